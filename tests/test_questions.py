"""Poll questions: the true answer is the one the traced tensor gives, for several seeds and variants."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from attn_core.attention.pipeline import run_attention
from attn_core.attention.variants import AttentionConfig
from attn_core.labs import questions as q
from attn_core.text.embeddings import embed
from attn_core.text.tokens import tokenize

TEXTS = ["Your journey starts with one step", "the cat sat on the mat and the dog sat too",
         "Attention is all you need, said the paper"]


def traced(seed: int, variant: str = "MultiHeadAttention", text: str = TEXTS[0], heads: int = 4,
           method: str = "neg_inf"):
    toks = tokenize(text)
    cfg = AttentionConfig(variant=variant, d_in=8, d_out=8, num_heads=heads, seed=seed, mask_method=method)
    _, trace = run_attention(cfg, embed([t.id for t in toks], 8, seed=seed))
    return trace, [t.label for t in toks]


def check_choices(question: q.Question) -> None:
    assert q.MIN_CHOICES <= len(question.choices) <= q.MAX_CHOICES
    assert len(set(question.choices)) == len(question.choices)
    assert q.Question.from_dict(json.loads(json.dumps(question.to_dict()))) == question  # a poll store keeps JSON


@pytest.mark.parametrize("seed", [0, 1, 7, 123, 2024])
@pytest.mark.parametrize("variant", ["MultiHeadAttention", "MultiHeadAttentionWrapper", "CausalAttention"])
def test_attends_most_is_the_rows_argmax(seed, variant):
    trace, labels = traced(seed, variant, TEXTS[seed % len(TEXTS)])
    weights = trace.of_kind("weights")
    for head in range(len(weights) if len(weights) > 1 else (weights[0].tensor.shape[1]
                                                               if weights[0].tensor.ndim == 4 else 1)):
        w = (weights[head].tensor[0] if len(weights) > 1 else
             weights[0].tensor[0, head] if weights[0].tensor.ndim == 4 else weights[0].tensor[0])
        for query in (None, len(labels) - 1):
            question = q.attends_most(trace, labels, head, query)
            check_choices(question)
            question = question.in_words(str)
            i = q.default_query(trace, head) if query is None else query
            assert question.choices[question.answer] == labels[int(torch.argmax(w[i]))]
            assert f"'{labels[i].split(': ')[1]}'" in question.prompt
            # the wrong choices are the row's runners-up: each weighs no more than the answer
            for c in question.choices:
                assert float(w[i, labels.index(c)]) <= float(w[i].max())
            # the proof: the row's weights the question is about (its visible keys, the choices among them)
            kept = [labels.index(c) for c in question.proof["labels"]]
            assert kept == sorted(kept) and set(question.choices) <= set(question.proof["labels"])
            assert np.allclose(question.proof["values"], w[i].numpy()[kept], atol=1e-6)
            assert {k for k in range(len(labels)) if w[i, k] > 0} <= set(kept)  # short rows: every visible key
            decimals = question.proof["decimals"]
            best, runner_up = np.sort(w[i].numpy())[::-1][:2]
            assert q.printed(best, decimals) != q.printed(runner_up, decimals)


def test_attends_most_rejects_ties_and_bad_rows():
    trace, labels = traced(0)
    with pytest.raises(ValueError, match="sees only one token"):
        q.attends_most(trace, labels, 0, query=0)  # the first row sees itself only: no question
    uniform = trace.of_kind("weights")[0].tensor  # a tie: two keys with the same largest weight
    uniform[0, 0, 3, :4] = 0.25
    with pytest.raises(ValueError, match="attends equally"):
        q.attends_most(trace, labels, 0, query=3)
    with pytest.raises(ValueError, match="head 9 does not exist"):
        q.attends_most(trace, labels, 8)
    with pytest.raises(ValueError, match="labels"):
        q.attends_most(trace, labels[:-1], 0)


@pytest.mark.parametrize("seed", [0, 3, 11])
@pytest.mark.parametrize("heads", [2, 4, 8])
def test_view_shape_is_the_recorded_shape(seed, heads):
    trace, _ = traced(seed, heads=heads, text=TEXTS[seed % len(TEXTS)])
    question = q.view_shape(trace, "keys")
    check_choices(question)
    question = question.in_words(str)
    step = next(s for s in trace.steps if s.name == "keys.view")
    assert question.choices[question.answer] == str(tuple(step.tensor.shape))
    assert ".view(" in question.prompt


def test_view_shape_needs_a_view():
    trace, _ = traced(0, "CausalAttention")
    with pytest.raises(ValueError, match="MultiHeadAttention"):
        q.view_shape(trace)


@pytest.mark.parametrize("seed", [0, 1, 2, 5, 9])
@pytest.mark.parametrize("method", ["neg_inf", "renormalize"])
def test_masking_answer_is_the_method_that_gives_the_row(seed, method):
    trace, labels = traced(seed, text=TEXTS[seed % len(TEXTS)], method=method)
    question = q.masking(trace, labels, head=seed % 4, seed=seed)
    check_choices(question)
    question = question.in_words(str)
    rows = question.proof["rows"]
    shown = np.array(question.proof["values"])
    assert [c for c in question.choices if np.allclose(rows[c], shown, atol=1e-5)] == \
        [question.choices[question.answer]]
    # the correct methods' row is the trace's own weights row (whichever method the module used)
    i = labels.index(question.prompt.split("'")[1])
    own = trace.of_kind("weights")[0].tensor[0, seed % 4, i].numpy()
    assert np.allclose(rows["−∞ or renormalize (the same row)"], own, atol=1e-6)


def test_previous_token_head_is_the_highest_mean_on_the_diagonal_below():
    rng = np.random.default_rng(0)
    for seed in range(5):
        H, T = 6, 9
        w = rng.random((H, T, T)) * np.tril(np.ones((T, T)))
        w /= w.sum(-1, keepdims=True)
        question = q.previous_token_head(w, layer=seed)
        check_choices(question)
        question = question.in_words(str)
        manual = [np.mean([w[h, i, i - 1] for i in range(1, T)]) for h in range(H)]
        assert question.choices[question.answer] == f"head {int(np.argmax(manual)) + 1}"
        assert f"layer {seed + 1}" in question.prompt


def test_previous_token_head_of_a_trace_and_a_planted_head():
    trace, labels = traced(4, heads=4)
    w = q.trace_heads(trace)
    assert w.shape == (4, len(labels), len(labels))
    planted = w.copy()
    planted[2] = np.eye(len(labels), k=-1)
    planted[2, 0, 0] = 1.0
    assert q.previous_token_head(planted).answer == q.previous_token_head(planted).in_words(str).choices.index("head 3")
    with pytest.raises(ValueError, match="3 or more heads"):
        q.previous_token_head(w[:2])


def test_a_near_tie_at_two_decimals_says_the_decimals_that_tell_it():
    """0.341 vs 0.340 both print as 0.34 in a heatmap cell: the question asks for 3 decimals and proves it there,
    and the teacher's menu asks about a row the screen settles instead."""
    trace, labels = traced(0)
    weights = trace.of_kind("weights")[0].tensor
    weights[0, 0, 3, :] = torch.tensor([0.341, 0.340, 0.200, 0.119, 0.0, 0.0])
    question = q.attends_most(trace, labels, 0, query=3).in_words(str)
    assert question.proof["decimals"] == 3
    assert "read them to 3 decimals" in question.prompt
    assert "0.341" in question.explain and "0.340" in question.explain
    assert question.choices[question.answer] == labels[0]
    assert q.provable_query(trace, 0, 3) != 3  # the clicked near tie: the menu asks about another row
    clear = q.provable_query(trace, 0, 3)
    assert q.attends_most(trace, labels, 0, clear).proof["decimals"] == q.SHOWN_DECIMALS
    weights[0, 0, 3, :] = torch.tensor([0.34001, 0.34, 0.200, 0.11999, 0.0, 0.0])  # beyond 4 decimals: no question
    with pytest.raises(ValueError, match="attends equally to two tokens in head 1, even to 4 decimals"):
        q.attends_most(trace, labels, 0, query=3)


