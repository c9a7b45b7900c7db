"""The one GGUF writer of the tests: tiny files of any architecture a family declares (llama, qwen2, qwen3, gemma3,
phi3, ...), written here with ``gguf.GGUFWriter`` (no download): random weights in llama.cpp's tensor names and
layout (by the architecture's own table: fused tensors concatenated, a Llama's q/k rows permuted as llama.cpp's
converter does, any quantization gguf writes), and a small real vocabulary trained here on mixed English, Chinese,
emoji and code (byte-level BPE with merges for Qwen; a SentencePiece-style vocabulary with scores and byte fallback,
no merges, for Gemma and Phi-3; GPT-2's byte alphabet and three merges for a Llama), with the metadata
transformers' GGUF loader needs."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import gguf
import numpy as np
import torch
from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, trainers

from attn_core.models.gguf_tokenizer import QWEN2_SPLIT, byte_decoder
from attn_core.models.gguf_weights import GLOBAL_NAMES, architectures
from attn_core.models.rope_lm import RopeLM

CORPUS = [
    "The quick brown fox jumps over the lazy dog. The dog sleeps; the fox runs.",
    "Attention weights sum to one: softmax(q . k / sqrt(d_k)).",
    "注意力机制让模型关注输入的不同部分。自注意力计算每个词与其他词的关系。",
    "因果注意力只看前面的词，多头注意力有多个头。",
    "def attention(q, k, v):\n    return softmax(q @ k.T) @ v  # 计算上下文向量\n",
    "emoji 🦊🚀 and numbers 12345, 3.14159 in 2026",
    "Hello 你好 world 世界! print('hi')",
]
TEXTS = ["The quick brown fox jumps over the lazy dog.", "注意力机制和自注意力：上下文向量。",
         "mixed 中文 and English, numbers 2026 and 3.14", "emoji 🦊🚀👩‍💻 done",
         "def f(x):\n    return x  # 代码\n\n  two  spaces", "<|im_start|>user\n你好<|im_end|>\n"]
QWEN_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
GEMMA_SPECIAL = ["<pad>", "<eos>", "<bos>", "<unk>"]
Q = gguf.GGMLQuantizationType
# the book's names -> llama.cpp's tensor names: the reader's table, inverted (one place for the names)
TO_GGUF = {book: gguf_name for gguf_name, book in GLOBAL_NAMES.items()}
SPM_ARCHS = ("gemma3", "phi3")  # their tiny files hold a SentencePiece-style vocabulary


def arch_model(cfg: dict) -> RopeLM:
    """A random model of ``cfg["arch"]`` (default llama), with what that architecture fixes (Gemma's sandwich norms,
    Qwen2's biases, ...) as its family's module declares it."""
    spec = architectures().get(cfg.get("arch", "llama"))
    return RopeLM(cfg | dict(spec.model if spec else {}))


def block_to_gguf(arch: str) -> dict[str, tuple[str, bool]]:
    """The book's block names -> (llama.cpp's name, whether that tensor is fused from several), by ``arch``'s own
    table (an architecture no family reads: every family's unfused names)."""
    known = architectures()
    tables = [known[arch].block_names] if arch in known else [a.block_names for a in known.values()]
    inverted: dict[str, tuple[str, bool]] = {}
    for table in tables:
        for gguf_name, book in table.items():
            if isinstance(book, str):
                inverted[book] = (gguf_name, False)
            elif arch in known:
                inverted |= {part: (gguf_name, True) for part in book}
    return inverted


@lru_cache(maxsize=1)
def qwen_vocab() -> tuple[list[str], list[str]]:
    """(tokens, merges) of a byte-level BPE trained on :data:`CORPUS` with Qwen's pre-tokenizer."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated"),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    trainer = trainers.BpeTrainer(vocab_size=420, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(CORPUS * 3, trainer)
    vocab = tok.get_vocab()
    tokens = [t for t, _unused in sorted(vocab.items(), key=lambda item: item[1])]
    merges = [" ".join(m) if isinstance(m, list) else m for m in json.loads(tok.to_str())["model"]["merges"]]
    return tokens, merges


@lru_cache(maxsize=1)
def gemma_vocab() -> list[str]:
    """SentencePiece-style pieces (``▁`` for a space) trained on :data:`CORPUS`, best merges first, after the
    special tokens and the 256 byte-fallback tokens; a piece of two spaces stored as spaces, as Gemma's files do."""
    tok = Tokenizer(models.BPE(byte_fallback=True))
    tok.normalizer = normalizers.Replace(" ", "\u2581")
    trainer = trainers.BpeTrainer(vocab_size=300, show_progress=False)
    tok.train_from_iterator(CORPUS * 3, trainer)
    pieces = [t for t, _unused in sorted(tok.get_vocab().items(), key=lambda item: item[1])]
    chars = [p for p in pieces if len(p) == 1]
    merged = [p for p in pieces if len(p) > 1 and p != "\u2581\u2581"]
    return GEMMA_SPECIAL + [f"<0x{b:02X}>" for b in range(256)] + ["  "] + merged + chars


def add_spm_vocab(w: gguf.GGUFWriter, tokens: list[str], types: list[int]) -> None:
    """A SentencePiece-style vocabulary as Gemma's files hold it: scored best first, ``<pad>``, ``<eos>``, ``<bos>``,
    ``<unk>`` as ids 0-3, a BOS before every text; no merges (the loader rebuilds them)."""
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([-float(i) for i in range(len(tokens))])
    w.add_token_types(types)
    w.add_pad_token_id(0)
    w.add_eos_token_id(1)
    w.add_bos_token_id(2)
    w.add_unk_token_id(3)
    w.add_add_bos_token(True)


def byte_alphabet() -> list[str]:
    """GPT-2's bytes_to_unicode: the 256 characters byte-level BPE spells bytes with, in byte order."""
    return [c for c, _ in sorted(byte_decoder().items(), key=lambda item: item[1])]


def write_tokenizer(w: gguf.GGUFWriter, arch: str, pre: str = "smollm") -> int:
    """The vocabulary's metadata; returns the vocabulary size (``pre``: a Llama's pre-tokenizer)."""
    if arch in SPM_ARCHS:
        tokens = spm_vocab(arch)
        add_spm_vocab(w, tokens, [3, 3, 3, 2] + [6] * 256 + [1] * (len(tokens) - 260))
        return len(tokens)
    if arch not in ("qwen2", "qwen3"):  # a Llama's (or a foreign file's): GPT-2's bytes and three merges
        tokens = byte_alphabet() + ["Ġt", "he", "Ġthe", "<|endoftext|>"]
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre(pre)
        w.add_token_list(tokens)
        w.add_token_types([1] * 259 + [3])
        w.add_token_merges(["Ġ t", "h e", "Ġt he"])
        w.add_eos_token_id(259)
        return len(tokens)
    tokens, merges = qwen_vocab()
    tokens = tokens + QWEN_SPECIAL + ["<think>"]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types([1] * (len(tokens) - 4) + [3, 3, 3, 4])
    w.add_token_merges(merges)
    w.add_eos_token_id(len(tokens) - 4)
    w.add_bos_token_id(len(tokens) - 4)
    w.add_add_bos_token(False)
    return len(tokens)


def qwen_cfg(arch: str = "qwen3", **over: object) -> dict:
    """A tiny model's config: 3 layers, 4 query heads sharing 2 K/V heads; Qwen3's heads of 128 on a 64-wide
    stream (transformers reads no head_dim for qwen3: 128 is its default), Qwen2's of 16."""
    cfg = {"arch": arch, "vocab_size": vocab_size(arch), "context_length": 128, "emb_dim": 64, "n_heads": 4,
           "head_dim": 128 if arch == "qwen3" else 16, "n_layers": 3, "hidden_dim": 96, "n_kv_groups": 2,
           "rope_base": 1_000_000.0, "rms_eps": 1e-6, "tied": True, "qkv_bias": arch == "qwen2",
           "qk_norm": arch == "qwen3"}
    return cfg | over


def phi3_cfg(**over: object) -> dict:
    """A tiny Phi-3: 2 layers, 4 query heads of 16 sharing 2 K/V heads (Phi-3 medium groups them; mini does not),
    an output head of its own (transformers ties none for Phi-3)."""
    cfg = {"arch": "phi3", "vocab_size": vocab_size("phi3"), "context_length": 128, "emb_dim": 64, "n_heads": 4,
           "n_layers": 2, "hidden_dim": 96, "n_kv_groups": 2, "rope_base": 10_000.0, "rms_eps": 1e-5, "tied": False}
    return cfg | over


def gemma_cfg(**over: object) -> dict:
    """A tiny Gemma 3: 6 layers (5 local over a window of 4, the 6th global), 2 query heads of 256 (Gemma's
    head_dim; its query scaling 256 too) sharing 1 K/V head on a 64-wide stream."""
    cfg = {"arch": "gemma3", "vocab_size": vocab_size("gemma3"), "context_length": 128, "emb_dim": 64,
           "n_heads": 2, "head_dim": 256, "n_layers": 6, "hidden_dim": 96, "n_kv_groups": 1,
           "rope_base": 1_000_000.0, "rope_local_base": 10_000.0, "rms_eps": 1e-6, "tied": True,
           "windows": [4, 4, 4, 4, 4, None], "query_pre_attn_scalar": 256.0, "qk_norm": True}
    return cfg | over


def spm_vocab(arch: str) -> list[str]:
    """The SentencePiece-style vocabulary of ``arch``'s tiny file: Gemma's runs of spaces are stored as spaces; a
    Phi-3 (Llama 2's vocabulary) has none."""
    tokens = gemma_vocab()
    return tokens if arch == "gemma3" else [t for t in tokens if t.strip()]


def vocab_size(arch: str) -> int:
    return len(spm_vocab(arch)) if arch in SPM_ARCHS else len(qwen_vocab()[0]) + len(QWEN_SPECIAL) + 1


def randomize(model: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """Random weights (norm weights around 1, biases small) so every tensor matters."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1 + 0.2 * torch.randn_like(p))
            else:
                p.normal_(0, 0.15 if p.ndim == 2 else 0.05)
    return model.eval()


def gguf_name(name: str, arch: str) -> str:
    """The GGUF tensor name of a book-named tensor (``trf_blocks.3.att.W_query.weight`` -> ``blk.3.attn_q.weight``;
    a part of a fused tensor: the fused tensor's name)."""
    if not name.startswith("trf_blocks."):
        return TO_GGUF[name]
    _unused, i, rest = name.split(".", 2)
    return f"blk.{i}.{block_to_gguf(arch)[rest][0]}"


def permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's convert_hf_to_gguf ``permute`` of q/k rows."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def gguf_tensors(model: torch.nn.Module, arch: str) -> dict[str, np.ndarray]:
    """``model``'s weights in ``arch``'s GGUF names, float32 (fused tensors concatenated by rows, in the table's
    order; a Llama's q/k rows permuted; no ``output.weight`` when tied)."""
    names, state, cfg = block_to_gguf(arch), model.state_dict(), model.cfg
    out: dict[str, np.ndarray] = {}
    for name, tensor in state.items():
        if name == "out_head.weight" and cfg.get("tied", True):
            continue
        a = tensor.numpy().astype(np.float32)
        if not name.startswith("trf_blocks."):
            out[TO_GGUF[name]] = a
            continue
        _unused, i, rest = name.split(".", 2)
        target, fused = names[rest]
        gname = f"blk.{i}.{target}"
        if fused:  # a part of a fused tensor: its rows below the parts before it (W_query, W_key, W_value; fc1, fc2)
            out[gname] = np.concatenate([out[gname], a]) if gname in out else a
            continue
        if arch == "llama" and rest in ("att.W_query.weight", "att.W_key.weight"):
            a = permute(a, cfg["n_heads"] if rest == "att.W_query.weight" else cfg["n_kv_groups"])
        out[gname] = a
    return out


def add_metadata(w: gguf.GGUFWriter, cfg: dict, arch: str, *, window: int | None = 4, name: str = "",
                 size_label: str = "1M", file_type: gguf.LlamaFileType = gguf.LlamaFileType.ALL_F32,
                 extra_meta: dict | None = None) -> None:
    """The model's metadata as llama.cpp's converter writes it (``window``: Gemma 3's sliding window; None: left
    out, as real Qwen files have none)."""
    w.add_name(name or f"Tiny {arch}")
    w.add_size_label(size_label)
    w.add_file_type(file_type)
    w.add_block_count(cfg["n_layers"])
    w.add_context_length(cfg["context_length"])
    w.add_embedding_length(cfg["emb_dim"])
    w.add_feed_forward_length(cfg["hidden_dim"])
    w.add_head_count(cfg["n_heads"])
    w.add_head_count_kv(cfg["n_kv_groups"])
    if arch != "phi3":  # llama.cpp writes none for a Phi-3: head_dim is emb_dim / n_heads, the reader's default
        w.add_key_length(cfg["head_dim"])
        w.add_value_length(cfg["head_dim"])
    w.add_rope_freq_base(cfg["rope_base"])
    w.add_layer_norm_rms_eps(cfg["rms_eps"])
    if arch == "gemma3" and window is not None:
        w.add_sliding_window(window)
    for key, value in (extra_meta or {}).items():
        w.add_uint32(key, value) if isinstance(value, int) else w.add_float32(key, value)


def finish(w: gguf.GGUFWriter) -> None:
    """Header, metadata and tensors to the file, then close it."""
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_gguf(path: Path, model: torch.nn.Module, arch: str, *, window: int = 4, skip: str = "",
               extra_meta: dict | None = None, qtype: gguf.GGMLQuantizationType = Q.F32, pre: str = "smollm") -> Path:
    """``model``'s weights as a GGUF file of ``arch`` (llama.cpp's names; norms F32, the matrices as ``qtype``;
    ``skip``: leave out the tensors whose GGUF name ends so, to make a damaged file; ``pre``: a Llama's
    pre-tokenizer)."""
    cfg = model.cfg
    w = gguf.GGUFWriter(path, arch)
    add_metadata(w, cfg, arch, window=window, extra_meta=extra_meta)
    write_tokenizer(w, arch, pre)
    for gname, a in gguf_tensors(model, arch).items():
        if skip and gname.endswith(skip):
            continue
        if a.ndim == 2 and qtype == Q.IQ4_NL:  # a type gguf cannot write: zero blocks of its size
            block, size = gguf.GGML_QUANT_SIZES[qtype]
            w.add_tensor(gname, np.zeros((a.shape[0], a.shape[1] // block * size), np.uint8), raw_dtype=qtype)
        elif a.ndim == 2 and qtype != Q.F32:
            w.add_tensor(gname, gguf.quants.quantize(a, qtype), raw_dtype=qtype)
        else:
            w.add_tensor(gname, a)
    finish(w)
    return path


def transformers_model(path: Path):
    """transformers' own model and tokenizer from the same GGUF file (eager attention: it returns the weights)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32,
                                                 attn_implementation="eager").eval()
    return model, AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)


def assert_equal_to_peer(ours: RopeLM, theirs, idx: torch.Tensor, atol: float = 1e-4) -> None:
    """Our logits, traced and fused (SDPA, no trace), and every layer's attention weights equal transformers' (eager
    attention) on ``idx``."""
    from attn_core.models.traced import layer_trace
    from attn_core.tracing.trace import Trace

    trace = Trace(copy=False)
    with torch.no_grad():
        out = theirs(idx, output_attentions=True)
        logits = ours(idx, trace=trace)
        fast = ours(idx)
    torch.testing.assert_close(logits, out.logits, atol=atol, rtol=0)
    torch.testing.assert_close(fast, out.logits, atol=atol, rtol=0)
    for layer in range(ours.cfg["n_layers"]):
        weights = layer_trace(trace, layer)["attn_weights"].tensor
        assert weights.shape == (1, ours.cfg["n_heads"], idx.shape[1], idx.shape[1])
        torch.testing.assert_close(weights, out.attentions[layer], atol=atol, rtol=0)
