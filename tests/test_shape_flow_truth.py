"""Issue 10 items 2, 3, 8 (Shape flow), 10 (the step in the link): what the Shape flow page says."""

import json

import pytest

from apptest_utils import _rows, messages
from apptest_utils import open_page as open_app

SHAPE = "app_pages/shape_flow.py"
MHA = dict(input_mode="learned", variant="MultiHeadAttention", d_in="8", d_out="8", num_heads="4")


pytestmark = pytest.mark.usefixtures("fresh_caches")  # tests/conftest.py


def open_page(page=SHAPE, **query):
    return open_app(page, **query)


def before_line(at) -> str:
    return next((m.value for m in at.markdown if m.value.startswith("**Before this step**")), "")


def test_each_step_compares_with_the_same_tensor():
    at = open_page(**MHA)
    seen = {}
    for i in range(20):
        seen[at.subheader[0].value] = before_line(at)
        if i < 19:
            at.button(key="flow_step_next").click().run()
    views = {k: v for k, v in seen.items() if ".view`" in k and "context" not in k}
    transposes = {k: v for k, v in seen.items() if ".transpose`" in k and "context" not in k}
    assert len(views) == 3 and len(transposes) == 3
    for title, line in views.items():
        var = title.split("`")[1].split(".")[0]
        assert line.startswith(f"**Before this step** `{var}`:"), (title, line)
        assert "(b=1, num_tokens=6, d_out=8) → (b=1, num_tokens=6, num_heads=4, head_dim=2)" in line
    for title, line in transposes.items():
        var = title.split("`")[1].split(".")[0]
        assert f"`{var}` (step `{var}.view`)" in line, (title, line)
        assert "→ (b=1, num_heads=4, num_tokens=6, head_dim=2)" in line
    assert all("unchanged" not in v for v in seen.values())


def test_first_code_line_names_the_inputs_really_used():
    at = open_page()  # the book's sentence with the book's fixed inputs
    assert "x = inputs" in at.code[0].value and "token_embeddings" not in at.code[0].value
    at = open_page(**MHA)
    assert at.code[0].value == "x = token_embeddings + pos_embeddings"


def test_source_expander_names_the_function_and_heads_count_from_one():
    at = open_page(**MHA)
    assert not any("the class" in e.label for e in at.expander)
    at.session_state["flow_step"] = 7  # keys.transpose: a per-head tensor
    at.run()
    assert any(e.label == "This line in the full source of `MultiHeadAttention.forward`" for e in at.expander)
    picker = next(n for n in at.number_input if n.label.startswith("head"))
    assert picker.label == "head (1–4)" and picker.value == 1 and picker.min == 1 and picker.max == 4


def test_full_source_is_drawn_only_while_its_expander_is_open_and_stays_open_across_steps():
    """Issue 11: closed, the expander's 60 highlighted lines were redrawn on every step (the marker moves)."""
    at = open_page(**MHA)
    at.session_state["flow_step"] = 7
    at.run()
    marked = lambda: [c.value for c in at.code if "◀◀◀ this step" in c.value]  # noqa: E731
    assert not marked()
    at.session_state["flow_source"] = True  # opened
    at.run()
    assert len(marked()) == 1 and "keys.transpose(1, 2)" in marked()[0].split("◀◀◀")[0].splitlines()[-1]
    at.button(key="flow_step_next").click().run()
    assert len(marked()) == 1 and at.session_state["flow_source"], "still open on the next step"


def test_token_count_is_singular_for_one_token():
    at = open_page(sentence="Hello", **{k: v for k, v in MHA.items()})
    assert any("**1 token ·" in m.value for m in at.markdown), [m.value for m in at.markdown][:3]


