"""Tiled attention with an online softmax: the FlashAttention-2 loop in plain PyTorch, step by step.

The chapter computes the whole ``num_tokens x num_tokens`` score matrix, masks it and softmaxes it. A fused
kernel (FlashAttention, PyTorch's SDPA) never holds that matrix: it walks tiles of ``block_q`` queries and
``block_k`` keys, keeps a running maximum ``m`` and running sum ``l`` per query row, rescales what it has
summed so far by ``alpha = exp(m_old - m_new)`` whenever the maximum grows, and divides by ``l`` once at the
end. A tile the mask hides entirely (above the causal diagonal, outside a window) is skipped: never computed.

``flash_attention(q, k, v, block_q=2, block_k=2)`` equals ``F.scaled_dot_product_attention(q, k, v,
is_causal=True)``; with a ``trace`` it records every computed tile's numbers under the scope
``tile[i,j]`` (its scores block ``S``, ``m``/``l`` before and after, ``alpha``, the accumulator ``acc``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn

from attn_core.attention.classes import check_inputs, check_sizes
from attn_core.attention.masks import causal_mask
from attn_core.messages import Msg, Problem
from attn_core.tracing.trace import Trace, record, scope


@dataclass(frozen=True)
class TilePlan:
    """Which tiles of a (num_queries x num_keys) score matrix the loop computes: ``computed[i][j]`` for query
    tile ``i`` and key tile ``j``; a tile the mask hides entirely is skipped."""

    num_queries: int
    num_keys: int
    block_q: int
    block_k: int
    computed: tuple[tuple[bool, ...], ...]

    @property
    def num_tiles(self) -> int:
        return len(self.computed) * len(self.computed[0]) if self.computed else 0

    @property
    def num_computed(self) -> int:
        return sum(sum(row) for row in self.computed)

    def rows(self, i: int) -> range:
        """The query positions of query tile ``i``."""
        return range(i * self.block_q, min((i + 1) * self.block_q, self.num_queries))

    def cols(self, j: int) -> range:
        """The key positions of key tile ``j``."""
        return range(j * self.block_k, min((j + 1) * self.block_k, self.num_keys))

    def order(self) -> list[tuple[int, int, bool]]:
        """Every tile in the loop's order (query tiles outside, key tiles inside): (i, j, computed)."""
        return [(i, j, c) for i, row in enumerate(self.computed) for j, c in enumerate(row)]


def check_blocks(block_q: object, block_k: object) -> None:
    """``ValueError`` unless both block sizes are whole numbers of at least 1."""
    for name, block in (("block_q", block_q), ("block_k", block_k)):
        if isinstance(block, bool) or not isinstance(block, int) or block < 1:
            raise Problem("{name} must be a whole number of at least 1 token; got {block!r}", name=name, block=block)


