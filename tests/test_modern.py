"""Issue 23: grouped-query (and multi-query), sliding-window and latent attention, and what they cost."""

from __future__ import annotations

import os

import pytest
import torch

from attn_core import AttentionConfig, MultiHeadAttention, Trace, run_attention
from attn_core.attention.kv_cache import KVCache, LayerCache
from attn_core.attention.modern import GroupedQueryAttention, MultiHeadLatentAttention
from attn_core.labs.kv_cost import PRESETS, AttentionShape, cache_bytes, kv_cost_rows
from attn_core.models.gpt import GPT_CONFIG_124M, GPTModel
from attn_core.tracing.views import kv_head


def weights_of(module: torch.nn.Module) -> dict:
    """A module's parameters without its mask buffer (a window's mask is not the plain causal one)."""
    return {k: v for k, v in module.state_dict().items() if k != "mask"}


@pytest.mark.parametrize("num_heads, num_kv_groups", [(4, 2), (8, 1), (6, 3)])
def test_the_books_grouped_query_attention_gives_the_same_output(num_heads, num_kv_groups):
    try:
        from llms_from_scratch import llama3
    except ImportError:
        if os.environ.get("CI") == "true":
            raise AssertionError("the book's code (llms-from-scratch, installed with --no-deps by .ci/run) is "
                                 "missing") from None
        pytest.skip("the book's package llms-from-scratch is not installed")
    d, T = 48, 7  # head_dim 12, 6, 8: even, as RoPE needs
    torch.manual_seed(num_heads)
    theirs = llama3.GroupedQueryAttention(d, d, num_heads, num_kv_groups)
    ours = GroupedQueryAttention(d, d, 16, 0.0, num_heads, num_kv_groups).eval()
    with torch.no_grad():
        for name in ("W_query", "W_key", "W_value"):
            getattr(ours, name).weight.copy_(getattr(theirs, name).weight)
        ours.out_proj.weight.copy_(theirs.out_proj.weight)
        ours.out_proj.bias.zero_()  # the book's GQA has no bias in out_proj
    x = torch.randn(2, T, d)
    head_dim = d // num_heads
    cos, sin = torch.ones(T, head_dim), torch.zeros(T, head_dim)  # RoPE made neutral
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    with torch.no_grad():
        expected = theirs(x, mask, cos, sin)
        torch.testing.assert_close(ours(x, Trace()), expected, atol=1e-6, rtol=0)  # explicit path
        torch.testing.assert_close(ours(x), expected, atol=1e-6, rtol=0)  # SDPA with enable_gqa


def test_gqa_with_as_many_groups_as_heads_is_multi_head_attention():
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 16, 32, 0.0, num_heads=4).eval()
    gqa = GroupedQueryAttention(16, 16, 32, 0.0, num_heads=4, num_kv_groups=4).eval()
    gqa.load_state_dict(mha.state_dict())  # the same parameter names and shapes
    x = torch.randn(2, 9, 16)
    with torch.no_grad():
        torch.testing.assert_close(gqa(x, Trace()), mha(x, Trace()), atol=1e-6, rtol=0)
        torch.testing.assert_close(gqa(x), mha(x), atol=1e-6, rtol=0)


def test_a_window_at_least_as_long_as_the_text_is_causal_attention():
    torch.manual_seed(1)
    mha = MultiHeadAttention(16, 16, 32, 0.0, num_heads=4).eval()
    x = torch.randn(1, 9, 16)
    for window in (9, 12, 32):
        swa = MultiHeadAttention(16, 16, 32, 0.0, num_heads=4, window=window).eval()
        swa.load_state_dict(weights_of(mha), strict=False)
        with torch.no_grad():
            torch.testing.assert_close(swa(x, Trace()), mha(x, Trace()), atol=1e-6, rtol=0)
            torch.testing.assert_close(swa(x), mha(x), atol=1e-6, rtol=0)
    short = MultiHeadAttention(16, 16, 32, 0.0, num_heads=4, window=3).eval()
    trace = Trace()
    with torch.no_grad():
        short(x, trace)
    weights = trace["attn_weights"].tensor[0, 0]
    assert (weights[8, :6] == 0).all() and (weights[8, 6:] > 0).all()  # the last query sees tokens 7, 8, 9 only
    torch.testing.assert_close(short(x), short(x, Trace()), atol=1e-6, rtol=0)  # SDPA reads the band too


def test_latent_attention_with_an_identity_latent_is_multi_head_attention():
    torch.manual_seed(2)
    mha = MultiHeadAttention(16, 16, 32, 0.0, num_heads=4).eval()
    mla = MultiHeadLatentAttention(16, 16, 32, 0.0, num_heads=4, latent_dim=16).eval()
    with torch.no_grad():
        mla.W_query.load_state_dict(mha.W_query.state_dict())
        mla.out_proj.load_state_dict(mha.out_proj.state_dict())
        mla.W_DKV.weight.copy_(torch.eye(16))  # the latent is the input itself
        mla.W_UK.weight.copy_(mha.W_key.weight)
        mla.W_UV.weight.copy_(mha.W_value.weight)
    x = torch.randn(2, 8, 16)
    with torch.no_grad():
        torch.testing.assert_close(mla(x, Trace()), mha(x, Trace()), atol=1e-5, rtol=0)
        torch.testing.assert_close(mla(x), mha(x), atol=1e-5, rtol=0)


