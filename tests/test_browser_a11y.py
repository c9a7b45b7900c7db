"""Accessibility in real Chromium: axe-core (the copy bundled in ``axe-playwright-python``: nothing is fetched) on
every page of the app, WCAG 2.0/2.1 A and AA rules, with no serious or critical violation; in English on every page
and in Chinese on the pages with the most coloured text.

Also two layouts of issue 41 (item 15) at 1280x720 with the sidebar open: KV cache cost's chart with its whole
legend above the fold, and BPE side by side's tables with every column and cell inside the page.

Also, on every page and section opened: no request leaves the machine (every request the browser makes goes to the
app itself), and the pages listed here are every page of the navigation.

Cost: one server and one Chromium for the module; each page is one load. Waits are conditions on the page (the
script has finished, nothing stale, the screen measured, every chart drawn), never sleeps.
"""

from __future__ import annotations

from urllib.parse import urlencode, urlsplit

import pytest
from langs import CHINESE, ENGLISH

from browser import TABLES_FIT_JS, chromium_page, require, require_browser

pytestmark = pytest.mark.browser

LOAD_MS = 300_000  # a bound only: a page that runs a real model four times (Windows, Chinese) on a busy CI box
RULE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
BLOCKING = ("serious", "critical")
# Every st.Page's url path in dashboard/main.py ("" is Explore, the default page).
PAGES = ["text-to-vectors", "", "shape-flow", "masking-lab", "tiled", "windows", "walkthrough", "learn", "generate",
         "kv-cache", "benchmark", "lesson", "answer"]
ZH_PAGES = ["text-to-vectors", "windows"]
# A page of sections draws one at a time: each is opened by its link (the section's English id) and checked too.
SECTION_KEYS = {"": "section", "text-to-vectors": "t2v_section", "masking-lab": "lab_section", "windows": "win_section"}

# The page has drawn: the script finished, nothing is stale or a skeleton, the screen has been measured (every page
# but the poll's answer page, which draws no sidebar), every chart has its marks, every image has loaded and no
# finite animation (a fade) is still running.
READY_JS = """(answer) => {
    const app = document.querySelector('[data-testid="stApp"]');
    const main = document.querySelector('[data-testid="stMain"]');
    if (!app || !main || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
    if (!main.querySelector('[data-testid="stElementContainer"]')) return false;
    if (!answer && !document.body.dataset.screen) return false;
    if (document.querySelector('[data-stale="true"], [data-testid="stSkeleton"]')) return false;
    for (const c of main.querySelectorAll('[data-testid="stVegaLiteChart"]'))
        if (!c.querySelector('svg.marks, canvas.marks')) return false;
    for (const img of main.querySelectorAll('[data-testid="stImage"] img'))
        if (!img.complete || !img.naturalWidth) return false;
    // a fade still running (a tooltip under the pointer after a click) would be measured half-transparent
    for (const a of document.getAnimations())
        if (a.playState === 'running' && isFinite(a.effect.getComputedTiming().endTime)) return false;
    return true;
}"""


def axe_missing_reason() -> str | None:
    try:
        import axe_playwright_python.sync_playwright  # noqa: F401
    except ImportError:
        return "axe-playwright-python is not installed: pip install -r requirements-dev.txt"
    return None


OUTSIDE: list[str] = []  # requests the module's pages made to any host but the app's


@pytest.fixture(scope="module")
def page(server):
    require_browser()
    require(axe_missing_reason(), "the accessibility test")
    own = urlsplit(server).netloc
    with chromium_page(1280, 720) as p:
        p.set_default_timeout(LOAD_MS)
        p.context.on("request", lambda r: OUTSIDE.append(r.url) if urlsplit(r.url).scheme in (
            "http", "https", "ws", "wss") and urlsplit(r.url).netloc != own else None)
        yield p


def open_drawn(page, url: str) -> None:
    """Open ``url`` and wait until it is drawn; no page may have asked another host for anything."""
    page.goto(url)
    page.wait_for_function(READY_JS, arg="/answer" in url, timeout=LOAD_MS, polling=200)
    assert not OUTSIDE, f"requests to other hosts: {sorted(set(OUTSIDE))[:10]}"


