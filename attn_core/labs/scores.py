"""Head scores: what pattern each trained attention head has, read from its attention weights.

Every score takes weights of shape (..., T, T) (rows = queries, each row sums to 1) and returns
one number per head, averaged over the query rows where the pattern is defined:

- ``previous_token``: weight on key i-1 (rows i >= 1). 1.0 for a perfect previous-token head.
- ``induction``: weight on the token *after* the latest earlier occurrence of the query's token
  (key j+1 where tokens[j] == tokens[i], j+1 < i); needs the token ids. The copy step of an
  induction head: "last time I saw this token, what came next?".
- ``first_token``: weight on key 0 (rows i >= 1), the "attention sink".
- ``mean_distance``: average i - j, weighted by attention (0: attends to itself).
- ``entropy``: average row entropy in nats (0: one key; log(T) for a uniform full row).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from attn_core.messages import N_, Msg, Problem

SCORE_NAMES = ("previous_token", "induction", "first_token", "mean_distance", "entropy")
SCORE_TITLES = {"previous_token": N_("previous-token"), "induction": N_("induction"), "first_token": N_("first-token"),
                "mean_distance": N_("mean distance"), "entropy": N_("entropy")}
# A head gets a name when its score reaches this (the verdict's pattern scores, 0-1).
PATTERN_THRESHOLDS = {"induction": 0.4, "previous_token": 0.4, "first_token": 0.5}
PATTERN_NAMES = {"induction": N_("induction head"), "previous_token": N_("previous-token head"),
                 "first_token": N_("first-token (sink) head")}
PATTERN_LINES = {  # a head's verdict with its pattern, one whole sentence per pattern
    "induction": N_("layer {layer} head {head}: induction head, {score:.2f}"),
    "previous_token": N_("layer {layer} head {head}: previous-token head, {score:.2f}"),
    "first_token": N_("layer {layer} head {head}: first-token (sink) head, {score:.2f}"),
}


def _check(weights: np.ndarray) -> np.ndarray:
    """The weights as a float array: float32 stays float32 (a model's twelve 1,024 x 1,024 heads are 48 MB, not 96)."""
    w = np.asarray(weights)
    if w.dtype not in (np.float32, np.float64):
        w = w.astype(np.float64)
    if w.ndim < 2 or w.shape[-1] != w.shape[-2]:
        raise Problem("expected attention weights of shape (..., T, T); got {shape}", shape=w.shape)
    return w


def induction_targets(tokens: Sequence[int]) -> list[tuple[int, int]]:
    """(query i, key j+1) pairs where j < i is the latest earlier position of tokens[i] and j+1 < i."""
    last: dict[int, int] = {}
    pairs = []
    for i, t in enumerate(tokens):
        j = last.get(int(t))
        if j is not None and j + 1 < i:
            pairs.append((i, j + 1))
        last[int(t)] = i
    return pairs


def previous_token_score(weights: np.ndarray) -> np.ndarray:
    """Mean weight on the previous key, rows 1..T-1 -> shape weights.shape[:-2]."""
    w = _check(weights)
    T = w.shape[-1]
    if T < 2:
        return np.full(w.shape[:-2], np.nan)
    i = np.arange(1, T)
    return w[..., i, i - 1].mean(axis=-1)


def first_token_score(weights: np.ndarray) -> np.ndarray:
    """Mean weight on key 0, rows 1..T-1."""
    w = _check(weights)
    if w.shape[-1] < 2:
        return np.full(w.shape[:-2], np.nan)
    return w[..., 1:, 0].mean(axis=-1)


def induction_score(weights: np.ndarray, tokens: Sequence[int]) -> np.ndarray:
    """Mean weight on the token after the earlier occurrence of the query's token (NaN if no repeats)."""
    w = _check(weights)
    pairs = induction_targets(tokens)
    if len(tokens) != w.shape[-1]:
        raise Problem("{n_ids} token ids for {T} x {T} attention weights", n_ids=len(tokens), T=w.shape[-1])
    if not pairs:
        return np.full(w.shape[:-2], np.nan)
    q, k = np.array(pairs).T
    return w[..., q, k].mean(axis=-1)


def mean_distance(weights: np.ndarray) -> np.ndarray:
    """Attention-weighted mean of (i - j) over all rows, in tokens."""
    w = _check(weights)
    T = w.shape[-1]
    j = np.arange(T, dtype=w.dtype)
    # sum_j w_ij (i - j) = i * (row i's sum) - (w @ j)_i: a matrix-vector product, not a (T, T) product;
    # einsum, not ``w @ j``: numpy's matmul starts OpenBLAS threads that fight the server's (docs/measurements.md)
    return (j * w.sum(axis=-1) - np.einsum("...ij,j->...i", w, j)).mean(axis=-1)


def entropy(weights: np.ndarray) -> np.ndarray:
    """Mean row entropy in nats (0 * log 0 counts as 0)."""
    w = _check(weights)
    terms = np.log(w, where=w > 0, out=np.zeros_like(w))  # the logarithm of the non-zero weights only
    terms *= w
    return -terms.sum(axis=-1).mean(axis=-1)


def head_scores(weights: np.ndarray, tokens: Sequence[int] | None = None) -> dict[str, np.ndarray]:
    """Every score for weights of shape (layers, heads, T, T) (or any (..., T, T)): name -> (layers, heads)."""
    w = _check(weights)
    return {
        "previous_token": previous_token_score(w),
        "induction": induction_score(w, tokens) if tokens is not None else np.full(w.shape[:-2], np.nan),
        "first_token": first_token_score(w),
        "mean_distance": mean_distance(w),
        "entropy": entropy(w),
    }


def verdict(scores: dict[str, np.ndarray], layer: int, head: int) -> tuple[str, str, float]:
    """(pattern key or "", plain words, score) for one head: the pattern score furthest above its threshold."""
    key, words, value = verdict_msg(scores, layer, head)
    return key, str(words), value


def verdict_msg(scores: dict[str, np.ndarray], layer: int, head: int) -> tuple[str, Msg, float]:
    """:func:`verdict` with its words as a message the pages translate."""
    best, best_margin = "", 0.0
    for name, threshold in PATTERN_THRESHOLDS.items():
        value = float(scores[name][layer, head])
        if np.isfinite(value) and value >= threshold and value - threshold >= best_margin:
            best, best_margin = name, value - threshold
    if best:
        value = float(scores[best][layer, head])
        return best, Msg(PATTERN_LINES[best], layer=layer + 1, head=head + 1, score=value), value
    dist = float(scores["mean_distance"][layer, head])
    ent = float(scores["entropy"][layer, head])
    return "", Msg("layer {layer} head {head}: no clear pattern (entropy {entropy:.2f}, distance {distance:.1f})",
                   layer=layer + 1, head=head + 1, entropy=ent, distance=dist), float("nan")


def verdicts(scores: dict[str, np.ndarray]) -> list[str]:
    """One line per head, layer by layer."""
    return [str(m) for m in verdicts_msg(scores)]


def verdicts_msg(scores: dict[str, np.ndarray]) -> list[Msg]:
    """:func:`verdicts` as messages the pages translate."""
    n_layers, n_heads = scores["entropy"].shape
    return [verdict_msg(scores, layer, h)[1] for layer in range(n_layers) for h in range(n_heads)]


# What the model view calls a head (``head_type``): a named pattern first, else by where and how widely it looks.
HEAD_TYPES = {"previous_token": N_("previous-token"), "first_token": N_("first-token (sink)"),
              "induction": N_("induction"), "local": N_("local"), "broad": N_("broad"), "": N_("mixed")}
LOCAL_DISTANCE = 3.0  # tokens: a head whose attention sits this close to the query on average is local
BROAD_ENTROPY = 0.7  # of a uniform causal row's entropy: a head spreading at least this much is broad


def causal_uniform(T: int) -> tuple[float, float]:
    """(mean distance, mean entropy) of uniform causal attention over T tokens: what no preference looks like."""
    i = np.arange(T)
    return float((i / 2).mean()), float(np.log(i + 1).mean())


def head_type(scores: dict[str, np.ndarray], layer: int, head: int, T: int) -> str:
    """A key of ``HEAD_TYPES``: the verdict's pattern (previous-token, first-token, induction) if it has one; else
    "local" (mean distance at most LOCAL_DISTANCE tokens and at most half of uniform attention's), "broad" (entropy at
    least BROAD_ENTROPY of a uniform causal row's), or "" (mixed)."""
    pattern = verdict(scores, layer, head)[0]
    if pattern:
        return pattern
    uniform_distance, uniform_entropy = causal_uniform(T)
    dist, ent = float(scores["mean_distance"][layer, head]), float(scores["entropy"][layer, head])
    if T > 1 and dist <= min(LOCAL_DISTANCE, uniform_distance / 2):
        return "local"
    if T > 1 and ent >= BROAD_ENTROPY * uniform_entropy:
        return "broad"
    return ""