def test_the_default_row_wins_by_a_margin_the_heatmap_prints():
    """The widest gap is not enough: 0.344 vs 0.338 (gap 0.006) print as 0.34 and 0.34; 0.3451 vs 0.3399
    (gap 0.0052) print as 0.35 and 0.34."""
    trace, labels = traced(0)
    weights = trace.of_kind("weights")[0].tensor
    rows = {2: [0.334, 0.333, 0.333], 3: [0.344, 0.338, 0.318, 0.0], 4: [0.3451, 0.3399, 0.3150, 0.0, 0.0],
            5: [0.2002, 0.2, 0.2, 0.2, 0.1998, 0.0]}
    for i, row in rows.items():
        weights[0, 0, i, :] = torch.tensor(row + [0.0] * (len(labels) - len(row)))
    assert q.default_query(trace, 0) == 4
    question = q.attends_most(trace, labels, 0)
    assert question.proof["decimals"] == 2 and question.in_words(str).prompt.endswith("in head 1?")
    weights[0, 0, 4, :2] = torch.tensor([0.3449, 0.3399])  # now no row wins at 2 decimals: the fewest that tell
    assert q.default_query(trace, 0) in (3, 4) and q.attends_most(trace, labels, 0).proof["decimals"] == 3
    for i in rows:
        weights[0, 0, i, :] = 0.25
    with pytest.raises(ValueError, match="No row of this picture has one clear largest weight"):
        q.default_query(trace, 0)


