"""Issue 22: generation one token at a time, with the KV cache (the book's chapter-4 bonus design)."""

from __future__ import annotations

import os

import pytest
import torch

from attn_core import Trace, causal_mask
from attn_core.attention.kv_cache import KVCache
from attn_core.models.gpt import GPT_CONFIG_124M, MAX_NEW_TOKENS, GPTModel, generate, generate_text_simple, next_token

CFG = dict(GPT_CONFIG_124M, n_layers=3, emb_dim=48, n_heads=4, context_length=64, vocab_size=300, drop_rate=0.0)


@pytest.fixture(scope="module")
def model() -> GPTModel:
    torch.manual_seed(123)
    return GPTModel(CFG).eval()


def test_cached_generation_gives_the_same_tokens_and_logits(model):
    torch.manual_seed(0)
    idx = torch.randint(0, CFG["vocab_size"], (2, 7))
    cached, plain = generate(model, idx, 40, use_cache=True), generate(model, idx, 40, use_cache=False)
    assert cached.shape == (2, 47) and torch.equal(cached, plain)
    # every step's logits: the new token alone through the cache == the last row of the whole text
    cache = KVCache(CFG["n_layers"])
    with torch.no_grad():
        model(cached[:, :7], cache=cache)
        for t in range(7, 47):
            step = model(cached[:, t:t + 1], cache=cache)[:, -1]
            full = model(cached[:, :t + 1])[:, -1]
            torch.testing.assert_close(step, full, atol=1e-5, rtol=0)


def test_the_efficient_path_reads_the_cache_like_the_explicit_one(model):
    idx = torch.randint(0, CFG["vocab_size"], (1, 9))
    explicit, fast = KVCache(3), KVCache(3)
    with torch.no_grad():
        model(idx[:, :5], cache=fast)
        model(idx[:, :5], cache=explicit, trace=Trace())  # a trace takes the explicit path
        a = model(idx[:, 5:], cache=fast)
        b = model(idx[:, 5:], cache=explicit, trace=Trace())
    torch.testing.assert_close(a, b, atol=1e-5, rtol=0)


def test_the_books_generate_text_simple_gives_the_same_ids(model):
    try:
        from llms_from_scratch import ch04
    except ImportError:
        if os.environ.get("CI") == "true":
            raise AssertionError("the book's code (llms-from-scratch, installed with --no-deps by .ci/run) is "
                                 "missing") from None
        pytest.skip("the book's package llms-from-scratch is not installed (pip install --no-deps "
                    "llms-from-scratch==1.0.19)")
    torch.manual_seed(1)
    theirs = ch04.GPTModel(CFG).eval()
    theirs.load_state_dict(model.state_dict())  # every key matches
    idx = torch.randint(0, CFG["vocab_size"], (2, 5))
    expected = ch04.generate_text_simple(theirs, idx, 30, CFG["context_length"])
    assert torch.equal(generate(model, idx, 30, use_cache=True), expected)
    assert torch.equal(generate_text_simple(model, idx, 30, CFG["context_length"]), expected)


def test_beyond_the_context_the_oldest_tokens_are_dropped_as_the_book_does(model):
    idx = torch.randint(0, CFG["vocab_size"], (1, 10))
    cached = generate(model, idx, 30, use_cache=True, context_size=16)
    assert torch.equal(cached, generate_text_simple(model, idx, 30, 16))  # idx[:, -context_size:]
    assert torch.equal(cached, generate(model, idx, 30, use_cache=False, context_size=16))


def test_cache_shapes_grow_by_one_and_bytes_are_the_tensors(model):
    cache = KVCache(CFG["n_layers"])
    idx = torch.randint(0, CFG["vocab_size"], (2, 4))
    head_dim = CFG["emb_dim"] // CFG["n_heads"]
    with torch.no_grad():
        model(idx, cache=cache)
        for k in range(1, 4):
            model(torch.randint(0, CFG["vocab_size"], (2, 1)), cache=cache)
            assert cache.shapes() == [(2, CFG["n_heads"], 4 + k, head_dim)] * CFG["n_layers"]
            real = sum(layer.keys.nbytes + layer.values.nbytes for layer in cache.layers)
            assert cache.nbytes == real == 2 * (4 + k) * 2 * 3 * CFG["n_heads"] * head_dim * 4


