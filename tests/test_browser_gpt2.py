"""The model view in real Chromium (issue 21): a 12 x 12 GPT-2-shaped model (tiny and random: made here, no network)
at 1280x720 and 1920x1080. The whole grid fits one screen, nothing is cut off or overlapped, and a click on a head
opens it in every section (the Weights section, that layer and head, in the link)."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
import torch
from test_browser_layout import CHECK_JS, LOAD_TIMEOUT_MS, READY_JS, SIXTY_FOUR_TOKENS, TOL_PX, VIEWPORTS
from transformers import GPT2Config, GPT2LMHeadModel
from transformers.utils import logging as hf_logging

from browser import chromium_page, require_browser, streamlit_server

pytestmark = pytest.mark.browser
hf_logging.set_verbosity_error()
NAME = "gpt2-12x12"


@pytest.fixture(scope="module")
def gpt2_server(tmp_path_factory):
    """The app with a random GPT-2 of 12 layers x 12 heads (24 wide) as its only pretrained weights."""
    require_browser()
    folder = tmp_path_factory.mktemp("weights")
    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(n_layer=12, n_head=12, n_embd=24)).save_pretrained(folder / NAME)
    import os

    env = dict(os.environ, ATTENTION_LAB_GPT2_DIR=str(folder))
    with streamlit_server(env=env) as url:
        yield url


@pytest.mark.parametrize("viewport", list(VIEWPORTS))
def test_the_model_view_fits_one_screen_and_a_click_opens_the_head(gpt2_server, viewport):
    width, height = VIEWPORTS[viewport]
    query = {"model": NAME, "section": "Model view", "sentence": SIXTY_FOUR_TOKENS}
    with chromium_page(width, height) as page:
        page.set_default_timeout(LOAD_TIMEOUT_MS)
        page.goto(f"{gpt2_server}/?{urlencode(query)}")
        page.wait_for_function(READY_JS, timeout=LOAD_TIMEOUT_MS, polling="raf")
        found = page.evaluate(CHECK_JS, TOL_PX)
        assert not found["cut"] and not found["overlap"], found
        grid = page.locator(".st-key-model_grid")
        box = grid.bounding_box()
        assert box["height"] <= height, f"the grid is {box['height']:.0f} px tall at {viewport}"
        page.screenshot(path=f"/tmp/gpt2app-shots/test-model-view-{viewport}.png")
        head = grid.locator('[aria-label*="layer 3 head 5:"]').first  # Vega's SVG names each frame by its tooltip
        head.scroll_into_view_if_needed()
        head.click()
        # the link gains layer and head in separate writes: wait for both (layer alone raced the head on a busy box)
        page.wait_for_function("() => { const p = new URL(location).searchParams; "
                               "return p.get('layer') === '3' && p.get('head') === 'head 5'; }",
                               timeout=LOAD_TIMEOUT_MS)
        page.wait_for_function(READY_JS, timeout=LOAD_TIMEOUT_MS, polling="raf")
        params = page.evaluate("() => Object.fromEntries(new URL(location).searchParams)")
        assert params["head"] == "head 5" and params.get("section", "Weights") == "Weights", params  # the default
        assert page.locator(".st-key-weights").count() == 1  # the Weights section's chart: that head's weights
        assert "layer 3" in page.locator('[data-testid="stMarkdownContainer"]', has_text="output shape").inner_text()
