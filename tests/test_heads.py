"""Does a head matter: head ablation, activation patching, value-weighted attention and rollout on SmolLM2 against
transformers' own GGUF loading of the same file with the same heads edited (a forward pre-hook on its ``o_proj``,
allowed on the test's private peer), the induction knockout on words repeated, the book's GPTModel and a toy
family, the shared model left untouched by concurrent calls, and bad input."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
from peers import transformers_peer

from attn_core import GPTModel
from attn_core.labs.head_question import harmful_head
from attn_core.labs.heads import head_ablation, mean_attention, patch_heads, rollout, rollout_of, value_weighted
from attn_core.labs.knockout import knockout, repeated_words, top_next
from attn_core.labs.questions import Question
from attn_core.messages import Problem
from attn_core.models.family_llama import wheel_file
from attn_core.models.rope_lm import RopeLM

GGUF = wheel_file()
TEXT = "The quick brown fox jumps over the lazy dog. The quick brown fox jumps over the lazy"
HEADS = [(0, 2), (5, 0), (5, 7), (17, 3), (17, 4), (29, 8)]



pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.fixture(scope="session")
def ours(smollm2):
    return smollm2  # tests/conftest.py


@pytest.fixture(scope="session")
def peer(ours):
    """transformers' model from the same GGUF file (eager attention: it returns the weights; tests/peers.py)."""
    return transformers_peer(GGUF)[0]


@pytest.fixture(scope="module")
def idx(ours) -> torch.Tensor:
    return torch.tensor([ours.tokenizer.encode(TEXT)])


def peer_losses(peer, idx: torch.Tensor, edits: dict) -> torch.Tensor:
    """transformers' per-token losses with ``edits[layer](x)`` applied to that layer's o_proj input."""
    handles = []
    for layer, edit in edits.items():
        handles.append(peer.model.layers[layer].self_attn.o_proj.register_forward_pre_hook(
            lambda module, args, edit=edit: (edit(args[0]),)))
    try:
        with torch.no_grad():
            logits = peer(idx).logits
    finally:
        for h in handles:
            h.remove()
    return torch.nn.functional.cross_entropy(logits[0, :-1], idx[0, 1:], reduction="none")


def hf_edit(heads: list[int], how: str, source: torch.Tensor | None = None):
    def edit(x: torch.Tensor) -> torch.Tensor:  # (1, T, 9 * 64): the heads side by side
        x = x.clone().view(1, x.shape[1], 9, 64)
        for h in heads:
            if how == "zero":
                x[:, :, h] = 0
            elif how == "mean":
                x[:, :, h] = x[:, :, h].mean(dim=1, keepdim=True)
            else:
                x[:, :, h] = source.view(1, x.shape[1], 9, 64)[:, :, h]
        return x.view(1, x.shape[1], 9 * 64)
    return edit


def by_layer(heads):
    layers: dict[int, list[int]] = {}
    for layer, head in heads:
        layers.setdefault(layer, []).append(head)
    return layers


@pytest.mark.parametrize("how", ["zero", "mean"])
def test_ablation_equals_transformers_with_the_same_heads_edited(ours, peer, idx, how):
    mine = head_ablation(ours, idx, HEADS, how)
    theirs = peer_losses(peer, idx, {layer: hf_edit(hs, how) for layer, hs in by_layer(HEADS).items()})
    plain = peer_losses(peer, idx, {})
    assert mine.shape == (idx.shape[1] - 1,)
    print(f"{how}: max |loss - transformers| = {(mine - theirs).abs().max():.2e}")
    torch.testing.assert_close(mine, theirs, atol=1e-3, rtol=0)
    assert (theirs - plain).abs().max() > 0.05  # the edit changed something the comparison could miss


def test_ablating_nothing_is_the_plain_model(ours, peer, idx):
    mine = head_ablation(ours, idx, [])
    with torch.no_grad():
        logits = ours(idx)
    plain = torch.nn.functional.cross_entropy(logits[0, :-1], idx[0, 1:], reduction="none")
    torch.testing.assert_close(mine, plain, atol=1e-6, rtol=0)
    torch.testing.assert_close(mine, peer_losses(peer, idx, {}), atol=1e-3, rtol=0)


