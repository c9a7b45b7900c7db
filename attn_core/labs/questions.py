"""Predict-then-reveal questions about what is on screen, answered by the very tensor on screen.

Each generator reads a :class:`Trace` (through :mod:`attn_core.tracing.views`) or a layer's weights and returns a
:class:`Question`: 3-5 distinct choices, the index of the true one, and the numbers that prove it (a row of
weights, the shapes, the rows each masking method gives). The wrong choices come from the same tensor (the
runners-up of a row, the other reshapes of the same sizes, the classic masking mistakes on the same scores),
so they are plausible. The answer must be provable on screen: it wins by a margin that shows at the precision the
heatmaps print (:data:`SHOWN_DECIMALS`), or the question says how many decimals tell it apart; a question that
the tensor cannot answer unambiguously (a tie, even to :data:`MAX_DECIMALS`) raises ``Problem`` saying what to
change. Questions are plain data (:meth:`Question.to_dict`): a poll store keeps them as JSON, their
sentences as :class:`~attn_core.messages.Msg` (message id and values), so each reader sees them in their own
language (:meth:`Question.in_words`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from decimal import ROUND_HALF_UP, Decimal

import numpy as np
import torch

from attn_core.labs.lab import masking_variants
from attn_core.labs.scores import previous_token_score
from attn_core.messages import N_, Msg, Problem
from attn_core.tracing.trace import Trace
from attn_core.tracing.views import head_matrix, head_step, num_heads

MIN_CHOICES, MAX_CHOICES = 3, 5
TIE = 1e-6  # two numbers closer than this are a tie: the tensor does not single out one answer
SHOWN_DECIMALS = 2  # what a heatmap cell and a proof print: a question's winner must look larger there
MAX_DECIMALS = 4  # the most a proof prints (a heatmap's tooltip); closer numbers make no question
PROOF_VALUES = 12  # a proving row keeps its largest weights, few enough for a phone and for a poll store's JSON


@dataclass(frozen=True)
class Question:
    """One multiple-choice question and its true answer, read from a tensor."""

    kind: str  # "attends_most" | "view_shape" | "masking" | "previous_token_head"
    prompt: Msg | str  # plain text (never Markdown): the page escapes it
    choices: tuple[Msg | str, ...]  # token labels and shapes as written; words as Msg
    answer: int  # index into choices
    explain: Msg | str  # one sentence: why the answer is right
    # The numbers that prove it: {"title": Msg, "labels": [str | Msg], "values": [float], "highlight": int,
    # "decimals": int (the precision at which the answer shows)}, and for masking {"rows": {choice's msgid: [float]},
    # "answer_row": msgid}
    proof: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not MIN_CHOICES <= len(self.choices) <= MAX_CHOICES:
            raise Problem("a question needs {low}-{high} choices; got {n}", low=MIN_CHOICES, high=MAX_CHOICES,
                          n=len(self.choices))
        if len(set(self.choices)) != len(self.choices):
            raise Problem("the choices must be distinct; got {choices}", choices=[str(c) for c in self.choices])
        if not 0 <= self.answer < len(self.choices):
            raise Problem("answer {answer} is not one of the {n} choices", answer=self.answer, n=len(self.choices))

    def to_dict(self) -> dict:
        """JSON-ready: each Msg as ``{"msgid": ..., "values": {...}}``."""
        return {"kind": self.kind, "prompt": _to_json(self.prompt), "choices": [_to_json(c) for c in self.choices],
                "answer": self.answer, "explain": _to_json(self.explain), "proof": _to_json(self.proof)}

    @classmethod
    def from_dict(cls, d: dict) -> Question:
        return cls(kind=d["kind"], prompt=_from_json(d["prompt"]), choices=tuple(map(_from_json, d["choices"])),
                   answer=int(d["answer"]), explain=_from_json(d.get("explain", "")),
                   proof=_from_json(dict(d.get("proof") or {})))

    def in_words(self, render: Callable[[Msg | str], str]) -> Question:
        """This question with every sentence rendered by ``render`` (``str``: English; the dashboard passes its
        translator); a masking proof's row names are message ids, rendered too."""
        def words(x):
            if isinstance(x, Msg | str):
                return render(x)
            if isinstance(x, list):
                return [words(v) for v in x]
            return x
        proof = {k: words(v) for k, v in self.proof.items() if k not in ("rows", "answer_row")}
        if "rows" in self.proof:
            proof["rows"] = {render(Msg(name)): row for name, row in self.proof["rows"].items()}
        if "answer_row" in self.proof:
            proof["answer_row"] = render(Msg(self.proof["answer_row"]))
        return replace(self, prompt=render(self.prompt), choices=tuple(map(render, self.choices)),
                       explain=render(self.explain), proof=proof)


