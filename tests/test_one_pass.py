"""A new sentence on the Model view costs one pass of the model (issue 51): the grid, the next-token table, the
per-token loss with every head, the opened head's layer, its value-weighted view and rollout all read that pass;
only knocking heads out runs the model again, once. Passes are counted as calls of the model's ``embed`` (every
forward, walk, traced layer run and edited run starts there), and what the page shows is checked against attn_core's
own one-off computations."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from apptest_utils import chart_with, messages, open_page, table_text
from attn_core.labs.heads import head_ablation, rollout, token_losses, weights_and_moved
from attn_core.labs.knockout import top_next
from attn_core.models.traced import walk_layers, walk_many

SMOL = "SmolLM2-135M-Instruct"
pytestmark = pytest.mark.usefixtures("fresh_caches")  # tests/conftest.py


@pytest.fixture
def passes(smollm2, monkeypatch) -> list[int]:
    """The number of tokens of every pass of SmolLM2's class (the app's shared model included) from now on."""
    cls = type(smollm2)
    embed = cls.embed

    def counted(self, in_idx, *args, **kwargs):
        seen.append(int(in_idx.shape[1]))
        return embed(self, in_idx, *args, **kwargs)

    seen: list[int] = []
    monkeypatch.setattr(cls, "embed", counted)
    return seen


def no_errors(at) -> None:
    assert not messages(at)["exception"] and not messages(at)["error"], messages(at)


def ids_of(smol, text: str) -> torch.Tensor:
    return torch.tensor([smol.tokenizer.encode(text)])


@pytest.mark.parametrize("weights", [SMOL, "random"])  # SmolLM2 chosen, or shown beside the chapter's random weights
def test_a_new_sentence_costs_one_pass_and_no_knock_out_costs_none(smollm2, passes, weights):
    text = f"One pass reads this sentence about the cat and the {weights} mat"
    at = open_page(sentence=text, model=weights, section="Model view")
    no_errors(at)
    assert len(passes) == 1, passes  # the grid, the next-token table and the loss with every head
    at.run()
    assert len(passes) == 1, passes  # a rerun reads the kept pass
    rows = chart_with(at, "loss of this token (nats)")
    idx = ids_of(smollm2, text)
    with torch.no_grad():
        plain = token_losses(smollm2(idx), idx)  # the model's own forward, all logits at once
    np.testing.assert_allclose([r["loss"] for r in rows], plain.numpy(), atol=1e-4)


def test_knocking_heads_out_costs_one_pass_and_the_other_parts_none(smollm2, passes):
    text = "The cat sat on the mat because the cat was tired of counting passes"
    at = open_page(sentence=text, model=SMOL, section="Model view", layer="3")
    no_errors(at)
    assert len(passes) == 1, passes
    heads = [(0, 1), (4, 3), (11, 8)]
    at.multiselect(key="heads_out").set_value(heads).run()
    no_errors(at)
    assert len(passes) == 2, passes  # losses and next tokens from one edited pass, not one each
    at.multiselect(key="heads_out").set_value([]).run()
    assert len(passes) == 2, passes
    at.multiselect(key="heads_out").set_value(heads).run()  # kept like any run
    assert len(passes) == 2, passes
    rows = chart_with(at, "loss of this token (nats)")
    after = [r["loss"] for r in rows if r["setting"] == "without 3 heads"]
    shown = table_text(at.table[-1])["without 3 heads"]
    at.radio(key="heads_part").set_value("value").run()
    no_errors(at)
    assert at.selectbox(key="heads_vlayer").value == 2 and at.selectbox(key="heads_vhead").value == 0
    at.radio(key="heads_part").set_value("rollout").run()
    no_errors(at)
    at.radio(key="heads_part").set_value("knock").run()
    no_errors(at)
    assert len(passes) == 2, passes  # the layer's α·‖f(x)‖ and rollout read the kept pass
    idx = ids_of(smollm2, text)
    np.testing.assert_allclose(after, head_ablation(smollm2, idx, heads).numpy(), atol=1e-4)
    assert [f"({p:.1%})" for _i, p in top_next(smollm2, idx, heads)] == [c[c.rindex("("):] for c in shown]
    at.radio(key="heads_part").set_value("value").run()
    reading = next(m.value for m in at.markdown if "of the attention of token" in m.value)
    alpha, moved = weights_and_moved(smollm2, idx, 2)
    row = alpha[0, -1]  # the opened head: 1 of layer 3
    j = int(row.argmax())
    assert reading.startswith(f"Token {j + 1} (") and f"takes {float(row[j]):.0%} of the attention" in reading
    at.radio(key="heads_part").set_value("rollout").run()
    rolled = [r["share"] for r in chart_with(at, "rollout through all 30 layers")
              if r["view"] == "rollout through all 30 layers"]
    np.testing.assert_allclose(rolled, rollout(smollm2, idx)[-1, -1].numpy(), atol=1e-4)


def test_the_walk_keeps_what_gives_every_loss(smollm2):
    from attn_core.labs.heads import edited_logits, knock_out, knocked, losses_of

    idx = ids_of(smollm2, "A walk keeps the last hidden states so the losses need no second pass")
    walk = walk_layers(smollm2, idx)
    assert walk.final.shape == (1, idx.shape[1], smollm2.cfg["emb_dim"])
    with torch.no_grad():
        plain = token_losses(smollm2(idx), idx)  # the model's own forward, all logits at once
    torch.testing.assert_close(losses_of(smollm2, walk.final, idx), plain, atol=1e-5, rtol=0)
    losses, top = knocked(smollm2, idx, [(3, 1), (7, 4)], "mean")
    whole = token_losses(edited_logits(smollm2, idx, {3: knock_out([1], "mean"), 7: knock_out([4], "mean")}), idx)
    torch.testing.assert_close(losses, whole, atol=1e-5, rtol=0)
    assert [i for i, _p in top] == [i for i, _p in top_next(smollm2, idx, [(3, 1), (7, 4)], "mean")]


def test_a_batched_pass_reads_out_each_sentences_losses_and_last_logits(smollm2):
    texts = ["One", "The cat sat on the mat", "A longer sentence, so that the others are padded behind it: " * 6]
    seqs = [smollm2.tokenizer.encode(t) for t in texts]
    assert len(seqs[0]) == 1 and sum(map(len, seqs)) > 64  # one token (no loss); rows over two read-out chunks
    for walk, ids in zip(walk_many(smollm2, seqs, losses=True), seqs):
        idx = torch.tensor([ids])
        with torch.no_grad():
            logits = smollm2(idx)  # the model's own forward, all logits at once
        assert walk.losses.shape == (len(ids) - 1,)
        torch.testing.assert_close(walk.losses, token_losses(logits, idx), atol=1e-4, rtol=0)
        torch.testing.assert_close(walk.last_logits, logits[0, -1], atol=1e-3, rtol=1e-4)
    assert walk_many(smollm2, seqs)[1].losses is None  # not asked: not read out


def test_a_batch_split_over_threads_gives_each_sentence_its_own_walk(smollm2):
    """``workers=2``: the sentences dealt out to two padded passes on two threads; every walk, loss and layer's
    weights handed over are the ones the single padded pass gives, in the sessions' order."""
    texts = ["A short one", "The cat sat on the mat and looked at the door", "Two words", "One more sentence here"]
    seqs = [smollm2.tokenizer.encode(t) for t in texts]
    seen: list[dict] = [{}, {}]
    hand = [[lambda i, w, k=k, run=run: seen[run].setdefault((k, i), w.clone()) for k in range(4)] for run in range(2)]
    one = walk_many(smollm2, seqs, hand[0], losses=True)
    two = walk_many(smollm2, seqs, hand[1], losses=True, workers=2)
    for a, b, ids in zip(one, two, seqs):
        assert b.final.shape == (1, len(ids), smollm2.cfg["emb_dim"])
        torch.testing.assert_close(b.final, a.final, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(b.losses, a.losses, atol=1e-5, rtol=1e-5)  # losses ~7: a few ulps of padding
        torch.testing.assert_close(b.last_logits, a.last_logits, atol=1e-4, rtol=1e-5)
    assert seen[0].keys() == seen[1].keys() and len(seen[0]) == 4 * 30
    for key, w in seen[0].items():
        assert w.shape == (9, len(seqs[key[0]]), len(seqs[key[0]]))
        torch.testing.assert_close(seen[1][key], w, atol=1e-5, rtol=1e-5)


def test_sessions_waiting_for_the_model_share_one_pass_and_each_gets_its_own(smollm2, passes):
    """Eight sessions ask for eight sentences at once: fewer passes than sentences, and every session's walk and
    model view equal the one it gets alone (to float rounding), never another session's."""
    from concurrent.futures import ThreadPoolExecutor

    from dashboard.state import models

    texts = [f"Session {k} reads its own sentence with {k + 2} small words " + "more " * k for k in range(8)]
    seqs = [tuple(t.id for t in models.tokens_of(SMOL, text)) for text in texts]
    smol = models.handle(SMOL)
    with ThreadPoolExecutor(8) as pool:
        together = list(pool.map(lambda ids: (models.walk(smol, ids), models.model_view(smol, ids)), seqs))
    assert len(passes) < len(seqs), passes
    assert sorted(passes, reverse=True)[0] == max(len(s) for s in seqs)  # padded to the longest of a batch
    models.clear_caches()
    for ids, (walk, view) in zip(seqs, together):
        alone = walk_layers(smollm2, torch.tensor([ids]))
        assert view.ids == ids and view.thumbs.shape[:2] == (30, 9)
        assert walk.final.shape == alone.final.shape
        torch.testing.assert_close(walk.last_logits, alone.last_logits, atol=1e-3, rtol=1e-4)
        with torch.no_grad():
            own = token_losses(smollm2(torch.tensor([ids])), torch.tensor([ids]))
        torch.testing.assert_close(walk.losses, own, atol=1e-4, rtol=0)
        for a, b in zip(walk.inputs, alone.inputs):
            torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)
        single = models.model_view(smol, ids)
        np.testing.assert_allclose(view.thumbs, single.thumbs, atol=1e-5)
        for name, scores in view.scores.items():
            np.testing.assert_allclose(scores, single.scores[name], atol=1e-5)
