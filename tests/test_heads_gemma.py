"""Does a head matter, on Gemma 3 (18 layers x 4 query heads sharing one K/V head, a norm after each attention):
the built-in text is words the model has read, so it copies the repeat (random ids over its 262k vocabulary gave
no copying at all) and its top induction heads carry it; knocking heads out equals transformers' model with the same
heads zeroed at its o_proj (a tiny Gemma 3 file, its query heads sharing one K/V head); value-weighted attention
counts what reaches the residual stream, through the norm's gain. Numbers: docs/measurements.md."""

from __future__ import annotations

import pytest
import torch

from attn_core.labs.heads import head_ablation, weights_and_moved
from attn_core.labs.knockout import knockout, repeat_half, repeat_loss, repeated_words
from attn_core.messages import Problem
from attn_core.models.traced import trace_layer

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def test_the_built_in_text_is_whole_words_twice_after_the_tokenizers_own_start(gemma3, smollm2):
    for model, prefix in ((gemma3, [2]), (smollm2, [])):  # Gemma's <bos>; SmolLM2 starts a text with nothing
        idx = repeated_words(model.tokenizer, 50, seed=0)
        ids = idx[0].tolist()
        half = ids[len(prefix):len(prefix) + 50]
        assert ids[:len(prefix)] == prefix and ids[len(prefix):] == half + half and len(set(half)) == 50
        words = [model.tokenizer.token_bytes(t) for t in half]
        assert all(w[:1] == b" " and w[1:].isalpha() for w in words), words
        assert repeat_half(idx) == 50
        assert not torch.equal(idx, repeated_words(model.tokenizer, 50, seed=1))
    with pytest.raises(Problem, match="words of The Verdict"):
        repeated_words(gemma3.tokenizer, 5000)
    with pytest.raises(Problem, match="written twice"):
        repeat_half(torch.tensor([[5, 6, 7, 8]]))


def test_gemma_copies_the_repeat_and_its_top_induction_heads_carry_it(gemma3):
    idx = repeated_words(gemma3.tokenizer, 50, seed=0)
    result = knockout(gemma3, idx, 6, "induction")
    print(f"plain {result.plain:.2f}, top-6 {result.top_loss:.2f} {result.top}, random {result.random_losses}")
    assert result.plain < 1.0  # it copies: measured 0.35 nats
    assert result.top_loss >= 10 * result.plain and result.top_loss > max(result.random_losses)
    scores = [result.scores["induction"][layer, head] for layer, head in result.top]
    assert min(scores[:3]) > 0.4 and min(scores) > 0.15  # three strong ones (0.85, 0.51, 0.45), then ~0.2
    assert result.plain == pytest.approx(float(result.losses["plain"][-49:].mean()))  # <bos> is not on the repeat
    # the old text, 50 random ids over the whole vocabulary twice: many ids unused or special, nothing copied
    old = torch.randint(262_144 // 20, 262_144, (1, 50), generator=torch.Generator().manual_seed(0))
    old = torch.cat([old, old], dim=1)
    assert repeat_loss(head_ablation(gemma3, old, []), old) > 5.0


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """(ours, transformers') for one tiny Gemma 3 file: 6 layers (5 local), 2 query heads sharing 1 K/V head."""
    from attn_core.models.family_gemma3 import FAMILY as GEMMA
    from tests.gguf_fixtures import arch_model, gemma_cfg, randomize, transformers_model, write_gguf

    folder = tmp_path_factory.mktemp("gemma3_heads")
    path = write_gguf(folder / "tiny-gemma3.gguf", randomize(arch_model(gemma_cfg())), "gemma3")
    mp = pytest.MonkeyPatch()
    mp.setenv("ATTENTION_LAB_CACHE", str(folder / "cache"))
    ours = GEMMA.load_file(path)
    mp.undo()
    return ours, transformers_model(path)[0]


@pytest.mark.parametrize("how", ["zero", "mean"])
def test_knocking_out_gemma_heads_equals_transformers_with_them_edited_at_o_proj(tiny, how):
    ours, theirs = tiny
    idx = torch.tensor([ours.tokenizer.encode("the cat sat on the mat and the cat sat on the mat again")])
    heads = [(0, 1), (2, 0), (5, 0), (5, 1)]  # local layers and the global one (both its heads)
    head_dim = ours.cfg["head_dim"]

    def edit(hs):
        def pre_hook(module, args):
            x = args[0].clone().view(1, idx.shape[1], 2, head_dim)
            for h in hs:
                x[:, :, h] = 0 if how == "zero" else x[:, :, h].mean(dim=1, keepdim=True)
            return (x.view(1, idx.shape[1], 2 * head_dim),)
        return pre_hook

    layers: dict[int, list[int]] = {}
    for layer, head in heads:
        layers.setdefault(layer, []).append(head)
    handles = [theirs.model.layers[layer].self_attn.o_proj.register_forward_pre_hook(edit(hs))
               for layer, hs in layers.items()]
    try:
        with torch.no_grad():
            logits = theirs(idx).logits
    finally:
        for h in handles:
            h.remove()
    expected = torch.nn.functional.cross_entropy(logits[0, :-1], idx[0, 1:], reduction="none")
    mine = head_ablation(ours, idx, heads, how)
    torch.testing.assert_close(mine, expected, atol=1e-4, rtol=0)
    assert (mine - head_ablation(ours, idx, [])).abs().max() > 0.01  # the edit changed something


def test_value_weighted_on_gemma_counts_what_reaches_the_residual_stream(gemma3):
    idx = torch.tensor([gemma3.tokenizer.encode("The cat sat on the mat because the cat was tired")])
    T, layer = idx.shape[1], 5  # a global layer: its 4 query heads read the one K/V head
    alpha, moved = weights_and_moved(gemma3, idx, layer)
    block = gemma3.trf_blocks[layer]
    x = trace_layer(gemma3, idx, layer)["input"].tensor
    with torch.no_grad():
        v = block.att.W_value(x)[0]  # (T, head_dim): the one K/V head
        W_O = block.att.out_proj.weight.view(-1, 4, 256).permute(1, 2, 0)  # (heads, head_dim, emb_dim)
        f = v @ W_O  # (heads, T, emb_dim): f_h(x_j)
        gain = block.post_attention_norm.weight
        output = block.post_attention_norm(block.att(x, *gemma3.block_args(layer)))[0]  # what reaches the stream
    assert alpha.shape == (4, T, T) and moved.shape == (4, T)
    torch.testing.assert_close(moved, (f * gain).norm(dim=-1), rtol=1e-4, atol=1e-4)
    # the stream gets g ⊙ Σ_h Σ_j α_hij f_h(x_j), divided by one number a row: the sizes weighed are the parts' sizes
    parts = torch.einsum("hij,hje->ie", alpha, f * gain)
    cos = torch.nn.functional.cosine_similarity(parts, output, dim=-1)
    assert float(cos.min()) > 0.9999
    assert ((f.norm(dim=-1) - moved).abs() / moved).max() > 0.1  # without the gain the sizes would be wrong
