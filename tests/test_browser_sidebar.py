"""Issue 33 item 7: the sidebar at a projector's 1280x720 shows only the knobs a page uses, the Sentence box above
the fold, and says how a typed sentence applies. One server and one Chromium; every wait is a condition."""

from __future__ import annotations

import pytest

from browser import chromium_page, require_browser, streamlit_server, wait_drawn

pytestmark = pytest.mark.browser

SIDEBAR = '[data-testid="stSidebarUserContent"]'
OWN_CONTROLS = ["learn", "generate", "kv-cache", "benchmark"]
LINK = "variant=MultiHeadAttention&d_out=8&num_heads=4&sentence=The+cat+sat"


def settle(page) -> None:
    wait_drawn(page, 120_000)
    page.wait_for_function("() => document.body.dataset.screen", timeout=60_000)


def sidebar_labels(page) -> list[str]:
    return page.locator(f"{SIDEBAR} [data-testid='stWidgetLabel']").all_inner_texts()


def test_sidebar_shows_a_pages_knobs_with_the_sentence_above_the_fold():
    require_browser()
    with streamlit_server() as url, chromium_page(1280, 720) as page:
        page.goto(f"{url}/?{LINK}")
        settle(page)
        page.locator(f"{SIDEBAR} .st-key-d_out input").wait_for(timeout=60_000)  # a first run may be rerun once
        box = page.locator(f"{SIDEBAR} textarea").bounding_box()
        assert box and box["y"] + box["height"] <= 720, f"the Sentence box ends at y {box}: below the fold"
        assert page.locator(f"{SIDEBAR} textarea").input_value() == "The cat sat"
        assert "Ctrl+Enter" in page.locator(SIDEBAR).inner_text()  # how a typed sentence applies
        assert {"Variant", "d_out", "num_heads"} <= set(sidebar_labels(page))
        for path in OWN_CONTROLS:  # pages with their own controls: no knob that would do nothing there
            page.get_by_role("link", name={"learn": "Learn", "generate": "Generate", "kv-cache": "KV cache cost",
                                           "benchmark": "Benchmark"}[path]).click()
            page.wait_for_url(f"**/{path}*", timeout=60_000)
            settle(page)
            labels = sidebar_labels(page)
            assert page.locator(f"{SIDEBAR} textarea").count() == 0, (path, labels)
            assert not {"Variant", "d_out", "Sentence", "Masking method", "dropout"} & set(labels), (path, labels)
            assert "d_out=8" in page.url, page.url  # the settings stay in the link meanwhile
        page.get_by_role("link", name="Explore").click()
        page.wait_for_function("() => !location.pathname.includes('benchmark')", timeout=60_000)
        settle(page)
        # back on Explore, every setting is as it was: the link's view, not the defaults
        assert page.locator(f"{SIDEBAR} textarea").input_value() == "The cat sat"
        assert page.locator(f"{SIDEBAR} .st-key-d_out input").input_value() == "8"
        assert page.locator('[data-testid="stAlert"]').filter(has_text="Session State").count() == 0
