"""Layouts that hold (issue 9): every page in real Chromium at a projector's 1280x720 and at 1920x1080.

For each page and setting the page is drawn, then one JS evaluation measures the laid-out boxes:

(a) **cut off**: no chart's drawn content (the ``svg``/``canvas`` Vega draws inside
    ``stVegaLiteChart``, and ``stImage`` images) reaches past its enclosing column
    (``stColumn``), or, outside columns, past the content box of the main block container;
(b) **overlap**: no chart's drawn content intersects another visible element: the boxes compared
    are those of element containers (``stElementContainer``, one per Streamlit element) that are
    not ancestors or descendants of one another, a chart's box being its drawn content's.

A page of sections (Explore) is measured on every section (hidden elements have no box and are skipped). Presentation
mode (``?present=true``) is measured as it opens: sidebar collapsed, at 1280x720. Explore's Trained section must
have drawn a trained model's heads when measured (it opens on one); one more case opens it on a 37-token
sentence, the densest 4-head grid the trained models draw.

Both allow ``TOL_PX`` of rounding. The failure message names each offender by its testid, its
widget key (``st-key-…``) or its first words, with the page and settings.

Cost: one server and one Chromium for the module; each case is one page load (no fixed sleeps: the
waits are conditions on the DOM, with generous limits for a busy 2-core machine). Settings only
visit the pages they change (the Walkthrough ignores heads, Learn and Benchmark ignore the sidebar).
"""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from langs import CHINESE, ENGLISH, LANGS

from attn_core import tokenize
from browser import chromium_page, require_browser

pytestmark = pytest.mark.browser

BOOK_SENTENCE = "Your journey starts with one step"  # the sidebar's default

TOL_PX = 2
LOAD_TIMEOUT_MS = 120_000  # a 64-token Explore on a busy 2-core machine: a few seconds; allow for much worse

VIEWPORTS = {"1280x720": (1280, 720), "1920x1080": (1920, 1080)}
TEN_TOKENS = "The teacher wrote a short sentence on the board."
SIXTY_FOUR_TOKENS = (
    "Attention lets every token look back at the tokens before it and decide how much each one matters. A causal "
    "mask hides the future, softmax turns scores into weights that sum to one, and the weighted values become the "
    "context vector. Several heads do this at once, each with its own separate projections of the input.")
# URL parameters as dashboard/state/controls.py reads them (URL_KEYS). Heads need MultiHeadAttention (the default
# CausalAttention has one) and a d_out that 4 divides.
# A phrase said twice (the trained induction heads light up) in 37 tokens, long words among them: the trained
# models read at most 48 tokens, so this is about the densest grid of 4 heads with the widest labels they draw.
TRAINED_SENTENCE = (
    "The students compared attention patterns carefully during the afternoon; then the students compared attention "
    "patterns carefully during the afternoon again, because repeated phrases let trained induction heads find the "
    "earlier copy of every token.")
