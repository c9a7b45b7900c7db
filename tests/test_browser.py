"""End-to-end: the real app in headless Chromium (Playwright driving Debian's /usr/bin/chromium)."""


import pytest

from browser import chromium_page, wait_drawn, wait_idle

pytestmark = pytest.mark.browser




@pytest.fixture
def page(server):
    with chromium_page(1500, 2400) as p:
        yield p


def no_exception(page) -> None:
    errors = page.locator('[data-testid="stException"]')
    assert errors.count() == 0, errors.first.inner_text()


def weights_chart(page):
    """The weights heatmap (the chart drawn with key "weights" in Explore's Weights section)."""
    chart = page.locator('.st-key-weights [data-testid="stVegaLiteChart"]').first
    chart.wait_for()
    return chart, chart.bounding_box()


def open_section(page, name: str) -> None:
    """Click one of Explore's section buttons and wait until it is drawn."""
    page.locator(".st-key-section").get_by_role("radio", name=name, exact=True).click()
    page.wait_for_function(f"() => decodeURIComponent(location.search).includes('section={name}'.replace(' ', '+'))"
                           if name != "Weights" else "() => !location.search.includes('section=')")
    wait_idle(page)


def test_explore_end_to_end(page, server, tmp_path):
    page.goto(server)
    wait_idle(page)
    no_exception(page)
    page.screenshot(path=tmp_path / "explore_default.png")

    # Type a sentence (Ctrl+Enter commits a text area).
    area = page.get_by_role("textbox", name="Sentence")
    area.fill("the cat saw the dog and the bird")
    area.press("Control+Enter")
    wait_idle(page)
    page.get_by_text("8 tokens").first.wait_for()
    no_exception(page)

    # Switch to MultiHeadAttention with the book preset, then change the number of heads.
    page.get_by_role("button", name="Book example").click()
    wait_idle(page)
    page.get_by_text("MultiHeadAttention (§3.6.2)").first.wait_for()
    heads = page.get_by_role("spinbutton", name="num_heads")
    heads.fill("1")
    heads.press("Enter")
    wait_idle(page)
    page.get_by_text("1 heads × head_dim 2").first.wait_for()
    heads.fill("2")
    heads.press("Enter")
    wait_idle(page)
    page.get_by_text("head 2", exact=True).first.wait_for()
    no_exception(page)

    # Mask method: renormalize after softmax.
    page.get_by_role("combobox", name="Masking method").click()  # opens the selectbox
    page.get_by_role("option", name="zero after softmax, renormalize").click()
    wait_idle(page)
    page.get_by_text("(zero after softmax, renormalize)").first.wait_for()
    open_section(page, "Scores")
    page.get_by_text("Renormalize method: softmax first").first.wait_for()
    no_exception(page)
    page.screenshot(path=tmp_path / "explore_mha.png")
    open_section(page, "Weights")

    # Click a weight cell: the story switches from the default cell.
    chart, box = weights_chart(page)
    chart.scroll_into_view_if_needed()
    box = chart.bounding_box()
    default = "query 6: step → key 1: Your"
    assert page.get_by_text(default).count() == 1
    clicked = False
    for fx, fy in [(0.45, 0.55), (0.35, 0.7), (0.3, 0.8), (0.5, 0.75), (0.25, 0.45)]:
        page.mouse.click(box["x"] + box["width"] * fx, box["y"] + box["height"] * fy)
        wait_idle(page)
        if page.get_by_text(default).count() == 0:
            clicked = True
            break
    assert clicked, "clicking the weights heatmap did not change the cell story"
    assert page.get_by_text("Cell story: query").count() == 1
    no_exception(page)
    page.screenshot(path=tmp_path / "explore_clicked.png")


def click_next_and_wait(page, expect: str) -> None:
    """Click "Next ▶" and wait until the page shows ``expect`` (the new step's label) and has finished
    its rerun: one condition per click, so a slow machine only makes the wait longer."""
    page.get_by_role("button", name="Next ▶").click()
    page.get_by_text(expect).first.wait_for(timeout=STEP_TIMEOUT_MS)
    wait_drawn(page, timeout=STEP_TIMEOUT_MS)


STEP_TIMEOUT_MS = 120_000  # generous: CI is a busy 2-core machine