@pytest.mark.parametrize("make", [
    lambda: GroupedQueryAttention(16, 16, 32, 0.0, 8, 2),
    lambda: MultiHeadLatentAttention(16, 16, 32, 0.0, 4, 6),
    lambda: MultiHeadAttention(16, 16, 32, 0.0, 4, window=3),
], ids=["gqa", "mla", "swa"])
def test_every_variant_reads_the_kv_cache_on_both_paths(make):
    torch.manual_seed(3)
    module = make().eval()
    x = torch.randn(2, 9, 16)
    with torch.no_grad():
        full = module(x)
        for trace in (None, Trace()):
            cache = LayerCache()
            parts = [module(x[:, :5], trace, cache)] + [module(x[:, t:t + 1], None if trace is None else Trace(),
                                                               cache) for t in range(5, 9)]
            torch.testing.assert_close(torch.cat(parts, dim=1), full, atol=1e-5, rtol=0)


def test_a_traced_gqa_shows_the_repeat_and_which_kv_head_each_query_head_reads():
    cfg = AttentionConfig(variant="GroupedQueryAttention", d_in=16, d_out=16, num_heads=8, num_kv_groups=2,
                          context_length=32)
    _, trace = run_attention(cfg, torch.randn(1, 6, 16))
    assert trace["keys.transpose"].shape == (1, 2, 6, 2) and trace["keys.repeat"].shape == (1, 8, 6, 2)
    assert trace["keys.transpose"].contiguous is False and trace["keys.repeat"].contiguous is True  # a copy
    assert [kv_head(trace, h) for h in range(8)] == [0, 0, 0, 0, 1, 1, 1, 1]
    repeated = trace["keys.repeat"].tensor
    assert torch.equal(repeated[0, 2], repeated[0, 3]) and not torch.equal(repeated[0, 3], repeated[0, 4])


def test_cache_bytes_are_what_the_formula_says():
    cfg = dict(GPT_CONFIG_124M, n_layers=2, emb_dim=32, n_heads=8, context_length=64, vocab_size=100, drop_rate=0.0)
    torch.manual_seed(4)
    model = GPTModel(cfg).eval()
    idx = torch.randint(0, 100, (2, 10))
    for attention, shape in [
        (None, AttentionShape("MHA", n_layers=2, n_heads=8, head_dim=4)),
        (lambda: GroupedQueryAttention(32, 32, 64, 0.0, 8, 2), AttentionShape("GQA", 2, 8, 4, kv_heads=2)),
        (lambda: GroupedQueryAttention(32, 32, 64, 0.0, 8, 1), AttentionShape("MQA", 2, 8, 4, kv_heads=1)),
        (lambda: MultiHeadLatentAttention(32, 32, 64, 0.0, 8, 12), AttentionShape("MLA", 2, 8, 4, latent_dim=12)),
    ]:
        if attention is not None:
            for block in model.trf_blocks:
                block.att = attention().eval()
        cache = KVCache(2)
        with torch.no_grad():
            model(idx, cache=cache)
        assert cache.nbytes == cache_bytes(shape, tokens=10, batch=2, bytes_per_value=4), shape.name


def test_the_books_kv_cache_numbers_are_reproduced():
    llama = PRESETS["Llama-3-8B-like (32 layers, 4096-d, bf16)"]
    rows = {r.name: r for r in kv_cost_rows(llama, tokens=32_768)}
    assert round(rows["MHA"].total_bytes / 1e9, 2) == 17.18
    assert round(rows["GQA (8 K/V heads)"].total_bytes / 1e9, 2) == 4.29
    assert rows["MHA"].total_bytes / rows["GQA (8 K/V heads)"].total_bytes == 4.0
    assert round(rows["MHA + SWA 1024 (5:1)"].total_bytes / 1e9, 2) == 3.14
    assert round(rows["GQA + SWA 1024 (5:1)"].total_bytes / 1e9, 2) == 0.78


@pytest.mark.parametrize("make, message", [
    (lambda: GroupedQueryAttention(18, 18, 8, 0.0, 6, 4), r"must divide num_heads \(6\).*use 1, 2, 3 or 6 \("),
    (lambda: GroupedQueryAttention(16, 16, 8, 0.0, 4, 0), "must divide num_heads"),
    (lambda: MultiHeadAttention(16, 16, 8, 0.0, 4, window=0), "sliding window must be a whole number of at least 1"),
    (lambda: MultiHeadLatentAttention(16, 16, 8, 0.0, 4, 0), r"latent_dim must be a whole number from 1 to d_out"),
    (lambda: MultiHeadLatentAttention(16, 16, 8, 0.0, 4, 17), r"from 1 to d_out \(16\)"),
])
def test_bad_sizes_say_which_values_work(make, message):
    with pytest.raises(ValueError, match=message):
        make()
