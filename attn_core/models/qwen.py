"""Qwen2 (Qwen2.5) and Qwen3 written like the book's ch05 Qwen3 code (``llms_from_scratch.qwen3``), traced like
``LlamaModel``.

A Qwen is a Llama with three differences the file states: ``head_dim`` is its own (Qwen3-0.6B: 16 heads of 128
on a 1,024-wide stream, so ``d_out = num_heads * head_dim`` is not ``emb_dim``); Qwen2 adds a bias to each query,
key and value projection; Qwen3 has none but RMS-normalizes each query and key head (``q_norm``, ``k_norm``)
before RoPE. :class:`GroupedQueryAttention` says all three, plus what Gemma 3 adds (a sliding window, its own
query scaling): :mod:`attn_core.models.gemma3` uses it too. Names are the book's (``W_query``, ``q_norm``,
``fc1``/``fc2``/``fc3``, ``norm1``/``norm2``), so our state dict loads into its ``Qwen3Model`` (its RMSNorm calls
the weight ``scale``).

The trace holds each layer's steps under ``trf_blocks[i].att``, Llama's and ``queries.norm`` / ``keys.norm`` (the
per-head norms) before ``queries.rope`` / ``keys.rope``. A :class:`KVCache` keeps each layer's ``num_kv_groups``
K/V heads after norm and RoPE; a windowed layer holds only its last ``window`` positions.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from attn_core.attention.classes import check_inputs, masked_softmax, record_dropout
from attn_core.attention.kv_cache import LayerCache
from attn_core.attention.masks import causal_mask
from attn_core.messages import N_, Problem
from attn_core.models.family import Shared, file_stamp
from attn_core.models.llama import KV_HEADS, KV_SPLIT, FeedForward, RMSNorm, apply_rope, compute_rope_params
from attn_core.models.no_init import empty_weights
from attn_core.models.traced import TracedLM
from attn_core.tracing.trace import Trace, record

Q_NORM_NOTE = N_("RMSNorm of each query head (q_norm, over head_dim) before RoPE: every head's queries get the "
                 "same length scale")
K_NORM_NOTE = N_("RMSNorm of each key head (k_norm, over head_dim) before RoPE")


class GroupedQueryAttention(nn.Module):
    """The book's Qwen3 attention: ``num_heads`` query heads of ``head_dim`` share ``num_kv_groups`` K/V heads,
    optional q/k/v biases (Qwen2), optional per-head RMSNorm of queries and keys (Qwen3, Gemma 3), RoPE, causal,
    optionally over a sliding ``window`` of keys (Gemma 3's local layers); scores are divided by
    ``sqrt(query_pre_attn_scalar)`` (``head_dim`` unless the model says otherwise)."""

    def __init__(self, d_in: int, num_heads: int, num_kv_groups: int, head_dim: int, *, qkv_bias: bool = False,
                 qk_norm: bool = False, rms_eps: float = 1e-6, window: int | None = None,
                 query_pre_attn_scalar: float | None = None, mask_method: str = "neg_inf", dropout: float = 0.0):
        super().__init__()
        if num_heads % num_kv_groups:
            raise Problem("num_heads ({num_heads}) must be a multiple of num_kv_groups ({num_kv_groups})",
                          num_heads=num_heads, num_kv_groups=num_kv_groups)
        self.d_in, self.num_heads, self.num_kv_groups, self.head_dim = d_in, num_heads, num_kv_groups, head_dim
        self.group_size = num_heads // num_kv_groups
        self.d_out = num_heads * head_dim
        self.W_query = nn.Linear(d_in, self.d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, num_kv_groups * head_dim, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, num_kv_groups * head_dim, bias=qkv_bias)
        self.out_proj = nn.Linear(self.d_out, d_in, bias=False)
        self.q_norm = RMSNorm(head_dim, eps=rms_eps) if qk_norm else None
        self.k_norm = RMSNorm(head_dim, eps=rms_eps) if qk_norm else None
        self.qkv_bias, self.qk_norm, self.rms_eps = qkv_bias, qk_norm, rms_eps
        self.window, self.sinks = window, 0
        self.query_pre_attn_scalar = float(query_pre_attn_scalar or head_dim)
        self.mask_method = mask_method
        self.efficient = mask_method == "neg_inf" and dropout == 0.0
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, trace: Trace | None = None,
                cache: LayerCache | None = None) -> torch.Tensor:
        """``cache``: this layer's KV cache (num_kv_groups K/V heads after norm and RoPE, before the repeat)."""
        num_cached = 0 if cache is None else cache.length
        check_inputs(x, self.d_in, cos.shape[0] - num_cached)
        if trace is None and self.efficient:
            return self.forward_efficient(x, cos, sin, cache)
        b, num_tokens, d_in = x.shape
        queries = self.W_query(x)  # Shape: (b, num_tokens, num_heads * head_dim)
        keys = self.W_key(x)  # Shape: (b, num_tokens, num_kv_groups * head_dim)
        values = self.W_value(x)  # Shape: (b, num_tokens, num_kv_groups * head_dim)
        record(trace, "queries", queries)
        record(trace, "keys", keys)
        record(trace, "values", values)

        # Reshape: (b, num_tokens, num_heads, head_dim) and (b, num_tokens, num_kv_groups, head_dim)
        queries = queries.view(b, num_tokens, self.num_heads, self.head_dim)
        keys = keys.view(b, num_tokens, self.num_kv_groups, self.head_dim)
        values = values.view(b, num_tokens, self.num_kv_groups, self.head_dim)
        record(trace, "queries.view", queries)
        record(trace, "keys.view", keys, axes=KV_SPLIT)
        record(trace, "values.view", values, axes=KV_SPLIT)

        # Transpose: heads in front of tokens
        queries = queries.transpose(1, 2)  # Shape: (b, num_heads, num_tokens, head_dim)
        keys = keys.transpose(1, 2)  # Shape: (b, num_kv_groups, num_tokens, head_dim)
        values = values.transpose(1, 2)  # Shape: (b, num_kv_groups, num_tokens, head_dim)
        record(trace, "queries.transpose", queries)
        record(trace, "keys.transpose", keys, axes=KV_HEADS)
        record(trace, "values.transpose", values, axes=KV_HEADS)

        if self.q_norm is not None:  # each head's query and key vectors RMS-normalized before they are rotated
            queries = self.q_norm(queries)
            keys = self.k_norm(keys)
            record(trace, "queries.norm", queries, kind="queries_normed", note=Q_NORM_NOTE)
            record(trace, "keys.norm", keys, kind="keys_normed", note=K_NORM_NOTE, axes=KV_HEADS)

        # Apply RoPE: rotate each query and key by its position (the positions continue after the cached ones)
        queries = apply_rope(queries, cos, sin, offset=num_cached)
        keys = apply_rope(keys, cos, sin, offset=num_cached)
        record(trace, "keys.rope", keys, axes=KV_HEADS)
        record(trace, "queries.rope", queries)

        if cache is not None:  # the num_kv_groups rotated K/V heads; a windowed layer holds only its window
            keys, values = self.cache_update(cache, keys, values)
            record(trace, "keys.cached", keys, axes=KV_HEADS)
            record(trace, "values.cached", values, axes=KV_HEADS)

        # Expand keys and values to match the number of heads: (b, num_heads, num_keys, head_dim), K1 K1 K2 K2 ...
        keys = keys.repeat_interleave(self.group_size, dim=1)
        values = values.repeat_interleave(self.group_size, dim=1)
        record(trace, "keys.repeat", keys, group=self.group_size)
        record(trace, "values.repeat", values, group=self.group_size)

        attn_scores = queries @ keys.transpose(2, 3)  # Dot product for each head
        record(trace, "attn_scores", attn_scores)
        mask_bool = causal_mask(num_tokens, keys.shape[2], window=self.window, sinks=self.sinks, device=x.device)
        record(trace, "mask_bool", mask_bool)
        attn_weights = masked_softmax(attn_scores, mask_bool, self.query_pre_attn_scalar, self.mask_method, trace)
        attn_weights = self.dropout(attn_weights)
        record_dropout(trace, self.dropout, attn_weights)

        context_vec = attn_weights @ values  # Shape: (b, num_heads, num_tokens, head_dim)
        record(trace, "context_vec", context_vec, note="each head's context vectors")
        context_vec = context_vec.transpose(1, 2)  # Shape: (b, num_tokens, num_heads, head_dim)
        record(trace, "context_vec.transpose", context_vec)
        context_vec = context_vec.reshape(b, num_tokens, self.d_out)  # Combine heads: (b, num_tokens, d_out)
        record(trace, "context_vec.view", context_vec)
        context_vec = self.out_proj(context_vec)  # Shape: (b, num_tokens, d_in)
        record(trace, "out_proj", context_vec)
        return context_vec

    def cache_update(self, cache: LayerCache, keys: torch.Tensor,
                     values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append to ``cache`` and return every key and value this call's queries need; a windowed layer then
        holds only its last ``window`` positions (the next query sees all but the oldest of them, and a step
        re-traced from the cache without its newest position still finds its whole window)."""
        keys, values = cache.update(keys, values)
        if self.window is not None:
            cache.keep_last(self.window)
        return keys, values

    def forward_efficient(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                          cache: LayerCache | None = None) -> torch.Tensor:
        """The same through PyTorch's fused scaled_dot_product_attention with ``enable_gqa`` (no repeat)."""
        b, num_tokens, d_in = x.shape
        num_cached = 0 if cache is None else cache.length
        queries = self.W_query(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        keys = self.W_key(x).view(b, num_tokens, self.num_kv_groups, self.head_dim).transpose(1, 2)
        values = self.W_value(x).view(b, num_tokens, self.num_kv_groups, self.head_dim).transpose(1, 2)
        if self.q_norm is not None:
            queries, keys = self.q_norm(queries), self.k_norm(keys)
        queries = apply_rope(queries, cos, sin, offset=num_cached)
        keys = apply_rope(keys, cos, sin, offset=num_cached)
        if cache is not None:
            keys, values = self.cache_update(cache, keys, values)
        attn_mask = None
        if (num_cached and num_tokens > 1) or self.window:  # what SDPA's is_causal cannot say: a mask of our own
            attn_mask = ~causal_mask(num_tokens, keys.shape[2], window=self.window, sinks=self.sinks, device=x.device)
        context_vec = F.scaled_dot_product_attention(queries, keys, values, attn_mask=attn_mask,
                                                     is_causal=attn_mask is None and num_cached == 0 and num_tokens > 1,
                                                     scale=self.query_pre_attn_scalar ** -0.5,
                                                     enable_gqa=self.group_size > 1)
        context_vec = context_vec.transpose(1, 2).reshape(b, num_tokens, self.d_out)
        return self.out_proj(context_vec)


def attention_cfg(cfg: dict, layer: int) -> dict:
    """Layer ``layer``'s ``GroupedQueryAttention`` arguments from a model's config."""
    windows = cfg.get("windows") or [None] * cfg["n_layers"]
    return {"d_in": cfg["emb_dim"], "num_heads": cfg["n_heads"], "num_kv_groups": cfg["n_kv_groups"],
            "head_dim": cfg["head_dim"], "qkv_bias": cfg.get("qkv_bias", False), "qk_norm": cfg.get("qk_norm", False),
            "rms_eps": cfg.get("rms_eps", 1e-6), "window": windows[layer],
            "query_pre_attn_scalar": cfg.get("query_pre_attn_scalar")}


class TransformerBlock(nn.Module):
    """Pre-RMSNorm attention + shortcut, then pre-RMSNorm SwiGLU feed-forward + shortcut (the book's Qwen3 block)."""

    def __init__(self, cfg: dict, layer: int = 0):
        super().__init__()
        self.att = GroupedQueryAttention(**attention_cfg(cfg, layer))
        self.ff = FeedForward(cfg)
        self.norm1 = RMSNorm(cfg["emb_dim"], eps=cfg.get("rms_eps", 1e-6))
        self.norm2 = RMSNorm(cfg["emb_dim"], eps=cfg.get("rms_eps", 1e-6))

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, trace: Trace | None = None,
                cache: LayerCache | None = None) -> torch.Tensor:
        shortcut = x
        x = self.norm1(x)
        record(trace, "input", x)
        x = self.att(x, cos, sin, trace, cache)  # Shape [batch_size, num_tokens, emb_size]
        x = x + shortcut  # Add the original input back
        shortcut = x
        x = self.norm2(x)
        x = self.ff(x)
        x = x + shortcut  # Add the original input back
        return x


class QwenModel(TracedLM):
    """The book's ``Qwen3Model`` (and Qwen2 with ``qkv_bias``): token embedding, ``n_layers`` blocks, final RMSNorm,
    output head (tied to the embedding when ``cfg["tied"]``: Qwen2.5-0.5B and Qwen3-0.6B tie it)."""

    def __init__(self, cfg: dict):
        super().__init__()
        self.cfg = dict(cfg, drop_rate=0.0)
        self.cfg.setdefault("head_dim", cfg["emb_dim"] // cfg["n_heads"])
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
        """(Re)compute the RoPE tables over ``head_dim`` (a model built on the meta device gets real ones here)."""
        cos, sin = compute_rope_params(head_dim=self.cfg["head_dim"], theta_base=self.cfg.get("rope_base", 1e6),
                                       context_length=self.cfg["context_length"])
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def embed(self, in_idx: torch.Tensor, start: int = 0) -> torch.Tensor:
        """The blocks' input: token embeddings only (positions are rotated into queries and keys)."""
        return self.tok_emb(in_idx)

    def block_args(self, layer: int) -> tuple:
        """Every layer's RoPE tables (the same for all)."""
        return self.cos, self.sin


def attention_like(att: GroupedQueryAttention, *, mask_method: str = "neg_inf", dropout: float = 0.0,
                   train: bool = False) -> GroupedQueryAttention:
    """A ``GroupedQueryAttention`` sharing ``att``'s weights, biases and norms (no copy) with the chapter's masking
    method and dropout: the shared model's own modules are never changed."""
    with torch.device("meta"):  # no weights drawn only to be replaced
        new = GroupedQueryAttention(att.d_in, att.num_heads, att.num_kv_groups, att.head_dim, qkv_bias=att.qkv_bias,
                                    qk_norm=att.qk_norm, rms_eps=att.rms_eps, window=att.window,
                                    query_pre_attn_scalar=att.query_pre_attn_scalar, mask_method=mask_method,
                                    dropout=dropout)
    new.sinks = att.sinks  # a windowed copy keeps its sink tokens too
    for name in ("W_query", "W_key", "W_value", "out_proj", "q_norm", "k_norm"):
        setattr(new, name, getattr(att, name))
    return new.train(train)


class LayerAttention(nn.Module):
    """One layer's attention as a single module, ``forward(x, trace=None)``, with that layer's RoPE tables (the
    weights are shared; ``knobs``: the chapter's ``mask_method``, ``dropout``, ``train``)."""

    def __init__(self, model: TracedLM, layer: int, **knobs: object):
        super().__init__()
        att = model.trf_blocks[layer].att
        self.att = attention_like(att, **knobs) if knobs else att
        self.cos, self.sin = model.block_args(layer)

    def forward(self, x: torch.Tensor, trace: Trace | None = None) -> torch.Tensor:
        return self.att(x, self.cos, self.sin, trace)


_SHARED = Shared(2)  # two at most: a float32 Qwen is large (docs/measurements.md)


def load_weights(model: TracedLM, weights, path: str | os.PathLike) -> TracedLM:
    """``weights`` (:class:`~attn_core.models.gguf_weights.GGUFWeights`) into a model built on the meta device:
    tied head, real RoPE tables, tokenizer, path and tensor types; eval mode, no gradients."""
    from attn_core.models.gguf_tokenizer import GGUFTokenizer

    missing, unexpected = model.load_state_dict(weights.state_dict, strict=False, assign=True)
    if weights.cfg.get("tied", True):
        model.out_head.weight = model.tok_emb.weight
        missing = [k for k in missing if k != "out_head.weight"]
    if missing or unexpected:
        raise Problem("{path}: the weights do not fit the model (missing {missing}, extra {extra})", path=str(path),
                      missing=missing[:3], extra=unexpected[:3])
    model.init_rope()
    model.tokenizer = GGUFTokenizer(weights.tokenizer)
    model.cfg["path"] = str(Path(path))
    model.cfg["types"] = dict(weights.types)
    return model.requires_grad_(False).eval()


def load_model(path: str | os.PathLike) -> QwenModel:
    """A Qwen2 or Qwen3 GGUF file as an eval-mode ``QwenModel`` with ``model.tokenizer`` and ``model.cfg``
    (de-quantized once, then read from the disk cache); a ``Problem`` saying what is wrong with the file."""
    from attn_core.models.gguf_weights import cached_weights

    weights = cached_weights(path)
    arch = weights.cfg.get("arch")
    if arch not in ("qwen2", "qwen3"):
        raise Problem("{path} holds a {arch} model, not a Qwen2 or Qwen3 one", path=str(path), arch=repr(arch))
    cfg = dict(weights.cfg, qkv_bias=arch == "qwen2", qk_norm=arch == "qwen3")
    with empty_weights():  # no random weights drawn only to be replaced
        model = QwenModel(cfg)
    return load_weights(model, weights, path)


def load_model_shared(path: str | os.PathLike) -> QwenModel:
    """``load_model`` once per process per file (keyed by path, size and mtime); callers only read the model."""
    p = Path(path).expanduser().resolve()
    return _SHARED.get(p, file_stamp(p) if p.is_file() else (), lambda: load_model(p))