def test_view_picture_shows_real_head_dim_few_heads_and_numeric_legend():
    at = open_page(input_mode="learned", variant="MultiHeadAttention", d_in="16", d_out="768", num_heads="12")
    els = at.get("vega_lite_chart")
    after_el = next(el for el in els if '"title": "head_dim"' in el.proto.spec)
    before_el = next(el for el in els if '"title": "d_out column"' in el.proto.spec)
    after, before = json.loads(after_el.proto.spec), json.loads(before_el.proto.spec)
    rows = _rows(after_el)
    assert {r["panel"] for r in rows} == {"head 1", "head 2", "head 3", "head 4"}  # a slice of 12 heads
    assert max(r["k"] for r in rows) + 1 == 6  # 6 of head_dim 64 columns, not head_dim 1
    color = after["spec"]["layer"][0]["encoding"]["color"]
    assert color["scale"]["domain"] == ["head 1", "head 2", "head 3", "head 4"] == color["sort"]
    colors = color["scale"]["range"]
    assert len(set(colors)) == 4
    brows = _rows(before_el)
    # The before picture's columns are the real d_out columns: head 2 starts at column 65 (counted from 1, as every
    # page counts).
    assert "65" in json.dumps(before) and {r["head"] for r in brows} == {"head 1", "head 2", "head 3", "head 4"}
    # a number keeps its value through the reshape: head 2's first entry is column 64 of token 1
    assert next(r["number"] for r in rows if r["panel"] == "head 2" and r["q"] == 0 and r["k"] == 0) == 64


def test_link_restores_the_step_and_reports_a_bad_one():
    at = open_page(flow_step="8", **MHA)
    assert at.subheader[0].value == "8. `keys.transpose`"
    at = open_page(flow_step="8/20 · keys.transpose", **MHA)
    assert at.subheader[0].value == "8. `keys.transpose`"
    at = open_page(flow_step="99", **MHA)
    assert at.subheader[0].value == "1. `x`"
    warning = " ".join(messages(at)["warning"])
    assert "flow\\_step" in warning and "99" in warning and "step 1" in warning


def test_square_shapes_name_the_query_and_key_axes():
    """Issue 20 item 9: a (b, heads, T, T) shape read "num_tokens=9, num_tokens=9"."""
    at = open_page(flow_step="11", **MHA)
    shape = next(m.value for m in at.markdown if m.value.startswith("**Shape**"))
    assert "num_tokens=6 (queries), num_tokens=6 (keys)" in shape, shape


def test_head_dim_one_is_named_with_a_button_that_widens_the_heads():
    """Issue 33 item 10: the sidebar's defaults (the book's d_out 2, 2 heads) give head_dim 1, trivial pictures.
    The page says so in one line and offers d_out = 2 x num_heads; the shared defaults stay the book's."""
    at = open_page()
    note = [i.value for i in at.info if "head_dim" in i.value]
    assert len(note) == 1 and "head_dim = d_out ÷ num_heads = 2 ÷ 2 = 1" in note[0], note
    assert at.number_input(key="d_out").value == 2  # the defaults are untouched
    at.button(key="widen_heads").click().run()
    assert not messages(at)["exception"]
    assert at.number_input(key="d_out").value == 4 and at.number_input(key="num_heads").value == 2
    assert not [i.value for i in at.info if "head_dim" in i.value]
    assert not [b for b in at.button if b.key == "widen_heads"]
    assert any("head_dim 2**" in m.value for m in at.markdown)
    at = open_page(**MHA)  # head_dim 2: nothing to say
    assert not [b for b in at.button if b.key == "widen_heads"]


def test_batched_matmul_tables_count_queries_and_keys_from_one():
    """Issue 33 item 10: rows were numbered from 0 and columns from 1; tokens count from 1 everywhere."""
    at = open_page()
    tables = [d.value for d in at.dataframe if any(str(c).startswith("key ") for c in d.value.columns)]
    assert len(tables) == 4, [list(d.value.columns) for d in at.dataframe]
    for t in tables:
        n = len(t)
        assert list(t.index) == [f"query {i}" for i in range(1, n + 1)]
        assert list(t.columns) == [f"key {j}" for j in range(1, n + 1)]