def test_patching_equals_transformers_and_patching_nothing_does_nothing(ours, peer):
    clean = torch.tensor([ours.tokenizer.encode("The capital of France is Paris. The capital of France is")])
    corrupt = torch.tensor([ours.tokenizer.encode("The capital of Italy is Rome. The capital of Italy is")])
    assert clean.shape == corrupt.shape
    target, foil = ours.tokenizer.encode(" Paris")[0], ours.tokenizer.encode(" Rome")[0]
    heads = [(17, 3), (18, 6), (20, 1)]
    patch = patch_heads(ours, clean, corrupt, heads, target, foil)
    assert patch.metric == "logit difference" and patch.clean > 0 > patch.corrupt

    kept = {}
    hooks = [peer.model.layers[layer].self_attn.o_proj.register_forward_pre_hook(
        lambda module, args, layer=layer: kept.__setitem__(layer, args[0].clone())) for layer in by_layer(heads)]
    with torch.no_grad():
        clean_logits = peer(clean).logits[0, -1]
    for h in hooks:
        h.remove()
    edits = {layer: hf_edit(hs, "patch", kept[layer]) for layer, hs in by_layer(heads).items()}
    hooks = [peer.model.layers[layer].self_attn.o_proj.register_forward_pre_hook(
        lambda module, args, edit=edit: (edit(args[0]),)) for layer, edit in edits.items()]
    with torch.no_grad():
        patched_logits = peer(corrupt).logits[0, -1]
    for h in hooks:
        h.remove()
    with torch.no_grad():
        corrupt_logits = peer(corrupt).logits[0, -1]

    def m(logits):
        return float(logits[target] - logits[foil])

    assert patch.clean == pytest.approx(m(clean_logits), abs=1e-3)
    assert patch.corrupt == pytest.approx(m(corrupt_logits), abs=1e-3)
    assert patch.patched == pytest.approx(m(patched_logits), abs=1e-3)
    nothing = patch_heads(ours, clean, corrupt, [], target)
    assert nothing.metric == "logit" and nothing.effect == 0.0


