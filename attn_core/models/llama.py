"""A Llama-family model (SmolLM2, Llama 3.2) written like the book's ch05 Llama 3 code, traced like ``GPTModel``.

``RMSNorm``, ``compute_rope_params`` / ``apply_rope``, ``FeedForward`` (``fc1`` gate, ``fc2`` up, ``fc3`` down,
SiLU), ``GroupedQueryAttention`` (RoPE on queries and keys, no biases), ``TransformerBlock`` and ``LlamaModel``
(the book's ``Llama3Model``; the output head tied to the token embedding when the file has no ``output``) keep
the book's names, so its state dict loads into ``llms_from_scratch.llama3.Llama3Model`` unchanged.

A :class:`~attn_core.models.traced.TracedLM` like ``GPTModel``: ``model(in_idx, trace=None, cache=None,
trace_layers=None)``; a trace holds each layer's steps under ``trf_blocks[i].att`` (read one with
:func:`attn_core.models.traced.layer_trace`), the rotated
queries and keys among them (``queries.rope``, ``keys.rope``); a :class:`KVCache` keeps the
``n_kv_groups`` K/V heads of each layer, after RoPE; :func:`attn_core.models.gpt.generate` runs it.
``load_model(path)`` reads a GGUF file (:mod:`attn_core.models.gguf_weights`) into an eval-mode model with
``model.tokenizer`` (:mod:`attn_core.models.gguf_tokenizer`) and ``model.cfg``.
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
from attn_core.attention.modern import KV_HEADS, KV_SPLIT  # the axes of grouped K/V tensors, named once
from attn_core.messages import Problem
from attn_core.models.family import Shared, file_stamp
from attn_core.models.no_init import empty_weights
from attn_core.models.traced import TracedLM
from attn_core.tracing.trace import Trace, record


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


class FeedForward(nn.Module):
    """SwiGLU: silu(fc1(x)) * fc2(x), then fc3 back to emb_dim."""

    def __init__(self, cfg: dict):
        super().__init__()
        self.fc1 = nn.Linear(cfg["emb_dim"], cfg["hidden_dim"], bias=False)  # gate
        self.fc2 = nn.Linear(cfg["emb_dim"], cfg["hidden_dim"], bias=False)  # up
        self.fc3 = nn.Linear(cfg["hidden_dim"], cfg["emb_dim"], bias=False)  # down

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x_fc1 = self.fc1(x)
        x_fc2 = self.fc2(x)
        x = nn.functional.silu(x_fc1) * x_fc2
        return self.fc3(x)


class GroupedQueryAttention(nn.Module):
    """The book's Llama 3 attention: ``num_heads`` query heads share ``num_kv_groups`` K/V heads (K1 K1 K1 K2 ...),
    RoPE on queries and keys, no biases, always causal. ``mask_method`` and ``dropout`` are the chapter's knobs
    (a Llama has no dropout: p = 0 unless a page asks, :func:`attention_like`)."""

    def __init__(self, d_in: int, d_out: int, num_heads: int, num_kv_groups: int, mask_method: str = "neg_inf",
                 dropout: float = 0.0, window: int | None = None, sinks: int = 0):
        super().__init__()
        self.mask_method = mask_method
        self.window, self.sinks = window, sinks  # a sliding window (+ attention sinks); None: full causal
        self.efficient = True  # trace=None runs SDPA (False: the explicit path, e.g. to renormalize)
        self.dropout = nn.Dropout(dropout)
        self.d_in, self.d_out = d_in, d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.W_key = nn.Linear(d_in, num_kv_groups * self.head_dim, bias=False)
        self.W_value = nn.Linear(d_in, num_kv_groups * self.head_dim, bias=False)
        self.num_kv_groups = num_kv_groups
        self.group_size = num_heads // num_kv_groups
        self.W_query = nn.Linear(d_in, d_out, bias=False)
        self.out_proj = nn.Linear(d_out, d_out, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, trace: Trace | None = None,
                cache: LayerCache | None = None) -> torch.Tensor:
        """``cache``: this layer's KV cache; it holds the num_kv_groups K/V heads, rotated (before the repeat)."""
        num_cached = 0 if cache is None else cache.length
        check_inputs(x, self.d_in, cos.shape[0] - num_cached)
        if trace is None and self.efficient:
            return self.forward_efficient(x, cos, sin, cache)
        b, num_tokens, d_in = x.shape
        queries = self.W_query(x)  # Shape: (b, num_tokens, d_out)
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
        keys = keys.transpose(1, 2)  # Shape: (b, num_kv_groups, num_tokens, head_dim)
        values = values.transpose(1, 2)  # Shape: (b, num_kv_groups, num_tokens, head_dim)
        queries = queries.transpose(1, 2)  # Shape: (b, num_heads, num_tokens, head_dim)
        record(trace, "keys.transpose", keys, axes=KV_HEADS)
        record(trace, "values.transpose", values, axes=KV_HEADS)
        record(trace, "queries.transpose", queries)

        # Apply RoPE: rotate each query and key by its position (the positions continue after the cached ones)
        keys = apply_rope(keys, cos, sin, offset=num_cached)
        queries = apply_rope(queries, cos, sin, offset=num_cached)
        record(trace, "keys.rope", keys, axes=KV_HEADS)
        record(trace, "queries.rope", queries)

        if cache is not None:  # the cache keeps the num_kv_groups rotated K/V heads: group_size times smaller
            keys, values = cache.update(keys, values)  # (b, num_kv_groups, num_cached + num_tokens, head_dim)
            record(trace, "keys.cached", keys, axes=KV_HEADS)
            record(trace, "values.cached", values, axes=KV_HEADS)

        # Expand keys and values to match the number of heads: (b, num_heads, num_keys, head_dim), K1 K1 K1 K2 ...
        keys = keys.repeat_interleave(self.group_size, dim=1)
        values = values.repeat_interleave(self.group_size, dim=1)
        record(trace, "keys.repeat", keys, group=self.group_size)
        record(trace, "values.repeat", values, group=self.group_size)

        attn_scores = queries @ keys.transpose(2, 3)  # Dot product for each head
        record(trace, "attn_scores", attn_scores)
        # queries after num_cached keys see those and themselves (the last `window` of them, + the first `sinks`)
        mask_bool = causal_mask(num_tokens, keys.shape[2], window=self.window, sinks=self.sinks)
        record(trace, "mask_bool", mask_bool)
        attn_weights = masked_softmax(attn_scores, mask_bool, self.head_dim, self.mask_method, trace)
        attn_weights = self.dropout(attn_weights)
        record_dropout(trace, self.dropout, attn_weights)

        context_vec = attn_weights @ values  # Shape: (b, num_heads, num_tokens, head_dim)
        record(trace, "context_vec", context_vec, note="each head's context vectors")
        context_vec = context_vec.transpose(1, 2)  # Shape: (b, num_tokens, num_heads, head_dim)
        record(trace, "context_vec.transpose", context_vec)
        context_vec = context_vec.reshape(b, num_tokens, self.d_out)  # Combine heads
        record(trace, "context_vec.view", context_vec)
        context_vec = self.out_proj(context_vec)
        record(trace, "out_proj", context_vec)
        return context_vec

    def forward_efficient(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                          cache: LayerCache | None = None) -> torch.Tensor:
        """The same through PyTorch's fused scaled_dot_product_attention with ``enable_gqa`` (no repeat)."""
        b, num_tokens, d_in = x.shape
        num_cached = 0 if cache is None else cache.length
        queries = self.W_query(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        keys = self.W_key(x).view(b, num_tokens, self.num_kv_groups, self.head_dim).transpose(1, 2)
        values = self.W_value(x).view(b, num_tokens, self.num_kv_groups, self.head_dim).transpose(1, 2)
        queries = apply_rope(queries, cos, sin, offset=num_cached)
        keys = apply_rope(keys, cos, sin, offset=num_cached)
        if cache is not None:
            keys, values = cache.update(keys, values)
        attn_mask = None
        if (num_cached and num_tokens > 1) or self.window:  # what SDPA's is_causal cannot say: a mask of our own
            attn_mask = ~causal_mask(num_tokens, keys.shape[2], window=self.window, sinks=self.sinks, device=x.device)
        context_vec = F.scaled_dot_product_attention(queries, keys, values, attn_mask=attn_mask,
                                                     is_causal=attn_mask is None and num_cached == 0 and num_tokens > 1,
                                                     dropout_p=self.dropout.p if self.training else 0.0,
                                                     enable_gqa=self.group_size > 1)
        context_vec = context_vec.transpose(1, 2).reshape(b, num_tokens, self.d_out)
        return self.out_proj(context_vec)


class TransformerBlock(nn.Module):
    """Pre-RMSNorm attention + shortcut, then pre-RMSNorm SwiGLU feed-forward + shortcut (no dropout)."""

    def __init__(self, cfg: dict):
        super().__init__()
        self.att = GroupedQueryAttention(d_in=cfg["emb_dim"], d_out=cfg["emb_dim"], num_heads=cfg["n_heads"],
                                         num_kv_groups=cfg["n_kv_groups"])
        self.ff = FeedForward(cfg)
        self.norm1 = RMSNorm(cfg["emb_dim"], eps=cfg.get("rms_eps", 1e-5))
        self.norm2 = RMSNorm(cfg["emb_dim"], eps=cfg.get("rms_eps", 1e-5))

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


class LlamaModel(TracedLM):
    """The book's ``Llama3Model``: token embedding (no position embedding: RoPE inside each attention),
    ``n_layers`` blocks, final RMSNorm, output head (tied to the embedding when ``cfg["tied"]``)."""

    def __init__(self, cfg: dict):
        super().__init__()
        self.cfg = dict(cfg, drop_rate=0.0)
        self.tok_emb = nn.Embedding(cfg["vocab_size"], cfg["emb_dim"])
        self.trf_blocks = nn.ModuleList([TransformerBlock(cfg) for _ in range(cfg["n_layers"])])
        self.final_norm = RMSNorm(cfg["emb_dim"], eps=cfg.get("rms_eps", 1e-5))
        self.out_head = nn.Linear(cfg["emb_dim"], cfg["vocab_size"], bias=False)
        if cfg.get("tied", True):
            self.out_head.weight = self.tok_emb.weight
        self.tokenizer = None  # set by load_model
        if not self.tok_emb.weight.is_meta:  # built for a file's weights: its loader makes the tables
            self.init_rope()

    def init_rope(self) -> None:
        """(Re)compute the RoPE tables (a model built on the meta device gets real ones here)."""
        cos, sin = compute_rope_params(head_dim=self.cfg["emb_dim"] // self.cfg["n_heads"],
                                       theta_base=self.cfg.get("rope_base", 10_000.0),
                                       context_length=self.cfg["context_length"],
                                       freq_factors=self.cfg.get("rope_freq_factors"))
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def embed(self, in_idx: torch.Tensor, start: int = 0) -> torch.Tensor:
        """The blocks' input: token embeddings only (positions are rotated into queries and keys)."""
        return self.tok_emb(in_idx)

    def block_args(self, layer: int) -> tuple:
        """Every layer's RoPE tables (the same for all; the positions continue after the cached tokens)."""
        return self.cos, self.sin


def attention_like(att: GroupedQueryAttention, *, mask_method: str = "neg_inf", dropout: float = 0.0,
                   train: bool = False) -> GroupedQueryAttention:
    """A ``GroupedQueryAttention`` sharing ``att``'s weights (no copy) with the chapter's masking method and dropout,
    as :func:`attn_core.models.gpt.attention_like` does for GPT-2: the shared model's own modules are never changed."""
    with torch.device("meta"):  # no weights drawn only to be replaced
        new = GroupedQueryAttention(att.d_in, att.d_out, att.num_heads, att.num_kv_groups, mask_method, dropout,
                                    window=att.window, sinks=att.sinks)
    for name in ("W_query", "W_key", "W_value", "out_proj"):
        getattr(new, name).weight = getattr(att, name).weight
    return new.train(train)


class LayerAttention(nn.Module):
    """One layer's attention as a single module, ``forward(x, trace=None)``, with that layer's block arguments (its
    RoPE tables): what a page runs on a layer's real input (the layer's weights are shared, not copied; ``knobs``:
    the chapter's ``mask_method``, ``dropout``, ``train`` for :func:`attention_like`)."""

    def __init__(self, model: TracedLM, layer: int, **knobs: object):
        super().__init__()
        att = model.trf_blocks[layer].att
        self.att = attention_like(att, **knobs) if knobs else att
        self.args = model.block_args(layer)

    def forward(self, x: torch.Tensor, trace: Trace | None = None) -> torch.Tensor:
        return self.att(x, *self.args, trace)


_SHARED = Shared(2)  # models kept per process: each holds its weights as float32 (docs/measurements.md)


def load_model(path: str | os.PathLike) -> LlamaModel:
    """A Llama-family GGUF file as an eval-mode ``LlamaModel`` with ``model.tokenizer`` and ``model.cfg``
    (de-quantized once, then read from the disk cache); ``ValueError`` saying what is wrong with the file."""
    from attn_core.models.gguf_tokenizer import GGUFTokenizer
    from attn_core.models.gguf_weights import cached_weights

    weights = cached_weights(path)
    with empty_weights():  # no random weights drawn only to be replaced
        model = LlamaModel(weights.cfg)
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


def load_model_shared(path: str | os.PathLike) -> LlamaModel:
    """``load_model`` once per process per file (keyed by path, size and mtime); callers only read the model."""
    p = Path(path).expanduser().resolve()
    return _SHARED.get(p, file_stamp(p) if p.is_file() else (), lambda: load_model(p))
