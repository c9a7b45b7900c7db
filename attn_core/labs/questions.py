"""Predict-then-reveal questions about what is on screen, answered by the very tensor on screen.

Each generator reads a :class:`Trace` (through :mod:`attn_core.tracing.views`) or a layer's weights and returns a
:class:`Question`: 3-5 distinct choices, the index of the true one, and the numbers that prove it (a row of
weights, the shapes, the rows each masking method gives). The wrong choices come from the same tensor (the
runners-up of a row, the other reshapes of the same sizes, the classic masking mistakes on the same scores),
so they are plausible. A question that the tensor cannot answer unambiguously (a tie) raises ``ValueError``
saying what to change. Questions are plain data (:meth:`Question.to_dict`): a poll store keeps them as JSON.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from attn_core.labs.lab import masking_variants
from attn_core.labs.scores import previous_token_score
from attn_core.tracing.trace import Trace
from attn_core.tracing.views import head_matrix, head_step, num_heads

MIN_CHOICES, MAX_CHOICES = 3, 5
TIE = 1e-6  # two numbers closer than this are a tie: the tensor does not single out one answer


@dataclass(frozen=True)
class Question:
    """One multiple-choice question and its true answer, read from a tensor."""

    kind: str  # "attends_most" | "view_shape" | "masking" | "previous_token_head"
    prompt: str  # plain text (never Markdown): the page escapes it
    choices: tuple[str, ...]
    answer: int  # index into choices
    explain: str  # one sentence: why the answer is right
    # The numbers that prove it: {"title": str, "labels": [str], "values": [float], "highlight": int}
    proof: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not MIN_CHOICES <= len(self.choices) <= MAX_CHOICES:
            raise ValueError(f"a question needs {MIN_CHOICES}-{MAX_CHOICES} choices; got {len(self.choices)}")
        if len(set(self.choices)) != len(self.choices):
            raise ValueError(f"the choices must be distinct; got {list(self.choices)}")
        if not 0 <= self.answer < len(self.choices):
            raise ValueError(f"answer {self.answer} is not one of the {len(self.choices)} choices")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["choices"] = list(self.choices)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> Question:
        return cls(kind=d["kind"], prompt=d["prompt"], choices=tuple(d["choices"]), answer=int(d["answer"]),
                   explain=d.get("explain", ""), proof=dict(d.get("proof") or {}))


def _piece(label: str) -> str:
    """ "3: starts" -> "starts" (a token label's piece, for prose)."""
    return label.split(": ", 1)[1] if ": " in label else label


def _weights(trace: Trace, head: int) -> np.ndarray:
    H = num_heads(trace)
    if not 0 <= head < H:
        raise ValueError(f"head {head + 1} does not exist: this module has {H} head(s); pick 1-{H}")
    w = head_matrix(trace, "weights", head)
    if w is None:
        raise ValueError("this trace records no attention weights: pick a variant that has them")
    return w


def default_query(trace: Trace, head: int = 0) -> int:
    """The query row that makes the clearest question: the latest row with 3+ visible keys and the widest gap
    between its largest and second-largest weight (the first row with a unique largest weight otherwise)."""
    w = _weights(trace, head)
    best, best_gap = None, -1.0
    for i in range(w.shape[0]):
        row = np.sort(np.nan_to_num(w[i], nan=0.0))[::-1]
        gap = float(row[0] - row[1]) if len(row) > 1 else float(row[0])
        visible = int((np.nan_to_num(w[i]) > 0).sum())
        if visible >= MIN_CHOICES and gap > TIE and gap >= best_gap:
            best, best_gap = i, gap
    if best is None:
        raise ValueError("no query row has one clear largest weight over 3 or more keys: type a longer sentence")
    return best


def attends_most(trace: Trace, labels: list[str], head: int = 0, query: int | None = None) -> Question:
    """"Which token does *query* attend to most in head h?" The answer is the row's argmax in the trace's
    weights; the wrong choices are the row's runners-up (then other tokens), listed in token order."""
    w = _weights(trace, head)
    T = w.shape[-1]
    if len(labels) != w.shape[0] or w.shape[0] != T:
        raise ValueError(f"{len(labels)} labels for a {w.shape[0]} x {T} weight matrix: pass the run's token labels")
    if T < MIN_CHOICES:
        raise ValueError(f"a question needs {MIN_CHOICES} tokens to choose from; this input has {T}: type more")
    i = default_query(trace, head) if query is None else query
    if not 0 <= i < T:
        raise ValueError(f"query {i + 1} is not a token of this {T}-token input")
    row = np.nan_to_num(w[i].astype(np.float64), nan=0.0)
    order = np.argsort(-row, kind="stable")
    if int((row > 0).sum()) < 2:
        raise ValueError(f"'{_piece(labels[i])}' sees only one token (the causal mask hides the rest): "
                         "ask about a later token")
    if row[order[0]] - row[order[1]] <= TIE:
        raise ValueError(f"'{_piece(labels[i])}' attends equally to two tokens in head {head + 1}: "
                         "ask about another token")
    picked = sorted(int(k) for k in order[:min(4, T)])
    choices = tuple(labels[k] for k in picked)
    heads = f" in head {head + 1}" if num_heads(trace) > 1 else ""
    return Question(
        kind="attends_most",
        prompt=f"Which token does '{_piece(labels[i])}' ({labels[i].split(':')[0]}) attend to most{heads}?",
        choices=choices, answer=picked.index(int(order[0])),
        explain=f"Row '{labels[i]}' of the weights{heads}: its largest weight, {row[order[0]]:.3f}, is on "
                f"'{labels[int(order[0])]}' (next: {row[order[1]]:.3f}).",
        proof={"title": f"weights{heads}, row '{labels[i]}'", "labels": list(labels),
               "values": [float(v) for v in row], "highlight": int(order[0])},
    )


def _fmt(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(n) for n in shape) + ")"


def view_shape(trace: Trace, name: str = "keys") -> Question:
    """"What is the shape of `keys` after `.view(b, num_tokens, num_heads, head_dim)`?" The answer is the recorded
    step's shape; the wrong choices are the shapes one step before and after (un-split, transposed) and a swap."""
    step = next((s for s in trace.steps if s.name == f"{name}.view"), None)
    if step is None or len(step.shape) != 4:
        raise ValueError(f"this module records no `{name}.view`: pick MultiHeadAttention (or a variant that splits "
                         "heads with .view) to ask about its shape")
    b, T, h, hd = step.shape
    right = _fmt((b, T, h, hd))
    wrong = [_fmt((b, h, T, hd)), _fmt((b, T, h * hd)), _fmt((b, T, hd, h)), _fmt((b, h, hd, T)),
             _fmt((b, T * h, hd)), _fmt((T, h, hd))]
    choices = [right] + [c for c in dict.fromkeys(wrong) if c != right][:3]
    choices.sort()  # an order that does not give the answer away
    code = step.code.splitlines()[0].strip() if step.code else f"{name} = {name}.view(b, num_tokens, num_heads, " \
                                                                   "head_dim)"
    return Question(
        kind="view_shape",
        prompt=f"What is the shape of `{name}` after `{code}`?",
        choices=tuple(choices), answer=choices.index(right),
        explain=f".view splits the last axis (d_out = {h * hd}) into num_heads x head_dim = {h} x {hd}; "
                f"the token axis stays second until .transpose(1, 2).",
        proof={"title": f"the trace's `{name}` step by step", "labels": [s.name for s in trace.steps
                                                                          if s.name.split(".")[0] == name],
               "values": [_fmt(s.shape) for s in trace.steps if s.name.split(".")[0] == name],
               "highlight": [s.name for s in trace.steps if s.name.split(".")[0] == name].index(step.name)},
    )


MASKING_CHOICES = {  # lab variant name -> the choice a student sees; the two correct methods are one choice
    "−∞ before softmax": "−∞ or renormalize (the same row)",
    "softmax, zero, renormalize": "−∞ or renormalize (the same row)",
    "mistake: zeros in the scores": "zeros in the scores (not −∞)",
    "mistake: renormalize raw scores": "renormalize raw scores (no softmax)",
    "mistake: no renormalization": "softmax, zero the future, no renormalizing",
}


def masking(trace: Trace, labels: list[str], head: int = 0, seed: int = 0) -> Question:
    """"Renormalize or −∞: which gives this row?" One method (chosen by ``seed``) is applied to the trace's own
    scores (head ``head``) and a row is shown; the choices are the methods, each computed on the same scores.
    The shown row is one that exactly one choice gives (the first rows are the same for several)."""
    scores = head_matrix(trace, "scores", head)
    keys = head_matrix(trace, "keys", head)
    if scores is None or keys is None or scores.shape[0] != scores.shape[1]:
        raise ValueError("this trace records no square attention scores: pick a variant with a causal mask")
    T = scores.shape[0]
    if T < MIN_CHOICES:
        raise ValueError(f"a masking question needs {MIN_CHOICES} or more tokens; this input has {T}")
    rows = {}  # choice -> that method's weights
    for v in masking_variants(torch.from_numpy(np.array(scores, dtype=np.float32)), keys.shape[-1]):
        if v.name in MASKING_CHOICES:
            rows.setdefault(MASKING_CHOICES[v.name], v.weights.numpy().astype(np.float64))
    choices = sorted(rows)
    rng = np.random.default_rng(seed)
    for target in [choices[k] for k in rng.permutation(len(choices))]:
        for i in [*range(T - 2, 0, -1), T - 1]:  # rows with masked keys first: there the methods differ
            shown = rows[target][i]
            matching = [c for c in choices if np.allclose(rows[c][i], shown, rtol=0, atol=1e-5, equal_nan=True)]
            if matching == [target]:
                heads = f" (head {head + 1})" if num_heads(trace) > 1 else ""
                numbers = ", ".join("nan" if np.isnan(x) else f"{x:.3f}" for x in shown)
                return Question(
                    kind="masking",
                    prompt=f"Row '{labels[i]}' of these scores{heads}, masked causally, came out as [{numbers}]. "
                           "Which masking gives this row?",
                    choices=tuple(choices), answer=choices.index(target),
                    explain="Each method computed on the same scores; only this one gives that row. Masking with −∞ "
                            "and renormalizing after softmax give the very same weights.",
                    proof={"title": f"row '{labels[i]}' by each method", "labels": list(labels),
                           "values": [float(x) for x in np.nan_to_num(shown)], "highlight": -1, "answer_row": target,
                           "rows": {c: [float(x) for x in np.nan_to_num(rows[c][i])] for c in choices}},
                )
    raise ValueError("every row is the same under two masking methods: type a longer sentence")


def previous_token_head(weights: np.ndarray, layer: int | None = None) -> Question:
    """"Which head of layer L is the previous-token head?" ``weights``: one layer's (num_heads, T, T). The answer
    is the head with the largest mean weight on the previous token (:func:`scores.previous_token_score`); the wrong
    choices are the runners-up, listed by head number."""
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 3 or w.shape[0] < MIN_CHOICES:
        raise ValueError(f"a head question needs {MIN_CHOICES} or more heads; got weights of shape {w.shape}")
    score = np.nan_to_num(previous_token_score(w), nan=-1.0)
    order = np.argsort(-score, kind="stable")
    if score[order[0]] - score[order[1]] <= TIE:
        raise ValueError("two heads attend to the previous token equally: pick another layer")
    picked = sorted(int(h) for h in order[:MAX_CHOICES - 1])
    where = f" of layer {layer + 1}" if layer is not None else ""
    return Question(
        kind="previous_token_head",
        prompt=f"Which head{where} is the previous-token head (puts most weight on the token just before)?",
        choices=tuple(f"head {h + 1}" for h in picked), answer=picked.index(int(order[0])),
        explain=f"Mean weight on the previous token: head {order[0] + 1} {score[order[0]]:.2f}, the next "
                f"best head {order[1] + 1} {score[order[1]]:.2f}.",
        proof={"title": f"mean weight on the previous token, each head{where}",
               "labels": [f"head {h + 1}" for h in range(len(score))], "values": [float(s) for s in score],
               "highlight": int(order[0])},
    )


def trace_heads(trace: Trace) -> np.ndarray | None:
    """(num_heads, T, T) weights of a one-layer trace (None if it has none), for :func:`previous_token_head`."""
    if head_step(trace, "weights") is None:
        return None
    return np.stack([head_matrix(trace, "weights", h) for h in range(num_heads(trace))])