TRAINED_MAX_TOKENS = 48  # the shipped models' context_length: a longer sentence gets a note instead of heads
SETTINGS = {
    "default": {},
    "4heads": {"variant": "MultiHeadAttention", "d_out": "8", "num_heads": "4"},
    "10tokens": {"sentence": TEN_TOKENS},
    "64tokens": {"sentence": SIXTY_FOUR_TOKENS},
    "trained37": {"sentence": TRAINED_SENTENCE, "section": "Trained"},  # opens on the Trained section: only it
    "t2v_windows": {"t2v_section": "Sliding windows"}, "t2v_lookup": {"t2v_section": "Q/K/V as a lookup"},  # its charts
}
# Which settings change what a page draws, and where: the rest would repeat a case. 1280x720 with the sidebar open
# is the narrowest screen (an 820 px main area), so every page meets every setting there that changes it. At
# 1920x1080 (1460 px, every column ~1.8x wider) Explore, which may lay itself out by width, meets three (10 tokens
# lies between the book's 6 and 64); the pages sized for 820 px meet their widest setting (and Shape flow, whose
# default opens another step, its default).
ALL = ["default", "4heads", "10tokens", "64tokens"]
PAGES = {  # page: (path, settings at 1280x720, settings at 1920x1080)
    "explore": ("", ALL, ["default", "4heads", "64tokens"]),
    "shape-flow": ("shape-flow", ALL, ["default", "64tokens"]),
    "masking-lab": ("masking-lab", ["default", "10tokens", "64tokens"], ["64tokens"]),  # one head, whatever the heads
    "tiled": ("tiled", ["default", "10tokens"], ["default"]),  # its grid and tables
    "windows": ("windows", ["default"], ["default"]),  # its own model and text: the sidebar changes nothing there
    "walkthrough": ("walkthrough", ["default", "64tokens"], ["64tokens"]),  # reads only the sentence: one table
    "learn": ("learn", ["default"], ["default"]),  # its own controls; the shipped model is loaded (no training)
    "benchmark": ("benchmark", ["default"], ["default"]),  # its own controls; no run (it takes the page's time budget)
    "generate": ("generate", ["default"], ["default"]),  # its own controls; three tokens generated first
    "kv-cache": ("kv-cache", ["default"], ["default"]),  # its own controls
    "text-to-vectors": ("text-to-vectors", ["default", "t2v_windows", "t2v_lookup"], ["t2v_windows"]),  # own controls
}
# Explore's Trained section with a trained model's 4-head grid on a long sentence, 1280x720 with the sidebar open
# (its grid once ran 135 px past the 820 px column; the section iteration measured it only as it first opened, blank).
TRAINED = ["trained37"]
COLLAPSED = ["4heads", "64tokens"]  # Explore at 1280x720 with the sidebar collapsed (1120 px): its widest settings
# Presentation mode (?present=true: large type, sidebar collapsed) on a 1280x720 projector: every page as a prepared
# link opens it, and Explore with its longest sentence too.
PRESENT = [(page, "default") for page in PAGES] + [("explore", "64tokens")]
# The Shape flow's stepper opens at step 1 (x); three settings open it at its widest steps instead (a link names
# the step), and the page must then show that step's heading.
STEPS = {("shape-flow", "4heads"): ("15", "15. attn_weights"), ("shape-flow", "64tokens"): ("15", "15. attn_weights"),
         ("shape-flow", "10tokens"): ("12", "12. mask_bool")}


def _cases() -> list:
    cases = []
    for i, vp in enumerate(VIEWPORTS):
        for page, spec in PAGES.items():
            cases += [pytest.param(page, name, vp, "open", id=f"{page}-{name}-{vp}") for name in spec[1 + i]]
    cases += [pytest.param("explore", name, "1280x720", "open", id=f"explore-{name}-1280x720") for name in TRAINED]
    cases += [pytest.param("explore", name, "1280x720", "collapsed", id=f"explore-{name}-1280x720-sidebar_collapsed")
              for name in COLLAPSED]
    cases += [pytest.param(page, name, "1280x720", "present", id=f"{page}-{name}-1280x720-presentation")
              for page, name in PRESENT]
    # presentation mode with the sidebar opened by hand: the charts must shrink into the narrower column
    cases += [pytest.param("explore", "4heads", "1280x720", "present_open",
                           id="explore-4heads-1280x720-presentation-sidebar_open")]
    return cases


# Everything the page waits for before measuring: the script has finished, nothing is stale or still a
# lazy-loading skeleton, every chart has drawn and every image loaded. Then the boxes must hold still
# for 10 animation frames (Vega sizes its svg after drawing; a column may reflow once more).
READY_JS = """() => {
    const app = document.querySelector('[data-testid="stApp"]');
    const main = document.querySelector('[data-testid="stMain"]');
    if (!app || !main || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
    if (!main.querySelector('[data-testid="stElementContainer"]')) return false;  // the page has drawn something
    if (!document.body.dataset.screen) return false;  // dashboard/drawing/screen.py: charts sized for this screen
    if (document.querySelector('[data-stale="true"], [data-testid="stMain"] [data-testid="stSkeleton"]')) return false;
    for (const c of main.querySelectorAll('[data-testid="stVegaLiteChart"]'))
        if (!c.querySelector('svg.marks, canvas.marks')) return false;
    for (const img of main.querySelectorAll('[data-testid="stImage"] img'))
        if (!img.complete || !img.naturalWidth) return false;
    const sig = [...main.querySelectorAll('[data-testid="stElementContainer"], svg.marks, canvas.marks, img')]
        .map(e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.width, r.height].map(Math.round); })
        .join(';');
    if (sig !== window.__layoutSig) { window.__layoutSig = sig; window.__layoutStable = 0; return false; }
    return ++window.__layoutStable >= 10;
}"""

