"""Phi-3 from a tiny GGUF file written here (tests/gguf_fixtures.py), against transformers' own GGUF loading of the
same file: logits, attention weights, tokens, greedy generation with and without the cache. The file stores each
layer's queries, keys and values as one fused ``attn_qkv`` and the SwiGLU gate and up projections as one ``ffn_up``:
they load split into the book's ``W_query`` / ``W_key`` / ``W_value`` and ``fc1`` / ``fc2``. The family finds the
file by its architecture; nothing outside ``attn_core/models/family_phi3.py`` knows Phi-3. Fast: no real model."""

from __future__ import annotations

import pytest
import torch

from attn_core.messages import Problem
from attn_core.models import registry
from attn_core.models.family_phi3 import FAMILY as PHI3
from attn_core.models.gpt import generate
from tests.gguf_fixtures import (
    TEXTS,
    arch_model,
    assert_equal_to_peer,
    phi3_cfg,
    randomize,
    transformers_model,
    write_gguf,
)

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTENTION_LAB_CACHE", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """(path, the model written, ours loaded from the file, transformers' model, transformers' tokenizer)."""
    folder = tmp_path_factory.mktemp("phi3")
    written = randomize(arch_model(phi3_cfg()))
    path = write_gguf(folder / "tiny-phi3.gguf", written, "phi3")
    mp = pytest.MonkeyPatch()
    mp.setenv("ATTENTION_LAB_CACHE", str(folder / "cache"))
    ours = PHI3.load_file(path)
    mp.undo()
    theirs, tokenizer = transformers_model(path)
    return path, written, ours, theirs, tokenizer


def ids_of(model, text: str) -> torch.Tensor:
    return torch.tensor([model.tokenizer.encode(text)])


def test_the_fused_tensors_load_split_into_the_books_names(files):
    _path, written, ours, _theirs, _tok = files
    assert ours.state_dict().keys() == written.state_dict().keys()
    for name, want in written.state_dict().items():
        assert torch.equal(ours.state_dict()[name], want), name
    att = ours.trf_blocks[0].att
    assert (att.W_query.weight.shape, att.W_key.weight.shape, att.W_value.weight.shape) == ((64, 64), (32, 64),
                                                                                            (32, 64))
    assert not ours.cfg["tied"] and ours.out_head.weight is not ours.tok_emb.weight


def test_logits_and_attention_weights_equal_transformers(files):
    _path, _written, ours, theirs, _tok = files
    assert_equal_to_peer(ours, theirs, ids_of(ours, TEXTS[0] + " " + TEXTS[1]))


def test_tokens_equal_transformers_tokenizer(files):
    _path, _written, ours, _theirs, tokenizer = files
    for text in TEXTS:
        ids = ours.tokenizer.encode(text)
        assert ids == tokenizer.encode(text), text
        assert ours.tokenizer.decode(ids[1:]) == tokenizer.decode(ids[1:]), text


def test_greedy_generation_equals_transformers_with_and_without_cache(files):
    _path, _written, ours, theirs, _tok = files
    idx = ids_of(ours, TEXTS[2])
    with torch.no_grad():
        want = theirs.generate(idx, max_new_tokens=12, do_sample=False, attention_mask=torch.ones_like(idx),
                               pad_token_id=0)
    cached = generate(ours, idx, 12, use_cache=True)
    uncached = generate(ours, idx, 12, use_cache=False)
    assert cached.tolist() == uncached.tolist() == want.tolist()


def test_the_family_finds_describes_and_configures_the_file(files, monkeypatch):
    path, _written, _ours, _theirs, _tok = files
    monkeypatch.setenv("ATTENTION_LAB_GGUF_DIR", str(path.parent))
    found = [f for f in registry.find_models() if f.path == path]
    assert [(f.name, f.family, f.label) for f in found] == [("tiny-phi3", "phi3", "Tiny phi3 · 1M · F32")]
    model = registry.load_model("tiny-phi3")
    c = registry.model_config(model)
    assert (c.label, c.n_heads, c.n_kv_heads, c.head_dim, c.grouped, c.qkv_bias) == ("Tiny phi3 · 1M · F32", 4, 2,
                                                                                      16, True, False)
    assert (c.rope_bases, c.windows, c.family_title) == ((10_000.0, 10_000.0), (), "Phi-3")
    assert "ATTENTION_LAB_GGUF_DIR" in str(PHI3.how_to_get())


def test_partial_rope_is_a_problem_that_says_what(tmp_path):
    model = randomize(arch_model(phi3_cfg()))
    path = write_gguf(tmp_path / "partial.gguf", model, "phi3", extra_meta={"phi3.rope.dimension_count": 8})
    with pytest.raises(Problem, match="rotates 8 of each head's 16 dimensions"):
        PHI3.load_file(path)