def tile_plan(mask_bool: torch.Tensor | None, num_queries: int, num_keys: int, block_q: int,
              block_k: int) -> TilePlan:
    """The tiles of a ``mask_bool`` (True where hidden; None: nothing hidden) that hold any visible cell."""
    check_blocks(block_q, block_k)
    n_i, n_j = -(-num_queries // block_q), -(-num_keys // block_k)
    computed = tuple(
        tuple(mask_bool is None or not bool(mask_bool[i * block_q:(i + 1) * block_q,
                                                        j * block_k:(j + 1) * block_k].all())
              for j in range(n_j))
        for i in range(n_i))
    return TilePlan(num_queries, num_keys, block_q, block_k, computed)


def assemble_tiles(trace: Trace, plan: TilePlan, batch_heads: tuple[int, int], name: str,
                   fill: float) -> torch.Tensor:
    """The recorded blocks ``name`` of every computed tile side by side, (b, num_heads, num_queries, num_keys);
    skipped tiles hold ``fill``."""
    whole = torch.full((*batch_heads, plan.num_queries, plan.num_keys), fill)
    prefix = trace.prefix + "." if trace.prefix else ""
    for i, j, computed in plan.order():
        if computed:
            rows, cols = plan.rows(i), plan.cols(j)
            whole[:, :, rows.start:rows.stop, cols.start:cols.stop] = trace[f"{prefix}tile[{i},{j}].{name}"].tensor
    return whole


def weights_from_tiles(trace: Trace, plan: TilePlan, batch_heads: tuple[int, int]) -> torch.Tensor:
    """The attention weights the recorded tiles imply, (b, num_heads, num_queries, num_keys): each tile's ``P``
    times ``exp(m_then - m_final) / l_final`` of its query tile; skipped tiles are 0."""
    weights = torch.zeros(*batch_heads, plan.num_queries, plan.num_keys)
    prefix = trace.prefix + "." if trace.prefix else ""
    for i, row in enumerate(plan.computed):
        done = [j for j, c in enumerate(row) if c]
        if not done:
            continue
        m_final = trace[f"{prefix}tile[{i},{done[-1]}].m"].tensor
        l_final = trace[f"{prefix}tile[{i},{done[-1]}].l"].tensor
        for j in done:
            P = trace[f"{prefix}tile[{i},{j}].P"].tensor
            m_then = trace[f"{prefix}tile[{i},{j}].m"].tensor
            fix = torch.exp(m_then - m_final.masked_fill(m_final == -torch.inf, 0.0)) / l_final.clamp_min(1e-38)
            rows, cols = plan.rows(i), plan.cols(j)
            weights[:, :, rows.start:rows.stop, cols.start:cols.stop] = P * fix.unsqueeze(-1)
    return weights


def _check_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise Problem("queries, keys and values must be (b, heads, num_tokens, head_dim); got shapes "
                      "{q_shape}, {k_shape}, {v_shape}", q_shape=tuple(q.shape), k_shape=tuple(k.shape),
                      v_shape=tuple(v.shape))
    if k.shape != v.shape or q.shape[0] != k.shape[0] or q.shape[-1] != k.shape[-1]:
        raise Problem("keys and values must have one shape, and the same batch and head_dim as the queries; "
                      "got {q_shape}, {k_shape}, {v_shape}", q_shape=tuple(q.shape), k_shape=tuple(k.shape),
                      v_shape=tuple(v.shape))
    if k.shape[1] < 1 or q.shape[1] % k.shape[1]:
        raise Problem("{num_heads} query heads cannot share {kv_heads} K/V heads evenly: the number of "
                      "query heads must be a multiple of the number of K/V heads", num_heads=q.shape[1],
                      kv_heads=k.shape[1])


def flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, block_q: int = 2, block_k: int = 2,
                    causal: bool = True, window: int | None = None, sinks: int = 0,
                    trace: Trace | None = None) -> torch.Tensor:
    """Attention of ``q`` (b, num_heads, num_queries, head_dim) over ``k``, ``v`` (b, num_kv_heads, num_keys,
    head_dim), tile by tile with an online softmax; equals SDPA with the same mask. Query ``i`` sits at position
    ``num_keys - num_queries + i`` (after every cached key, as :func:`causal_mask` places it).
    Grouped K/V heads: query head ``h`` reads K/V head ``h // (num_heads // num_kv_heads)``."""
    check_blocks(block_q, block_k)
    _check_qkv(q, k, v)
    b, num_heads, num_queries, head_dim = q.shape
    num_keys = k.shape[2]
    group_size = num_heads // k.shape[1]
    # Grouped K/V: (b, num_kv_heads, num_keys, head_dim) -> (b, num_heads, num_keys, head_dim)
    keys = k.repeat_interleave(group_size, dim=1)
    values = v.repeat_interleave(group_size, dim=1)
    hidden = causal or window is not None
    mask = dict(window=window, causal=causal, sinks=sinks, device=q.device)
    mask_bool = causal_mask(num_queries, num_keys, **mask) if hidden else None  # True where hidden
    plan = tile_plan(mask_bool, num_queries, num_keys, block_q, block_k)
    scale = head_dim**-0.5
    context_vec = torch.zeros_like(q)

    for i in range(len(plan.computed)):
        q_tile = q[:, :, i * block_q:(i + 1) * block_q]  # (b, num_heads, block_q, head_dim)
        rows = q_tile.shape[2]
        m = torch.full((b, num_heads, rows), -torch.inf, dtype=q.dtype, device=q.device)  # running max per row
        l = torch.zeros(b, num_heads, rows, dtype=q.dtype, device=q.device)  # noqa: E741  running sum of exp
        acc = torch.zeros(b, num_heads, rows, head_dim, dtype=q.dtype, device=q.device)  # unnormalized output
        for j in range(len(plan.computed[i])):
            if not plan.computed[i][j]:
                continue  # every cell of this tile is masked: skip it, never compute it
            k_tile = keys[:, :, j * block_k:(j + 1) * block_k]  # (b, num_heads, block_k, head_dim)
            v_tile = values[:, :, j * block_k:(j + 1) * block_k]
            with scope(trace, "tile", i, j):
                S = q_tile @ k_tile.transpose(2, 3) * scale  # (b, num_heads, block_q, block_k)
                if mask_bool is not None:
                    tile_mask = mask_bool[i * block_q:(i + 1) * block_q, j * block_k:(j + 1) * block_k]
                    S = S.masked_fill(tile_mask, -torch.inf)  # hidden cells of a partly visible tile
                record(trace, "S", S)
                record(trace, "m_old", m)
                record(trace, "l_old", l)
                m_new = torch.maximum(m, S.amax(dim=-1))  # the running max grows (or stays)
                m_safe = m_new.masked_fill(m_new == -torch.inf, 0.0)  # a row with nothing visible yet: no NaN
                alpha = torch.exp(m - m_safe)  # rescales what was summed under the old max
                P = torch.exp(S - m_safe.unsqueeze(-1))  # (b, num_heads, block_q, block_k)
                l = alpha * l + P.sum(dim=-1)  # noqa: E741
                acc = alpha.unsqueeze(-1) * acc + P @ v_tile  # (b, num_heads, block_q, head_dim)
                m = m_new
                record(trace, "alpha", alpha)
                record(trace, "P", P)
                record(trace, "m", m)
                record(trace, "l", l)
                record(trace, "acc", acc)
        # Divide once at the end (a row that saw no key at all keeps zeros instead of 0 / 0)
        context_vec[:, :, i * block_q:(i + 1) * block_q] = acc / l.clamp_min(torch.finfo(l.dtype).tiny).unsqueeze(-1)
    if trace is not None:  # the whole matrices, assembled from the tiles for pages that draw them
        record(trace, "mask_bool", mask_bool)
        attn_scores_scaled = assemble_tiles(trace, plan, q.shape[:2], "S", -torch.inf)
        record(trace, "attn_scores_scaled", attn_scores_scaled, d_k=head_dim, sqrt_d_k=head_dim**0.5,
               note=Msg("for display only: the tiles' S blocks side by side, skipped tiles −∞ (never computed)"))
        attn_weights = weights_from_tiles(trace, plan, q.shape[:2])
        record(trace, "attn_weights", attn_weights,
               note=Msg("for display only: each tile's P rescaled by exp(m_tile - m_final) / l_final (the tiled "
                        "loop never holds this matrix)"))
    record(trace, "context_vec", context_vec,
           note=Msg("every query tile's accumulator divided by its running sum: {computed} of {tiles} tiles "
                    "computed", computed=plan.num_computed, tiles=plan.num_tiles))
    return context_vec


