"""Every bad input is a ValueError with a plain message that says what to change."""

import pytest
import torch

from attn_core import (
    AttentionConfig,
    CausalAttention,
    MultiHeadAttention,
    MultiHeadAttentionWrapper,
    embed,
    run_attention,
    simplified_attention,
)


def test_d_out_not_divisible_by_heads_says_what_works():
    with pytest.raises(ValueError, match=r"divisible by num_heads \(4\).*use num_heads 1, 2, 3 or 6,"):
        MultiHeadAttention(3, 6, 10, 0.0, 4)


def test_more_tokens_than_context_length(batch):
    for module in (CausalAttention(3, 2, 4, 0.0), MultiHeadAttention(3, 2, 4, 0.0, 2),
                   MultiHeadAttentionWrapper(3, 2, 4, 0.0, 2)):
        with pytest.raises(ValueError, match="6 tokens do not fit in context_length = 4.*at least 6"):
            module(batch)


@pytest.mark.parametrize("p", [-0.1, 1.0, 1.5])
def test_dropout_outside_unit_interval(p):
    with pytest.raises(ValueError, match="dropout must be at least 0 and below 1"):
        CausalAttention(3, 2, 6, p)


def test_unknown_mask_method_and_device_and_variant(batch):
    with pytest.raises(ValueError, match="unknown mask method 'zeros'"):
        MultiHeadAttention(3, 2, 6, 0.0, 2, mask_method="zeros")
    with pytest.raises(ValueError, match="not available here"):
        run_attention(AttentionConfig(device="cuda:7"), batch)
    with pytest.raises(ValueError, match="unknown variant"):
        run_attention(AttentionConfig(variant="SelfAttention_v3"), batch)


def test_empty_input():
    with pytest.raises(ValueError, match="no tokens"):
        CausalAttention(3, 2, 6, 0.0)(torch.zeros(1, 0, 3))
    with pytest.raises(ValueError, match="no tokens"):
        embed([], 3)
    with pytest.raises(ValueError, match="at least one token"):
        simplified_attention(torch.zeros(0, 3))


def test_wrong_input_width(batch):
    with pytest.raises(ValueError, match=r"d_in=5"):
        MultiHeadAttention(5, 2, 6, 0.0, 2)(batch)


@pytest.mark.parametrize("bad", [0, -3, 2.5])
def test_nonpositive_sizes(bad):
    with pytest.raises(ValueError, match="whole number of at least 1"):
        CausalAttention(3, bad, 6, 0.0)


def test_too_many_tokens_for_positions():
    with pytest.raises(ValueError, match="1024 positions"):
        embed([1] * 1025, 4, "learned")
