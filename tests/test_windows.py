"""Perplexity under sliding windows and attention sinks (attn_core/windows.py), on the chapter's GPTModel."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from attn_core.gpt import GPT_CONFIG_124M, GPTModel
from attn_core.windows import masked_like, token_losses, window_perplexity

CFG = GPT_CONFIG_124M | {"vocab_size": 97, "context_length": 48, "emb_dim": 32, "n_heads": 4, "n_layers": 2,
                         "drop_rate": 0.0}


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return GPTModel(CFG).eval()


@pytest.fixture(scope="module")
def idx():
    return torch.randint(0, 97, (1, 40), generator=torch.Generator().manual_seed(1))


def test_full_attention_is_the_plain_forwards_perplexity(model, idx):
    with torch.inference_mode():
        logits = model(idx)
    want = math.exp(float(F.cross_entropy(logits[0, :-1], idx[0, 1:])))
    assert window_perplexity(model, idx) == pytest.approx(want, rel=1e-5)
    assert window_perplexity(model, idx, window=40) == pytest.approx(want, rel=1e-5)  # a window >= T is full
    assert window_perplexity(model, idx, window=200, sinks=3) == pytest.approx(want, rel=1e-5)


def test_window_and_sinks_change_the_numbers_and_both_methods_agree(model, idx):
    full = token_losses(model, idx)
    window = token_losses(model, idx, window=4)
    sinks = token_losses(model, idx, window=4, sinks=2)
    torch.testing.assert_close(window[:4], full[:4])  # the first 4 queries see no further back than 4 keys anyway
    assert not torch.allclose(window[8:], full[8:])
    assert not torch.allclose(sinks[8:], window[8:])
    torch.testing.assert_close(token_losses(model, idx, window=4, sinks=0), window)
    renorm = token_losses(model, idx, window=4, sinks=2, mask_method="renormalize")
    torch.testing.assert_close(renorm, sinks, atol=1e-4, rtol=1e-4)


def test_the_shared_model_is_left_as_it_was(model, idx):
    before = {n: b for n, b in model.named_buffers()}
    att = model.trf_blocks[0].att
    view = masked_like(model, 40, window=3, sinks=1, mask_method="renormalize")
    assert view.trf_blocks[0].att.window == 3 and att.window is None and att.mask_method == "neg_inf"
    assert all(b is before[n] for n, b in model.named_buffers())
    assert view.trf_blocks[0].att.W_query.weight is att.W_query.weight  # weights shared, not copied


@pytest.mark.parametrize("kw, words", [
    (dict(window=0), "at least 1 key"), (dict(window=2.5), "at least 1 key"), (dict(window=4, sinks=-1), "sinks"),
    (dict(window=4, sinks=40), "use fewer than 40"), (dict(mask_method="zeros"), "neg_inf, renormalize")])
def test_bad_values_say_what_works(model, idx, kw, words):
    with pytest.raises(ValueError, match=words):
        window_perplexity(model, idx, **kw)
    with pytest.raises(ValueError, match="at least 2 tokens"):
        window_perplexity(model, idx[:, :1])
