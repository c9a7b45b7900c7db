"""The one grouped-query attention every RoPE family runs (Llama 3, SmolLM2, Qwen2, Qwen3, Gemma 3, Phi-3), written
like the book's ch05 ``GroupedQueryAttention`` of ``llms_from_scratch.llama3`` / ``qwen3``, traced like the chapter's
classes; with ``RMSNorm``, ``compute_rope_params`` and ``apply_rope`` in the book's names.

What differs between the families is configuration, never a class: ``head_dim`` of its own (``d_out = num_heads *
head_dim`` need not be ``emb_dim``: Qwen3, Gemma 3), biases on the query, key and value projections (``qkv_bias``:
Qwen2), an RMSNorm of each query and key head before RoPE (``qk_norm``: Qwen3, Gemma 3), a sliding ``window`` of keys
plus the first ``sinks`` (Gemma 3's local layers; the windows lab), its own query scaling
(``query_pre_attn_scalar``: Gemma 3; None = ``head_dim``). The trace holds the book's steps (``queries``,
``keys.view``, ``queries.norm``, ``keys.rope``, ``attn_scores``, ``mask_bool``, ``context_vec``, ...). The fused
path (PyTorch's scaled_dot_product_attention) runs by one rule: only where it gives the explicit path's numbers.

:class:`LayerAttention` is one layer's attention as a module a page runs (``forward(x, trace=None)``), the chapter's
knobs on a copy that shares the weights (:func:`attention_like`).
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from attn_core.attention.classes import check_inputs, masked_softmax, record_dropout
from attn_core.attention.kv_cache import LayerCache
from attn_core.attention.masks import causal_mask
from attn_core.attention.modern import KV_HEADS, KV_SPLIT, check_groups
from attn_core.messages import N_
from attn_core.tracing.trace import Trace, record

Q_NORM_NOTE = N_("RMSNorm of each query head (q_norm, over head_dim) before RoPE: every head's queries get the "
                 "same length scale")
K_NORM_NOTE = N_("RMSNorm of each key head (k_norm, over head_dim) before RoPE")


class RMSNorm(nn.Module):
    """Root-mean-square norm: each vector divided by its RMS, then a trainable scale (no mean, no shift)."""

    def __init__(self, emb_dim: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(emb_dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        means = x.pow(2).mean(dim=-1, keepdim=True)
        x_normed = x * torch.rsqrt(means + self.eps)
        return x_normed * self.weight


def compute_rope_params(head_dim: int, theta_base: float = 10_000, context_length: int = 4096,
                        freq_factors: list[float] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The book's ``compute_rope_params``: cos and sin (context_length, head_dim) of each position's angles.
    ``freq_factors`` (a GGUF's ``rope_freqs``, Llama 3.1+): each frequency divided by its factor."""
    assert head_dim % 2 == 0, "Embedding dimension must be even"
    # Compute the inverse frequencies
    inv_freq = 1.0 / (theta_base ** (torch.arange(0, head_dim, 2)[: (head_dim // 2)].float() / head_dim))
    if freq_factors is not None:
        inv_freq = inv_freq / torch.tensor(freq_factors, dtype=torch.float32)
    positions = torch.arange(context_length, dtype=torch.float32)
    angles = positions[:, None] * inv_freq[None, :]  # Shape: (context_length, head_dim // 2)
    angles = torch.cat([angles, angles], dim=1)  # Shape: (context_length, head_dim)
    return torch.cos(angles), torch.sin(angles)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, offset: int = 0) -> torch.Tensor:
    """Rotate each pair (i, i + head_dim/2) of x (b, heads, seq_len, head_dim) by its position's angle; positions
    start at ``offset`` (the tokens already in the KV cache)."""
    batch_size, num_heads, seq_len, head_dim = x.shape
    x1 = x[..., : head_dim // 2]  # First half
    x2 = x[..., head_dim // 2:]  # Second half
    cos = cos[offset:offset + seq_len, :].unsqueeze(0).unsqueeze(0)  # Shape: (1, 1, seq_len, head_dim)
    sin = sin[offset:offset + seq_len, :].unsqueeze(0).unsqueeze(0)
    rotated = torch.cat((-x2, x1), dim=-1)
    x_rotated = (x * cos) + (rotated * sin)
    return x_rotated


class GroupedQueryAttention(nn.Module):
    """The book's Llama 3 / Qwen3 attention: ``num_heads`` query heads of ``head_dim`` share ``num_kv_groups`` K/V
    heads (K1 K1 K2 K2 ...), RoPE on queries and keys, causal (over a sliding ``window`` + ``sinks`` when set);
    optional q/k/v biases and per-head q/k RMSNorms; scores divided by ``sqrt(query_pre_attn_scalar)``.
    ``mask_method`` and ``dropout`` are the chapter's knobs (a model has no dropout: p = 0 unless a page asks)."""

    def __init__(self, d_in: int, num_heads: int, num_kv_groups: int, head_dim: int | None = None, *,
                 qkv_bias: bool = False, qk_norm: bool = False, rms_eps: float = 1e-6, window: int | None = None,
                 sinks: int = 0, query_pre_attn_scalar: float | None = None, mask_method: str = "neg_inf",
                 dropout: float = 0.0):
        super().__init__()
        check_groups(num_heads, num_kv_groups)
        self.d_in, self.num_heads, self.num_kv_groups = d_in, num_heads, num_kv_groups
        self.head_dim = head_dim or d_in // num_heads
        self.group_size = num_heads // num_kv_groups  # query heads per K/V head
        self.d_out = num_heads * self.head_dim
        self.W_query = nn.Linear(d_in, self.d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, num_kv_groups * self.head_dim, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, num_kv_groups * self.head_dim, bias=qkv_bias)
        self.out_proj = nn.Linear(self.d_out, d_in, bias=False)
        self.q_norm = RMSNorm(self.head_dim, eps=rms_eps) if qk_norm else None
        self.k_norm = RMSNorm(self.head_dim, eps=rms_eps) if qk_norm else None
        self.qkv_bias, self.qk_norm, self.rms_eps = qkv_bias, qk_norm, rms_eps
        self.window, self.sinks = window, sinks  # a sliding window (+ attention sinks); None: full causal
        self.query_pre_attn_scalar = query_pre_attn_scalar  # None: scores divided by sqrt(head_dim), the book's
        self.mask_method = mask_method
        self.efficient = True  # False: always the explicit path, even where the fused one would give the same
        self.dropout = nn.Dropout(dropout)

    def fused(self, trace: Trace | None) -> bool:
        """The one rule for the fused path: only where it gives the explicit path's numbers (no trace to fill,
        −∞ masking, no dropout)."""
        return trace is None and self.efficient and self.mask_method == "neg_inf" and self.dropout.p == 0.0

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, trace: Trace | None = None,
                cache: LayerCache | None = None) -> torch.Tensor:
        """``cache``: this layer's KV cache (num_kv_groups K/V heads after norm and RoPE, before the repeat)."""
        num_cached = 0 if cache is None else cache.length
        check_inputs(x, self.d_in, cos.shape[0] - num_cached)
        if self.fused(trace):
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
            queries = self.q_norm(queries)  # Shape: (b, num_heads, num_tokens, head_dim)
            keys = self.k_norm(keys)  # Shape: (b, num_kv_groups, num_tokens, head_dim)
            record(trace, "queries.norm", queries, kind="queries_normed", note=Q_NORM_NOTE)
            record(trace, "keys.norm", keys, kind="keys_normed", note=K_NORM_NOTE, axes=KV_HEADS)

        # Apply RoPE: rotate each query and key by its position (the positions continue after the cached ones)
        queries = apply_rope(queries, cos, sin, offset=num_cached)
        keys = apply_rope(keys, cos, sin, offset=num_cached)
        record(trace, "keys.rope", keys, axes=KV_HEADS)
        record(trace, "queries.rope", queries)

        if cache is not None:  # the num_kv_groups rotated K/V heads: group_size times smaller than the queries
            keys, values = self.cache_update(cache, keys, values)  # (b, num_kv_groups, num_keys, head_dim)
            record(trace, "keys.cached", keys, axes=KV_HEADS)
            record(trace, "values.cached", values, axes=KV_HEADS)

        # Expand keys and values to match the number of heads: (b, num_heads, num_keys, head_dim), K1 K1 K2 K2 ...
        keys = keys.repeat_interleave(self.group_size, dim=1)
        values = values.repeat_interleave(self.group_size, dim=1)
        record(trace, "keys.repeat", keys, group=self.group_size)
        record(trace, "values.repeat", values, group=self.group_size)

        attn_scores = queries @ keys.transpose(2, 3)  # Dot product for each head: (b, num_heads, num_tokens, num_keys)
        record(trace, "attn_scores", attn_scores)
        # queries after num_cached keys see those and themselves (the last `window` of them, + the first `sinks`)
        mask_bool = causal_mask(num_tokens, keys.shape[2], window=self.window, sinks=self.sinks, device=x.device)
        record(trace, "mask_bool", mask_bool)
        attn_weights = masked_softmax(attn_scores, mask_bool, self.query_pre_attn_scalar or self.head_dim,
                                      self.mask_method, trace)
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
        """Append to ``cache`` and return every key and value this call's queries need; a windowed layer without
        sinks then holds only its last ``window`` positions (the next query sees all but the oldest of them, and a
        step re-traced from the cache without its newest position still finds its whole window)."""
        keys, values = cache.update(keys, values)
        if self.window is not None and not self.sinks:
            cache.keep_last(self.window)
        return keys, values

    def forward_efficient(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                          cache: LayerCache | None = None) -> torch.Tensor:
        """The same through PyTorch's fused scaled_dot_product_attention with ``enable_gqa`` (no repeat)."""
        b, num_tokens, d_in = x.shape
        num_cached = 0 if cache is None else cache.length
        # (b, heads, num_tokens, head_dim) for the queries, (b, num_kv_groups, num_tokens, head_dim) for keys, values
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
        scale = None if self.query_pre_attn_scalar is None else self.query_pre_attn_scalar ** -0.5
        context_vec = F.scaled_dot_product_attention(queries, keys, values, attn_mask=attn_mask,
                                                     is_causal=attn_mask is None and num_cached == 0 and num_tokens > 1,
                                                     scale=scale, enable_gqa=self.group_size > 1)
        context_vec = context_vec.transpose(1, 2).reshape(b, num_tokens, self.d_out)  # (b, num_tokens, d_out)
        return self.out_proj(context_vec)


def attention_like(att: GroupedQueryAttention, *, mask_method: str = "neg_inf", dropout: float = 0.0,
                   train: bool = False) -> GroupedQueryAttention:
    """A ``GroupedQueryAttention`` sharing ``att``'s weights, biases and norms (no copy) with the chapter's masking
    method and dropout, as :func:`attn_core.models.gpt.attention_like` does for GPT-2: the shared model's own modules
    are never changed."""
    with torch.device("meta"):  # no weights drawn only to be replaced
        new = GroupedQueryAttention(att.d_in, att.num_heads, att.num_kv_groups, att.head_dim, qkv_bias=att.qkv_bias,
                                    qk_norm=att.qk_norm, rms_eps=att.rms_eps, window=att.window, sinks=att.sinks,
                                    query_pre_attn_scalar=att.query_pre_attn_scalar, mask_method=mask_method,
                                    dropout=dropout)
    for name in ("W_query", "W_key", "W_value", "out_proj", "q_norm", "k_norm"):
        setattr(new, name, getattr(att, name))
    return new.train(train)


class LayerAttention(nn.Module):
    """One layer's attention as a single module, ``forward(x, trace=None)``, with that layer's block arguments (its
    RoPE tables): what a page runs on a layer's real input (the layer's weights are shared, not copied; ``knobs``:
    the chapter's ``mask_method``, ``dropout``, ``train`` for :func:`attention_like`)."""

    def __init__(self, model: nn.Module, layer: int, **knobs: object):
        super().__init__()
        att = model.trf_blocks[layer].att
        self.att = attention_like(att, **knobs) if knobs else att
        self.args = model.block_args(layer)

    def forward(self, x: torch.Tensor, trace: Trace | None = None) -> torch.Tensor:
        return self.att(x, *self.args, trace)
