"""AppTest: the Explore page with every variant, mask method and bad input."""

import json

import numpy as np
import pytest
import torch

from apptest_utils import chart_data, chart_with, clear_caches, messages, new_app, open_page, show_section
from attn_core import BOOK_INPUTS, VARIANTS, CausalAttention, MultiHeadAttention, tokenize

pytestmark = pytest.mark.usefixtures("fresh_caches")  # tests/conftest.py


def weights_matrix(at) -> np.ndarray:
    rows = chart_data(at, "weights")
    n = max(r["q"] for r in rows) + 1
    m = np.zeros((n, n))
    for r in rows:
        m[r["q"], r["k"]] = r["value"]
    return m


def test_defaults_run_and_match_attn_core():
    at = new_app()
    at.run()
    assert not at.exception
    torch.manual_seed(123)
    ca = CausalAttention(3, 2, 1024, 0.0)
    from attn_core import Trace
    t = Trace()
    ca(BOOK_INPUTS.unsqueeze(0), t)
    np.testing.assert_allclose(weights_matrix(at), t["attn_weights"].tensor[0].numpy(), atol=1e-6)
    assert "CausalAttention" in at.markdown[0].value


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("method", ["neg_inf", "renormalize"])
def test_every_variant_and_mask_method(variant, method):
    at = new_app()
    at.run()
    at.selectbox(key="variant").set_value(variant)
    at.selectbox(key="mask_method").set_value(method)
    at.run()
    msgs = messages(at)
    assert not msgs["exception"] and not msgs["error"], msgs
    w = weights_matrix(at)
    np.testing.assert_allclose(w.sum(axis=1), 1.0, atol=1e-5)
    if variant in ("CausalAttention", "MultiHeadAttentionWrapper", "MultiHeadAttention"):
        assert np.allclose(np.triu(w, 1), 0)


def test_book_multihead_weights_equal_attn_core_for_both_methods():
    for method in ("neg_inf", "renormalize"):
        clear_caches()
        at = new_app()
        at.run()
        at.button(key="preset_Book example").click().run()
        at.selectbox(key="mask_method").set_value(method).run()
        torch.manual_seed(123)
        from attn_core import Trace
        t = Trace()
        MultiHeadAttention(3, 2, 1024, 0.0, 2, mask_method=method)(BOOK_INPUTS.unsqueeze(0), t)
        np.testing.assert_allclose(weights_matrix(at), t["attn_weights"].tensor[0, 0].numpy(), atol=1e-6)
        heads = chart_with(show_section(at, "All heads"), "head 2")
        assert {r["panel"] for r in heads} == {"head 1", "head 2"}



def test_book_example_resets_every_setting_that_changes_its_numbers():
    """Issue 33: a link's window, causal off, q/k/v biases, masking method and training are reset by the preset."""
    at = new_app(window="2", causal="false", qkv_bias="true", mask_method="renormalize", train_mode="true",
                 dropout="0.5", seed="7")
    at.run()
    at.button(key="preset_Book example").click().run()
    assert not at.exception
    torch.manual_seed(123)
    from attn_core import Trace
    t = Trace()
    MultiHeadAttention(3, 2, 1024, 0.0, 2)(BOOK_INPUTS.unsqueeze(0), t)
    np.testing.assert_allclose(weights_matrix(at), t["attn_weights"].tensor[0, 0].numpy(), atol=1e-6)
    assert dict(at.query_params) == {"variant": "MultiHeadAttention", "lang": "en"}  # the language: always written


@pytest.mark.parametrize("query,words,absent", [
    (dict(window="1"), "mask: **causal, window 1** (−∞ before softmax)", "biases"),
    (dict(causal="false", qkv_bias="true"), "**no mask** (causal off) · q/k/v biases", "−∞"),
    (dict(causal="false", window="3", mask_method="renormalize"),
     "mask: **window 3, not causal** (zero after softmax, renormalize)", "biases"),
])
def test_the_summary_names_the_mask_and_the_biases(query, words, absent):
    at = new_app(variant="MultiHeadAttention", **query)
    at.run()
    line = next(m.value for m in at.markdown if "output shape" in m.value)
    assert words in line and absent not in line, line