def _to_json(x):
    if isinstance(x, Msg):
        return {"msgid": x.msgid, "values": dict(x.values)}
    if isinstance(x, dict):
        return {k: _to_json(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_to_json(v) for v in x]
    return x


def _from_json(x):
    if isinstance(x, dict):
        if set(x) == {"msgid", "values"}:
            return Msg(x["msgid"], **x["values"])
        return {k: _from_json(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_from_json(v) for v in x]
    return x


def _piece(label: str) -> str:
    """ "3: starts" -> "starts" (a token label's piece, for prose)."""
    return label.split(": ", 1)[1] if ": " in label else label


def _weights(trace: Trace, head: int) -> np.ndarray:
    H = num_heads(trace)
    if not 0 <= head < H:
        raise Problem("head {head} does not exist: this module has {H} head(s); pick 1-{H}", head=head + 1, H=H)
    w = head_matrix(trace, "weights", head)
    if w is None:
        raise Problem("this trace records no attention weights: pick a variant that has them")
    return w


def printed(x: float, decimals: int) -> str:
    """``x`` as a chart prints it to ``decimals`` places (d3's toFixed: half up, on the float's exact value)."""
    if np.isnan(x):
        return "nan"
    return str(Decimal(float(x)).quantize(Decimal(1).scaleb(-decimals), rounding=ROUND_HALF_UP))


def decimals_to_tell(best: float, runner_up: float) -> int | None:
    """The fewest decimals, from :data:`SHOWN_DECIMALS` up to :data:`MAX_DECIMALS`, at which ``best`` prints larger
    than ``runner_up`` (in a chart and in Python's text alike); None when they print the same even then."""
    for d in range(SHOWN_DECIMALS, MAX_DECIMALS + 1):
        if Decimal(printed(best, d)) > Decimal(printed(runner_up, d)) and f"{best:.{d}f}" != f"{runner_up:.{d}f}":
            return d
    return None


def _margin(weights_row: np.ndarray) -> tuple[int, int | None, float]:
    """One row of weights: (its visible keys, the decimals that tell its largest weight from the next, the gap)."""
    row = np.sort(np.nan_to_num(weights_row.astype(np.float64), nan=0.0))[::-1]
    if len(row) < 2:
        return int((row > 0).sum()), None, 0.0
    return int((row > 0).sum()), decimals_to_tell(row[0], row[1]), float(row[0] - row[1])


def default_query(trace: Trace, head: int = 0) -> int:
    """The query row that makes the clearest question: among the rows with 3+ visible keys, one whose largest
    weight prints larger than the next at :data:`SHOWN_DECIMALS` (else at the fewest decimals that tell them apart),
    the widest gap first, the latest of equal gaps."""
    w = _weights(trace, head)
    rows = np.sort(np.nan_to_num(w.astype(np.float64), nan=0.0), axis=-1)[:, ::-1]  # (T, T): each row, largest first
    gaps = rows[:, 0] - rows[:, 1] if rows.shape[-1] > 1 else np.zeros(len(rows))
    candidates = np.flatnonzero(((rows > 0).sum(axis=-1) >= MIN_CHOICES) & (gaps > TIE))
    best, best_key = None, None
    # the widest gap first, the latest of equal gaps first: the first row that tells its two at SHOWN_DECIMALS wins
    for i in sorted(candidates.tolist(), key=lambda i: (gaps[i], i), reverse=True):
        decimals = decimals_to_tell(rows[i, 0], rows[i, 1])
        if decimals is None:
            continue
        key = (-decimals, float(gaps[i]))
        if best_key is None or key > best_key:
            best, best_key = i, key
        if decimals == SHOWN_DECIMALS:
            break
    if best is None:
        raise Problem("No row of this picture has one clear largest weight over 3 or more keys (even to {decimals} "
                      "decimals): pick another head or type another sentence", decimals=MAX_DECIMALS)
    return best


def provable_query(trace: Trace, head: int = 0, query: int | None = None) -> int:
    """``query`` (the row the teacher picked) when its largest weight visibly wins at :data:`SHOWN_DECIMALS`,
    else :func:`default_query`'s row: a near tie the screen prints as equal makes no question."""
    if query is not None:
        w = _weights(trace, head)
        if 0 <= query < w.shape[0]:
            visible, decimals, _gap = _margin(w[query])
            if visible >= 2 and decimals == SHOWN_DECIMALS:
                return query
    return default_query(trace, head)


def attends_most(trace: Trace, labels: list[str], head: int = 0, query: int | None = None) -> Question:
    """"Which token does *query* attend to most in head h?" The answer is the row's argmax in the trace's
    weights; the wrong choices are the row's runners-up (then other tokens), listed in token order. When the
    winner prints equal to the runner-up at :data:`SHOWN_DECIMALS`, the question says how many decimals tell them
    apart (and the proof prints that many); beyond :data:`MAX_DECIMALS` there is no question."""
    w = _weights(trace, head)
    T = w.shape[-1]
    if len(labels) != w.shape[0] or w.shape[0] != T:
        raise Problem("{n_labels} labels for a {rows} x {T} weight matrix: pass the run's token labels",
                      n_labels=len(labels), rows=w.shape[0], T=T)
    if T < MIN_CHOICES:
        raise Problem("a question needs {low} tokens to choose from; this input has {T}: type more", low=MIN_CHOICES,
                      T=T)
    i = default_query(trace, head) if query is None else query
    if not 0 <= i < T:
        raise Problem("query {query} is not a token of this {T}-token input", query=i + 1, T=T)
    row = np.nan_to_num(w[i].astype(np.float64), nan=0.0)
    order = np.argsort(-row, kind="stable")
    if int((row > 0).sum()) < 2:
        raise Problem("'{token}' sees only one token (the causal mask hides the rest): ask about a later token",
                      token=_piece(labels[i]))
    decimals = decimals_to_tell(row[order[0]], row[order[1]]) if row[order[0]] - row[order[1]] > TIE else None
    if decimals is None:
        raise Problem("'{token}' attends equally to two tokens in head {head}, even to {decimals} decimals: ask "
                      "about another token", token=_piece(labels[i]), head=head + 1, decimals=MAX_DECIMALS)
    picked = sorted(int(k) for k in order[:min(4, T)])
    choices = tuple(labels[k] for k in picked)
    words = {"token": _piece(labels[i]), "position": labels[i].split(":")[0], "label": labels[i],
             "head": head + 1, "best": printed(row[order[0]], decimals), "best_label": labels[int(order[0])],
             "next": printed(row[order[1]], decimals), "decimals": decimals}
    many, close = num_heads(trace) > 1, decimals > SHOWN_DECIMALS
    if many and close:
        prompt = Msg("Which token does '{token}' ({position}) attend to most in head {head}? Its two largest weights "
                     "are close: read them to {decimals} decimals.", **words)
    elif many:
        prompt = Msg("Which token does '{token}' ({position}) attend to most in head {head}?", **words)
    elif close:
        prompt = Msg("Which token does '{token}' ({position}) attend to most? Its two largest weights are close: "
                     "read them to {decimals} decimals.", **words)
    else:
        prompt = Msg("Which token does '{token}' ({position}) attend to most?", **words)
    if many:
        explain = Msg("Row '{label}' of the weights in head {head}: its largest weight, {best}, is on '{best_label}' "
                      "(next: {next}).", **words)
    else:
        explain = Msg("Row '{label}' of the weights: its largest weight, {best}, is on '{best_label}' (next: "
                      "{next}).", **words)
    seen = [int(k) for k in order if row[k] > 0]
    keep = sorted(set(seen[:PROOF_VALUES]) | set(picked))  # in token order; the choices always among them
    cut = {"label": labels[i], "head": head + 1, "n": len(keep), "total": len(seen)}
    if len(keep) < len(seen):
        title = (Msg("weights in head {head}, row '{label}': the {n} largest of {total}", **cut) if many else
                 Msg("weights, row '{label}': the {n} largest of {total}", **cut))
    else:
        title = (Msg("weights in head {head}, row '{label}'", label=labels[i], head=head + 1) if many else
                 Msg("weights, row '{label}'", label=labels[i]))
    return Question(
        kind="attends_most", prompt=prompt, choices=choices, answer=picked.index(int(order[0])), explain=explain,
        proof={"title": title, "labels": [labels[k] for k in keep], "values": [round(float(row[k]), 6) for k in keep],
               "highlight": keep.index(int(order[0])), "decimals": decimals},
    )


def _fmt(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(n) for n in shape) + ")"


def view_shape(trace: Trace, name: str = "keys") -> Question:
    """"What is the shape of `keys` after `.view(b, num_tokens, num_heads, head_dim)`?" The answer is the recorded
    step's shape; the wrong choices are the shapes one step before and after (un-split, transposed) and a swap."""
    step = next((s for s in trace.steps if s.name == f"{name}.view"), None)
    if step is None or len(step.shape) != 4:
        raise Problem("this module records no `{name}.view`: pick MultiHeadAttention (or a variant that splits "
                      "heads with .view) to ask about its shape", name=name)
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
        prompt=Msg("What is the shape of `{name}` after `{code}`?", name=name, code=code),
        choices=tuple(choices), answer=choices.index(right),
        explain=Msg(".view splits the last axis (d_out = {d_out}) into num_heads x head_dim = {h} x {hd}; "
                    "the token axis stays second until .transpose(1, 2).", d_out=h * hd, h=h, hd=hd),
        proof={"title": Msg("the trace's `{name}` step by step", name=name), "labels": [s.name for s in trace.steps
                                                                          if s.name.split(".")[0] == name],
               "values": [_fmt(s.shape) for s in trace.steps if s.name.split(".")[0] == name],
               "highlight": [s.name for s in trace.steps if s.name.split(".")[0] == name].index(step.name)},
    )


ROW_DECIMALS = 3  # a masking question prints its row to 3 decimals: the methods must differ there


def _rounded(row: np.ndarray) -> list[float]:
    """A row for the proof: NaN as 0 (JSON has no NaN), 6 decimals (a poll store re-reads it every refresh)."""
    return [round(float(x), 6) for x in np.nan_to_num(row)]


MASKING_CHOICES = {  # lab variant name -> the choice a student sees (a msgid); the two correct methods are one choice
    "−∞ before softmax": N_("−∞ or renormalize (the same row)"),
    "softmax, zero, renormalize": N_("−∞ or renormalize (the same row)"),
    "mistake: zeros in the scores": N_("zeros in the scores (not −∞)"),
    "mistake: renormalize raw scores": N_("renormalize raw scores (no softmax)"),
    "mistake: no renormalization": N_("softmax, zero the future, no renormalizing"),
}


def masking(trace: Trace, labels: list[str], head: int = 0, seed: int = 0) -> Question:
    """"Renormalize or −∞: which gives this row?" One method (chosen by ``seed``) is applied to the trace's own
    scores (head ``head``) and a row is shown; the choices are the methods, each computed on the same scores.
    The shown row is one that exactly one choice gives as printed to :data:`ROW_DECIMALS` decimals (the first rows
    are the same for several; a method that leaks a weight of 0.0001 prints like the correct one)."""
    scores = head_matrix(trace, "scores", head)
    keys = head_matrix(trace, "keys", head)
    if scores is None or keys is None or scores.shape[0] != scores.shape[1]:
        raise Problem("this trace records no square attention scores: pick a variant with a causal mask")
    T = scores.shape[0]
    if T < MIN_CHOICES:
        raise Problem("a masking question needs {low} or more tokens; this input has {T}", low=MIN_CHOICES, T=T)
    rows = {}  # choice -> that method's weights
    for v in masking_variants(torch.from_numpy(np.array(scores, dtype=np.float32)), keys.shape[-1]):
        if v.name in MASKING_CHOICES:
            rows.setdefault(MASKING_CHOICES[v.name], v.weights.numpy().astype(np.float64))
    choices = sorted(rows)
    rng = np.random.default_rng(seed)
    for target in [choices[k] for k in rng.permutation(len(choices))]:
        for i in [*range(T - 2, 0, -1), T - 1]:  # rows with masked keys first: there the methods differ
            shown = rows[target][i]
            printed_rows = {c: [printed(x, ROW_DECIMALS) for x in rows[c][i]] for c in choices}
            matching = [c for c in choices if printed_rows[c] == printed_rows[target]]  # as a student reads them
            if matching == [target]:
                numbers = ", ".join(printed_rows[target])
                if num_heads(trace) > 1:
                    prompt = Msg("Row '{label}' of these scores (head {head}), masked causally, came out as "
                                 "[{numbers}]. Which masking gives this row?", label=labels[i], head=head + 1,
                                 numbers=numbers)
                else:
                    prompt = Msg("Row '{label}' of these scores, masked causally, came out as [{numbers}]. Which "
                                 "masking gives this row?", label=labels[i], numbers=numbers)
                return Question(
                    kind="masking", prompt=prompt, choices=tuple(Msg(c) for c in choices),
                    answer=choices.index(target),
                    explain=Msg("Each method computed on the same scores; only this one gives that row. Masking "
                                "with −∞ and renormalizing after softmax give the very same weights."),
                    proof={"title": Msg("row '{label}' by each method", label=labels[i]), "labels": list(labels),
                           "values": _rounded(shown), "highlight": -1, "answer_row": target,
                           "rows": {c: _rounded(rows[c][i]) for c in choices}, "decimals": ROW_DECIMALS},
                )
    raise Problem("every row is the same under two masking methods: type a longer sentence")


def previous_token_head(weights: np.ndarray, layer: int | None = None) -> Question:
    """"Which head of layer L is the previous-token head?" ``weights``: one layer's (num_heads, T, T). The answer
    is the head with the largest mean weight on the previous token (:func:`scores.previous_token_score`); the wrong
    choices are the runners-up, listed by head number. The proof prints the means to as many decimals as tell the
    best from the next (:func:`decimals_to_tell`)."""
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 3 or w.shape[0] < MIN_CHOICES:
        raise Problem("a head question needs {low} or more heads; got weights of shape {shape}", low=MIN_CHOICES,
                      shape=w.shape)
    score = np.nan_to_num(previous_token_score(w), nan=-1.0)
    order = np.argsort(-score, kind="stable")
    decimals = (decimals_to_tell(score[order[0]], score[order[1]]) if score[order[0]] - score[order[1]] > TIE
                else None)
    if decimals is None:
        raise Problem("two heads attend to the previous token equally (even to {decimals} decimals): pick another "
                      "layer", decimals=MAX_DECIMALS)
    picked = sorted(int(h) for h in order[:MAX_CHOICES - 1])
    if layer is not None:
        prompt = Msg("Which head of layer {layer} is the previous-token head (puts most weight on the token just "
                     "before)?", layer=layer + 1)
        title = Msg("mean weight on the previous token, each head of layer {layer}", layer=layer + 1)
    else:
        prompt = Msg("Which head is the previous-token head (puts most weight on the token just before)?")
        title = Msg("mean weight on the previous token, each head")
    return Question(
        kind="previous_token_head", prompt=prompt,
        choices=tuple(Msg("head {head}", head=h + 1) for h in picked), answer=picked.index(int(order[0])),
        explain=Msg("Mean weight on the previous token: head {best} {best_score}, the next best head {next} "
                    "{next_score}.", best=int(order[0]) + 1, best_score=printed(score[order[0]], decimals),
                    next=int(order[1]) + 1, next_score=printed(score[order[1]], decimals)),
        proof={"title": title, "labels": [Msg("head {head}", head=h + 1) for h in range(len(score))],
               "values": [round(float(s), 6) for s in score], "highlight": int(order[0]), "decimals": decimals},
    )


def trace_heads(trace: Trace) -> np.ndarray | None:
    """(num_heads, T, T) weights of a one-layer trace (None if it has none), for :func:`previous_token_head`."""
    if head_step(trace, "weights") is None:
        return None
    return np.stack([head_matrix(trace, "weights", h) for h in range(num_heads(trace))])
