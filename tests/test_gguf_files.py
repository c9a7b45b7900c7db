"""GGUF files made here with ``gguf.GGUFWriter``: a tiny random Llama whose q/k rows are permuted as llama.cpp's
converter does loads back into the weights it was made from (every supported float and 8/4-bit type), and
damaged or unsupported files are ``ValueError`` s that say which and what works. Fast: no real model."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from attn_core.models.family_llama import FAMILY as LLAMA
from attn_core.models.gguf_files import find_gguf
from attn_core.models.gguf_weights import SUPPORTED_TYPES, cached_weights, unpermute
from attn_core.models.gpt import generate
from attn_core.models.rope_lm import RopeLM
from tests.gguf_fixtures import Q, arch_model, permute, write_gguf

CFG = {"arch": "llama", "vocab_size": 260, "context_length": 64, "emb_dim": 64, "n_heads": 4, "n_layers": 2,
       "hidden_dim": 96, "n_kv_groups": 2, "rope_base": 10_000.0, "rms_eps": 1e-5, "tied": True}
load_model = LLAMA.load_file


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTENTION_LAB_CACHE", str(tmp_path / "cache"))


def reference() -> RopeLM:
    torch.manual_seed(0)
    model = arch_model(CFG).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.2)
    return model


def test_unpermute_undoes_llama_cpps_permute():
    w = np.arange(4 * 8 * 3, dtype=np.float32).reshape(32, 3)
    assert np.array_equal(unpermute(permute(w, 4), 4), w)


@pytest.mark.parametrize("qtype,atol", [(Q.F32, 0.0), (Q.F16, 2e-3), (Q.BF16, 2e-2), (Q.Q8_0, 2e-2),
                                        (Q.Q4_0, 0.2), (Q.Q4_1, 0.2), (Q.Q5_0, 0.1), (Q.Q5_1, 0.1)])
def test_a_written_llama_loads_back_into_its_weights(tmp_path, qtype, atol):
    ref = reference()
    model = load_model(write_gguf(tmp_path / "tiny.gguf", ref, "llama", qtype=qtype))
    for name, want in ref.state_dict().items():
        torch.testing.assert_close(model.state_dict()[name], want, atol=atol, rtol=0, msg=name)
    idx = torch.tensor([[1, 5, 9, 200, 3]])
    with torch.no_grad():
        if qtype == Q.F32:  # the same weights: the same logits, and the q/k permutation undone
            torch.testing.assert_close(model(idx), ref(idx))
    assert generate(model, idx, 4, use_cache=True).tolist() == generate(model, idx, 4, use_cache=False).tolist()
    assert model.tokenizer.encode(" the") == [258] and model.tokenizer.decode([258, 259]) == " the<|endoftext|>"


def test_the_disk_cache_is_used_and_keyed_by_the_file(tmp_path):
    path = write_gguf(tmp_path / "tiny.gguf", reference(), "llama")
    first = cached_weights(path)
    files = sorted(p.suffix for p in (tmp_path / "cache").iterdir())
    assert files == [".json", ".safetensors"]
    again = cached_weights(path)
    assert again.cfg == first.cfg
    assert torch.equal(again.state_dict["tok_emb.weight"], first.state_dict["tok_emb.weight"])


def test_a_replaced_file_leaves_one_cache_entry(tmp_path):
    path = write_gguf(tmp_path / "tiny.Q8_0.gguf", reference(), "llama")
    cache = tmp_path / "cache"
    cache.mkdir()
    for legacy in ("tiny.safetensors", "tiny.json"):  # names before cache version 3 (cut at the first dot)
        (cache / legacy).write_text("{}")
    other = cache / "tiny.Q8_0x-1-2-v3.json"  # another file's entry whose name only starts the same
    other.write_text("{}")
    cached_weights(path)
    first = {p.name for p in cache.iterdir()} - {other.name}
    assert len(first) == 2 and all(name.startswith("tiny.Q8_0-") for name in first)
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))  # the file replaced
    cached_weights(path)
    second = {p.name for p in cache.iterdir()} - {other.name}
    assert len(second) == 2 and not second & first and other.exists()


def test_gguf_files_in_the_env_folder_are_listed(tmp_path, monkeypatch):
    path = write_gguf(tmp_path / "mine.gguf", reference(), "llama")
    monkeypatch.setenv("ATTENTION_LAB_GGUF_DIR", str(tmp_path))
    assert ("mine", path) in find_gguf()


def test_not_a_gguf_file(tmp_path):
    bad = tmp_path / "model.gguf"
    bad.write_text("not a model\n" * 100)
    with pytest.raises(ValueError, match=r"not a GGUF file.*llama \(Llama 3, SmolLM2\)"):
        load_model(bad)


def test_a_cut_short_file(tmp_path):
    path = write_gguf(tmp_path / "tiny.gguf", reference(), "llama")
    data = path.read_bytes()
    for keep in (len(data) - 1000, 300):
        cut = tmp_path / f"cut{keep}.gguf"
        cut.write_bytes(data[:keep])
        with pytest.raises(ValueError, match="cut short|damaged"):
            load_model(cut)


def test_another_architecture(tmp_path):
    path = write_gguf(tmp_path / "gpt2.gguf", reference(), "gpt2")
    with pytest.raises(ValueError, match="'gpt2' model.*Llama"):
        load_model(path)


def test_an_unsupported_quantization(tmp_path):
    path = write_gguf(tmp_path / "iq4.gguf", reference(), "llama", qtype=Q.IQ4_NL)
    with pytest.raises(ValueError, match="IQ4_NL.*" + ", ".join(SUPPORTED_TYPES)):
        load_model(path)


def test_an_unknown_pre_tokenizer(tmp_path):
    path = write_gguf(tmp_path / "pre.gguf", reference(), "llama", pre="klingon")
    with pytest.raises(ValueError, match="'klingon'.*smollm"):
        load_model(path)
