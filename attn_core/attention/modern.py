"""Attention as today's LLMs use it: grouped-query (and multi-query) and multi-head latent attention, from the
book's bonus material (ch04: GQA as in Llama 3, MLA as in DeepSeek), with the chapter's names, traced.

Both shrink the KV cache of ``MultiHeadAttention``: GQA lets ``num_heads // num_kv_groups`` query heads share
each K/V head (``num_kv_groups = 1`` is multi-query attention, ``= num_heads`` is MultiHeadAttention); MLA keeps
one low-rank latent per token (``latent_dim`` numbers) and up-projects it to every head's keys and values.
Sliding-window attention is a ``window`` on any causal class (:func:`attn_core.attention.masks.causal_mask`).
"""

from __future__ import annotations

import torch
import torch.nn as nn

from attn_core.attention.classes import check_inputs, check_sizes, fused_attention, masked_softmax, record_dropout
from attn_core.attention.kv_cache import LayerCache
from attn_core.attention.masks import MaskKind, causal_mask
from attn_core.messages import Msg, Problem, either
from attn_core.tracing.trace import Trace, record

KV_SPLIT = ("b", "num_tokens", "num_kv_groups", "head_dim")  # the axes of grouped K/V tensors
KV_HEADS = ("b", "num_kv_groups", "num_tokens", "head_dim")


def check_groups(num_heads: int, num_kv_groups: int) -> None:
    """Raise ``ValueError`` unless ``num_kv_groups`` divides ``num_heads`` (listing the values that do)."""
    fits = [g for g in range(1, num_heads + 1) if num_heads % g == 0]
    if not isinstance(num_kv_groups, int) or num_kv_groups < 1 or num_heads % num_kv_groups:
        raise Problem("num_kv_groups ({num_kv_groups!r}) must divide num_heads ({num_heads}) so that every K/V "
                      "head serves the same number of query heads: use {fits} (1 = multi-query, "
                      "{num_heads} = multi-head attention)", num_kv_groups=num_kv_groups, num_heads=num_heads,
                      fits=either(fits))


def check_latent(latent_dim: int, d_out: int) -> None:
    """Raise ``ValueError`` unless 1 <= latent_dim <= d_out."""
    if not isinstance(latent_dim, int) or not 1 <= latent_dim <= d_out:
        raise Problem("latent_dim must be a whole number from 1 to d_out ({d_out}): the latent is a compression "
                      "of the keys and values; got {latent_dim!r}", d_out=d_out, latent_dim=latent_dim)


def attend(module: nn.Module, queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, num_cached: int,
           trace: Trace | None) -> torch.Tensor:
    """What every multi-head variant does once each query head has its keys and values, all (b, num_heads, T,
    head_dim): the scores, the mask slice for queries after ``num_cached`` keys, softmax, dropout, the context
    vectors, the heads merged back and out_proj (as MultiHeadAttention.forward does, line by line)."""
    b, num_heads, num_tokens, head_dim = queries.shape
    attn_scores = queries @ keys.transpose(2, 3)  # Dot product for each head
    record(trace, "attn_scores", attn_scores)
    num_keys = num_cached + num_tokens
    mask_bool = module.mask.bool()[num_cached:num_keys, :num_keys] if module.causal or module.window else None
    record(trace, "mask_bool", mask_bool, **MaskKind.of(module.causal, module.window).fields())
    attn_weights = masked_softmax(attn_scores, mask_bool, keys.shape[-1], module.mask_method, trace)
    attn_weights = module.dropout(attn_weights)
    record_dropout(trace, module.dropout, attn_weights)

    context_vec = attn_weights @ values  # Shape: (b, num_heads, num_tokens, head_dim)
    record(trace, "context_vec", context_vec, note=Msg("each head's context vectors"))
    context_vec = context_vec.transpose(1, 2)  # Shape: (b, num_tokens, num_heads, head_dim)
    record(trace, "context_vec.transpose", context_vec)
    context_vec = context_vec.contiguous().view(b, num_tokens, module.d_out)
    record(trace, "context_vec.view", context_vec)
    context_vec = module.out_proj(context_vec)
    record(trace, "out_proj", context_vec)
    return context_vec


