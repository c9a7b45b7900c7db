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
            assert np.allclose(question.proof["values"], w[i].numpy())


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
