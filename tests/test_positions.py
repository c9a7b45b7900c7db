"""RoPE measured on queries and keys (attn_core/labs/positions.py) and the book's own apply_rope as the peer."""

from __future__ import annotations

import pytest
import torch

from attn_core.labs.positions import (
    cosine_similarity_matrix,
    rope_frequencies,
    rotate,
    score_by_distance,
    shift_invariance,
    sinusoidal_embeddings,
)
from attn_core.models.rope_attention import apply_rope, compute_rope_params


def test_apply_rope_equals_the_books():
    book = pytest.importorskip("llms_from_scratch.llama3")
    x = torch.randn(2, 3, 11, 64, generator=torch.Generator().manual_seed(0))
    cos, sin = compute_rope_params(64, 100_000.0, 32)
    book_cos, book_sin = book.compute_rope_params(64, theta_base=100_000.0, context_length=32)
    torch.testing.assert_close(cos, book_cos)
    torch.testing.assert_close(apply_rope(x, cos, sin), book.apply_rope(x, book_cos, book_sin))


def test_rotate_is_apply_rope_at_chosen_positions_and_frequencies_fall():
    x = torch.randn(5, 8, generator=torch.Generator().manual_seed(1))
    cos, sin = compute_rope_params(8, 10_000.0, 5)
    torch.testing.assert_close(rotate(x, list(range(5)), 10_000.0), apply_rope(x[None, None], cos, sin)[0, 0])
    theta = rope_frequencies(8, 10_000.0)
    assert theta[0] == 1.0 and torch.all(theta[1:] < theta[:-1])  # pair 0 turns 1 radian a token, later pairs less
    with pytest.raises(ValueError, match="even head_dim"):
        rope_frequencies(7, 10_000.0)


def test_scores_depend_only_on_the_distance():
    g = torch.Generator().manual_seed(2)
    q, k = torch.randn(64, generator=g), torch.randn(64, generator=g)
    near = score_by_distance(q, k, range(0, 50), 100_000.0, start=0)
    far = score_by_distance(q, k, range(0, 50), 100_000.0, start=700)
    torch.testing.assert_close(near, far, atol=1e-3, rtol=1e-3)
    assert float(near[0]) == pytest.approx(float(q @ k) / 8, rel=1e-5)  # distance 0: no net rotation
    queries, keys = torch.randn(3, 20, 16, generator=g), torch.randn(1, 20, 16, generator=g)
    assert shift_invariance(queries, keys, 100, 10_000.0) < 1e-4
    with pytest.raises(ValueError, match="0 or more"):
        shift_invariance(queries, keys, -1, 10_000.0)


def test_sinusoidal_embeddings_and_their_similarity():
    pe = sinusoidal_embeddings(50, 16)
    assert pe.shape == (50, 16)
    torch.testing.assert_close(pe[0], torch.tensor([0.0, 1.0] * 8))
    sim = cosine_similarity_matrix(pe)
    torch.testing.assert_close(sim.diagonal(), torch.ones(50))
    assert sim[10, 11] > sim[10, 30]  # neighbours are more alike than distant positions