def test_teaching_pages_step_through(page, server, tmp_path):
    page.set_default_timeout(STEP_TIMEOUT_MS)
    page.goto(f"{server}/shape-flow")
    wait_idle(page, timeout=STEP_TIMEOUT_MS)
    no_exception(page)
    for i in range(4):
        click_next_and_wait(page, f"Step {i + 2} of 20")
        no_exception(page)
    page.get_by_text("view size is not compatible").first.wait_for()
    page.screenshot(path=tmp_path / "shape_flow.png", full_page=True)

    page.goto(f"{server}/walkthrough")
    wait_idle(page, charts=False, timeout=STEP_TIMEOUT_MS)
    n = 19
    for i in range(n - 1):
        page.get_by_text("Agrees with the book").first.wait_for()
        no_exception(page)
        click_next_and_wait(page, f"Step {i + 2} of {n}")
    page.get_by_text("§3.6.2 · MultiHeadAttention (seed 123)").wait_for()
    page.get_by_text("Agrees with the book").first.wait_for()
    page.screenshot(path=tmp_path / "walkthrough.png", full_page=True)

    page.goto(f"{server}/masking-lab")
    wait_idle(page, timeout=STEP_TIMEOUT_MS)
    page.get_by_role("button", name="Mistakes ▶").click()  # the lab draws one section at a time
    page.get_by_text("mistake: renormalize raw scores", exact=True).first.click()
    page.get_by_text("Wrong: raw scores can be negative").first.wait_for()
    wait_drawn(page, timeout=STEP_TIMEOUT_MS)
    no_exception(page)
    page.screenshot(path=tmp_path / "masking_lab.png", full_page=True)


# Where the stepper's position text and the slider's thumb are drawn, and whether the thumb still carries a value.
STEPPER_JS = """() => {
    const slider = document.querySelector('[data-testid="stMain"] [data-testid="stSlider"]');
    const box = (e) => { const r = e.getBoundingClientRect(); return {l: r.left, t: r.top, r: r.right, b: r.bottom}; };
    const text = [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stMarkdownContainer"]')]
        .find(e => /^Step \\d+ of \\d+/.test(e.innerText));
    const value = slider.querySelector('[data-testid="stSliderThumbValue"]');
    const thumb = slider.querySelector('input[type="range"]').parentElement.parentElement;  // react-aria's thumb
    return {text: text && text.innerText, textBox: text && box(text.querySelector('p')), thumb: box(thumb),
            valueShown: !!value && value.checkVisibility()};
}"""


@pytest.mark.parametrize("link", ["shape-flow?flow_step=1", "shape-flow?flow_step=20",
                                  "walkthrough?walk_step=10&present=true"])
def test_stepper_position_is_readable_beside_the_thumb(server, link):
    """Issue 9: the slider's thumb covered its own "1/20 · x" value. The position is a line of its own above the
    track ("Step 1 of 20 · x"), clear of the thumb at either end, and the thumb carries no value."""
    with chromium_page(1280, 720) as page:
        page.goto(f"{server}/{link}")
        page.locator('[data-testid="stMain"] [data-testid="stSlider"] input[type="range"]').wait_for(
            state="attached", timeout=STEP_TIMEOUT_MS)  # the slider may be a lazy-loading skeleton at first
        wait_drawn(page, timeout=STEP_TIMEOUT_MS)
        no_exception(page)
        seen = page.evaluate(STEPPER_JS)
    step = link.split("_step=")[1].split("&")[0]
    assert seen["text"] and seen["text"].startswith(f"Step {step} of "), seen
    assert not seen["valueShown"], "the thumb's own value is hidden (it sat under the thumb)"
    a, b = seen["textBox"], seen["thumb"]
    assert a["b"] <= b["t"] or b["b"] <= a["t"] or a["r"] <= b["l"] or b["r"] <= a["l"], f"thumb over the text: {seen}"


def test_links_restore_page_state(page, server):
    """Issue 10 item 10 in the real app: the step, head, cell, zoom window and mistake come back
    from a link, and clicking writes them into the address bar."""
    from urllib.parse import urlencode

    from dashboard.state.controls import INPUT_NAMES, VARIANT_NAMES

    page.set_default_timeout(STEP_TIMEOUT_MS)
    learned = urlencode({"input_mode": INPUT_NAMES["learned"]})  # the URL carries the shown labels
    mha = f"{learned}&{urlencode({'variant': VARIANT_NAMES['MultiHeadAttention']})}&d_in=8&d_out=8&num_heads=2"
    page.goto(f"{server}/shape-flow?{mha}&flow_step=8")
    wait_drawn(page)
    page.get_by_text("8. keys.transpose").first.wait_for()
    click_next_and_wait(page, "Step 9 of 20")
    page.wait_for_function("() => new URLSearchParams(location.search).get('flow_step') === '9'")  # the number

    page.goto(f"{server}/?{mha}&sentence=the+cat+sat+on+the+mat&head=head+2&cell=5,2&section=Output")
    wait_drawn(page)
    page.get_by_text("context vectors (head 2)").first.wait_for()  # the section and the head
    page.locator(".st-key-section").get_by_role("radio", name="Weights", exact=True).click()
    page.get_by_text("Cell story: query 5: the → key 2: cat").first.wait_for()
    no_exception(page)

    words = "+".join(f"w{i}" for i in range(200))
    page.goto(f"{server}/?sentence={words}&{learned}&d_in=8&weights_zoom_size=32&weights_zoom_start=40")
    wait_drawn(page)
    page.get_by_text("Zoom: tokens 40–71").first.wait_for()

    page.goto(f"{server}/masking-lab?mistake=nope")
    wait_drawn(page)
    page.get_by_text("is not valid here").first.wait_for()
    page.get_by_text("mistake: renormalize raw scores", exact=True).first.click()
    page.get_by_text("Wrong: raw scores can be negative").first.wait_for()
    page.wait_for_function("() => decodeURIComponent(location.search).includes('mistake=mistake')")


