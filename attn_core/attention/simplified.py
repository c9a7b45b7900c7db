"""Section 3.3: simplified self-attention, with no trainable weights.

The inputs attend to themselves: scores are dot products of the input vectors,
weights are the scores normalized per row, context vectors are the weighted sums.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from attn_core.messages import Msg, Problem
from attn_core.tracing.trace import Trace, record

NORMALIZATIONS = ("softmax", "softmax_naive", "sum")


def softmax_naive(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """The book's naive softmax: exp(x) / sum(exp(x)). Overflows for large x (inf / inf = nan)."""
    return torch.exp(x) / torch.exp(x).sum(dim=dim, keepdim=True)


@dataclass(frozen=True)
class SimplifiedAttention:
    """What simplified attention computed: ``scores`` (omega), ``weights`` (alpha), ``context`` (z)."""

    scores: torch.Tensor
    weights: torch.Tensor
    context: torch.Tensor


def simplified_attention(
    inputs: torch.Tensor, normalize: str = "softmax", trace: Trace | None = None
) -> SimplifiedAttention:
    """All context vectors of section 3.3.1-3.3.2 for ``inputs`` of shape (num_tokens, d) or (b, num_tokens, d).

    ``normalize`` picks how scores become weights: ``"softmax"`` (torch.softmax, the book's
    choice), ``"softmax_naive"`` (exp / sum exp), or ``"sum"`` (scores / their sum).
    """
    if normalize not in NORMALIZATIONS:
        raise Problem("unknown normalization {normalize!r}: choose one of {choices}", normalize=normalize,
                      choices=", ".join(NORMALIZATIONS))
    if inputs.ndim not in (2, 3) or inputs.shape[-2] == 0:
        raise Problem("simplified attention needs inputs of shape (num_tokens, d) or (b, num_tokens, d) "
                      "with at least one token; got {shape}", shape=tuple(inputs.shape))
    attn_scores = inputs @ inputs.transpose(-2, -1)  # (.., num_tokens, num_tokens); book: inputs @ inputs.T
    record(trace, "attn_scores", attn_scores, note=Msg("omega[i, j] = x(i) . x(j): how similar token j is to query i"))
    normalized = Msg("each row normalized to sum to 1")
    if normalize == "softmax":
        attn_weights = torch.softmax(attn_scores, dim=-1)
        record(trace, "attn_weights", attn_weights, note=normalized)
    elif normalize == "softmax_naive":
        attn_weights = softmax_naive(attn_scores)
        record(trace, "attn_weights", attn_weights, note=normalized)
    else:
        attn_weights = attn_scores / attn_scores.sum(dim=-1, keepdim=True)
        record(trace, "attn_weights", attn_weights, note=normalized)
    all_context_vecs = attn_weights @ inputs  # (.., num_tokens, d)
    record(trace, "context_vec", all_context_vecs,
           note=Msg("z(i) = sum_j alpha[i, j] x(j): a weighted mix of all inputs"))
    return SimplifiedAttention(attn_scores, attn_weights, all_context_vecs)