def axe_problems(page, where: str) -> list[str]:
    """Run axe-core on the page as drawn; one line per serious or critical violation, starting with ``where``."""
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page, options={"runOnly": {"type": "tag", "values": RULE_TAGS},
                                       "resultTypes": ["violations"]}).response
    problems = []
    for v in results["violations"]:
        if v["impact"] not in BLOCKING:
            continue
        for node in v["nodes"]:
            why = "; ".join(c["message"] for c in node["any"] + node["all"] + node["none"])
            problems.append(f"{where}: {v['id']} ({v['impact']}) {' '.join(map(str, node['target']))}: "
                            f"{node['html'][:160]} -- {why}")
    return problems


def page_problems(page, server: str, path: str, lang: str, sections: bool = True) -> list[str]:
    """Every serious violation on page ``path`` in ``lang``: as it opens, with ``sections`` in each of its sections,
    and (Generate) after a generated token."""
    url = f"{server}/{path}?lang={lang}"
    open_drawn(page, url)
    problems = axe_problems(page, path or "explore")
    key = SECTION_KEYS.get(path)
    if key and sections:
        sections = page.locator(f'.st-key-{key} [role="radio"]')
        ids = [sections.nth(i).inner_text().strip() for i in range(sections.count())]
        assert len(ids) > 1, f"{path}: no sections found under .st-key-{key}"
        for section in ids[1:]:  # the first is what the page opened on
            open_drawn(page, f"{url}&{urlencode({key: section})}")
            problems += axe_problems(page, f"{path or 'explore'} [{section}]")
    if path == "generate":  # the newest token is marked in the text, and the step's charts are drawn
        page.get_by_role("button", name="Next token ▶").click()
        page.mouse.move(0, 0)  # off the button: its tooltip would open mid-check after the hover delay
        page.get_by_text("Step 1: token").wait_for()
        page.wait_for_function(READY_JS, arg=False, timeout=LOAD_MS, polling=200)
        problems += axe_problems(page, "generate [step 1]")
    return problems


@pytest.mark.parametrize("path", PAGES, ids=[p or "explore" for p in PAGES])
def test_every_page_has_no_serious_accessibility_violation(server, page, path):
    problems = page_problems(page, server, path, ENGLISH)
    assert not problems, "\n".join(problems)
    if path == "":  # the navigation lists no page this module does not open
        links = page.locator('[data-testid="stSidebarNavLink"]')
        listed = {urlsplit(links.nth(i).get_attribute("href")).path.strip("/") for i in range(links.count())}
        assert len(listed) >= 5 and listed <= set(PAGES), sorted(listed - set(PAGES))


@pytest.mark.parametrize("path", ZH_PAGES)
def test_chinese_pages_have_no_serious_accessibility_violation(server, page, path):
    problems = page_problems(page, server, path, CHINESE, sections=False)  # the sections' widgets: as in English
    assert not problems, "\n".join(problems)


def test_the_dark_theme_has_no_serious_accessibility_violation(server, page):
    """The contrast fixes mix with the theme's own text colour: on the dark theme too (a page with code, pills and
    shortcut hints), in a tab of the same browser that prefers dark."""
    dark = page.context.browser.new_page(viewport={"width": 1280, "height": 720}, color_scheme="dark")
    try:
        dark.set_default_timeout(LOAD_MS)
        problems = page_problems(dark, server, "shape-flow", ENGLISH)
        assert dark.evaluate("() => getComputedStyle(document.querySelector('.stApp')).backgroundColor") != \
            "rgb(255, 255, 255)"  # the dark theme was on
    finally:
        dark.close()
    assert not problems, "\n".join(problems)


def test_bpe_side_by_side_shows_every_column_at_1280x720(server, page):
    open_drawn(page, f"{server}/text-to-vectors?lang=en&t2v_section=BPE+side+by+side")
    page.get_by_text("GPT-2 pieces").first.wait_for()
    found = page.evaluate(TABLES_FIT_JS)
    assert found["tables"] >= 2 and not found["problems"], found  # the counts, and the pieces and ids


def test_kv_cache_chart_and_its_legend_fit_a_1280x720_screen(server, page):
    open_drawn(page, f"{server}/kv-cache?lang=en")
    bottoms = page.evaluate("""() => [...document.querySelectorAll(
        '[data-testid="stVegaLiteChart"] .role-legend-label text')].map(e => e.getBoundingClientRect().bottom)""")
    assert len(bottoms) >= 6 and max(bottoms) <= 720, bottoms