# The measurement. Returns {"cut": [...], "overlap": [...], "main_width": px, "charts": n}.
CHECK_JS = r"""(tol) => {
    const main = document.querySelector('[data-testid="stMainBlockContainer"]');
    const DRAWN = '[data-testid="stVegaLiteChart"] svg.marks, [data-testid="stVegaLiteChart"] canvas.marks, '
                + '[data-testid="stImage"] img';
    const shown = (el) => {
        const r = el.getBoundingClientRect();
        return r.width >= 1 && r.height >= 1 && el.checkVisibility({visibilityProperty: true});
    };
    const box = (el) => {
        const r = el.getBoundingClientRect();
        return {l: r.left, t: r.top, r: r.right, b: r.bottom};
    };
    const union = (bs) => ({l: Math.min(...bs.map(b => b.l)), t: Math.min(...bs.map(b => b.t)),
                            r: Math.max(...bs.map(b => b.r)), b: Math.max(...bs.map(b => b.b))});
    const contentBox = (el) => {  // inside the padding (the main block container has 5 rem each side)
        const b = box(el), s = getComputedStyle(el);
        return {l: b.l + parseFloat(s.paddingLeft), t: b.t, r: b.r - parseFloat(s.paddingRight), b: b.b};
    };
    const words = (el) => (el.innerText || '').replace(/\s+/g, ' ').trim().slice(0, 50);
    const px = (b) => `[${Math.round(b.l)}..${Math.round(b.r)} x ${Math.round(b.t)}..${Math.round(b.b)}]`;
    // An element is named by its kind (the testid of its first child that has one), its widget key
    // (st-key-...) and its first words; a chart by the words just before it (its title or section).
    let last = '';
    const items = [...main.querySelectorAll('[data-testid="stElementContainer"]')].filter(shown).map(ec => {
        const drawn = [...ec.querySelectorAll(DRAWN)].filter(shown).map(box);
        const chart = drawn.length > 0;
        const key = [...ec.classList].find(c => c.startsWith('st-key-'));
        const inner = ec.querySelector('[data-testid]:not([data-testid="stFullScreenFrame"])');
        const kind = chart ? (ec.querySelector('[data-testid="stImage"]') ? 'stImage' : 'stVegaLiteChart')
                           : inner?.getAttribute('data-testid') || 'element';
        const name = [kind, key, chart ? `(after "${last}")` : (words(ec) && `"${words(ec)}"`)]
            .filter(Boolean).join(' ');
        if (!chart && words(ec)) last = words(ec);
        return {ec, chart, name, box: chart ? union(drawn) : box(ec)};
    });
    const cut = [], overlap = [];
    for (const it of items) {
        if (!it.chart) continue;
        const col = it.ec.closest('[data-testid="stColumn"]');
        const c = col ? box(col) : contentBox(main);
        const over = Math.max(c.l - it.box.l, it.box.r - c.r);
        if (over > tol)
            cut.push(`${it.name} ${px(it.box)} reaches ${Math.round(over)} px past its `
                     + `${col ? 'column' : 'main area'} ${px(c)}`);
    }
    items.forEach((a, i) => {
        if (!a.chart) return;
        items.forEach((b, j) => {
            if (i === j || (b.chart && j < i) || a.ec.contains(b.ec) || b.ec.contains(a.ec)) return;
            const w = Math.min(a.box.r, b.box.r) - Math.max(a.box.l, b.box.l);
            const h = Math.min(a.box.b, b.box.b) - Math.max(a.box.t, b.box.t);
            if (w > tol && h > tol)
                overlap.push(`${a.name} ${px(a.box)} overlaps ${b.name} ${px(b.box)} `
                             + `by ${Math.round(w)}x${Math.round(h)} px`);
        });
    });
    return {cut, overlap, main_width: Math.round(contentBox(main).r - contentBox(main).l),
            charts: items.filter(it => it.chart).length};
}"""


