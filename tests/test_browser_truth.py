"""Issue 20 in real Chromium at a projector's 1280x720: what Streamlit itself renders (its Markdown autolinks bare
URLs, which markdown-it in the AppTest tests does not), and layouts that must fit above the fold."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from test_browser_layout import LOAD_TIMEOUT_MS, open_drawn

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
