"""Issue 20: what the class sees is true. AppTest and unit tests for the teacher's run-through items."""

from __future__ import annotations

import re

import pytest
import torch

from apptest_utils import _rows, chart_with, messages, show_section, spec_nodes
from apptest_utils import open_page as open_app

WALK = "app_pages/walkthrough.py"
LAB = "app_pages/masking_lab.py"

pytestmark = pytest.mark.usefixtures("fresh_caches")  # tests/conftest.py


# Item 1: the book's vectors belong to the book's sentence ---------------------------------------------------
@pytest.mark.parametrize("text", ["The cat sat on the mat", "I love my dog very much"])
def test_other_six_token_sentences_get_their_own_vectors(text):
    from attn_core import BOOK_INPUTS, tokenize
    from attn_core.text.embeddings import embed, uses_book_inputs

    ids = [t.id for t in tokenize(text)]
    assert len(ids) == 6 and not uses_book_inputs(ids)
    with pytest.raises(ValueError, match="book's sentence"):
        embed(ids, 3, "book")
    at = open_app(sentence=text)  # the default input mode is the book's
    assert any("book's fixed inputs" in c.value for c in at.caption), [c.value for c in at.caption]
    show_section(at, "Tokens")
    assert any(m.value.startswith("**Input x (learned inputs)**") for m in at.markdown)
    rows = _rows(at.get("vega_lite_chart")[0])
    x = torch.tensor([[r["value"] for r in rows if r["q"] == q] for q in sorted({r["q"] for r in rows})])
    assert not torch.allclose(x.reshape(BOOK_INPUTS.shape), BOOK_INPUTS)


def test_the_books_sentence_keeps_the_books_vectors():
    from attn_core import BOOK_INPUTS, BOOK_SENTENCE, tokenize
    from attn_core.text.embeddings import embed, uses_book_inputs

    ids = [t.id for t in tokenize(BOOK_SENTENCE)]
    assert uses_book_inputs(ids) and torch.equal(embed(ids, 3, "book")[0], BOOK_INPUTS)
    at = open_app()
    assert not any("book's fixed inputs" in c.value for c in at.caption)
    show_section(at, "Tokens")
    assert any(m.value.startswith("**Input x (book inputs)**") for m in at.markdown)
    assert not messages(at)["error"]


# Item 6: words follow the method and the measured result ------------------------------------------------------
RENORM = dict(variant="MultiHeadAttention", mask_method="renormalize")


def test_scores_words_and_panels_follow_the_renormalize_method():
    at = show_section(open_app(**RENORM), "Scores")
    captions = " ".join(c.value for c in at.caption)
    assert "−∞" not in captions and "masks nothing before softmax" in captions, captions
    panels = {r["panel"] for r in chart_with(at, "future zeroed")}
    assert panels == {"softmax over all keys", "future zeroed", "÷ row sum = the weights"}, panels
    at = show_section(open_app(variant="MultiHeadAttention"), "Scores")  # −∞ before softmax: grey −∞ cells
    assert any("Grey cells marked −∞ are masked" in c.value for c in at.caption)


@pytest.mark.parametrize("cell, says, never", [
    ("3,1", "Softmax over all 6 keys", "visible keys"),  # a past key
    ("2,4", "zeroed after softmax", "−∞"),  # a future key
])
def test_cell_story_follows_the_renormalize_method(cell, says, never):
    at = open_app(cell=cell, **RENORM)
    story = next(m.value for m in at.markdown if "1. **Score**" in m.value)
    words = story + " ".join(c.value for c in at.caption)
    assert says in words and never not in words, words


def test_cell_story_with_neg_inf_counts_visible_keys():
    at = open_app(cell="3,1", variant="MultiHeadAttention")
    assert any("3 visible keys" in c.value for c in at.caption)


def test_masking_lab_says_what_its_float16_table_shows():
    """The lab said −1e9 "overflows float16 to −∞" while its own precision table shows PyTorch raising an error."""
    from attn_core import BOOK_INPUTS
    from attn_core.labs.lab import precision_table

    at = open_app(LAB, mistake="large negative instead of −∞")
    verdict = next(m.value for m in at.markdown if "Works in float32" in m.value)
    scores = BOOK_INPUTS @ BOOK_INPUTS.T
    f16 = next(r for r in precision_table(scores, 3) if r.dtype == "float16" and r.method == "-1e9")
    assert f16.fully_masked_row.startswith("PyTorch error")  # what the lab's table shows
    assert "overflows float16" not in verdict and "raises an error" in verdict, verdict


# Item 12 (second part): a link's input mode is said, not silently taken ----------------------------------------
@pytest.mark.parametrize("mode, shown", [("learned", "learned inputs"), ("onehot", "one-hot inputs")])
def test_a_links_input_mode_is_named_on_the_page(mode, shown):
    at = open_app(input_mode=mode, d_in="8")
    assert shown in at.markdown[0].value, at.markdown[0].value


def test_a_bad_input_mode_is_named():
    at = open_app(input_mode="trained")
    assert any("input\\_mode" in w and "trained" in w for w in messages(at)["warning"]), messages(at)


