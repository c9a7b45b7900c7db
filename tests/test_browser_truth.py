"""Issue 20 in real Chromium at a projector's 1280x720: what Streamlit itself renders (its Markdown autolinks bare
URLs, which markdown-it in the AppTest tests does not), and layouts that must fit above the fold."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from test_browser_layout import LOAD_TIMEOUT_MS, open_drawn, wait_still

from browser import chromium_page, require_browser

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def tab(server):
    """One Chromium tab at 1280x720 for the module; each case navigates it (a new Streamlit session)."""
    require_browser()
    with chromium_page(1280, 720) as page:
        page.set_default_timeout(LOAD_TIMEOUT_MS)
        yield page


# Item 12: no URL from a link value or user text becomes a link or an image ------------------------------------
LINKS_AND_IMAGES_JS = """(host) => ({
    alerts: [...document.querySelectorAll('[data-testid="stAlert"]')].map(a => a.innerText),
    inAlerts: document.querySelectorAll('[data-testid="stAlert"] a, [data-testid="stAlert"] img').length,
    foreign: [...document.querySelectorAll('a[href], img[src]')]
        .filter(e => (e.getAttribute('href') || e.getAttribute('src')).includes(host)).length})"""


@pytest.mark.parametrize("query, host", [
    ({"device": "[Click here to fix your GPU](https://evil.example/fix)"}, "evil.example"),
    ({"cell": "![b](http://host.example/beacon.png)"}, "host.example"),
    ({"variant": "MultiHeadAttention", "head": "www.evil.example/fix"}, "evil.example"),
    ({"seed": "see https://evil.example/x"}, "evil.example"),
])
def test_no_link_value_becomes_a_link_or_an_image(tab, server, query, host):
    open_drawn(tab, f"{server}/?{urlencode(query)}")
    found = tab.evaluate(LINKS_AND_IMAGES_JS, host)
    assert any(host in a and "is not valid here" in a for a in found["alerts"]), found  # shown, as text
    assert found["inAlerts"] == 0 and found["foreign"] == 0, found


@pytest.mark.parametrize("path", ["", "walkthrough", "shape-flow"])
def test_no_url_in_the_sentence_becomes_a_link(tab, server, path):
    query = {"sentence": "See www.evil.example/fix or https://evil.example/x ![b](http://evil.example/b.png)"}
    open_drawn(tab, f"{server}/{path}?{urlencode(query)}")
    found = tab.evaluate(LINKS_AND_IMAGES_JS, "evil.example")
    assert found["inAlerts"] == 0 and found["foreign"] == 0, found


# Item 3: presentation mode keeps the weights' numbers up to 12 tokens, and the grid above the fold ---------------
NINE_TOKENS = "The teacher wrote a short sentence on the board"
TWELVE_TOKENS = "The teacher wrote a short sentence on the board for the class"
WEIGHTS_JS = """() => {
    const chart = document.querySelector('.st-key-weights [data-testid="stVegaLiteChart"]')
        || document.querySelector('[data-testid="stVegaLiteChart"]');
    const svg = chart.querySelector('svg.marks');
    const values = [...svg.querySelectorAll('text')]
        .filter(t => /^(0|1\\.00|0?\\.\\d\\d|\\de-\\d)$/.test(t.textContent));
    const bottom = Math.max(...[...svg.querySelectorAll('.mark-rect path')].map(p => p.getBoundingClientRect().bottom));
    const fonts = [...new Set(values.map(t => parseFloat(getComputedStyle(t).fontSize)))];
    return {bottom, values: values.length, fonts, height: window.innerHeight};
}"""


def presented(tab) -> None:
    """Wait for the presentation layout (the main column 1180 px wide): a fresh tab's first load measures it (it
    measured the column before presentation mode's padding applied, 820 px, and needed a reload)."""
    tab.wait_for_function("document.body.dataset.screen === '1180x100'", timeout=LOAD_TIMEOUT_MS)
    wait_still(tab)


