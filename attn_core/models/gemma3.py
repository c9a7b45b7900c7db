"""Gemma 3 (text) written like the book's ch05 Gemma 3 code, traced like ``LlamaModel``.

What Gemma 3 adds to a Qwen3 (:mod:`attn_core.models.qwen`, whose ``GroupedQueryAttention`` it uses): the token
embeddings are scaled by ``sqrt(emb_dim)``; each block norms before *and after* its attention and its feed-forward
(``norm1`` -> attention -> ``post_attention_norm``, ``norm2`` -> feed-forward -> ``post_ffn_norm``); the
feed-forward is GeGLU (``gelu_tanh(fc1(x)) * fc2(x)``); most layers are local: they attend over a sliding window of
keys with their own RoPE base (gemma-3-270m: 5 of every 6 layers, window 512, base 10,000; the global layers base
1,000,000); scores are divided by ``sqrt(query_pre_attn_scalar)``. llama.cpp's files store each RMSNorm weight as
Gemma's ``1 + weight``, so a plain :class:`~attn_core.models.llama.RMSNorm` reads them as they are.

A local layer's :class:`~attn_core.attention.kv_cache.LayerCache` holds only its last ``window`` positions.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
import torch.nn as nn

from attn_core.attention.kv_cache import LayerCache
from attn_core.messages import Problem
from attn_core.models.family import Shared, file_stamp
from attn_core.models.llama import RMSNorm, compute_rope_params
from attn_core.models.no_init import empty_weights
from attn_core.models.qwen import GroupedQueryAttention, attention_cfg, load_weights
from attn_core.models.traced import TracedLM
from attn_core.tracing.trace import Trace, record


class FeedForward(nn.Module):
    """GeGLU: gelu_tanh(fc1(x)) * fc2(x), then fc3 back to emb_dim."""

    def __init__(self, cfg: dict):
        super().__init__()
        self.fc1 = nn.Linear(cfg["emb_dim"], cfg["hidden_dim"], bias=False)  # gate
        self.fc2 = nn.Linear(cfg["emb_dim"], cfg["hidden_dim"], bias=False)  # up
        self.fc3 = nn.Linear(cfg["hidden_dim"], cfg["emb_dim"], bias=False)  # down

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x_fc1 = self.fc1(x)
        x_fc2 = self.fc2(x)
        x = nn.functional.gelu(x_fc1, approximate="tanh") * x_fc2
        return self.fc3(x)


class TransformerBlock(nn.Module):
    """RMSNorm -> attention -> RMSNorm + shortcut, then RMSNorm -> GeGLU -> RMSNorm + shortcut."""

    def __init__(self, cfg: dict, layer: int):
        super().__init__()
        eps = cfg.get("rms_eps", 1e-6)
        self.att = GroupedQueryAttention(**attention_cfg(cfg, layer))
        self.ff = FeedForward(cfg)
        self.norm1 = RMSNorm(cfg["emb_dim"], eps=eps)  # the book's input_layernorm
        self.post_attention_norm = RMSNorm(cfg["emb_dim"], eps=eps)
        self.norm2 = RMSNorm(cfg["emb_dim"], eps=eps)  # the book's pre_feedforward_layernorm
        self.post_ffn_norm = RMSNorm(cfg["emb_dim"], eps=eps)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, trace: Trace | None = None,
                cache: LayerCache | None = None) -> torch.Tensor:
        shortcut = x
        x = self.norm1(x)
        record(trace, "input", x)
        x = self.att(x, cos, sin, trace, cache)  # Shape [batch_size, num_tokens, emb_size]
        x = self.post_attention_norm(x)
        x = x + shortcut  # Add the original input back
        shortcut = x
        x = self.norm2(x)
        x = self.ff(x)
        x = self.post_ffn_norm(x)
        x = x + shortcut  # Add the original input back
        return x


class Gemma3Model(TracedLM):
    """The book's ``Gemma3Model``: scaled token embedding, ``n_layers`` blocks (local ones over ``cfg["windows"]``),
    final RMSNorm, output head tied to the embedding."""

    def __init__(self, cfg: dict):
        super().__init__()
        self.cfg = dict(cfg, drop_rate=0.0)
        self.cfg.setdefault("windows", [None] * cfg["n_layers"])
        self.cfg["qk_norm"] = True
        self.tok_emb = nn.Embedding(cfg["vocab_size"], cfg["emb_dim"])
        self.trf_blocks = nn.ModuleList([TransformerBlock(self.cfg, i) for i in range(cfg["n_layers"])])
        self.final_norm = RMSNorm(cfg["emb_dim"], eps=cfg.get("rms_eps", 1e-6))
        self.out_head = nn.Linear(cfg["emb_dim"], cfg["vocab_size"], bias=False)
        if cfg.get("tied", True):
            self.out_head.weight = self.tok_emb.weight
        self.tokenizer = None  # set by load_model
        if not self.tok_emb.weight.is_meta:  # built for a file's weights: its loader makes the tables
            self.init_rope()

    def init_rope(self) -> None:
        """(Re)compute both RoPE tables: the global layers' base and the local layers' own."""
        c = self.cfg
        cos, sin = compute_rope_params(c["head_dim"], c.get("rope_base", 1e6), c["context_length"])
        cos_local, sin_local = compute_rope_params(c["head_dim"], c.get("rope_local_base", 10_000.0),
                                                   c["context_length"])
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        self.register_buffer("cos_local", cos_local, persistent=False)
        self.register_buffer("sin_local", sin_local, persistent=False)

    def embed(self, in_idx: torch.Tensor, start: int = 0) -> torch.Tensor:
        """The blocks' input: token embeddings scaled by sqrt(emb_dim) (positions are rotated in later)."""
        return self.tok_emb(in_idx) * self.cfg["emb_dim"] ** 0.5

    def block_args(self, layer: int) -> tuple:
        """A local layer's RoPE tables (its own base), or the global ones."""
        if self.cfg["windows"][layer] is not None:
            return self.cos_local, self.sin_local
        return self.cos, self.sin


_SHARED = Shared(2)  # two at most: a float32 Gemma 3 is large (docs/measurements.md)


def load_model(path: str | os.PathLike) -> Gemma3Model:
    """A Gemma 3 GGUF file as an eval-mode ``Gemma3Model`` with ``model.tokenizer`` and ``model.cfg``
    (de-quantized once, then read from the disk cache); a ``Problem`` saying what is wrong with the file."""
    from attn_core.models.gguf_weights import cached_weights

    weights = cached_weights(path)
    if weights.cfg.get("arch") != "gemma3":
        raise Problem("{path} holds a {arch} model, not a Gemma 3 one", path=str(path),
                      arch=repr(weights.cfg.get("arch")))
    with empty_weights():  # no random weights drawn only to be replaced
        model = Gemma3Model(weights.cfg)
    return load_weights(model, weights, path)


def load_model_shared(path: str | os.PathLike) -> Gemma3Model:
    """``load_model`` once per process per file (keyed by path, size and mtime); callers only read the model."""
    p = Path(path).expanduser().resolve()
    return _SHARED.get(p, file_stamp(p) if p.is_file() else (), lambda: load_model(p))
