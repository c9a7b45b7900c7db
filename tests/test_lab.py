"""attn_core.labs.lab and attn_core.labs.walkthrough: what the teaching pages show."""

import math

import pytest
import torch

from attn_core import BOOK_INPUTS, MultiHeadAttentionWrapper
from attn_core.labs.lab import (
    DTYPES,
    SCALING_SAMPLES,
    batched_vs_loop,
    guarded_softmax,
    masking_variants,
    precision_table,
    reshape_demo,
    scaling_table,
    wrapper_as_multihead,
)
from attn_core.labs.walkthrough import book_walkthrough, dropout_ok


@pytest.fixture
def scores():
    g = torch.Generator().manual_seed(0)
    return torch.randn(7, 7, generator=g) * 2  # has negative scores


def test_correct_methods_agree_and_mistakes_fail_as_described(scores):
    v = {x.name: x for x in masking_variants(scores, 4)}
    a, b = v["−∞ before softmax"], v["softmax, zero, renormalize"]
    assert (a.weights - b.weights).abs().max() < 1e-6
    for right in (a, b):
        assert right.correct and right.future_weight == 0 and right.row_sum_error < 1e-6 and right.min_weight >= 0
    assert v["mistake: zeros in the scores"].future_weight > 0.01  # future tokens still get weight
    assert v["mistake: renormalize raw scores"].min_weight < 0  # negative "weights"
    assert v["mistake: no renormalization"].row_sum_error > 0.1  # rows no longer sum to 1
    big = v["large negative instead of −∞"]
    assert (big.weights - a.weights).abs().max() < 1e-6
    for name, x in v.items():
        if not x.correct:
            assert (x.weights - a.weights).abs().max() > 1e-3, name


def test_precision_table_fully_masked_rows(scores):
    rows = precision_table(scores, 4)
    assert {r.dtype for r in rows} == set(DTYPES)
    by = {(r.dtype, r.method): r for r in rows}
    assert by[("float32", "−∞")].fully_masked_row.startswith("NaN")
    assert by[("float32", "finfo.min")].fully_masked_row.startswith("uniform")
    assert by[("float32", "finfo.min")].max_diff_vs_fp32 == 0
    assert by[("float16", "-1e9")].fully_masked_row.startswith("PyTorch error")
    assert 0 < by[("bfloat16", "−∞")].max_diff_vs_fp32 < 0.02  # bf16 has ~3 significant digits
    masked = scores.clone()
    masked[0] = -torch.inf
    g = guarded_softmax(masked)
    assert torch.equal(g[0], torch.zeros(7)) and torch.isfinite(g).all()
    torch.testing.assert_close(g[1:].sum(-1), torch.ones(6))


def test_scaling_keeps_softmax_from_saturating():
    rows = scaling_table()
    assert rows[-1].score_std > 4 * rows[0].score_std  # grows like sqrt(d_k)
    assert rows[-1].max_weight_unscaled > 0.9 and rows[-1].max_weight_scaled < 0.6


def test_scaling_table_averages_seeded_samples_into_a_smooth_curve():
    """Issue 33 item 10: one 8 x 8 sample jumped (d_k = 512: mean max weight 0.48 after scaling, std 26 for an
    expected 22.6). Averaged over seeded samples: the same numbers each time, the mean of the single samples, and
    the curve the variance argument predicts."""
    rows = scaling_table()
    assert rows == scaling_table()  # seeded
    singles = [scaling_table(samples=1, seed=s) for s in range(SCALING_SAMPLES)]
    for i, row in enumerate(rows):
        mean = sum(one[i].max_weight_unscaled for one in singles) / SCALING_SAMPLES
        assert row.max_weight_unscaled == pytest.approx(mean, rel=1e-5)
        assert 0.85 < row.score_std / row.d_k**0.5 < 1.15  # std of q.k ~ sqrt(d_k)
    unscaled = [r.max_weight_unscaled for r in rows]
    assert unscaled == sorted(unscaled)  # sharpens steadily with d_k
    scaled = [r.max_weight_scaled for r in rows]
    assert max(scaled) - min(scaled) < 0.06, scaled  # flat: dividing by sqrt(d_k) undoes the growth
    with pytest.raises(ValueError, match="samples"):
        scaling_table(samples=0)