def test_changing_knobs_changes_chart_data():
    at = new_app(input_mode="learned", variant="MultiHeadAttention", d_in="8", d_out="8", num_heads="2")
    at.run()
    assert not at.exception
    base = weights_matrix(at)
    at.number_input(key="d_out").set_value(16).run()
    assert not np.allclose(weights_matrix(at), base)
    at.number_input(key="num_heads").set_value(4).run()
    heads = chart_with(show_section(at, "All heads"), "head 4")
    assert {r["panel"] for r in heads} == {f"head {h}" for h in range(1, 5)}
    at.toggle(key="train_mode").set_value(True)
    at.slider(key="dropout").set_value(0.5).run()
    dropped = chart_with(show_section(at, "Dropout"), "after dropout (survivors × 2)")
    assert any(r["value"] and r["value"] > 1.0 for r in dropped)  # survivors scaled by 1/(1-p) = 2
    assert {r["panel"] for r in dropped} == {"attention weights", "after dropout (survivors × 2)"}


def test_masked_cells_are_marked_not_blank():
    at = new_app(section="Scores")
    at.run()
    rows = chart_with(at, "masked scores (−∞: causal)")
    masked = [r for r in rows if r["panel"].startswith("masked") and r["masked"]]
    assert len(masked) == 15  # 6 x 6 upper triangle


def test_repeated_tokens_stay_distinct():
    at = new_app()
    at.run()
    at.text_area(key="sentence").set_value("the cat saw the dog").run()
    rows = chart_data(at, "weights")
    assert sorted({r["row"] for r in rows}) == sorted(["1: the", "2: cat", "3: saw", "4: the", "5: dog"])
    assert any("learned token + position" in c.value for c in at.caption)  # a one-line note


@pytest.mark.parametrize("params,expect", [
    (dict(variant="MultiHeadAttention", d_out="6", num_heads="4"), "divisible by num_heads"),
    (dict(sentence=""), "empty"),
    (dict(sentence="   "), "empty"),
    (dict(sentence="word " * 40, variant="CausalAttention", context_length="16"), "context_length is 16"),
    (dict(sentence="word " * 1100), "up to 1024 tokens"),
    (dict(sentence="a b c d e f g h", input_mode="onehot", d_in="4"), "One-hot inputs need d_in"),
])
def test_invalid_combinations_explain_without_exception(params, expect):
    at = new_app(**params)
    at.run()
    msgs = messages(at)
    assert not msgs["exception"]
    assert any(expect in e for e in msgs["error"]), msgs


def test_context_length_button_raises_it():
    at = new_app(sentence="word " * 40, context_length="16")
    at.run()
    at.button(key="raise_context").click().run()
    assert at.number_input(key="context_length").value == len(tokenize("word " * 40))
    assert not messages(at)["error"]


def test_unavailable_device_falls_back_to_cpu():
    at = new_app(device="cuda:7")
    at.run()
    msgs = messages(at)
    assert not msgs["exception"]
    assert any("not available" in w for w in msgs["warning"])
    assert "on cpu" in at.markdown[0].value


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")
def test_cuda_device_is_offered_and_gives_the_cpu_weights():
    cpu = new_app(variant="MultiHeadAttention", num_heads="2", d_out="4")
    cpu.run()
    gpu = new_app(variant="MultiHeadAttention", num_heads="2", d_out="4", device="cuda:0")
    gpu.run()
    msgs = messages(gpu)
    assert not msgs["exception"] and not msgs["warning"], msgs
    assert "cuda:0" in gpu.selectbox(key="device").options
    assert "on cuda:0" in gpu.markdown[0].value
    np.testing.assert_allclose(weights_matrix(gpu), weights_matrix(cpu), atol=1e-5)


@pytest.mark.parametrize("text", ["🙂 emoji and 你好世界 CJK", "<script>alert('x')</script> <b>bold</b>",
                                  "tokens <|endoftext|> special"])
def test_odd_text_is_shown_as_text(text):
    at = new_app(sentence=text)
    at.run()
    msgs = messages(at)
    assert not msgs["exception"] and not msgs["error"], msgs
    labels = {r["row"] for r in chart_data(at, "weights")}
    assert all("\ufffd" not in lbl for lbl in labels)
    for md in at.markdown:
        assert "<script>" not in md.value