@pytest.mark.parametrize("text, n", [(NINE_TOKENS, 9), (TWELVE_TOKENS, 12)])
def test_presentation_weights_keep_their_numbers_above_the_fold(tab, server, text, n):
    from attn_core import tokenize

    assert len(tokenize(text)) == n
    open_drawn(tab, f"{server}/?{urlencode({'sentence': text, 'present': 'true'})}")
    presented(tab)
    found = tab.evaluate(WEIGHTS_JS)
    assert found["values"] >= n * (n + 1) // 2, found  # every unmasked cell prints its weight
    assert min(found["fonts"]) >= 16, found
    assert found["bottom"] <= found["height"], found  # the whole grid above the fold


# Item 4: the walkthrough's "Now with your sentence": every value visible, cell text >= 12 px or none ------------
TABLES_AND_TEXT_JS = """() => {
    const cut = [];  // cells outside the box that clips their table (a scrolling box whose scrollbar may not show)
    for (const table of document.querySelectorAll('[data-testid="stTable"] table')) {
        let clip = table.parentElement;
        while (clip !== document.body && getComputedStyle(clip).overflowX === 'visible') clip = clip.parentElement;
        const box = clip.getBoundingClientRect();
        for (const td of table.querySelectorAll('td, th')) {
            const r = td.getBoundingClientRect();
            if (r.width && (r.right > box.right + 2 || r.left < box.left - 2)) cut.push(td.innerText);
        }
    }
    const fonts = [...document.querySelectorAll('[data-testid="stVegaLiteChart"] svg.marks .mark-text text')]
        .map(t => parseFloat(getComputedStyle(t).fontSize));
    return {cut, smallest: fonts.length ? Math.min(...fonts) : null};
}"""


@pytest.mark.parametrize("step", [1, 7, 19])
def test_walkthrough_your_sentence_shows_every_value_legibly(tab, server, step):
    query = {"sentence": NINE_TOKENS, "walk_step": str(step)}
    open_drawn(tab, f"{server}/walkthrough?{urlencode(query)}")
    found = tab.evaluate(TABLES_AND_TEXT_JS)
    assert not found["cut"], found
    assert found["smallest"] is None or found["smallest"] >= 12, found



def test_learn_in_presentation_mode_fits_one_projector_screen(tab, server):
    """Issue 20 item 2: the loss curve, every head of every layer and the current scores above the fold."""
    tab.set_viewport_size({"width": 1280, "height": 720})
    tab.goto(f"{server}/learn?present=true")
    tab.get_by_role("button", name="Trained model").click()
    tab.get_by_text("Attention on the probe input").wait_for(timeout=LOAD_TIMEOUT_MS)
    wait_still(tab)
    boxes = tab.evaluate("""() => {
        const main = document.querySelector('[data-testid="stMain"]');
        const box = (el) => el.getBoundingClientRect().bottom;
        return {loss: [...main.querySelectorAll('[data-testid="stVegaLiteChart"]')].slice(0, 1).map(box),
                heads: [...main.querySelectorAll('[data-testid="stImage"] img')].map(box),
                goal: [...main.querySelectorAll('[data-testid="stAlert"]')].slice(0, 1).map(box),
                title: main.querySelectorAll('h1').length};
    }""")
    assert boxes["title"] == 0, "presentation mode drops the page title"
    assert len(boxes["heads"]) == 8 and boxes["loss"] and boxes["goal"], boxes
    assert max(boxes["loss"] + boxes["heads"] + boxes["goal"]) <= 720, boxes


@pytest.mark.parametrize("present", [False, True])
def test_a_charts_hover_toolbar_covers_no_button(tab, server, present):
    """Issue 20 item 9: the toolbar shown on hovering a chart covered Explore's Download and Next buttons."""
    tab.set_viewport_size({"width": 1280, "height": 720})
    open_drawn(tab, f"{server}/?section=Weights" + ("&present=true" if present else ""))
    tab.locator('[data-testid="stVegaLiteChart"]').first.hover()
    tab.locator('[data-testid="stElementToolbar"]').first.wait_for(state="visible")
    overlaps = tab.evaluate("""() => {
        const bar = document.querySelector('[data-testid="stElementToolbar"]').getBoundingClientRect();
        return [...document.querySelectorAll('button')].filter(b => {
            const r = b.getBoundingClientRect();
            return r.width && !b.closest('[data-testid="stElementToolbar"]') && r.left < bar.right &&
                   bar.left < r.right && r.top < bar.bottom && bar.top < r.bottom;
        }).map(b => b.innerText.slice(0, 30));
    }""")
    assert not overlaps, overlaps
