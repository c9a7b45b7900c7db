"""The tiled online-softmax loop (attn_core/attention/flash.py) against SDPA, the band mask and MultiHeadAttention."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attn_core.attention.classes import MultiHeadAttention
from attn_core.attention.flash import MultiHeadAttentionTiled, flash_attention, tile_plan
from attn_core.attention.masks import causal_mask
from attn_core.tracing.trace import Trace
from attn_core.tracing.views import num_heads


def _qkv(T: int, heads: int = 2, kv_heads: int | None = None, d: int = 8, S: int | None = None, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    S = T if S is None else S
    q = torch.randn(2, heads, T, d, generator=g) * 3  # large scores: the running max really moves
    k = torch.randn(2, kv_heads or heads, S, d, generator=g) * 3
    v = torch.randn(2, kv_heads or heads, S, d, generator=g)
    return q, k, v


@pytest.mark.parametrize("T,block_q,block_k", [(7, 2, 3), (13, 4, 4), (5, 8, 1), (1, 1, 1), (16, 5, 7)])
@pytest.mark.parametrize("causal", [True, False])
def test_equals_sdpa(T, block_q, block_k, causal):
    q, k, v = _qkv(T)
    want = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    got = flash_attention(q, k, v, block_q=block_q, block_k=block_k, causal=causal)
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("window,sinks", [(1, 0), (3, 0), (3, 2), (20, 0), (2, 1)])
def test_window_and_sinks_equal_the_band_mask(window, sinks):
    q, k, v = _qkv(11)
    allowed = ~causal_mask(11, window=window, sinks=sinks)
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
    got = flash_attention(q, k, v, block_q=3, block_k=2, window=window, sinks=sinks)
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


def test_sinks_keep_the_first_keys_visible():
    hidden = causal_mask(6, window=2, sinks=1)
    assert not hidden[5, 0] and hidden[5, 1] and not hidden[5, 4] and not hidden[5, 5] and hidden[0, 1]
    with pytest.raises(ValueError, match="sinks"):
        causal_mask(4, window=2, sinks=-1)


def test_grouped_kv_heads():
    q, k, v = _qkv(9, heads=6, kv_heads=2)
    want = F.scaled_dot_product_attention(q, k.repeat_interleave(3, 1), v.repeat_interleave(3, 1), is_causal=True)
    torch.testing.assert_close(flash_attention(q, k, v, block_q=2, block_k=4), want, atol=1e-4, rtol=1e-4)


def test_cached_queries_sit_after_the_keys():
    q, k, v = _qkv(3, S=10)  # 3 new queries over 10 keys: positions 7, 8, 9
    allowed = ~causal_mask(3, 10)
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
    torch.testing.assert_close(flash_attention(q, k, v, block_q=2, block_k=3), want, atol=1e-4, rtol=1e-4)


def test_skipped_tiles_and_counts():
    plan = tile_plan(causal_mask(6), 6, 6, 2, 2)  # the book's six tokens in 3 x 3 tiles of 2
    assert plan.computed == ((True, False, False), (True, True, False), (True, True, True))
    assert (plan.num_computed, plan.num_tiles) == (6, 9)
    window = tile_plan(causal_mask(64, window=4), 64, 64, 8, 8)
    assert window.num_computed == 8 + 7  # the diagonal tiles and the ones just left of them
    assert tile_plan(None, 5, 5, 2, 2).num_computed == 9


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_bad_blocks_and_shapes_say_what_to_change(bad):
    q, k, v = _qkv(4)
    with pytest.raises(ValueError, match="block_q must be a whole number"):
        flash_attention(q, k, v, block_q=bad)
    with pytest.raises(ValueError, match="cannot share"):
        flash_attention(torch.randn(1, 3, 4, 8), torch.randn(1, 2, 4, 8), torch.randn(1, 2, 4, 8))
    with pytest.raises(ValueError, match=r"\(b, heads, num_tokens, head_dim\)"):
        flash_attention(torch.randn(4, 8), k, v)


def test_trace_m_and_l_after_the_last_tile_are_the_rows_max_and_sum():
    q, k, v = _qkv(7, heads=1)
    trace = Trace()
    flash_attention(q, k, v, block_q=3, block_k=2, trace=trace)
    scores = (q @ k.transpose(2, 3)) / 8**0.5
    scores = scores.masked_fill(causal_mask(7), -torch.inf)
    row_max = scores.amax(-1)
    row_sum = torch.exp(scores - row_max.unsqueeze(-1)).sum(-1)
    for i, last_j in ((0, 1), (1, 2), (2, 3)):  # query tile i's last computed key tile
        rows = slice(3 * i, 3 * i + 3)
        torch.testing.assert_close(trace[f"tile[{i},{last_j}].m"].tensor, row_max[:, :, rows])
        torch.testing.assert_close(trace[f"tile[{i},{last_j}].l"].tensor, row_sum[:, :, rows], atol=1e-5, rtol=1e-5)
    assert "tile[0,2].S" not in trace  # above the diagonal: skipped, never computed
    # the running max is corrected at least once: some alpha < 1
    assert any(bool((s.tensor < 1).any()) for s in trace.of_kind("tile_alpha"))
    weights = torch.softmax(scores, -1)
    torch.testing.assert_close(trace["attn_weights"].tensor, weights, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("window", [None, 2])
def test_tiled_variant_equals_multihead_attention(window):
    torch.manual_seed(123)
    mha = MultiHeadAttention(5, 8, 12, 0.0, 2, window=window).eval()
    tiled = MultiHeadAttentionTiled(5, 8, 12, 2, window=window, block_q=3, block_k=2)
    tiled.load_state_dict({k: v for k, v in mha.state_dict().items() if k != "mask"})
    x = torch.randn(1, 11, 5)
    trace = Trace()
    torch.testing.assert_close(tiled(x, trace=trace), mha(x), atol=1e-6, rtol=1e-5)
    assert num_heads(trace) == 2  # the tiles' scopes are not heads
    ref = Trace()
    mha(x, trace=ref)
    torch.testing.assert_close(trace["attn_weights"].tensor, ref["attn_weights"].tensor, atol=1e-6, rtol=1e-5)
