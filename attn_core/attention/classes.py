"""The chapter's attention classes (sections 3.4-3.6), traced.

Each class keeps the book's name, constructor signature (same positional order) and
attribute names, and creates ``W_query``, ``W_key``, ``W_value`` (then ``out_proj``) in
that order, so the book's seeds give the book's numbers. ``forward(x, trace=None)``
is the book's straight-line forward; a :class:`~attn_core.tracing.trace.Trace` passed in
receives every intermediate tensor.

Additions to the book, all off the book's path by default:
- ``mask_method``: ``"neg_inf"`` (the book: fill -inf before softmax) or
  ``"renormalize"`` (softmax, zero the future, divide by the row sums; section 3.5.1).
- ``causal``: ``False`` turns the mask off, to show plain self-attention.
- ``MultiHeadAttention`` runs PyTorch's fused ``scaled_dot_product_attention`` when no
  trace is asked for (``efficient=True``), as nanoGPT does; the explicit path otherwise.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from attn_core.attention.kv_cache import LayerCache
from attn_core.attention.masks import MaskKind, causal_mask
from attn_core.messages import Msg, Problem, either
from attn_core.tracing.trace import Trace, record

MASK_METHODS = ("neg_inf", "renormalize")


def check_sizes(
    d_in: int,
    d_out: int,
    context_length: int | None = None,
    dropout: float | None = None,
    mask_method: str | None = None,
    num_heads: int | None = None,
    window: int | None = None,
) -> None:
    """Raise ``ValueError`` with a plain message for sizes the classes cannot use."""
    if window is not None and (not isinstance(window, int) or window < 1):
        raise Problem("the sliding window must be a whole number of at least 1 key (1 = each token sees only "
                      "itself; None = no window); got {window!r}", window=window)
    for name, value in (("d_in", d_in), ("d_out", d_out), ("context_length", context_length),
                        ("num_heads", num_heads)):
        if value is not None and (not isinstance(value, int) or value < 1):
            raise Problem("{name} must be a whole number of at least 1; got {value!r}", name=name, value=value)
    if dropout is not None and not (0.0 <= float(dropout) < 1.0):
        raise Problem("dropout must be at least 0 and below 1 (it is the fraction of weights zeroed); "
                      "got {dropout!r}", dropout=dropout)
    if mask_method is not None and mask_method not in MASK_METHODS:
        raise Problem("unknown mask method {mask_method!r}: use 'neg_inf' (-inf before softmax) "
                      "or 'renormalize' (zero after softmax, then renormalize)", mask_method=mask_method)
    if num_heads is not None and d_out % num_heads != 0:
        fits = [h for h in range(1, min(d_out, 16) + 1) if d_out % h == 0]
        raise Problem(
            "d_out ({d_out}) must be divisible by num_heads ({num_heads}) so that each head "
            "gets head_dim = d_out / num_heads columns; with d_out = {d_out} use num_heads {fits}, "
            "or pick d_out as a multiple of {num_heads} (e.g. {example})",
            d_out=d_out, num_heads=num_heads, fits=either(fits), example=num_heads * max(1, round(d_out / num_heads)),
        )


def check_inputs(x: torch.Tensor, d_in: int, context_length: int | None = None) -> None:
    """Raise ``ValueError`` unless ``x`` is (b, num_tokens, d_in) with num_tokens in [1, context_length]."""
    if x.ndim != 3 or x.shape[-1] != d_in:
        raise Problem("expected inputs of shape (batch, num_tokens, d_in={d_in}); got {shape}",
                      d_in=d_in, shape=tuple(x.shape))
    num_tokens = x.shape[1]
    if num_tokens == 0:
        raise Problem("the input has no tokens: type at least one word")
    if context_length is not None and num_tokens > context_length:
        raise Problem(
            "{num_tokens} tokens do not fit in context_length = {context_length}: the causal "
            "mask is only {context_length} x {context_length}. Raise context_length to at least "
            "{num_tokens}, or shorten the text", num_tokens=num_tokens, context_length=context_length,
        )


def masked_softmax(
    attn_scores: torch.Tensor,
    mask_bool: torch.Tensor | None,
    d_k: int,
    mask_method: str = "neg_inf",
    trace: Trace | None = None,
) -> torch.Tensor:
    """Scores -> causal attention weights, by either masking method (section 3.5.1).

    ``mask_bool`` is True where a key is hidden (:func:`attn_core.attention.masks.causal_mask`); ``None`` means no
    mask. Both methods give the same weights: softmax over the unmasked keys only.
    """
    if mask_bool is not None and mask_method == "neg_inf":
        if trace is not None:
            trace.before_change(attn_scores)  # the trace keeps the scores as they were before the mask
        attn_scores.masked_fill_(mask_bool, -torch.inf)
        record(trace, "attn_scores_masked", attn_scores)
    attn_scores_scaled = attn_scores / d_k**0.5
    record(trace, "attn_scores_scaled", attn_scores_scaled, d_k=d_k, sqrt_d_k=d_k**0.5)
    attn_weights = torch.softmax(attn_scores_scaled, dim=-1)
    if mask_bool is None or mask_method == "neg_inf":
        record(trace, "attn_weights", attn_weights)
        return attn_weights
    # mask_method == "renormalize": softmax first, then zero the future and renormalize.
    record(trace, "attn_weights_unmasked", attn_weights)
    masked_simple = attn_weights.masked_fill(mask_bool, 0.0)
    record(trace, "attn_weights_zeroed", masked_simple)
    attn_weights = masked_simple / masked_simple.sum(dim=-1, keepdim=True)
    record(trace, "attn_weights", attn_weights,
           note=Msg("renormalized: rows sum to 1 again, equal to softmax over the past keys only"))
    return attn_weights


def record_dropout(trace: Trace | None, dropout: nn.Dropout, attn_weights: torch.Tensor) -> None:
    """Record ``attn_weights = self.dropout(attn_weights)`` (the caller's line) and which weights it zeroed."""
    if trace is None:
        return
    if dropout.training and dropout.p > 0:
        weights = trace.here("attn_weights").tensor  # before dropout
        dropout_mask = (attn_weights == 0) & (weights != 0)
        record(trace, "dropout_mask", dropout_mask, p=dropout.p)
        note = Msg("zeroed at random with p = {p:g}, survivors scaled by 1/(1-p) = {scale:.3g}; rows no longer sum "
                   "to 1", p=dropout.p, scale=1 / (1 - dropout.p))
    else:
        note = Msg("dropout inactive (eval mode or p = 0): weights unchanged")
    record(trace, "attn_weights_dropout", attn_weights, note=note, depth=2)


class SelfAttention_v1(nn.Module):
    """Section 3.4.2: self-attention with trainable weight matrices as raw parameters."""

    def __init__(self, d_in: int, d_out: int):
        super().__init__()
        check_sizes(d_in, d_out)
        self.W_query = nn.Parameter(torch.rand(d_in, d_out))
        self.W_key = nn.Parameter(torch.rand(d_in, d_out))
        self.W_value = nn.Parameter(torch.rand(d_in, d_out))

    def forward(self, x: torch.Tensor, trace: Trace | None = None) -> torch.Tensor:
        keys = x @ self.W_key
        queries = x @ self.W_query
        values = x @ self.W_value
        record(trace, "queries", queries)
        record(trace, "keys", keys)
        record(trace, "values", values)
        attn_scores = queries @ keys.transpose(-2, -1)  # omega; book: keys.T for 2-d x
        record(trace, "attn_scores", attn_scores, note=Msg("omega[i, j] = q(i) . k(j)"))
        attn_weights = masked_softmax(attn_scores, None, keys.shape[-1], trace=trace)
        context_vec = attn_weights @ values
        record(trace, "context_vec", context_vec)
        return context_vec


class SelfAttention_v2(nn.Module):
    """Section 3.4.2: the same, with nn.Linear layers (better initialization)."""

    def __init__(self, d_in: int, d_out: int, qkv_bias: bool = False):
        super().__init__()
        check_sizes(d_in, d_out)
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def forward(self, x: torch.Tensor, trace: Trace | None = None) -> torch.Tensor:
        keys = self.W_key(x)
        queries = self.W_query(x)
        values = self.W_value(x)
        record(trace, "queries", queries)
        record(trace, "keys", keys)
        record(trace, "values", values)
        attn_scores = queries @ keys.transpose(-2, -1)  # book: keys.T for 2-d x
        record(trace, "attn_scores", attn_scores, note=Msg("omega[i, j] = q(i) . k(j)"))
        attn_weights = masked_softmax(attn_scores, None, keys.shape[-1], trace=trace)
        context_vec = attn_weights @ values
        record(trace, "context_vec", context_vec)
        return context_vec


class CausalAttention(nn.Module):
    """Section 3.5.3: self-attention with a causal mask and dropout, for batches."""

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float,
                 qkv_bias: bool = False, mask_method: str = "neg_inf", causal: bool = True, window: int | None = None):
        super().__init__()
        check_sizes(d_in, d_out, context_length, dropout, mask_method, window=window)
        self.d_in, self.d_out, self.context_length = d_in, d_out, context_length
        self.mask_method, self.causal, self.window = mask_method, causal, window
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        # book: torch.triu(torch.ones(context_length, context_length), diagonal=1); a window W also hides keys older
        # than the last W (sliding-window attention)
        self.register_buffer("mask", causal_mask(context_length, window=window, causal=causal).float())

    def forward(self, x: torch.Tensor, trace: Trace | None = None) -> torch.Tensor:
        check_inputs(x, self.d_in, self.context_length)
        b, num_tokens, d_in = x.shape
        keys = self.W_key(x)  # (b, num_tokens, d_out)
        queries = self.W_query(x)
        values = self.W_value(x)
        record(trace, "queries", queries)
        record(trace, "keys", keys)
        record(trace, "values", values)
        attn_scores = queries @ keys.transpose(1, 2)  # (b, num_tokens, num_tokens)
        record(trace, "attn_scores", attn_scores, note=Msg("omega[i, j] = q(i) . k(j), for every pair of tokens"))
        mask_bool = self.mask.bool()[:num_tokens, :num_tokens] if self.causal or self.window else None
        record(trace, "mask_bool", mask_bool, **MaskKind.of(self.causal, self.window).fields())  # none: causal=False
        attn_weights = masked_softmax(attn_scores, mask_bool, keys.shape[-1], self.mask_method, trace)
        attn_weights = self.dropout(attn_weights)
        record_dropout(trace, self.dropout, attn_weights)
        context_vec = attn_weights @ values  # (b, num_tokens, d_out)
        record(trace, "context_vec", context_vec)
        return context_vec


