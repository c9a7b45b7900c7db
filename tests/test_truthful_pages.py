"""Issue 10 items 1, 4-8 and 10 on Explore and the Masking lab: the charts tell the truth, notes
appear once, and a link restores the head, the clicked cell, the zoom window and the mistake."""

import json

import pytest

from apptest_utils import _rows, messages, spec_json, spec_nodes, table_text
from apptest_utils import open_page as open_app

LAB = "app_pages/masking_lab.py"
SMALL = dict(sentence="the cat sat on the mat", input_mode="learned", variant="MultiHeadAttention", d_in="8",
             d_out="8", num_heads="2")


pytestmark = pytest.mark.usefixtures("fresh_caches")  # tests/conftest.py


def chart(at, text):
    """(spec, rows) of the first chart whose spec mentions ``text``."""
    for el in at.get("vega_lite_chart"):
        spec, rows = json.loads(spec_json(el)), _rows(el)  # a heatmap's titles travel as data
        if text in json.dumps(spec, ensure_ascii=False) or any(
                isinstance(v, str) and text in v for r in rows for v in r.values()):
            return spec, rows
    raise KeyError(text)


def color_domain(spec) -> list:
    return [n["scale"].get("domain") for n in spec_nodes(spec) if n.get("field") == "color" and "scale" in n][0]


def has_value_text(spec) -> bool:
    s = json.dumps(spec)
    return '"type": "text"' in s and ('"field": "label"' in s or '"format": ".2g"' in s)


# Item 1 -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("p, top", [("0.5", 2), ("0.9", 10)])
def test_dropout_survivors_are_coloured_on_a_scale_that_reaches_them(p, top):
    at = open_app(dropout=p, train_mode="true", section="Dropout", **SMALL)
    spec, rows = chart(at, "after dropout (survivors")
    assert color_domain(spec) == [0, top]
    after = [r["value"] for r in rows if r["panel"].startswith("after dropout") and r["value"]]
    assert after and max(after) > 1 and max(after) <= top  # the survivors really exceed the old 0-1 scale
    assert has_value_text(spec)  # numbers in cells (6 tokens fit)
    assert any(f"1/(1−p) = {top:g}" in m.value for m in at.markdown)


def test_masking_lab_dropout_uses_the_scaled_range_too():
    at = open_app(LAB, lab_section="Dropout", **SMALL)
    spec, rows = chart(at, "after dropout (training)")
    assert color_domain(spec) == [0, 2]  # the lab's p = 0.5
    assert max(r["value"] for r in rows if r["panel"] == "after dropout (training)") > 1


# Item 4 -----------------------------------------------------------------------------------------------
def test_method_difference_shows_true_magnitudes_not_zeros():
    at = open_app(LAB, **SMALL)
    assert any("in units of float32 epsilon" in m.value for m in at.markdown)
    spec, rows = chart(at, '"title": "|difference|"')
    nonzero = [r["value"] for r in rows if r["value"]]
    assert nonzero, "the methods differ by float rounding somewhere"
    assert max(nonzero) >= 0.05  # in epsilon units the differences are visible numbers, not "0.00"
    assert has_value_text(spec)
    assert color_domain(spec) == [0, 1]  # sequential, 0 = identical


# Item 5 -----------------------------------------------------------------------------------------------
def test_precision_table_does_not_tick_a_nan_row():
    at = open_app(LAB, lab_section="Precision", **SMALL)
    table = at.dataframe[0].value
    col = "finite (all rows)"
    assert col in table.columns
    nan_rows = table[table["a fully masked row becomes"].str.startswith("NaN")]
    assert len(nan_rows) and not nan_rows[col].any()


