"""Dropout by its properties (masks differ across torch versions, so no printed mask)."""

import pytest
import torch

from attn_core import AttentionConfig, CausalAttention, MultiHeadAttention, Trace, embed, run_attention


def test_survivors_scaled_and_zero_fraction_near_p():
    torch.manual_seed(123)
    p = 0.5
    dropout = torch.nn.Dropout(p)
    example = torch.ones(400, 400)
    out = dropout(example)
    zero_frac = (out == 0).float().mean().item()
    assert abs(zero_frac - p) < 0.01
    survivors = out[out != 0]
    torch.testing.assert_close(survivors, torch.full_like(survivors, 1 / (1 - p)))


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_module_dropout_on_weights(p):
    x = torch.randn(1, 300, 8, generator=torch.Generator().manual_seed(0))
    torch.manual_seed(1)
    ca = CausalAttention(8, 8, 300, p)
    ca.train()
    t = Trace()
    ca(x, t)
    before = t["attn_weights"].tensor
    after = t["attn_weights_dropout"].tensor
    dropped = t["dropout_mask"].tensor
    live = before != 0  # the causal mask's zeros cannot be dropped
    assert abs(dropped[live].float().mean().item() - p) < 0.02
    kept = live & ~dropped
    torch.testing.assert_close(after[kept], before[kept] / (1 - p))
    assert (after[dropped] == 0).all()
    sums = after.sum(-1)
    assert not torch.allclose(sums, torch.ones_like(sums))  # rows no longer sum to 1 in training


def test_eval_mode_turns_dropout_off():
    x = torch.randn(2, 20, 6)
    torch.manual_seed(3)
    mha = MultiHeadAttention(6, 6, 20, 0.5, 3)
    mha.eval()
    t = Trace()
    out = mha(x, t)
    torch.testing.assert_close(t["attn_weights_dropout"].tensor, t["attn_weights"].tensor)
    assert "dropout_mask" not in t
    torch.testing.assert_close(out, mha(x))  # and twice the same


def test_same_seed_same_mask_different_seed_different_mask():
    x = embed(list(range(40)), 16, "learned", seed=5)
    cfg = AttentionConfig("MultiHeadAttention", 16, 16, 4, 64, 0.5, train_mode=True, seed=7)
    _, t1 = run_attention(cfg, x)
    _, t2 = run_attention(cfg, x)
    _, t3 = run_attention(AttentionConfig(**{**cfg.as_dict(), "seed": 8}), x)
    assert torch.equal(t1["dropout_mask"].tensor, t2["dropout_mask"].tensor)
    assert not torch.equal(t1["dropout_mask"].tensor, t3["dropout_mask"].tensor)
    assert t1["dropout_mask"].tensor.any()