class MultiHeadAttentionWrapper(nn.Module):
    """Section 3.6.1: ``num_heads`` independent CausalAttention heads, outputs concatenated.

    The output width is ``d_out * num_heads``: here ``d_out`` is the width of each head.
    """

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int,
                 qkv_bias: bool = False, mask_method: str = "neg_inf", causal: bool = True, window: int | None = None):
        super().__init__()
        check_sizes(d_in, d_out, context_length, dropout, mask_method, num_heads=None, window=window)
        if not isinstance(num_heads, int) or num_heads < 1:
            raise Problem("{name} must be a whole number of at least 1; got {value!r}", name="num_heads",
                          value=num_heads)
        self.heads = nn.ModuleList(
            [CausalAttention(d_in, d_out, context_length, dropout, qkv_bias, mask_method, causal, window)
             for _ in range(num_heads)]
        )

    def forward(self, x: torch.Tensor, trace: Trace | None = None) -> torch.Tensor:
        if trace is None:
            return torch.cat([head(x) for head in self.heads], dim=-1)
        context_vecs = []
        for i, head in enumerate(self.heads):
            with trace.scope("head", i):
                context_vecs.append(head(x, trace))
        context_vec = torch.cat(context_vecs, dim=-1)  # (b, num_tokens, num_heads * d_out)
        record(trace, "context_vec", context_vec, kind="output", axes=("b", "num_tokens", "num_heads * d_out"),
               note=Msg("the {num_heads} heads' context vectors side by side: width d_out x num_heads = {width}",
                        num_heads=len(self.heads), width=context_vec.shape[-1]))
        return context_vec