# Item 6 -----------------------------------------------------------------------------------------------
def test_long_random_input_is_explained_and_a_relative_scale_offered():
    text = " ".join(["the quick brown fox jumps over the lazy dog"] * 12)  # ~108 tokens
    at = open_app(sentence=text, input_mode="learned", variant="MultiHeadAttention", d_in="64", d_out="64",
                  num_heads="4")
    assert any("Why the weights look alike" in i for i in messages(at)["info"])
    at.toggle(key="row_scale").set_value(True).run()
    assert not messages(at)["exception"]
    spec, rows = chart(at, "÷ row max")
    assert color_domain(spec) == [0, 1]
    by_row = {}
    for r in rows:
        if not r["masked"]:
            by_row.setdefault(r["q"], []).append(r["color"])
    assert all(abs(max(c) - 1) < 1e-9 for c in by_row.values())  # each row's largest weight is full colour
    assert any(r["value"] < 0.2 and r["color"] == 1 for r in rows if not r["masked"])  # tooltips keep the truth


def test_short_input_needs_no_explanation():
    at = open_app(**SMALL)
    assert not any("look alike" in i for i in messages(at)["info"])


# Item 7 -----------------------------------------------------------------------------------------------
def test_explore_compares_both_masking_methods_on_the_users_settings():
    at = open_app(**SMALL)
    at.toggle(key="compare_methods").set_value(True).run()
    assert not messages(at)["exception"]
    spec, rows = chart(at, "zero after softmax, renormalize")
    panels = {r["panel"] for r in rows}
    assert panels == {"−∞ before softmax", "zero after softmax, renormalize"}
    diff = float(next(m.value for m in at.metric if m.label == "max |difference|"))
    assert diff < 1e-6
    a = {(r["q"], r["k"]): r["value"] for r in rows if r["panel"] == "−∞ before softmax"}
    b = {(r["q"], r["k"]): r["value"] for r in rows if r["panel"] != "−∞ before softmax"}
    assert max(abs((a[c] or 0) - (b[c] or 0)) for c in a) < 1e-6


# Item 8 -----------------------------------------------------------------------------------------------
def test_masking_lab_shows_each_note_once_and_book_note_is_one_line():
    # the Dropout section runs the lab twice (dropout on)
    at = open_app(LAB, sentence="the cat sat on the mat and then it slept", lab_section="Dropout")
    notes = [c.value for c in at.caption if "book's fixed inputs" in c.value]
    assert len(notes) == 1 and not any("fixed 3-d inputs" in i for i in messages(at)["info"])


def test_empty_text_message_is_a_sentence():
    at = open_app(sentence=" ")
    errors = messages(at)["error"]
    assert errors and errors[0][0].isupper() and errors[0].endswith(".") and not errors[0].endswith("..")


# Item 10 ----------------------------------------------------------------------------------------------
def test_link_restores_head_cell_zoom_and_mistake():
    at = open_app(head="head 2", cell="5,2", **SMALL)
    assert at.session_state["head"] == 1
    assert any(r"Cell story: query **5\: the** → key **2\: cat**" in h.value for h in at.subheader)
    at = open_app(head="head 2", section="Output", **SMALL)
    assert any(m.value.startswith("**context vectors (head 2)**") for m in at.markdown)
    at = open_app(LAB, mistake="mistake: renormalize raw scores", **SMALL)
    assert any("Wrong: raw scores can be negative" in m.value for m in at.markdown)


def test_link_restores_the_zoom_window():
    text = " ".join(f"w{i}" for i in range(200))
    at = open_app(sentence=text, input_mode="learned", variant="CausalAttention", d_in="8", d_out="8",
                  weights_zoom_size="32", weights_zoom_start="40")
    assert at.session_state["weights_zoom_size"] == 32 and at.session_state["weights_zoom_start"] == 40
    assert any("Zoom: tokens 40–71" in c.value for c in at.caption)


@pytest.mark.parametrize("query, param, bad", [
    (dict(head="head 9"), "head", "head 9"),
    (dict(cell="99,1"), "cell", "99,1"),
    (dict(cell="![x](http://attacker/p.png)"), "cell", "![x](http://attacker/p.png)"),
    (dict(head="**bold**"), "head", "**bold**"),
])
def test_bad_link_values_are_reported_escaped_and_replaced(query, param, bad):
    at = open_app(**query, **SMALL)
    warning = next((w for w in at.warning if "is not valid here" in w.value), None)
    assert warning is not None, messages(at)
    from dashboard.state.links import md_escape, shown_value
    assert md_escape(param) in warning.value and shown_value(bad) in warning.value
    assert "instead" in warning.value
    assert f"` {bad} `" in warning.value  # verbatim in a code span: never a live link


