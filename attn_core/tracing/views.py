"""Read a Trace the way a page shows it: one head's 2-d matrix, or one cell's story.

A Trace's layout depends on the module: ``MultiHeadAttention`` keeps heads in its ``num_heads`` axis
(b, num_heads, ...), the wrapper records each head in a ``"head"`` scope, single-head modules
have (b, ...). These helpers read what the trace declares (its scopes, its steps' axis names) and hide
the difference, so pages stay free of attention logic. Steps inside other scopes (a tiled loop's tiles) are
parts of the whole, not heads: the helpers leave them out.

Any shape: weights may be (b, h, T_q, T_k) with T_q != T_k (a KV cache's new queries over every cached
key), and keys/values may have fewer heads than the queries (grouped K/V heads: query head ``h`` reads
K/V head ``h // (num_heads // num_kv_heads)``, the order ``repeat_interleave`` makes: K1 K1 K2 K2).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from attn_core.messages import Problem
from attn_core.tracing.trace import Step, Trace

# MultiHeadAttention records per-head queries/keys/values after its transpose.
_PER_HEAD_KIND = {"queries": "queries_per_head", "keys": "keys_per_head", "values": "values_per_head"}


def _variable(step: Step) -> str:
    """The variable a step's tensor is in (its statement writes it: ``queries = queries.view(...)`` -> "queries",
    ``attn_scores.masked_fill_(...)`` -> "attn_scores"); else the step's name up to its first dot."""
    return step.flow.var or step.name.split(".")[0]


def previous_form(steps: Sequence[Step], i: int) -> tuple[str, Step] | None:
    """The same tensor one step earlier, as (variable, step): for ``queries.view`` the projected
    ``queries``, for ``queries.transpose`` its ``.view``. A new tensor (``attn_weights =
    torch.softmax(attn_scores ...)``) is compared with the first recorded variable it is computed
    from. None for the first step or when nothing recorded feeds it. Read from what each step's statement
    writes and reads (:class:`attn_core.tracing.trace.Flow`), not from its code's text."""
    step = steps[i]
    var, reads = _variable(step), step.flow.reads
    written = {}  # variable -> the last step (before i) that wrote it
    for s in steps[:i]:
        written[_variable(s)] = s
    if var in written and var in reads:  # the variable rewritten from itself
        return var, written[var]
    for s in reversed(steps[:i]):  # an unnamed expression fed in whole: softmax(attn_scores / ...)
        if s.flow.expr and s.flow.expr in step.flow.parts:
            return s.name, s
    for name in reads:
        if name in written and name != "self":
            return name, written[name]
    return None


# The axis that counts heads in a tensor holding several (query heads; grouped K/V heads).
HEAD_AXES = ("num_heads", "num_kv_groups")


def _own(trace: Trace, kind: str) -> list[Step]:
    """The steps of ``kind`` at the module's own level or in one head's scope (not a tile's: a part of the whole)."""
    return [s for s in trace.of_kind(kind) if s.within("head")]


def _heads_in(step: Step) -> int | None:
    """How many heads one step's tensor holds side by side (its head axis), None if it holds no head axis."""
    axis = next((step.axes.index(a) for a in HEAD_AXES if a in step.axes), None)
    if axis is None and not step.axes and step.tensor.ndim == 4:  # no axis names: (b, heads, rows, cols)
        axis = 1
    return None if axis is None else int(step.tensor.shape[axis])


def num_heads(trace: Trace) -> int:
    """How many (query) heads the traced module has (1 for single-head modules): its "head" scopes, else the head
    axis of its attention weights."""
    heads = trace.scopes_of_kind("head")
    if heads:
        return len(heads)
    weights = _own(trace, "weights")
    n = _heads_in(weights[-1]) if weights else None
    return n or 1


def kv_head(trace: Trace, head: int, kind: str = "keys") -> int:
    """Which K/V head query ``head`` reads: itself, unless the trace's ``kind`` tensor has fewer heads than there
    are query heads (grouped-query attention), then ``head // group size``."""
    step = head_step(trace, kind, 0)
    H = num_heads(trace)
    kv = None if step is None or step.index("head") is not None else _heads_in(step)  # a head's own keys: itself
    if kv is None or kv >= H or H % kv:
        return head
    return head // (H // kv)


def head_step(trace: Trace, kind: str, head: int = 0) -> Step | None:
    """The step of ``kind`` that holds ``head`` (None if the module has no such step)."""
    kind = _PER_HEAD_KIND[kind] if kind in _PER_HEAD_KIND and _own(trace, _PER_HEAD_KIND[kind]) else kind
    steps = _own(trace, kind)
    per_head = [s for s in steps if s.index("head") is not None]
    if per_head:  # one step in each head's scope
        return next((s for s in per_head if s.index("head") == (head,)), None)
    return steps[0] if steps else None


def head_matrix(trace: Trace, kind: str, head: int = 0, batch: int = 0) -> np.ndarray | None:
    """The 2-d matrix of ``kind`` for one head and batch element, as float32 (None if absent). For a tensor
    with fewer heads than the queries (grouped K/V), the K/V head that query ``head`` reads.

    A view of the trace's tensor where possible (no copy): treat it as read-only."""
    step = head_step(trace, kind, head)
    if step is None:
        return None
    t = step.tensor
    if t.ndim == 4:
        index = head if t.shape[1] == num_heads(trace) else kv_head(trace, head, kind)
        t = t[batch, min(index, t.shape[1] - 1)]
    elif t.ndim == 3:
        t = t[batch]
    return t.float().numpy() if t.dtype.is_floating_point else t.numpy().astype(np.float32)