MIN_PRESENT_PX = 16  # presentation mode: numbers in tables and code (present.LABEL_PX for chart labels)
# Visible table cells and code whose text is smaller, and data grids (st.dataframe draws ~12 px text on a canvas that
# no style reaches): one line each.
SMALL_TEXT_JS = r"""(min) => {
    const main = document.querySelector('[data-testid="stMain"]');
    const shown = (el) => el.checkVisibility() && el.getBoundingClientRect().width > 0;
    const out = [];
    for (const el of main.querySelectorAll('[data-testid="stTable"] :is(td, th) p, [data-testid="stCode"] code'))
        if (shown(el) && el.innerText.trim() && parseFloat(getComputedStyle(el).fontSize) < min)
            out.push(`${getComputedStyle(el).fontSize} "${el.innerText.trim().slice(0, 30)}"`);
    for (const el of main.querySelectorAll('[data-testid="stDataFrame"]'))
        if (shown(el)) out.push('a data grid (st.dataframe)');
    return [...new Set(out)].slice(0, 8);
}"""


@pytest.fixture(scope="module")
def browser_page(server):
    """One Chromium tab for the whole module; each case navigates it (a new Streamlit session)."""
    require_browser()
    with chromium_page(*VIEWPORTS["1280x720"]) as page:
        page.set_default_timeout(LOAD_TIMEOUT_MS)
        yield page


STATE_JS = """() => ({script: document.querySelector('[data-testid="stApp"]')?.getAttribute('data-test-script-state'),
    screen: document.body.dataset.screen || null, stale: document.querySelectorAll('[data-stale="true"]').length,
    skeletons: document.querySelectorAll('[data-testid="stSkeleton"]').length, stable: window.__layoutStable})"""


def open_drawn(page, url: str) -> None:
    page.goto(url)
    try:
        page.wait_for_function(READY_JS, timeout=LOAD_TIMEOUT_MS, polling="raf")
    except Exception as e:  # say which condition never held
        raise AssertionError(f"{url} was not drawn and still: {page.evaluate(STATE_JS)}") from e


def wait_still(page) -> None:
    page.evaluate("() => { window.__layoutSig = null; }")
    page.wait_for_function(READY_JS, timeout=LOAD_TIMEOUT_MS, polling="raf")


def set_sidebar(page, *, collapsed: bool) -> None:
    """Open or collapse the sidebar as a user does (Streamlit remembers the choice in localStorage)."""
    sidebar = page.get_by_test_id("stSidebar")
    if (sidebar.get_attribute("data-collapsed") == "true") == collapsed:
        return
    if collapsed:
        sidebar.hover()  # the collapse button shows while the pointer is over the sidebar
        page.get_by_test_id("stSidebarCollapseButton").locator("button").click()
    else:
        page.get_by_test_id("stExpandSidebarButton").click()
    page.wait_for_function("(c) => document.querySelector('[data-testid=\"stSidebar\"]')"
                           ".getAttribute('data-collapsed') === c", arg=str(collapsed).lower())
    wait_still(page)


def measure(page, every_section: bool = True, key: str = "section") -> dict:
    """CHECK_JS on the page as drawn and, for a page of sections (Explore's row of section buttons), on each
    section in turn: only the chosen section is drawn, so every one is opened and measured (problems outside the
    sections are reported once). ``found["section_charts"]`` counts the charts each section drew."""
    found = page.evaluate(CHECK_JS, TOL_PX)
    seen = set(found["cut"] + found["overlap"])
    sections = page.locator(f'.st-key-{key} [role="radio"]')
    names = [" ".join(sections.nth(i).inner_text().split()) for i in range(sections.count())]
    found["section_charts"] = {name: found["charts"] for i, name in enumerate(names)
                           if sections.nth(i).get_attribute("aria-checked") == "true"}
    if not every_section:
        return found
    for i, name in enumerate(names):
        if sections.nth(i).get_attribute("aria-checked") == "true":
            continue
        sections.nth(i).click()
        # drawn when the Previous button names the section before this one (a rerun draws the chosen section)
        page.wait_for_function("""(want) => {
            const app = document.querySelector('[data-testid="stApp"]');
            const label = document.querySelector(`.st-key-${want[1]}_prev button [data-testid="stMarkdownContainer"]`);
            return app && app.getAttribute('data-test-script-state') === 'notRunning' && label
                && label.innerText.replace(/\\s+/g, ' ').trim() === want[0];  // the label, not its "PageUp" hint
        }""", arg=[f"◀ {names[i - 1]}" if i else "◀ Previous", key], timeout=LOAD_TIMEOUT_MS)
        wait_still(page)
        more = page.evaluate(CHECK_JS, TOL_PX)
        found["section_charts"][name] = more["charts"]
        for kind in ("cut", "overlap"):
            found[kind] += [f"[section {name}] {m}" for m in more[kind] if m not in seen]
            seen.update(more[kind])
    return found