def test_bad_mistake_and_zoom_values_are_reported():
    at = open_app(LAB, mistake="nope", **SMALL)
    assert any("mistake" in w and "nope" in w for w in messages(at)["warning"])
    text = " ".join(f"w{i}" for i in range(200))
    at = open_app(sentence=text, input_mode="learned", variant="CausalAttention", d_in="8", d_out="8",
                  weights_zoom_start="5000")
    assert any("weights\\_zoom\\_start" in w and "5000" in w for w in messages(at)["warning"])


@pytest.mark.parametrize("text", [None, "the cat sat on the mat"])  # the book's sentence, and 6 other tokens
def test_walkthrough_with_the_books_inputs_says_the_numbers_are_the_books(text):
    """With the book's sentence and its fixed inputs every step on "your sentence" is the book's step, number for
    number: the page says so instead of drawing the same chart and table a second time (issue 11). Another 6-token
    sentence gets its own vectors and its own chart (issue 20 item 1: it used to get the book's)."""
    at = open_app("app_pages/walkthrough.py", **({"sentence": text} if text else {}))
    for step in (0, 12):  # the first step and one later on
        at.session_state["walk_step"] = step
        at.run()
        said = any("fixed 3-d inputs" in c.value and "exactly the numbers above" in c.value for c in at.caption)
        if text is None:
            assert said
            assert len(at.table) == 2 and len(at.get("vega_lite_chart")) == 1, step  # the book's, drawn once
        else:
            assert not said and any("learned token + position embeddings" in c.value for c in at.caption)
            assert len(at.get("vega_lite_chart")) == 2, step  # the book's, then the sentence's own


def test_walkthrough_prints_every_steps_own_numbers_to_4_decimals():
    """The tables show the tensors the step computed and the book printed, every value, as the book prints it."""
    import numpy as np

    from attn_core.labs.walkthrough import book_walkthrough

    def text(t):
        v = t.detach().float().numpy()
        return np.char.mod("%.4f", v.reshape(1, -1) if v.ndim == 1 else v)

    at = open_app("app_pages/walkthrough.py")
    steps = book_walkthrough()
    for i, step in enumerate(steps):
        at.session_state["walk_step"] = i
        at.run()
        tables = [table_text(t) for t in at.table]
        assert (tables[0].to_numpy() == text(step.value)).all(), step.key  # our code computes
        if step.printed is not None:
            assert (tables[1].to_numpy() == text(step.printed)).all(), step.key  # the book prints
    ours = table_text(at.table[0])  # the last step (6, 2): one row per token, labels in full
    assert [s.replace("\\", "") for s in ours.index] == ["1: Your", "2: journey", "3: starts", "4: with", "5: one",
                                                          "6: step"]


def test_relative_scale_from_a_link_applies_on_the_first_run():
    at = open_app(row_scale="true", **SMALL)
    spec, _ = chart(at, "÷ row max")  # the heads grid, drawn before the toggle in page order
    assert color_domain(spec) == [0, 1]
    assert not any("look alike" in i for i in messages(at)["info"])


def test_error_sentences_keep_code_names_as_written():
    from dashboard.state.links import error_text

    assert error_text("d_out (6) must be divisible by num_heads (4)") == "d_out (6) must be divisible by num_heads (4)."
    assert error_text("the text is empty.") == "The text is empty."
    assert error_text("dropout must be at least 0") == "Dropout must be at least 0."
    # a Chinese sentence keeps its code name as written and ends with a Chinese full stop, even after a bracket
    assert error_text("d_out（5）必须能被 num_heads（2）整除") == "d_out（5）必须能被 num_heads（2）整除。"
    assert error_text("文本为空：请输入一个句子（例如：Your journey starts with one step）.") == \
        "文本为空：请输入一个句子（例如：Your journey starts with one step）。"