def all_heads(trace: Trace, kind: str, batch: int = 0) -> np.ndarray | None:
    """(num_heads, rows, cols) stack of ``kind`` over every (query) head."""
    mats = [head_matrix(trace, kind, h, batch) for h in range(num_heads(trace))]
    if any(m is None for m in mats):
        return None
    return np.stack(mats)  # type: ignore[arg-type]


@dataclass(frozen=True)
class CellStory:
    """How weight (i, j) came about and what it contributes: the numbers for one clicked cell."""

    i: int
    j: int
    head: int
    query: np.ndarray  # q_i
    key: np.ndarray  # k_j
    dot: float  # q_i . k_j (the score)
    d_k: int
    scaled: float | None  # dot / sqrt(d_k); None where the variant does not scale
    masked: bool  # j is in the future of i under the causal mask
    row_scaled: np.ndarray  # the scaled scores of row i (what softmax sees; -inf where masked)
    weight: float  # softmax share of key j in row i
    weight_used: float  # after dropout (equals weight without dropout)
    value: np.ndarray  # v_j
    contribution: np.ndarray  # weight_used * v_j
    context: np.ndarray  # z_i = sum over j of the contributions
    share_all: float | None = None  # renormalize method: key j's softmax share over every key (None: −∞ masking)
    kept: float | None = None  # renormalize method: what row i sums to once the future is zeroed

    @property
    def renormalized(self) -> bool:
        """Whether the weights came from softmax over every key, the future zeroed and each row ÷ its sum."""
        return self.share_all is not None


def cell_story(trace: Trace, i: int, j: int, head: int = 0, batch: int = 0) -> CellStory:
    """The story of attention weight (query i, key j) in one head, read from a trace."""
    x = head_matrix(trace, "input", 0, batch)
    q_all = head_matrix(trace, "queries", head, batch)
    k_all = head_matrix(trace, "keys", head, batch)
    v_all = head_matrix(trace, "values", head, batch)
    if q_all is None:  # simplified attention: the inputs play all three roles
        q_all = k_all = v_all = x
    weights = head_matrix(trace, "weights", head, batch)
    used = head_matrix(trace, "dropped_weights", head, batch)
    used = weights if used is None else used
    context = head_matrix(trace, "context", head, batch)
    scaled_m = head_matrix(trace, "scaled_scores", head, batch)
    mask = head_matrix(trace, "mask", head, batch)
    n_q, n_k = weights.shape
    if not (0 <= i < n_q and 0 <= j < n_k):
        raise Problem("cell ({i}, {j}) is outside the {n_q} x {n_k} weights", i=i, j=j, n_q=n_q, n_k=n_k)
    q, k, v = q_all[i], k_all[j], v_all[j]
    dot = float(q @ k)
    d_k = int(k_all.shape[-1])
    masked = bool(mask[i, j]) if mask is not None else False
    scaled = None if scaled_m is None else dot / d_k**0.5
    if scaled_m is not None:
        row = scaled_m[i].copy()
    else:
        row = head_matrix(trace, "scores", head, batch)[i].copy()
    unmasked = head_matrix(trace, "unmasked_weights", head, batch)
    zeroed = head_matrix(trace, "zeroed_weights", head, batch)
    if unmasked is None and mask is not None:  # −∞ before softmax: what softmax sees is −∞ where masked
        row[mask[i].astype(bool)] = -np.inf
    share_all = None if unmasked is None else float(unmasked[i, j])
    kept = None if zeroed is None else float(zeroed[i].sum())
    w_used = float(used[i, j])
    return CellStory(i, j, head, q, k, dot, d_k, scaled, masked, row, float(weights[i, j]), w_used, v,
                     w_used * v, context[i], share_all, kept)


def pool(matrix: np.ndarray, max_side: int, how: str = "max") -> tuple[np.ndarray, int]:
    """Shrink a matrix by k x k blocks (k = ceil(longest side / max_side)) so neither side exceeds
    ``max_side``; returns (pooled, k). ``how`` is "max" (keeps sharp peaks such as attention to one
    token) or "mean". Masked (-inf/NaN) cells stay masked only where a whole block is masked."""
    m = np.asarray(matrix, dtype=np.float32)
    k = int(np.ceil(max(m.shape) / max_side))
    if k <= 1:
        return m, 1
    rows, cols = m.shape
    pad_r, pad_c = (-rows) % k, (-cols) % k
    finite = np.isfinite(m)
    # plain reductions over blocks (NaN-aware ones were slow: docs/measurements.md): masked cells count as -inf for a
    # max and as nothing for a mean; a block with no finite cell becomes NaN (grey)
    if how == "max":
        # weights (no masked cell) and a side that k divides need no copy: the model view pools every head of every
        # layer (docs/measurements.md)
        src = m if finite.all() else np.where(finite, m, -np.inf)
        if pad_r or pad_c:
            src = np.pad(src, ((0, pad_r), (0, pad_c)), constant_values=-np.inf)
        pooled = _blocks(src, k, np.maximum)
        pooled[pooled == -np.inf] = np.nan
        return pooled, k
    total = _blocks(np.pad(np.where(finite, m, 0.0), ((0, pad_r), (0, pad_c))), k, np.add)
    n = _blocks(np.pad(finite.astype(np.float32), ((0, pad_r), (0, pad_c))), k, np.add)
    return np.divide(total, n, out=np.full_like(total, np.nan), where=n > 0), k


def _blocks(padded: np.ndarray, k: int, op: np.ufunc) -> np.ndarray:
    """``op`` over each k x k block, as k² strided whole-array steps (much faster than
    ``reshape(...).max(axis=(1, 3))``: docs/measurements.md)."""
    out = padded[0::k, 0::k].copy()
    for i in range(k):
        for j in range(k):
            if i or j:
                op(out, padded[i::k, j::k], out=out)
    return out