def test_sentences_have_the_token_counts_their_names_say():
    assert len(tokenize(TEN_TOKENS)) == 10
    assert len(tokenize(SIXTY_FOUR_TOKENS)) == 64
    assert len(tokenize(TRAINED_SENTENCE)) == 37 <= TRAINED_MAX_TOKENS


@pytest.mark.parametrize(("page_name", "setting", "viewport", "screen"), _cases())
def test_charts_stay_in_their_columns_and_overlap_nothing(browser_page, server, page_name, setting, viewport,
                                                         screen):
    """``screen``: "open" or "collapsed" (the sidebar), or "present" (presentation mode, sidebar collapsed) or
    "present_open" (presentation mode, sidebar opened)."""
    page = browser_page
    page.set_viewport_size(dict(zip(("width", "height"), VIEWPORTS[viewport])))
    path = PAGES[page_name][0]
    step, heading = STEPS.get((page_name, setting), (None, None))
    query = urlencode(SETTINGS[setting] | ({"flow_step": step} if step else {})
                      | ({"present": "true"} if screen.startswith("present") else {}))
    open_drawn(page, f"{server}/{path}" + (f"?{query}" if query else ""))
    if heading:
        assert heading in page.get_by_test_id("stMain").inner_text()
    if page_name == "learn":  # the shipped model: every chart of the page, drawn at once, no training
        page.get_by_role("button", name="Trained model").click()
        page.get_by_text("Attention on the probe input").wait_for()
        wait_still(page)
    if page_name == "generate":  # three steps: the row, the cache table and the full matrix are drawn
        for step in range(1, 4):
            page.get_by_role("button", name="Next token ▶").click()
            page.get_by_text(f"Step {step}: token").wait_for()
        wait_still(page)
    set_sidebar(page, collapsed=screen not in ("open", "present_open"))
    errors = page.get_by_test_id("stException")
    assert errors.count() == 0, errors.first.inner_text()
    if screen.startswith("present"):  # read from the back of the room: tables and code as large as the axis labels
        small = page.evaluate(SMALL_TEXT_JS, MIN_PRESENT_PX)
        assert not small, f"{page_name} in presentation mode: text under {MIN_PRESENT_PX} px: {small}"
    # a TRAINED case opens on the section it is for; the Masking lab's sections are measured one by one too
    found = measure(page, every_section=setting not in TRAINED,
                    key="lab_section" if page_name == "masking-lab" else "section")
    where = (f"{page_name} with {setting} settings at {viewport}, "
             + ("presentation mode" if screen == "present" else "presentation mode, sidebar open"
                if screen == "present_open" else f"sidebar {screen}")
             + f" (main area {found['main_width']} px)")
    if page_name in ("explore", "shape-flow", "masking-lab", "learn", "generate", "kv-cache"):
        assert found["charts"] > 0, f"{where}: no chart was drawn, so nothing was measured"
    if page_name == "masking-lab":  # each of its five sections was opened and measured
        assert len(found["section_charts"]) == 5, f"{where}: measured {found['section_charts']}"
    if page_name == "explore" and len(tokenize(SETTINGS[setting].get("sentence", BOOK_SENTENCE))) <= TRAINED_MAX_TOKENS:
        # the Trained section is measured with a trained model's heads drawn, not as a blank picker
        drawn = found["section_charts"]
        assert drawn.get("Trained", 0) >= 2, f"{where}: the Trained section drew {drawn}"
    problems = [f"cut off: {m}" for m in found["cut"]] + [f"overlap: {m}" for m in found["overlap"]]
    assert not problems, f"{where}: {len(problems)} layout problem(s):\n  " + "\n  ".join(problems)