class GroupedQueryAttention(nn.Module):
    """Grouped-query attention: ``num_heads`` query heads, ``num_kv_groups`` K/V heads, each shared by
    ``num_heads // num_kv_groups`` query heads (repeat_interleave order: K1 K1 K2 K2)."""

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int,
                 num_kv_groups: int, qkv_bias: bool = False, mask_method: str = "neg_inf", causal: bool = True,
                 efficient: bool = True, window: int | None = None):
        super().__init__()
        check_sizes(d_in, d_out, context_length, dropout, mask_method, num_heads, window=window)
        check_groups(num_heads, num_kv_groups)
        self.d_in, self.d_out, self.context_length = d_in, d_out, context_length
        self.mask_method, self.causal, self.efficient, self.window = mask_method, causal, efficient, window
        self.num_heads = num_heads
        self.num_kv_groups = num_kv_groups
        self.head_dim = d_out // num_heads
        self.group_size = num_heads // num_kv_groups  # query heads per K/V head
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, num_kv_groups * self.head_dim, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, num_kv_groups * self.head_dim, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", causal_mask(context_length, window=window, causal=causal).float())

    def forward(self, x: torch.Tensor, trace: Trace | None = None, cache: LayerCache | None = None) -> torch.Tensor:
        """``cache``: this layer's KV cache; it holds the num_kv_groups K/V heads (before the repeat)."""
        num_cached = 0 if cache is None else cache.length
        check_inputs(x, self.d_in, self.context_length - num_cached)
        if trace is None and self.efficient:
            return self.forward_efficient(x, cache)
        b, num_tokens, d_in = x.shape
        queries = self.W_query(x)  # Shape: (b, num_tokens, d_out)
        keys = self.W_key(x)  # Shape: (b, num_tokens, num_kv_groups * head_dim)
        values = self.W_value(x)
        record(trace, "queries", queries)
        record(trace, "keys", keys)
        record(trace, "values", values)

        # Split: (b, num_tokens, num_heads, head_dim) and (b, num_tokens, num_kv_groups, head_dim)
        queries = queries.view(b, num_tokens, self.num_heads, self.head_dim)
        keys = keys.view(b, num_tokens, self.num_kv_groups, self.head_dim)
        values = values.view(b, num_tokens, self.num_kv_groups, self.head_dim)
        record(trace, "keys.view", keys, axes=KV_SPLIT)
        record(trace, "values.view", values, axes=KV_SPLIT)
        record(trace, "queries.view", queries)

        # Transpose: heads in front of tokens, (b, heads, num_tokens, head_dim)
        keys = keys.transpose(1, 2)
        values = values.transpose(1, 2)
        queries = queries.transpose(1, 2)
        record(trace, "keys.transpose", keys, axes=KV_HEADS)
        record(trace, "queries.transpose", queries)
        record(trace, "values.transpose", values, axes=KV_HEADS)

        if cache is not None:  # the KV cache keeps the num_kv_groups heads: num_heads / num_kv_groups times smaller
            keys, values = cache.update(keys, values)  # (b, num_kv_groups, num_cached + num_tokens, head_dim)
            record(trace, "keys.cached", keys, axes=KV_HEADS)
            record(trace, "values.cached", values, axes=KV_HEADS)

        # Share each K/V head with its group of query heads: (b, num_kv_groups, T, head_dim) -> (b, num_heads, T,
        # head_dim), K1 K1 K2 K2. repeat_interleave copies; .expand would only make a view
        keys = keys.repeat_interleave(self.group_size, dim=1)
        values = values.repeat_interleave(self.group_size, dim=1)
        record(trace, "keys.repeat", keys, group=self.group_size)
        record(trace, "values.repeat", values, group=self.group_size)

        return attend(self, queries, keys, values, num_cached, trace)

    def forward_efficient(self, x: torch.Tensor, cache: LayerCache | None = None) -> torch.Tensor:
        """The same through PyTorch's fused scaled_dot_product_attention with ``enable_gqa`` (no repeat)."""
        b, num_tokens, d_in = x.shape
        queries = self.W_query(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        keys = self.W_key(x).view(b, num_tokens, self.num_kv_groups, self.head_dim).transpose(1, 2)
        values = self.W_value(x).view(b, num_tokens, self.num_kv_groups, self.head_dim).transpose(1, 2)
        return self.out_proj(fused_attention(self, queries, keys, values, cache, enable_gqa=self.group_size > 1))


class MultiHeadLatentAttention(nn.Module):
    """Multi-head latent attention: keys and values of every head are up-projected from one shared latent of
    ``latent_dim`` numbers per token, and the KV cache keeps only that latent (the book's ch04 bonus, DeepSeek)."""

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int,
                 latent_dim: int, qkv_bias: bool = False, mask_method: str = "neg_inf", causal: bool = True,
                 efficient: bool = True, window: int | None = None):
        super().__init__()
        check_sizes(d_in, d_out, context_length, dropout, mask_method, num_heads, window=window)
        check_latent(latent_dim, d_out)
        self.d_in, self.d_out, self.context_length = d_in, d_out, context_length
        self.mask_method, self.causal, self.efficient, self.window = mask_method, causal, efficient, window
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.latent_dim = latent_dim
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)  # per-head queries
        self.W_DKV = nn.Linear(d_in, latent_dim, bias=qkv_bias)  # down to the latent: what the cache keeps
        self.W_UK = nn.Linear(latent_dim, d_out, bias=qkv_bias)  # latent -> every head's keys
        self.W_UV = nn.Linear(latent_dim, d_out, bias=qkv_bias)  # latent -> every head's values
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", causal_mask(context_length, window=window, causal=causal).float())

    def forward(self, x: torch.Tensor, trace: Trace | None = None, cache: LayerCache | None = None) -> torch.Tensor:
        """``cache``: this layer's cache; it holds the latent (b, num_cached, latent_dim), not keys and values."""
        num_cached = 0 if cache is None else cache.length
        check_inputs(x, self.d_in, self.context_length - num_cached)
        if trace is None and self.efficient:
            return self.forward_efficient(x, cache)
        b, num_tokens, d_in = x.shape
        queries = self.W_query(x)  # Shape: (b, num_tokens, d_out)
        latent = self.W_DKV(x)  # Shape: (b, num_tokens, latent_dim)
        record(trace, "queries", queries)
        record(trace, "latent", latent)
        if cache is not None:  # the cache keeps the latent: latent_dim numbers a token instead of 2 * d_out
            latent = cache.update_latent(latent)  # (b, num_cached + num_tokens, latent_dim)
            record(trace, "latent.cached", latent)
        num_keys = latent.shape[1]
        keys = self.W_UK(latent)  # Shape: (b, num_keys, d_out)
        values = self.W_UV(latent)
        record(trace, "keys", keys)
        record(trace, "values", values)

        # Split and transpose as MultiHeadAttention does: (b, heads, tokens, head_dim)
        queries = queries.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        keys = keys.view(b, num_keys, self.num_heads, self.head_dim).transpose(1, 2)
        values = values.view(b, num_keys, self.num_heads, self.head_dim).transpose(1, 2)
        record(trace, "queries.transpose", queries)
        record(trace, "keys.transpose", keys)
        record(trace, "values.transpose", values)

        return attend(self, queries, keys, values, num_cached, trace)

    def forward_efficient(self, x: torch.Tensor, cache: LayerCache | None = None) -> torch.Tensor:
        """The same through PyTorch's fused scaled_dot_product_attention."""
        b, num_tokens, d_in = x.shape
        latent = self.W_DKV(x)
        if cache is not None:
            num_cached = cache.length
            latent = cache.update_latent(latent)
        else:
            num_cached = 0
        num_keys = latent.shape[1]
        queries = self.W_query(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        keys = self.W_UK(latent).view(b, num_keys, self.num_heads, self.head_dim).transpose(1, 2)
        values = self.W_UV(latent).view(b, num_keys, self.num_heads, self.head_dim).transpose(1, 2)
        return self.out_proj(fused_attention(self, queries, keys, values, None, num_cached=num_cached))