def test_markdown_in_the_sentence_is_shown_literally():
    at = new_app(sentence="![x](http://example.invalid/a.png) **bold** $x^2$")
    at.run()
    assert not messages(at)["exception"]
    story = next(h.value for h in at.subheader if h.value.startswith("Cell story"))
    # the default cell is (last token "$", first token "!"): both arrive escaped, so Markdown and
    # LaTeX in a sentence never render (no image fetched, no formula)
    assert "23\\: \\$" in story and "1\\: \\!" in story


def test_md_escape_neutralizes_links_and_formulas():
    from dashboard.state.links import md_escape

    assert md_escape("[a](b) $x$ **y**") == "\\[a\\]\\(b\\) \\$x\\$ \\*\\*y\\*\\*"


def test_only_the_open_section_is_drawn():
    at = new_app()
    at.run()
    drawn = [json.loads(el.proto.spec) for el in at.get("vega_lite_chart")]
    assert len(drawn) == 1, "a new visitor's page draws the weights chart alone"
    chart_data(at, "weights")
    with pytest.raises(KeyError):
        chart_with(at, "masked scores (−∞: causal)")
    show_section(at, "Scores")
    chart_with(at, "masked scores (−∞: causal)")
    with pytest.raises(KeyError):
        chart_data(at, "weights")


@pytest.mark.parametrize("variant,expect,absent", [
    ("simplified", ["Tokens", "Scores", "Weights", "Output"], ["Q, K, V", "All heads", "Dropout"]),
    ("CausalAttention", ["Tokens", "Q, K, V", "Scores", "Weights", "Dropout", "Output", "Trained"], ["All heads"]),
    ("MultiHeadAttention", ["All heads", "Weights", "Dropout"], []),
])
def test_sections_follow_the_variant(variant, expect, absent):
    at = new_app(variant=variant)
    at.run()
    labels = at.segmented_control(key="section").options
    assert all(x in labels for x in expect) and not any(x in labels for x in absent), labels
    assert labels.index("Scores") < labels.index("Weights") < labels.index("Output")  # the chapter's order


def test_next_and_previous_walk_the_sections_in_order():
    at = new_app(variant="MultiHeadAttention")
    at.run()
    labels = at.segmented_control(key="section").options
    at.button(key="section_next").click().run()
    assert at.session_state["section"] == labels[labels.index("Weights") + 1]
    assert any("Dropout is off" in i.value for i in at.info)
    at.button(key="section_prev").click().run()
    at.button(key="section_prev").click().run()
    assert at.session_state["section"] == "All heads"
    chart_with(at, "head 2")


def test_a_link_opens_a_section_and_a_bad_one_is_named():
    at = new_app(section="Output")
    at.run()
    assert any(m.value.startswith("**output (1, 6, 2)**") for m in at.markdown)
    assert len(at.get("vega_lite_chart")) == 2  # context vectors and output
    at = new_app(section="Nope")
    at.run()
    assert any("section" in w and "Nope" in w for w in messages(at)["warning"])
    chart_data(at, "weights")


def test_presentation_mode_draws_large_labels_and_values():
    at = new_app(present="true")
    at.run()
    assert not at.exception
    spec = json.loads(at.get("vega_lite_chart")[0].proto.spec)
    assert spec["config"]["axis"]["labelFontSize"] >= 16
    assert spec["config"]["legend"]["labelFontSize"] >= 16
    sizes = [layer["mark"].get("fontSize") for layer in spec["layer"] if isinstance(layer.get("mark"), dict)
             and layer["mark"].get("type") == "text"]
    assert sizes and min(sizes) >= 16, sizes  # the cell values
    at.button(key="present_exit").click().run()
    spec = json.loads(at.get("vega_lite_chart")[0].proto.spec)
    assert 13 <= spec["config"]["axis"]["labelFontSize"] < 16  # normal mode: smaller, still readable


def test_presentation_mode_panel_titles_are_large_too():
    at = new_app(present="true", variant="MultiHeadAttention", num_heads="2", section="All heads")
    at.run()
    spec = next(json.loads(el.proto.spec) for el in at.get("vega_lite_chart") if '"facet"' in el.proto.spec)
    assert spec["facet"]["header"]["labelFontSize"] >= 16  # "head 1", "head 2"