CELL_JS = """() => {  // the weights heatmap's cells (Vega's rect marks, without labels and legend): width in px
    const cells = document.querySelector('.st-key-weights svg.marks .mark-rect');
    return cells ? cells.getBoundingClientRect().width : 0;
}"""


def test_charts_grow_on_a_larger_screen_and_the_link_keeps_its_settings(browser_page, server):
    """At 1920x1080 the charts are drawn about 1.5 times as large as on the 1280x720 projector (they used
    less than half of a 1920-wide screen), and the extra rerun that resizes them keeps the link's settings."""
    page = browser_page
    url = f"{server}/?" + urlencode(SETTINGS["4heads"])
    widths = {}
    for vp in ("1280x720", "1920x1080"):
        page.set_viewport_size(dict(zip(("width", "height"), VIEWPORTS[vp])))
        open_drawn(page, url)
        set_sidebar(page, collapsed=False)
        widths[vp] = page.evaluate(CELL_JS)
        assert "4 heads" in page.get_by_test_id("stMain").inner_text(), vp
    assert widths["1920x1080"] >= 1.4 * widths["1280x720"] > 0, widths


# Phones: a 390x844 screen. The page never scrolls sideways (a wide table scrolls inside its own box), and
# "All heads" draws one head a row with cells a finger can point at.
PHONE = (390, 844)
PHONE_PAGES = {  # name: link
    "explore-all-heads": "?" + urlencode(SETTINGS["4heads"] | {"section": "All heads"}),
    "explore-all-heads-presentation": "?" + urlencode(SETTINGS["4heads"] | {"section": "All heads", "present": "true"}),
    "explore-model-view": "?section=Model+view&lang=zh",  # the found model's grid, its legend, the head charts
    "windows": "windows",
    "windows-sinks": "windows?win_section=Sinks+in+every+layer",
    "windows-rope": "windows?win_section=RoPE+on+real+queries+and+keys",
    "tiled": "tiled",
    "shape-flow": "shape-flow?lang=zh",  # its `MultiHeadAttentionWrapper` vs `MultiHeadAttention` heading
    "tiled-presentation": "tiled?" + urlencode({"present": "true", "sentence": TEN_TOKENS}),  # its tables
    "walkthrough-presentation": "walkthrough?present=true",
    "walkthrough-yours": "walkthrough?" + urlencode({"walk_step": "12", "sentence": TEN_TOKENS}),
}
WIDE_JS = """() => {  // how far the page, or its main area, scrolls sideways, and what reaches past the screen
    const main = document.querySelector('[data-testid="stMain"]');
    const vw = document.documentElement.clientWidth;
    const past = [...main.querySelectorAll('[data-testid="stElementContainer"]')].filter(e => {
        const r = e.getBoundingClientRect();
        return r.width > 0 && r.right > vw + 2;
    }).map(e => (e.querySelector('[data-testid]')?.getAttribute('data-testid') || 'element') + ' '
                + Math.round(e.getBoundingClientRect().right) + ' px');
    return {vw, page: document.documentElement.scrollWidth, main: main.scrollWidth, past: past.slice(0, 5)};
}"""
HEADS_JS = """() => {  // the All heads grid: its cells' sizes (SVG rect marks) and its text's font sizes
    const chart = [...document.querySelectorAll('[data-testid="stVegaLiteChart"]')].find(c =>
        [...c.querySelectorAll('svg.marks text')].some(t => t.textContent.trim() === 'head 4'));
    if (!chart) return null;
    const cells = [...chart.querySelectorAll('svg.marks .role-mark.mark-rect path')]
        .map(p => p.getBoundingClientRect()).filter(r => r.width > 0);
    const fonts = [...chart.querySelectorAll('svg.marks text')].filter(t => t.textContent.trim())
        .map(t => parseFloat(t.getAttribute('font-size') || getComputedStyle(t).fontSize));
    const svg = chart.querySelector('svg.marks').getBoundingClientRect();
    return {cells: cells.length, min_cell: Math.min(...cells.map(r => Math.min(r.width, r.height))),
            min_font: Math.min(...fonts), right: svg.right};
}"""


