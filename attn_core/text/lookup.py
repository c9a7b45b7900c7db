"""Queries, keys and values as a database lookup, hard and soft.

A database (a Python dict) compares the query with every key and returns the one value whose key is equal: a hard
lookup. Attention compares the query with every key too, but by a dot product, and returns a blend of *all* the
values, weighted by ``softmax(score / temperature)``. A low temperature makes the blend a hard lookup of the best
match; a high one averages everything. In the model the temperature is ``sqrt(d_k)``.

For a table of words (authors -> books) each key and the query become a vector of their character trigrams, unit
length, so query . key is their cosine similarity (1 for the same name, near 0 for unrelated ones); a misspelled
query still finds its author.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from attn_core.messages import Problem


def normalize_key(text: str) -> str:
    return " ".join(str(text).lower().split())


def hard_lookup(query: str, keys: list[str]) -> int | None:
    """The row whose key equals the query (case and spacing aside), as ``dict[query]`` finds it; None if none."""
    wanted = normalize_key(query)
    for i, key in enumerate(keys):
        if normalize_key(key) == wanted:
            return i
    return None


def _trigrams(text: str) -> Counter:
    padded = f"  {normalize_key(text)} "
    return Counter(padded[i:i + 3] for i in range(len(padded) - 2))


def trigram_vectors(texts: list[str]) -> tuple[np.ndarray, list[str]]:
    """(len(texts), n_trigrams) unit-length count vectors over the trigrams the texts share, and those trigrams."""
    counts = [_trigrams(t) for t in texts]
    vocab = sorted(set().union(*counts)) if counts else []
    index = {g: j for j, g in enumerate(vocab)}
    vectors = np.zeros((len(texts), len(vocab)), dtype=np.float64)
    for i, c in enumerate(counts):
        for g, n in c.items():
            vectors[i, index[g]] = n
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1.0, norms), vocab


def softmax(scores: np.ndarray) -> np.ndarray:
    """softmax over the last axis; -inf entries get weight 0."""
    shifted = scores - np.max(scores, axis=-1, keepdims=True)
    e = np.exp(shifted)
    return e / e.sum(axis=-1, keepdims=True)


@dataclass(frozen=True)
class SoftLookup:
    """One query against every key: scores (query . key), the softmax weights, and the blend of numeric values."""

    scores: np.ndarray  # (n_keys,)
    weights: np.ndarray  # (n_keys,), sums to 1
    blend: np.ndarray | None  # weights @ values (None without numeric values)
    best: int  # the key with the largest weight


def soft_lookup(query: np.ndarray, keys: np.ndarray, temperature: float,
                values: np.ndarray | None = None) -> SoftLookup:
    """Attention for one query: ``weights = softmax(keys @ query / temperature)``, ``blend = weights @ values``."""
    if not temperature > 0:
        raise Problem("temperature is {temperature}: it must be above 0 (small: a hard lookup; large: an even "
                      "average)", temperature=temperature)
    if keys.ndim != 2 or keys.shape[0] == 0:
        raise Problem("the table has no keys: add at least one row")
    scores = keys @ query  # (n_keys, d) @ (d,) -> (n_keys,)
    weights = softmax(scores / temperature)
    blend = None if values is None else weights @ values  # (n_keys,) @ (n_keys, …) -> (…)
    return SoftLookup(scores, weights, blend, int(np.argmax(weights)))


def table_lookup(query: str, keys: list[str], temperature: float, values: np.ndarray | None = None) -> SoftLookup:
    """:func:`soft_lookup` on words: the query and keys as trigram vectors (scores are cosine similarities)."""
    if not normalize_key(query):
        raise Problem("the query is empty: type a key to look up (for example an author's name)")
    vectors, _ = trigram_vectors([query, *keys])
    return soft_lookup(vectors[0], vectors[1:], temperature, values)


@dataclass(frozen=True)
class HeadLookup:
    """One query token of a real attention head, read as a lookup."""

    scores: np.ndarray  # (T,) q_i . k_j / sqrt(d_k); -inf for masked (future) keys
    weights: np.ndarray  # (T,) softmax(scores / temperature); temperature 1 is the model's own
    context: np.ndarray  # (d_head,) weights @ values: what came back


def head_lookup(queries: np.ndarray, keys: np.ndarray, values: np.ndarray, i: int, temperature: float = 1.0,
                causal: bool = True) -> HeadLookup:
    """Token ``i``'s query against every key of one head (queries, keys, values: (T, d_head) each)."""
    if not temperature > 0:
        raise Problem("temperature is {temperature}: it must be above 0", temperature=temperature)
    T = keys.shape[0]
    if not 0 <= i < queries.shape[0]:
        raise Problem("token {token} is outside the {num_tokens} tokens", token=i + 1, num_tokens=queries.shape[0])
    d_k = keys.shape[-1]
    scores = (keys @ queries[i]) / np.sqrt(d_k)  # (T, d_k) @ (d_k,) -> (T,)
    if causal:
        scores = np.where(np.arange(T) > i, -np.inf, scores)
    weights = softmax(scores / temperature)
    return HeadLookup(scores, weights, weights @ values)  # (T,) @ (T, d_head) -> (d_head,)