def test_reshape_demo_and_view_error():
    r = reshape_demo(3, 6, 3)
    assert r.viewed.shape == (3, 3, 2) and r.transposed.shape == (3, 3, 2)
    assert r.head_of_column.tolist() == [0, 0, 1, 1, 2, 2]
    assert r.transposed[1, 0].tolist() == [2.0, 3.0]  # head 2 of token 1 holds columns 2 and 3
    assert not r.transposed_contiguous and "view size is not compatible" in r.view_error
    with pytest.raises(ValueError):
        reshape_demo(3, 5, 2)


@pytest.mark.parametrize("bias", [False, True])
def test_wrapper_equals_multihead_with_copied_weights(bias):
    torch.manual_seed(5)
    wrapper = MultiHeadAttentionWrapper(3, 2, 6, 0.0, 3, qkv_bias=bias)
    mha = wrapper_as_multihead(wrapper)
    x = torch.stack((BOOK_INPUTS, BOOK_INPUTS))
    assert mha.d_out == 6 and mha.num_heads == 3
    assert (wrapper(x) - mha(x)).abs().max() < 1e-6


def test_batched_matmul_equals_loop_with_book_numbers():
    batched, per_head, diff = batched_vs_loop()
    # Equal, or apart by float32 rounding: BLAS builds differ (torch 2.11 with CUDA gave 2.4e-7, one ulp at 2.0).
    one_ulp = float(torch.finfo(torch.float32).eps * batched.abs().max())
    assert diff <= one_ulp
    expected = torch.tensor([[1.3208, 1.1631, 1.2879], [1.1631, 2.2150, 1.8424], [1.2879, 1.8424, 2.0402]])
    torch.testing.assert_close(per_head[0], expected, atol=1e-4, rtol=0)
    torch.testing.assert_close(batched[0, 1, 0], torch.tensor([0.4391, 0.7003, 0.5903]), atol=1e-4, rtol=0)


def test_walkthrough_agrees_with_the_book_everywhere():
    steps = book_walkthrough()
    assert len(steps) == 19
    for s in steps:
        if s.key == "dropout":
            assert s.printed is None and dropout_ok(s)
        else:
            assert s.agrees, (s.key, s.max_abs_diff)
    z2 = next(s for s in steps if s.key == "z_2")
    torch.testing.assert_close(z2.value, torch.tensor([0.4419, 0.6515, 0.5683]), atol=1e-4, rtol=0)
    overflow = next(s for s in steps if s.key == "overflow")
    assert math.isnan(overflow.value[0, 0]) and overflow.value[1].sum() == pytest.approx(1.0)


def test_walkthrough_runs_on_other_inputs():
    steps = book_walkthrough(torch.randn(9, 3))
    assert all(s.printed is None and s.agrees is None for s in steps if s.key != "overflow")
    assert next(s for s in steps if s.key == "weights").value.shape == (9, 9)
    assert len(book_walkthrough(torch.randn(1, 3))) == 19  # a one-token sentence works too
    with pytest.raises(ValueError):
        book_walkthrough(torch.randn(4, 5))


def test_precision_table_finite_means_every_row_including_the_fully_masked_one():
    from attn_core.labs.lab import precision_table

    torch.manual_seed(0)
    rows = precision_table(torch.randn(5, 5), d_k=4)
    for r in rows:
        if r.fully_masked_row.startswith("NaN"):
            assert r.finite is False, r  # a NaN row is not "finite"
        elif r.fully_masked_row.startswith("uniform"):
            assert r.finite is True, r
    assert any(r.fully_masked_row.startswith("NaN") for r in rows)