def test_value_weighted_is_alpha_times_the_norm_of_v_times_its_slice_of_W_O(ours, peer, idx):
    layer = 7
    values = {}
    hook = peer.model.layers[layer].self_attn.v_proj.register_forward_hook(
        lambda module, args, out: values.__setitem__("v", out))
    with torch.no_grad():
        out = peer(idx, output_attentions=True)
    hook.remove()
    alpha = out.attentions[layer][0]  # (9, T, T)
    T = idx.shape[1]
    v = values["v"][0].view(T, 3, 64)  # 3 K/V heads; query head h reads K/V head h // 3
    W_O = peer.model.layers[layer].self_attn.o_proj.weight  # (576, 576)
    norms = torch.stack([(v[:, h // 3] @ W_O[:, h * 64:(h + 1) * 64].T).norm(dim=-1) for h in range(9)])
    mine = value_weighted(ours, idx, layer)
    assert mine.shape == (9, T, T)
    torch.testing.assert_close(mine, alpha * norms[:, None, :], atol=1e-4, rtol=1e-3)


def test_rollout_multiplies_the_head_averaged_attention_of_transformers(ours, peer, idx):
    with torch.no_grad():
        attentions = peer(idx, output_attentions=True).attentions
    T = idx.shape[1]
    joint = torch.eye(T)
    for a in attentions:
        mixed = 0.5 * a[0].mean(0) + 0.5 * torch.eye(T)
        joint = (mixed / mixed.sum(-1, keepdim=True)) @ joint
    mine = rollout(ours, idx)
    assert mine.shape == (30, T, T)
    torch.testing.assert_close(mine[-1], joint, atol=1e-4, rtol=0)
    torch.testing.assert_close(mine.sum(-1), torch.ones(30, T))
    assert torch.all(mine.triu(1) == 0)  # causal all the way down: nothing comes from a later token


def test_top_6_induction_heads_carry_the_repeat(ours):
    idx = repeated_words(ours.tokenizer, 50, seed=0)
    result = knockout(ours, idx, 6, "induction")
    print(f"plain {result.plain:.2f}, top-6 induction {result.top_loss:.2f}, random {result.random_losses}")
    assert result.plain < 2.0  # words it copies: 1.13 nats (random ids over its vocabulary: 3.29)
    assert result.top_loss >= 5 * result.plain
    assert result.top_loss > max(result.random_losses)
    assert all(result.scores["induction"][layer, head] > 0.3 for layer, head in result.top)
    assert not set(result.top) & {h for s in result.random_sets for h in s}


def test_the_shared_model_is_unchanged_after_concurrent_calls(ours, idx):
    before = {name: p.clone() for name, p in ours.named_parameters() if name.endswith("out_proj.weight")}
    modules = [id(m) for m in ours.modules()]
    serial = [head_ablation(ours, idx, HEADS), head_ablation(ours, idx, [])]
    with ThreadPoolExecutor(4) as pool:
        runs = [pool.submit(head_ablation, ours, idx, HEADS if i % 2 == 0 else []) for i in range(4)]
        runs.append(pool.submit(value_weighted, ours, idx, 3))
        results = [r.result() for r in runs]
    for i, r in enumerate(results[:4]):
        torch.testing.assert_close(r, serial[i % 2], atol=1e-6, rtol=0)
    assert [id(m) for m in ours.modules()] == modules
    assert all(type(b.att.out_proj) is torch.nn.Linear for b in ours.trf_blocks)
    assert not any(m._forward_pre_hooks or m._forward_hooks for m in ours.modules())
    assert not ours.training and all(name in before for name, _ in before.items())
    for name, p in ours.named_parameters():
        if name in before:
            assert torch.equal(p, before[name])


def test_top_next_without_heads_is_the_models_next_token(ours, idx):
    with torch.no_grad():
        expected = torch.softmax(ours(idx)[0, -1], -1).topk(5)
    top = top_next(ours, idx, [])
    assert [i for i, _ in top] == expected.indices.tolist()
    assert top[0][0] == ours.tokenizer.encode(" dog")[0]


def _own_hook_losses(model, idx, heads, how):
    """The same ablation with hooks on a private model (not shared): the reference for the small families."""
    handles = []
    for layer, hs in by_layer(heads).items():
        att = model.trf_blocks[layer].att
        def pre(module, args, hs=hs, att=att):
            x = args[0].clone().view(1, args[0].shape[1], att.num_heads, att.head_dim)
            x[:, :, hs] = 0 if how == "zero" else x[:, :, hs].mean(dim=1, keepdim=True)
            return (x.view(args[0].shape),)
        handles.append(att.out_proj.register_forward_pre_hook(pre))
    with torch.no_grad():
        logits = model(idx)
    for h in handles:
        h.remove()
    return torch.nn.functional.cross_entropy(logits[0, :-1], idx[0, 1:], reduction="none")


@pytest.mark.parametrize("family", ["gpt", "gqa-toy"])
def test_other_families_ablate_value_weigh_and_roll_out(family):
    torch.manual_seed(0)
    if family == "gpt":
        model = GPTModel(dict(vocab_size=50, context_length=16, emb_dim=32, n_heads=4, n_layers=3, drop_rate=0.0,
                              qkv_bias=True)).eval()
    else:
        model = RopeLM(dict(vocab_size=50, context_length=16, emb_dim=32, n_heads=4, n_kv_groups=2,
                            n_layers=3, hidden_dim=48)).eval()
    idx = torch.randint(0, 50, (1, 12))
    heads = [(0, 1), (2, 0), (2, 3)]
    for how in ("zero", "mean"):
        torch.testing.assert_close(head_ablation(model, idx, heads, how), _own_hook_losses(model, idx, heads, how))
    weighted = value_weighted(model, idx, 1)
    assert weighted.shape == (4, 12, 12) and torch.all(weighted.triu(1) == 0) and weighted.sum() > 0
    torch.testing.assert_close(rollout(model, idx), rollout_of(mean_attention(model, idx)))


@pytest.mark.parametrize("call, words", [
    (lambda m, i: head_ablation(m, i, [(30, 0)]), "layers 0..29 and heads 0..8"),
    (lambda m, i: head_ablation(m, i, [(0, 9)]), "got layer 0, head 9"),
    (lambda m, i: head_ablation(m, i, [3]), "a pair (layer, head)"),
    (lambda m, i: head_ablation(m, i, [], how="half"), "how must be one of zero, mean"),
    (lambda m, i: head_ablation(m, i[:, :1], []), "at least two tokens are needed"),
    (lambda m, i: value_weighted(m, i, 30), "layers 0..29; got 30"),
    (lambda m, i: patch_heads(m, i, i[:, :-1], [], 5), "the same number of tokens"),
    (lambda m, i: patch_heads(m, i, i, [], 5), "no gap for a head to close"),
    (lambda m, i: patch_heads(m, i, i, [], 10**6), "the target token must be an id in 0..49151"),
    (lambda m, i: patch_heads(m, i, i, [], 5, -1), "the foil token must be an id in 0..49151"),
    (lambda m, i: knockout(m, i, 0), "k must be a whole number from 1 to 269"),
])
def test_bad_input_gets_a_clear_message(ours, idx, call, words):
    with pytest.raises(Problem) as e:
        call(ours, idx)
    assert words in str(e.value)


def test_the_poll_question_which_head_hurts_the_repeat_most(ours):
    idx = repeated_words(ours.tokenizer, 50, seed=0)
    q = harmful_head(ours, idx)
    assert q.kind == "harmful_head" and len(q.choices) == 4 and Question.from_dict(q.to_dict()) == q
    losses = q.proof["values"]
    assert q.answer == int(np.argmax(losses)) == q.proof["highlight"]
    layer, head = (int(n) - 1 for n in re.findall(r"\d+", str(q.choices[q.answer])))
    assert losses[q.answer] == pytest.approx(float(head_ablation(ours, idx, [(layer, head)])[50:].mean()), abs=1e-5)
    assert losses[q.answer] > 2 * float(head_ablation(ours, idx, [])[50:].mean())  # SmolLM2 starts with no <bos>
    sink = losses[2]  # the strongest first-token head: it looks hardest and moves least
    assert sink < min(losses[0], losses[1])
    assert abs(sink - float(head_ablation(ours, idx, [])[50:].mean())) < 0.2
