"""Tiled attention's tables of the loop's numbers in real Chromium: at 1280x720 with the sidebar open (the projector)
and on a 390x844 phone, in English and Chinese, every cell whole and every table inside the main column. The data
grid's six-column running table scrolled sideways in Chinese at 1280x720 (cutting "之后的 ℓ"), and on a phone its
toolbar covered the score table's third column: both are Markdown tables now (tests/test_phone_tables.py: their
numbers).

Cost: one server for the module; one Chromium and one page load per case; waits are conditions, never sleeps.
"""

from __future__ import annotations

import pytest
from langs import LANGS

from browser import TABLES_FIT_JS, chromium_page, require_browser, streamlit_server, wait_drawn

pytestmark = pytest.mark.browser

LOAD_MS = 120_000


@pytest.fixture(scope="module")
def server():
    require_browser()
    with streamlit_server() as url:
        yield url


@pytest.mark.parametrize("lang", list(LANGS))
@pytest.mark.parametrize("size", [(1280, 720), (390, 844)], ids=["projector", "phone"])
def test_the_score_and_running_tables_fit(server, lang, size):
    with chromium_page(*size) as page:
        page.set_default_timeout(LOAD_MS)
        page.goto(f"{server}/tiled?lang={lang}")
        page.wait_for_function("() => !!document.body.dataset.screen", timeout=LOAD_MS, polling=200)  # measured
        wait_drawn(page, LOAD_MS)
        page.wait_for_function("() => document.fonts.status === 'loaded' && document.querySelectorAll("
                               "'[data-testid=\"stMarkdown\"] table').length >= 2", timeout=LOAD_MS, polling=200)
        found = page.evaluate(TABLES_FIT_JS, ".st-key-tile_numbers")
        text = page.evaluate("() => document.querySelector('[data-testid=\"stMain\"]').innerText")
    assert found["tables"] >= 2 and not found["problems"], found  # the scores; the running max and sum
    assert "−∞" in text and "Infinity" not in text