class MultiHeadAttention(nn.Module):
    """Section 3.6.2: multi-head attention with weight splits (one matmul for all heads).

    ``d_out`` is the total width; each of the ``num_heads`` heads gets ``head_dim = d_out // num_heads``.
    """

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int,
                 qkv_bias: bool = False, mask_method: str = "neg_inf", causal: bool = True,
                 efficient: bool = True, window: int | None = None):
        super().__init__()
        check_sizes(d_in, d_out, context_length, dropout, mask_method, num_heads, window=window)
        self.d_in, self.context_length = d_in, context_length
        self.mask_method, self.causal, self.efficient, self.window = mask_method, causal, efficient, window
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads  # reduce the projection dim to match desired output dim
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)  # linear layer to combine head outputs
        self.dropout = nn.Dropout(dropout)
        # book: torch.triu(torch.ones(context_length, context_length), diagonal=1); a window W also hides keys older
        # than the last W (sliding-window attention)
        self.register_buffer("mask", causal_mask(context_length, window=window, causal=causal).float())

    def forward(self, x: torch.Tensor, trace: Trace | None = None, cache: LayerCache | None = None) -> torch.Tensor:
        """``cache``: this layer's KV cache; its keys and values come before this call's tokens, whose positions
        continue from the cache's length (attn_core/attention/kv_cache.py)."""
        num_cached = 0 if cache is None else cache.length
        check_inputs(x, self.d_in, self.context_length - num_cached)
        if trace is None and self.efficient:
            return self.forward_efficient(x, cache)
        b, num_tokens, d_in = x.shape
        keys = self.W_key(x)  # Shape: (b, num_tokens, d_out)
        queries = self.W_query(x)
        values = self.W_value(x)
        record(trace, "queries", queries)
        record(trace, "keys", keys)
        record(trace, "values", values)

        # We implicitly split the matrix by adding a `num_heads` dimension
        # Unroll last dim: (b, num_tokens, d_out) -> (b, num_tokens, num_heads, head_dim)
        keys = keys.view(b, num_tokens, self.num_heads, self.head_dim)
        values = values.view(b, num_tokens, self.num_heads, self.head_dim)
        queries = queries.view(b, num_tokens, self.num_heads, self.head_dim)
        record(trace, "keys.view", keys)
        record(trace, "values.view", values)
        record(trace, "queries.view", queries)

        # Transpose: (b, num_tokens, num_heads, head_dim) -> (b, num_heads, num_tokens, head_dim)
        keys = keys.transpose(1, 2)
        queries = queries.transpose(1, 2)
        values = values.transpose(1, 2)
        record(trace, "keys.transpose", keys)
        record(trace, "queries.transpose", queries)
        record(trace, "values.transpose", values)

        if cache is not None:  # KV cache: the earlier positions' keys and values, then this call's
            keys, values = cache.update(keys, values)  # (b, num_heads, num_cached + num_tokens, head_dim)
            record(trace, "keys.cached", keys)
            record(trace, "values.cached", values)

        # Compute scaled dot-product attention (aka self-attention) with a causal mask
        attn_scores = queries @ keys.transpose(2, 3)  # Dot product for each head
        record(trace, "attn_scores", attn_scores,
               note=Msg("one batched matmul computes every head's num_tokens x num_tokens scores"))

        # Original mask truncated to the number of tokens and converted to boolean
        # (with a KV cache: the rows of this call's positions, over every cached key)
        num_keys = num_cached + num_tokens
        mask_bool = self.mask.bool()[num_cached:num_keys, :num_keys] if self.causal or self.window else None
        record(trace, "mask_bool", mask_bool, **MaskKind.of(self.causal, self.window).fields())  # none: causal=False

        # Use the mask to fill attention scores (or renormalize after softmax: mask_method)
        attn_weights = masked_softmax(attn_scores, mask_bool, keys.shape[-1], self.mask_method, trace)
        attn_weights = self.dropout(attn_weights)
        record_dropout(trace, self.dropout, attn_weights)

        # Shape: (b, num_heads, num_tokens, head_dim)
        context_vec = attn_weights @ values
        record(trace, "context_vec", context_vec, note=Msg("each head's context vectors"))
        # Shape: (b, num_tokens, num_heads, head_dim)
        context_vec = context_vec.transpose(1, 2)
        record(trace, "context_vec.transpose", context_vec)

        # Combine heads, where self.d_out = self.num_heads * self.head_dim
        context_vec = context_vec.contiguous().view(b, num_tokens, self.d_out)
        record(trace, "context_vec.view", context_vec)
        context_vec = self.out_proj(context_vec)  # optional projection
        record(trace, "out_proj", context_vec)
        return context_vec

    def forward_efficient(self, x: torch.Tensor, cache: LayerCache | None = None) -> torch.Tensor:
        """Same math through PyTorch's fused scaled_dot_product_attention (no weights matrix kept)."""
        b, num_tokens, d_in = x.shape
        # (b, num_tokens, d_out) -> (b, num_heads, num_tokens, head_dim)
        queries = self.W_query(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        keys = self.W_key(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        values = self.W_value(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        return self.out_proj(fused_attention(self, queries, keys, values, cache))


def fused_attention(module: nn.Module, queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
                    cache: LayerCache | None, *, enable_gqa: bool = False, num_cached: int | None = None
                    ) -> torch.Tensor:
    """PyTorch's fused scaled_dot_product_attention for the efficient paths (as nanoGPT does): append the keys and
    values to ``cache``, mask by the module's own buffer where SDPA's is_causal cannot say it (queries after cached
    keys, or a window), and merge the heads back: (b, num_tokens, d_out)."""
    b, _, num_tokens, _ = queries.shape
    if num_cached is None:
        num_cached = 0 if cache is None else cache.length
    if cache is not None:
        keys, values = cache.update(keys, values)
    attn_mask, is_causal = None, module.causal
    if num_cached or module.window:
        num_keys = keys.shape[-2]
        attn_mask, is_causal = ~module.mask.bool()[num_cached:num_keys, :num_keys], False
    context_vec = F.scaled_dot_product_attention(
        queries, keys, values, attn_mask=attn_mask, dropout_p=module.dropout.p if module.training else 0.0,
        is_causal=is_causal, enable_gqa=enable_gqa)  # (b, num_heads, num_tokens, head_dim)
    return context_vec.transpose(1, 2).contiguous().view(b, num_tokens, module.d_out)