# Item 7: every benchmark bar readable (a log axis once the times span 10x) ----------------------------------------
def test_benchmark_bars_use_a_log_axis_when_one_repeat_is_slow():
    import altair as alt
    import pandas as pd

    from dashboard.drawing import measure_charts

    df = pd.DataFrame({"implementation": ["raw SDPA", "MultiHeadAttention (explicit)", "wrapper"],
                       "pass": ["forward"] * 3, "ms": [0.04, 0.07, 0.11], "ms_min": [0.03, 0.06, 0.10],
                       "ms_max": [0.05, 18.0, 0.12]})  # one slow repeat
    alt.data_transformers.disable_max_rows()
    spec = measure_charts.bar_chart(df, "ms", "implementation", "pass", spread=True).to_dict()
    scales = [layer["encoding"]["x"].get("scale", {}) for layer in spec["layer"] if "x" in layer.get("encoding", {})]
    assert scales and all(s.get("type") == "log" for s in scales), scales
    lo, hi = scales[0]["domain"]
    assert lo <= 0.03 and hi >= 18.0  # every bar, line and value inside
    even = df.assign(ms_max=df["ms"] * 1.1)  # times within 10x of each other: a plain axis from 0 reads better
    spec = measure_charts.bar_chart(even, "ms", "implementation", "pass", spread=True).to_dict()
    assert all(layer["encoding"]["x"].get("scale", {}).get("type") != "log" for layer in spec["layer"]
               if "x" in layer.get("encoding", {}))


# Item 8: Learn's scores table: no "None" column, the verdict whole ----------------------------------------------
@pytest.mark.parametrize("task", ["first", "induction"])
def test_learn_scores_table_has_no_empty_column_and_room_for_the_verdict(task):
    import json

    at = open_app("app_pages/learn.py")
    at.selectbox(key="learn_task").set_value(task).run()
    at.button(key="learn_load").click().run()
    table, proto = at.dataframe[0].value, at.dataframe[0].proto
    assert task == "induction" or "induction" not in table.columns, table  # it printed "None" in every row
    assert not table.isna().all().any(), table
    config = json.loads(proto.columns)
    assert config["verdict"].get("width") == "large", config  # "no clear pattern (entropy 2.88, c…" was cut
    assert not table["verdict"].str.contains("entropy").any()  # the numbers are in their own columns
    assert all(config[c].get("width") == "small" for c in ("layer", "head")), config


# Item 5: row labels never overlap: rows lower than their labels drop every other label ------------------------------
@pytest.mark.parametrize("big", [True, False])
def test_row_labels_thin_out_when_rows_are_lower_than_the_labels(big):
    import numpy as np

    from dashboard.drawing import cells, heatmaps

    labels = [f"{i + 1}: word{i}" for i in range(22)]
    m = np.random.default_rng(0).random((22, 22))

    def y_axis(spec):
        return [n["y"].get("axis", {}) for n in spec_nodes(spec) if isinstance(n.get("y"), dict)
                and n["y"].get("field") == "row"]

    small = heatmaps.facet_grid([m] * 4, [f"head {h}" for h in range(4)], labels, labels,
                                look=heatmaps.Look(scale="weights", max_px=180, big=big))
    row_px = cells.cell_px(22, 22, 180, big)
    assert row_px < (18 if big else 12)
    assert all(a.get("labelOverlap") for a in y_axis(small.to_dict())), y_axis(small.to_dict())
    roomy = heatmaps.heatmap(m[:6, :6], labels[:6], labels[:6], heatmaps.Look(max_px=480, big=big))
    assert not any(a.get("labelOverlap") for a in y_axis(roomy.to_dict()))
    assert all(a.get("labelFlush") is False for a in y_axis(roomy.to_dict()))  # the first label sat low (item 9)


def test_byte_pieces_are_explained_once_and_show_the_character_they_complete():
    """Issue 20 item 9: emoji and CJK tokens showed as ⟨f0 9f⟩ with no word of why; issue 41 item 12: every token
    of the run names its character, not only the last."""
    from attn_core import tokenize

    labels = [t.label for t in tokenize("I love 😀 and 猫")]
    assert labels[2:4] == ["3: 😀(1/2)", "4: 😀(2/2)"] and labels[-3:] == ["6: 猫(1/3)", "7: 猫(2/3)", "8: 猫(3/3)"]
    at = open_app(None, sentence="I love 😀 and 猫", input_mode="learned", section="Tokens")
    notes = [c.value for c in at.caption if "splits them into UTF-8 bytes" in c.value]
    assert len(notes) == 1 and "猫(1/3)" in notes[0], [c.value for c in at.caption]
    assert "3: 😀(1/2)" in list(at.dataframe[0].value.iloc[:, 0])
    at = open_app(None, sentence="plain words only", input_mode="learned", section="Tokens")
    assert not [c.value for c in at.caption if "UTF-8 bytes" in c.value]


def test_output_values_print_with_fixed_decimals():
    """Issue 20 item 9: output cells printed "−4e-3"-style values. Fixed decimals: 3, or 2 where "-0.452" would not
    fit its cell (the book's 6 x 2 at 1280x720)."""
    at = open_app(None, input_mode="learned", section="Output")
    specs = [el.proto.spec for el in at.get("vega_lite_chart")]
    assert len(specs) == 2 and all(re.search(r'"format": "\.[23]f"', spec) and ".0e" not in spec for spec in specs)


def test_the_model_trained_in_this_session_runs_on_your_sentence():
    """Issue 20 item 10: Learn's model (this session's) is one click from Explore, with its heads and verdicts."""
    at = open_app("app_pages/learn.py")
    at.button(key="learn_load").click().run()  # the Learn page's trained model becomes this session's job
    steps = at.session_state["learn_job"].trainer.step_count
    at.switch_page("app_pages/explore.py")
    at.session_state["section"] = "Trained"
    at.run()
    picker = at.segmented_control(key="explore_weights")
    assert picker.value == "session" and any(o.startswith("Yours: ") for o in picker.options), picker.options
    assert not messages(at)["exception"] and not messages(at)["error"], messages(at)
    verdict_lines = [c.value for c in at.caption if "·" in c.value and "head" not in c.value.lower()[:3]]
    assert verdict_lines, [c.value for c in at.caption]
    assert f"step {steps}" in " ".join(picker.options)