@pytest.mark.parametrize("name", list(PHONE_PAGES))
def test_a_phone_screen_never_scrolls_sideways(browser_page, server, name):
    page = browser_page
    page.set_viewport_size(dict(zip(("width", "height"), PHONE)))
    open_drawn(page, f"{server}/{PHONE_PAGES[name]}")
    errors = page.get_by_test_id("stException")
    assert errors.count() == 0, errors.first.inner_text()
    wide = page.evaluate(WIDE_JS)
    assert wide["page"] <= wide["vw"] + TOL_PX and wide["main"] <= wide["vw"] + TOL_PX, f"{name} at 390x844: {wide}"
    assert not wide["past"], f"{name} at 390x844: {wide}"
    hints = page.locator("button kbd").evaluate_all("ks => ks.filter(k => k.offsetParent).map(k => k.innerText)")
    assert not hints, f"{name} at 390x844 shows the hints of keys a phone has not: {hints}"
    cut = page.evaluate("() => [...document.querySelectorAll(':is(h1, h2, h3) code')]"
                        ".filter(c => c.getClientRects().length > 1).map(c => c.innerText)")
    assert not cut, f"{name} at 390x844 breaks these names in its headings mid-word: {cut}"
    if name.startswith("explore-all-heads"):  # one head a row, 6 tokens: cells >= 24 px, text >= 12 px
        heads = page.evaluate(HEADS_JS)
        assert heads and heads["cells"] >= 4 * 36, heads
        assert heads["min_cell"] >= 24 and heads["min_font"] >= 12 and heads["right"] <= PHONE[0], heads


FITS_JS = """(label) => {  // the Start button's label replaced by ``label``: is it drawn whole (no "Leave q…")?
    const p = document.querySelector('.st-key-learn_start button [data-testid="stMarkdownContainer"] p');
    if (!p) return null;
    p.textContent = label;
    const box = p.closest('[data-testid="stMarkdownContainer"]');  // cuts its text with an ellipsis
    const button = p.closest('button');
    const fits = box.scrollWidth <= box.clientWidth && button.scrollWidth <= button.clientWidth + 1;
    return {fits, text: box.scrollWidth, room: box.clientWidth, button: button.clientWidth};
}"""


@pytest.mark.parametrize("lang", list(LANGS))
def test_leave_queue_fits_its_button_at_1280x720(browser_page, server, lang):
    """A queued student's "Leave queue" was cut to "Leave q…". It takes the Start button's place, in the same column:
    drawn there in the Start button's font, it fits. (Queueing for real needs two busy training slots.)"""
    page = browser_page
    page.set_viewport_size(dict(zip(("width", "height"), VIEWPORTS["1280x720"])))
    open_drawn(page, f"{server}/learn?lang={lang}")
    set_sidebar(page, collapsed=False)
    label = {ENGLISH: "Leave queue", CHINESE: "退出队列"}[lang]
    found = page.evaluate(FITS_JS, label)
    assert found and found["fits"], found


GRID_JS = """() => {  // the model view's grid: its heads' frames (px) and its text's font sizes
    const grid = document.querySelector('.st-key-model_grid');
    if (!grid) return null;
    const frames = [...grid.querySelectorAll('svg.marks .role-mark.mark-rect path')]
        .map(p => p.getBoundingClientRect()).filter(r => r.width > 0);
    const fonts = [...grid.querySelectorAll('svg.marks text')].filter(t => t.textContent.trim())
        .map(t => parseFloat(t.getAttribute('font-size') || getComputedStyle(t).fontSize));
    return {frames: frames.length, min_frame: Math.min(...frames.map(r => Math.min(r.width, r.height))),
            min_font: Math.min(...fonts), width: grid.getBoundingClientRect().width};
}"""


def test_the_model_view_reads_on_a_1280x720_projector(browser_page, server):
    """The model view of the model found here (SmolLM2 where its wheel is installed): heads were 15 px frames with
    11 px labels in half the width."""
    page = browser_page
    page.set_viewport_size(dict(zip(("width", "height"), VIEWPORTS["1280x720"])))
    open_drawn(page, f"{server}/?section=Model+view")
    set_sidebar(page, collapsed=False)
    grid = page.evaluate(GRID_JS)
    if grid is None:
        pytest.skip("no pretrained model here: Explore has no Model view")
    assert grid["frames"] >= 4 and grid["min_frame"] >= 20 and grid["min_font"] >= 13, grid