def test_trained_section_shows_a_trained_model_at_once():
    """Issue 9: the Trained section was blank until a model was picked, and its picker was labelled "Weights"
    (the name of another section). It opens on the first shipped model, with a picker that says what it picks."""
    from attn_core.labs import checkpoints
    from attn_core.labs.learn import TASKS

    shipped = [t for t in TASKS if t != "verdict" and checkpoints.checkpoint_path(t).exists()]  # read symbols
    at = new_app(section="Trained")
    at.run()
    assert not messages(at)["exception"], messages(at)
    picker = at.segmented_control(key="explore_weights")
    assert picker.label == "Trained model" and picker.value == shipped[0]
    assert picker.options == [TASKS[t].title for t in shipped]
    rows = chart_with(at, "layer 1 head 1")  # the heads are drawn without a click
    assert max(r["q"] for r in rows) + 1 == len(tokenize("Your journey starts with one step"))
    picker.set_value(None).run()  # clicking the picked model again: a prompt, not a blank section
    assert any("Pick a **trained model**" in i.value for i in at.info)


FORTY_FOUR_TOKENS = ("Attention lets every token look back at the tokens before it and decide how much each one "
                     "matters. A causal mask hides the future, softmax turns scores into weights that sum to one, and "
                     "the weighted values become one")


def _weights_spec(at) -> dict:
    el = next(el for el in at.get("vega_lite_chart") if el.proto.id.endswith("weights"))
    return json.loads(el.proto.spec)


@pytest.mark.parametrize("sentence, beside", [("The teacher wrote a short sentence on the board.", True),
                                              ("one two three four five six seven eight nine ten eleven twelve "
                                               "thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty",
                                               False),
                                              (FORTY_FOUR_TOKENS, False)])
def test_weights_readable_at_1280(sentence, beside):
    """Issue 33: outside presentation mode the weights chart beside the cell story was 276 px wide: at 44 tokens only
    every 4th label, from 11 tokens no values. Beside the story while its cells hold their values (10 tokens);
    otherwise the whole column: values up to ~23 tokens, every token's 13 px label up to ~44."""
    from dashboard.drawing import cells

    T = len(tokenize(sentence))
    at = open_page(sentence=sentence, section="Weights")
    spec = _weights_spec(at)
    layers = spec["layer"]
    axes = [layers[0]["encoding"][c]["axis"] for c in ("x", "y")]
    assert all(a["labelOverlap"] is False for a in axes), axes  # every token labelled
    assert spec["width"] >= T * cells.LABEL_PX
    has_values = any("label" in json.dumps(layer.get("encoding", {}).get("text", {})) for layer in layers)
    assert has_values == (T <= 20), T  # values whenever cells hold them
    assert (spec["width"] <= 300) == beside, spec["width"]  # beside the story: a 3/5 column
    assert spec["config"]["axis"]["labelFontSize"] >= 13


def test_many_bad_link_values_make_one_box():
    """Issue 33: each bad link value had its own warning, a stack of boxes over the first screen. Several make one box
    listing every one (escaped, each with what is used instead); a single bad value stays a single warning."""
    at = open_page(d_out="abc", num_heads="zz", dropout="9", seed="-4")
    boxes = [w.value for w in at.warning if "not valid here" in w.value]
    assert len(boxes) == 1, boxes
    assert boxes[0].startswith("4 values in the link could not be used")
    for name in ("d\\_out", "num\\_heads", "dropout", "seed"):
        assert f"- The link's **{name}**" in boxes[0], boxes[0]
    at = open_page(d_out="abc")
    boxes = [w.value for w in at.warning if "not valid here" in w.value]
    assert len(boxes) == 1 and boxes[0].startswith("The link's **d\\_out**"), boxes


def test_a_sentence_a_word_longer_keeps_the_weights_charts_spec():
    """Past the sizes where cells shrink, the weights chart is as large for 32 tokens as for 33 and its labels' room
    does not follow the longest word by a character: its spec stays (only the data's name changes), so the browser
    swaps data into the Vega view it has instead of building a new one."""
    words = " ".join(["word"] * 31)
    specs, sizes = [], []
    at = new_app()
    at.run()
    for text in (words + " end", words + " end again", words + " fin"):
        at.text_area(key="sentence").set_value(text).run()
        el = next(el for el in at.get("vega_lite_chart") if el.proto.id.endswith("weights"))
        spec = json.loads(el.proto.spec)
        spec.pop("data")
        specs.append(spec)
        sizes.append(weights_matrix(at).shape[0])
    assert sizes == [32, 33, 32]
    assert specs[0] == specs[1] == specs[2]