class MultiHeadAttentionTiled(nn.Module):
    """``MultiHeadAttention`` whose attention runs tile by tile (:func:`flash_attention`): the same weights give
    the same output, without ever holding the (num_tokens x num_tokens) matrix. Masking is −∞ masking by
    construction: a renormalize-after-softmax pass cannot run tile by tile."""

    def __init__(self, d_in: int, d_out: int, context_length: int, num_heads: int, qkv_bias: bool = False,
                 causal: bool = True, window: int | None = None, block_q: int = 2, block_k: int = 2):
        super().__init__()
        check_sizes(d_in, d_out, context_length, 0.0, "neg_inf", num_heads, window=window)
        check_blocks(block_q, block_k)
        self.d_in, self.d_out, self.context_length = d_in, d_out, context_length
        self.num_heads, self.causal, self.window = num_heads, causal, window
        self.block_q, self.block_k = block_q, block_k
        self.head_dim = d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)

    def forward(self, x: torch.Tensor, trace: Trace | None = None) -> torch.Tensor:
        check_inputs(x, self.d_in, self.context_length)
        b, num_tokens, d_in = x.shape
        keys = self.W_key(x)  # Shape: (b, num_tokens, d_out)
        queries = self.W_query(x)
        values = self.W_value(x)
        record(trace, "queries", queries)
        record(trace, "keys", keys)
        record(trace, "values", values)

        # (b, num_tokens, d_out) -> (b, num_tokens, num_heads, head_dim) -> (b, num_heads, num_tokens, head_dim)
        keys = keys.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        queries = queries.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        values = values.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        record(trace, "queries.transpose", queries)
        record(trace, "keys.transpose", keys)
        record(trace, "values.transpose", values)

        # Tiles of block_q queries x block_k keys, an online softmax: never the whole (num_tokens x num_tokens)
        context_vec = flash_attention(queries, keys, values, block_q=self.block_q, block_k=self.block_k,
                                      causal=self.causal, window=self.window, trace=trace)
        # (b, num_heads, num_tokens, head_dim) -> (b, num_tokens, d_out)
        context_vec = context_vec.transpose(1, 2).contiguous().view(b, num_tokens, self.d_out)
        context_vec = self.out_proj(context_vec)  # optional projection
        record(trace, "out_proj", context_vec)
        return context_vec
