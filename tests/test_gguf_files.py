"""GGUF files made here with ``gguf.GGUFWriter``: a tiny random Llama whose q/k rows are permuted as llama.cpp's
converter does loads back into the weights it was made from (every supported float and 8/4-bit type), and
damaged or unsupported files are ``ValueError`` s that say which and what works. Fast: no real model."""

from __future__ import annotations

import os
from pathlib import Path

import gguf
import numpy as np
import pytest
import torch

from attn_core.models.gguf_files import find_gguf
from attn_core.models.gguf_tokenizer import byte_decoder
from attn_core.models.gguf_weights import SUPPORTED_TYPES, cached_weights, unpermute
from attn_core.models.gpt import generate
from attn_core.models.llama import LlamaModel, load_model

CFG = {"vocab_size": 260, "context_length": 64, "emb_dim": 64, "n_heads": 4, "n_layers": 2, "hidden_dim": 96,
       "n_kv_groups": 2, "rope_base": 10_000.0, "rms_eps": 1e-5, "tied": True}
Q = gguf.GGMLQuantizationType
NAMES = {"norm1": "attn_norm", "norm2": "ffn_norm", "att.W_query": "attn_q", "att.W_key": "attn_k",
         "att.W_value": "attn_v", "att.out_proj": "attn_output", "ff.fc1": "ffn_gate", "ff.fc2": "ffn_up",
         "ff.fc3": "ffn_down"}


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTENTION_LAB_CACHE", str(tmp_path / "cache"))


def byte_alphabet() -> list[str]:
    """GPT-2's bytes_to_unicode: the 256 characters byte-level BPE spells bytes with, in byte order."""
    return [c for c, _ in sorted(byte_decoder().items(), key=lambda item: item[1])]


def permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's convert_hf_to_gguf ``permute`` of q/k rows."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def reference() -> LlamaModel:
    torch.manual_seed(0)
    model = LlamaModel(CFG).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.2)
    return model


