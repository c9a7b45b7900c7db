"""Position encodings side by side: RoPE on a real model's queries and keys, learned and sinusoidal embeddings.

RoPE rotates each pair of a query's (or key's) dimensions (i, i + head_dim/2) by the angle ``position * θ_i``
with ``θ_i = base^(-2i/head_dim)``: fast pairs turn a lot per token, slow pairs barely. The score of a rotated
query and key depends only on how far apart they are, so shifting a whole text leaves every score as it was.
These functions measure that on the tensors a traced model recorded (``queries.transpose`` before the rotation,
``queries.rope`` after it).
"""

from __future__ import annotations

import math

import torch

from attn_core.messages import Problem
from attn_core.models.rope_attention import apply_rope, compute_rope_params


def rope_frequencies(head_dim: int, base: float) -> torch.Tensor:
    """θ_i = base^(-2i/head_dim) for each of the head_dim/2 pairs: the angle (radians) a pair turns per token."""
    if head_dim < 2 or head_dim % 2:
        raise Problem("RoPE needs an even head_dim of at least 2; got {head_dim}", head_dim=head_dim)
    return 1.0 / (base ** (torch.arange(0, head_dim, 2).float() / head_dim))


def rotate(x: torch.Tensor, positions: torch.Tensor | list[int], base: float) -> torch.Tensor:
    """Rows of ``x`` (n, head_dim) rotated to ``positions`` (n,): the book's ``apply_rope`` at those positions."""
    positions = torch.as_tensor(positions)
    cos, sin = compute_rope_params(x.shape[-1], base, int(positions.max()) + 1)
    return x * cos[positions] + torch.cat((-x[:, x.shape[-1] // 2:], x[:, : x.shape[-1] // 2]), dim=-1) * sin[positions]


def score_by_distance(query: torch.Tensor, key: torch.Tensor, distances: range, base: float,
                      start: int = 0) -> torch.Tensor:
    """q·k / √d of one query and one key (head_dim,) rotated to positions ``start + d`` and ``start`` for each
    distance d: how RoPE alone changes a score as the two tokens move apart."""
    n = len(distances)
    q = rotate(query.expand(n, -1), torch.tensor([start + d for d in distances]), base)
    k = rotate(key.expand(n, -1), torch.full((n,), start), base)
    return (q * k).sum(-1) / math.sqrt(query.shape[-1])


def shift_invariance(queries: torch.Tensor, keys: torch.Tensor, shift: int, base: float) -> float:
    """Largest change of the causal scores when the whole text moves ``shift`` positions later: queries, keys
    (heads, T, head_dim) unrotated, as a traced layer recorded them before RoPE (grouped K/V repeated here)."""
    if shift < 0:
        raise Problem("a shift is a number of positions, 0 or more; got {shift}", shift=shift)
    T, d = queries.shape[-2], queries.shape[-1]
    keys = keys.repeat_interleave(queries.shape[0] // keys.shape[0], dim=0)
    cos, sin = compute_rope_params(d, base, T + shift)
    scores = [apply_rope(q[None], cos, sin, offset) @ apply_rope(k[None], cos, sin, offset).transpose(-1, -2)
              for q, k, offset in ((queries, keys, 0), (queries, keys, shift))]
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    return float((scores[0] - scores[1])[..., causal].abs().max()) / math.sqrt(d)


def sinusoidal_embeddings(num_positions: int, dim: int) -> torch.Tensor:
    """The original Transformer's fixed position embeddings (num_positions, dim): sin on even, cos on odd dims."""
    position = torch.arange(num_positions, dtype=torch.float32)[:, None]
    div = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10_000.0) / dim))
    pe = torch.zeros(num_positions, dim)
    pe[:, 0::2] = torch.sin(position * div)
    pe[:, 1::2] = torch.cos(position * div)[:, : dim // 2]
    return pe


def cosine_similarity_matrix(embeddings: torch.Tensor) -> torch.Tensor:
    """(n, n) cosine similarity of every pair of rows: how alike two positions' embeddings are."""
    unit = embeddings / embeddings.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    return unit @ unit.T