def test_benchmark_page_in_browser(page, server, tmp_path):
    page.goto(f"{server}/benchmark")
    wait_idle(page, charts=False)
    page.get_by_role("button", name="Run benchmark").click()
    page.get_by_text("Why one implementation can be faster, and whether it was here").wait_for(timeout=60_000)
    wait_idle(page, charts=False)  # a run the budget stopped before any measurement has no chart to wait for
    # A complete run draws the T curve; on a busy machine the time budget may stop it first, and the
    # page must then say so (the budget holds whatever the load).
    page.get_by_text("Time vs number of tokens").or_(page.get_by_text("Stopped at the 10 s budget")).first.wait_for()
    no_exception(page)
    page.screenshot(path=tmp_path / "benchmark.png", full_page=True)


# The colours a reader sees, from the browser: each caption's text (its colour and alpha, times the opacity of it
# and its ancestors) over the app's background, and each legend swatch of the dropout mask with its label.
SEEN_JS = """() => {
    const rgba = (c) => c.startsWith('#') ? [1, 3, 5].map(i => parseInt(c.slice(i, i + 2), 16))
                                          : (c.match(/[\\d.]+/g) || []).map(Number);
    const app = document.querySelector('[data-testid="stApp"]');
    const captions = [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stCaptionContainer"]')]
        .filter(c => c.checkVisibility()).map(c => {
            let opacity = 1;
            for (let e = c; e && e !== app; e = e.parentElement) opacity *= Number(getComputedStyle(e).opacity);
            const [r, g, b, a = 1] = rgba(getComputedStyle(c).color);
            return {text: c.innerText.slice(0, 40), rgb: [r, g, b], alpha: a * opacity};
        });
    const chart = [...document.querySelectorAll('[data-testid="stMain"] svg.marks')]
        .find(svg => [...svg.querySelectorAll('.role-legend-label text')].some(t => t.textContent === '1 = zeroed'));
    const legend = (sel) => chart ? [...chart.querySelectorAll(sel)] : [];
    const swatches = legend('.role-legend-symbol path').map(p => rgba(p.getAttribute('fill')));
    const labels = legend('.role-legend-label text').map(t => t.textContent);
    return {page: rgba(getComputedStyle(app).backgroundColor).slice(0, 3), captions, swatches, labels};
}"""


def contrast(a, b) -> float:
    """WCAG contrast ratio of two sRGB colours (1 to 21)."""
    def lum(rgb):
        c = [v / 255 for v in rgb]
        c = [v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4 for v in c]
        return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2]
    hi, lo = sorted((lum(a), lum(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


@pytest.mark.parametrize("scheme", ["dark", "light"])
def test_captions_and_mask_legends_read_on_either_theme(server, scheme):
    """Issue 9: on the dark theme captions were a faint grey (Streamlit's 60 % opacity: 6.2:1 on the dark page,
    3.9:1 on the light one), the dropout mask's kept cells a white block and its "1 = zeroed" swatch dark on dark."""
    with chromium_page(1280, 720, color_scheme=scheme) as page:
        page.goto(f"{server}/?section=Dropout&train_mode=true&dropout=0.5")
        page.locator("svg.marks .role-legend-label text", has_text="1 = zeroed").wait_for(timeout=120_000)
        wait_drawn(page, timeout=120_000)
        no_exception(page)
        seen = page.evaluate(SEEN_JS)
    bg = seen["page"]
    assert (sum(bg) < 200) == (scheme == "dark"), f"the browser's {scheme} preference gave a page of {bg}"
    assert seen["captions"], "the section has captions"
    for c in seen["captions"]:
        shown = [c["alpha"] * v + (1 - c["alpha"]) * w for v, w in zip(c["rgb"], bg)]
        assert contrast(shown, bg) >= 7, f"caption {c['text']!r}: {contrast(shown, bg):.1f}:1 on the {scheme} page"
    swatch = dict(zip(seen["labels"], seen["swatches"]))
    assert set(swatch) == {"0 = kept", "1 = zeroed"}, seen
    assert contrast(swatch["1 = zeroed"][:3], bg) >= 7, f"the '1 = zeroed' swatch vanishes into the {scheme} page"
    assert contrast(swatch["0 = kept"][:3], bg) < 2, f"kept cells stand out as a block on the {scheme} page"