def test_the_default_row_is_the_row_by_row_rules_choice():
    """default_query sorts every row at once and asks for decimals only from the widest gap down; its row is the
    one the rule picks going row by row: among rows of 3+ visible keys whose two largest print apart, the fewest
    decimals, then the widest gap, then the latest row (random weights, rounded so that ties and near ties occur)."""
    def row_by_row(w: np.ndarray) -> int | None:
        best, best_key = None, None
        for i in range(w.shape[0]):
            visible, decimals, gap = q._margin(w[i])
            if visible >= q.MIN_CHOICES and decimals is not None and gap > q.TIE:
                if best_key is None or (-decimals, gap) >= best_key:
                    best, best_key = i, (-decimals, gap)
        return best

    trace, _labels = traced(0)
    weights = trace.of_kind("weights")[0].tensor
    rng = np.random.default_rng(7)
    T = weights.shape[-1]
    for trial in range(300):
        w = np.round(rng.dirichlet(np.full(T, 0.3 + trial % 3), size=T), 2 + trial % 3) * np.tril(np.ones((T, T)))
        w[T - 1] = np.where(np.arange(T) <= T // 2, w[T // 2], 0.0) if trial % 2 else w[T - 1]  # two equal rows
        weights[0, 0] = torch.tensor(w, dtype=weights.dtype)
        want = row_by_row(q._weights(trace, 0))
        if want is None:
            with pytest.raises(ValueError):
                q.default_query(trace, 0)
        else:
            assert q.default_query(trace, 0) == want, trial


def test_previous_token_head_proves_a_close_call_at_three_decimals():
    T = 5
    w = np.tile(np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None], (4, 1, 1))
    for h, mean in ((1, 0.341), (2, 0.340)):
        for i in range(1, T):
            w[h, i] = 0.0
            w[h, i, i - 1] = mean
            w[h, i, i] = 1 - mean
    question = q.previous_token_head(w).in_words(str)
    assert question.choices[question.answer] == "head 2" and question.proof["decimals"] == 3
    assert "head 2 0.341" in question.explain and "head 3 0.340" in question.explain
    w[2, 1:, :] = w[1, 1:, :] - 1e-6 * np.eye(T, k=-1)[1:]
    with pytest.raises(ValueError, match="equally"):
        q.previous_token_head(w)


@pytest.mark.parametrize("seed", range(6))
def test_a_masking_row_differs_from_every_other_method_as_printed(seed):
    """A method that leaks ~0.0001 onto the future keys prints like the correct one at 3 decimals: a row the
    student cannot tell apart is never the question."""
    trace, labels = traced(seed % 3, text=TEXTS[0])
    scores = trace.of_kind("scores")[0].tensor
    T, d_k = len(labels), trace.of_kind("keys")[0].tensor.shape[-1]
    past = torch.arange(T, dtype=torch.float32) * 0.3 * d_k**0.5
    scores[0, 0] = torch.where(torch.ones(T, T).tril().bool(), past, past.max() - 6.0 * d_k**0.5)
    question = q.masking(trace, labels, head=0, seed=seed)
    check_choices(question)
    question = question.in_words(str)
    assert question.proof["decimals"] == 3
    printed = {c: [q.printed(x, 3) for x in row] for c, row in question.proof["rows"].items()}
    right = printed[question.choices[question.answer]]
    assert [c for c in question.choices if printed[c] == right] == [question.choices[question.answer]]