def test_a_cached_step_traces_the_new_query_row_the_cached_keys_and_the_mask_slice(model):
    cache = KVCache(CFG["n_layers"])
    idx = torch.randint(0, CFG["vocab_size"], (1, 6))
    with torch.no_grad():
        model(idx[:, :3], cache=cache)
        trace = Trace()
        model(idx[:, 3:5], cache=cache, trace=trace)  # step k: two new queries at positions 3, 4 over keys 0..4
        assert torch.equal(trace["trf_blocks[0].att.mask_bool"].tensor, causal_mask(2, 5))
        step = Trace()
        model(idx[:, 5:6], cache=cache, trace=step)  # one new token: its row sees every key
    for layer in range(CFG["n_layers"]):
        scope = f"trf_blocks[{layer}].att."
        assert step[scope + "queries.transpose"].shape == (1, CFG["n_heads"], 1, 12)
        assert step[scope + "keys.cached"].shape == (1, CFG["n_heads"], 6, 12)
        assert step[scope + "attn_weights"].shape == (1, CFG["n_heads"], 1, 6)
        assert step[scope + "mask_bool"].shape == (1, 6) and not step[scope + "mask_bool"].tensor.any()
    first = Trace()
    with torch.no_grad():
        model(idx[:, :1], cache=KVCache(3), trace=first)  # step 1: one query, one key
    assert torch.equal(first["trf_blocks[0].att.mask_bool"].tensor, causal_mask(1))


def test_sampling_is_seeded_and_top_k_one_is_greedy(model):
    idx = torch.randint(0, CFG["vocab_size"], (1, 4))
    greedy = generate(model, idx, 10)
    assert torch.equal(generate(model, idx, 10, temperature=1.5, top_k=1), greedy)
    runs = [generate(model, idx, 10, temperature=2.0, generator=torch.Generator().manual_seed(7)) for _ in range(2)]
    assert torch.equal(runs[0], runs[1])
    logits = torch.tensor([[0.0, 5.0, 1.0, 4.0]])
    for seed in range(20):
        pick = next_token(logits, temperature=1.0, top_k=2, generator=torch.Generator().manual_seed(seed))
        assert int(pick) in (1, 3)  # only the two largest logits can be drawn


@pytest.mark.parametrize("kwargs, message", [
    (dict(idx=torch.zeros(1, 0, dtype=torch.long)), "prompt is empty"),
    (dict(max_new_tokens=0), "max_new_tokens must be a whole number from 1"),
    (dict(max_new_tokens=MAX_NEW_TOKENS + 1), f"from 1 to {MAX_NEW_TOKENS}"),
    (dict(temperature=-0.5), "temperature must be 0"),
    (dict(top_k=0), "top_k must be a whole number from 1"),
    (dict(context_size=10_000), "context_size must be from 1"),
])
def test_bad_generation_settings_say_what_to_change(model, kwargs, message):
    args = dict(idx=torch.tensor([[1, 2, 3]]), max_new_tokens=5) | kwargs
    with pytest.raises(ValueError, match=message):
        generate(model, args.pop("idx"), args.pop("max_new_tokens"), **args)


def test_a_cache_longer_than_the_context_is_refused(model):
    cache = KVCache(CFG["n_layers"])
    with torch.no_grad():
        model(torch.zeros(1, CFG["context_length"], dtype=torch.long), cache=cache)
        with pytest.raises(ValueError, match="do not fit in context_length"):
            model(torch.zeros(1, 1, dtype=torch.long), cache=cache)


def test_a_step_made_at_one_layer_shown_at_another_is_that_layers_step(model):
    """show_layer traces a step again at another layer (the page's layer box changed): the same row and full
    matrix as a step made at that layer, over views of the cache that leave it unchanged."""
    from attn_core.models.decoding import decode_step, prefill, prefix, show_layer

    ids = [5, 17, 42, 7]
    made = {}
    for layer in (0, 2):
        cache = KVCache(CFG["n_layers"])
        logits = prefill(model, ids, cache)
        made[layer] = decode_step(model, ids, cache, logits, layer=layer)[0], cache
    step, cache = made[0]
    before = [layer.keys.clone() for layer in cache.layers]
    again = show_layer(step, model, ids + [step.token_id], cache, 2)
    assert again.layer == 2 and again.token_id == made[2][0].token_id
    torch.testing.assert_close(torch.from_numpy(again.row), torch.from_numpy(made[2][0].row))
    torch.testing.assert_close(torch.from_numpy(again.full_weights), torch.from_numpy(made[2][0].full_weights))
    assert all(torch.equal(a, layer.keys) for a, layer in zip(before, cache.layers))  # the views grew, not the cache
    assert prefix(cache, 3).shapes() == [(1, CFG["n_heads"], 3, 12)] * CFG["n_layers"]