def write_gguf(path: Path, model: LlamaModel, qtype=Q.F32, arch: str = "llama", pre: str = "smollm") -> Path:
    """``model`` as a GGUF file: F32 norms, the matrices as ``qtype``, q/k permuted, a byte-level vocabulary."""
    w = gguf.GGUFWriter(path, arch)
    w.add_block_count(CFG["n_layers"])
    w.add_context_length(CFG["context_length"])
    w.add_embedding_length(CFG["emb_dim"])
    w.add_feed_forward_length(CFG["hidden_dim"])
    w.add_head_count(CFG["n_heads"])
    w.add_head_count_kv(CFG["n_kv_groups"])
    w.add_rope_freq_base(CFG["rope_base"])
    w.add_layer_norm_rms_eps(CFG["rms_eps"])
    tokens = byte_alphabet() + ["Ġt", "he", "Ġthe", "<|endoftext|>"]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types([1] * 259 + [3])
    w.add_token_merges(["Ġ t", "h e", "Ġt he"])
    w.add_eos_token_id(259)
    for name, tensor in model.state_dict().items():
        if name == "out_head.weight":
            continue
        a = tensor.numpy().astype(np.float32)
        if name.startswith("trf_blocks."):
            _, i, rest = name.split(".", 2)
            key = rest.rsplit(".", 1)[0]
            gname = f"blk.{i}.{NAMES[key]}.weight"
            if key == "att.W_query":
                a = permute(a, CFG["n_heads"])
            elif key == "att.W_key":
                a = permute(a, CFG["n_kv_groups"])
        else:
            gname = {"tok_emb.weight": "token_embd.weight", "final_norm.weight": "output_norm.weight"}[name]
        if a.ndim == 2 and qtype == Q.IQ4_NL:  # a type gguf cannot write: zero blocks of its size
            block, size = gguf.GGML_QUANT_SIZES[qtype]
            w.add_tensor(gname, np.zeros((a.shape[0], a.shape[1] // block * size), np.uint8), raw_dtype=qtype)
        elif a.ndim == 2 and qtype != Q.F32:
            w.add_tensor(gname, gguf.quants.quantize(a, qtype), raw_dtype=qtype)
        else:
            w.add_tensor(gname, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_unpermute_undoes_llama_cpps_permute():
    w = np.arange(4 * 8 * 3, dtype=np.float32).reshape(32, 3)
    assert np.array_equal(unpermute(permute(w, 4), 4), w)


@pytest.mark.parametrize("qtype,atol", [(Q.F32, 0.0), (Q.F16, 2e-3), (Q.BF16, 2e-2), (Q.Q8_0, 2e-2),
                                        (Q.Q4_0, 0.2), (Q.Q4_1, 0.2), (Q.Q5_0, 0.1), (Q.Q5_1, 0.1)])
def test_a_written_llama_loads_back_into_its_weights(tmp_path, qtype, atol):
    ref = reference()
    model = load_model(write_gguf(tmp_path / "tiny.gguf", ref, qtype))
    for name, want in ref.state_dict().items():
        torch.testing.assert_close(model.state_dict()[name], want, atol=atol, rtol=0, msg=name)
    idx = torch.tensor([[1, 5, 9, 200, 3]])
    with torch.no_grad():
        if qtype == Q.F32:  # the same weights: the same logits, and the q/k permutation undone
            torch.testing.assert_close(model(idx), ref(idx))
    assert generate(model, idx, 4, use_cache=True).tolist() == generate(model, idx, 4, use_cache=False).tolist()
    assert model.tokenizer.encode(" the") == [258] and model.tokenizer.decode([258, 259]) == " the<|endoftext|>"


def test_the_disk_cache_is_used_and_keyed_by_the_file(tmp_path):
    path = write_gguf(tmp_path / "tiny.gguf", reference())
    first = cached_weights(path)
    files = sorted(p.suffix for p in (tmp_path / "cache").iterdir())
    assert files == [".json", ".safetensors"]
    again = cached_weights(path)
    assert again.cfg == first.cfg
    assert torch.equal(again.state_dict["tok_emb.weight"], first.state_dict["tok_emb.weight"])


def test_a_replaced_file_leaves_one_cache_entry(tmp_path):
    path = write_gguf(tmp_path / "tiny.Q8_0.gguf", reference())
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
    path = write_gguf(tmp_path / "mine.gguf", reference())
    monkeypatch.setenv("ATTENTION_LAB_GGUF_DIR", str(tmp_path))
    assert ("mine", path) in find_gguf()


def test_not_a_gguf_file(tmp_path):
    bad = tmp_path / "model.gguf"
    bad.write_text("not a model\n" * 100)
    with pytest.raises(ValueError, match="not a GGUF file.*Llama-family"):
        load_model(bad)


def test_a_cut_short_file(tmp_path):
    path = write_gguf(tmp_path / "tiny.gguf", reference())
    data = path.read_bytes()
    for keep in (len(data) - 1000, 300):
        cut = tmp_path / f"cut{keep}.gguf"
        cut.write_bytes(data[:keep])
        with pytest.raises(ValueError, match="cut short|damaged"):
            load_model(cut)


def test_another_architecture(tmp_path):
    path = write_gguf(tmp_path / "gpt2.gguf", reference(), arch="gpt2")
    with pytest.raises(ValueError, match="'gpt2' model.*Llama"):
        load_model(path)


def test_an_unsupported_quantization(tmp_path):
    path = write_gguf(tmp_path / "iq4.gguf", reference(), qtype=Q.IQ4_NL)
    with pytest.raises(ValueError, match="IQ4_NL.*" + ", ".join(SUPPORTED_TYPES)):
        load_model(path)


def test_an_unknown_pre_tokenizer(tmp_path):
    path = write_gguf(tmp_path / "pre.gguf", reference(), pre="klingon")
    with pytest.raises(ValueError, match="'klingon'.*smollm"):
        load_model(path)
