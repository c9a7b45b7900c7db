"""Knock out the strongest heads of one kind (induction, previous-token, first-token) vs as many random heads, on
words in random order, repeated (:func:`repeated_words`): on the repeat, a model that copies can predict every token,
and its loss there says how much the copying heads carry (:func:`knockout`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from attn_core.labs.heads import by_layer, check_tokens, edited_hidden, head_ablation, knock_out, token_losses, top_of
from attn_core.labs.scores import head_scores
from attn_core.messages import Problem
from attn_core.models.traced import TracedLM
from attn_core.text.word_tokenizer import verdict_text
from attn_core.tracing.trace import Trace

KINDS = ("induction", "previous_token", "first_token")
RANDOM_SETS = 3


def repeated_words(tokenizer, n: int = 50, seed: int = 0) -> torch.Tensor:
    """(1, P + 2n): ``n`` distinct whole-word tokens of The Verdict (the book's text) in the model's own tokenizer,
    in an order drawn with ``seed``, then the same ``n`` again, after the P tokens the tokenizer starts every text
    with (Gemma's ``<bos>``; none for GPT-2 or SmolLM2). Words a model has read, not random ids: many ids of a
    large vocabulary are unused or special, and a model does not copy those (docs/measurements.md)."""
    prefix = tokenizer.encode("")
    ids = tokenizer.encode(verdict_text())[len(prefix):]
    words = [t for t in dict.fromkeys(ids) if _is_word(tokenizer.token_bytes(t))]
    if not 2 <= n <= len(words):
        raise Problem("the repeated text takes 2 to {most} words of The Verdict; got {n}", most=len(words), n=n)
    order = torch.randperm(len(words), generator=torch.Generator().manual_seed(seed))[:n].tolist()
    half = [words[i] for i in order]
    return torch.tensor([prefix + half + half])


def _is_word(piece: bytes) -> bool:
    """A token that is a space and a whole word of letters (" pockets"), as both BPE and SentencePiece spell it."""
    return piece[:1] == b" " and piece[1:].isalpha()


def repeat_half(idx: torch.Tensor) -> int:
    """How many tokens the text repeats at its end: the largest n with its last n tokens equal to the n before."""
    ids = idx[0].tolist()
    for n in range(len(ids) // 2, 1, -1):
        if ids[-n:] == ids[-2 * n:-n]:
            return n
    raise Problem("the text must end in a part of at least two tokens written twice (as the built-in text does)")


def repeat_loss(losses: torch.Tensor, idx: torch.Tensor) -> float:
    """The mean loss on the second copy of token ids ``idx`` (a text repeated once, :func:`repeat_half`), its first
    token left out (nothing before it says what it is); ``losses[t]`` is the loss of token t + 1."""
    n = repeat_half(idx)
    return float(losses[-(n - 1):].mean())


def scored_losses(model: TracedLM, idx: torch.Tensor) -> tuple[dict[str, np.ndarray], torch.Tensor]:
    """One forward that gives both every head's scores (layers, heads) and the per-token losses: each layer runs
    the explicit path with a trace of its own, dropped after its weights are scored."""
    check_tokens(model, idx)
    tokens = idx[0].tolist()
    per_layer: list[dict[str, np.ndarray]] = []
    with torch.no_grad():
        x = model.embed(idx)
        for i, block in enumerate(model.trf_blocks):
            trace = Trace(copy=False)
            x = block(x, *model.block_args(i), trace)
            per_layer.append(head_scores(trace.of_kind("weights")[-1].tensor[0].numpy(), tokens))
            del trace
        logits = model.out_head(model.final_norm(x))
    scores = {name: np.stack([s[name] for s in per_layer]) for name in per_layer[0]}
    return scores, token_losses(logits, idx)


def top_heads(scores: dict[str, np.ndarray], kind: str, k: int) -> list[tuple[int, int]]:
    """The ``k`` heads (layer, head) with the highest ``kind`` score, strongest first."""
    values = np.nan_to_num(scores[kind], nan=-np.inf)
    order = np.argsort(-values, axis=None, kind="stable")[:k]
    return [tuple(int(v) for v in np.unravel_index(i, values.shape)) for i in order]


@dataclass(frozen=True)
class Knockout:
    """The loss on the repeat: plain, without the top-k heads of ``kind``, and without each of the random sets."""

    kind: str
    k: int
    plain: float
    top: list[tuple[int, int]]
    top_loss: float
    random_sets: list[list[tuple[int, int]]]
    random_losses: list[float]
    scores: dict[str, np.ndarray]
    losses: dict[str, np.ndarray]  # "plain", "top" and "random 1..": per-token losses (T - 1)

    @property
    def ratio(self) -> float:
        """How many times the plain loss the top-k heads' knockout gives."""
        return self.top_loss / self.plain


def knockout(model: TracedLM, idx: torch.Tensor, k: int, kind: str = "induction", how: str = "zero",
             n_random: int = RANDOM_SETS, seed: int = 0) -> Knockout:
    """Knock out the ``k`` strongest ``kind`` heads, then ``n_random`` sets of ``k`` other heads drawn with ``seed``,
    on token ids ``idx`` (a text repeated once: :func:`repeated_words`). 2 + ``n_random`` forwards."""
    if kind not in KINDS:
        raise Problem("kind must be one of {kinds}; got {kind}", kinds=", ".join(KINDS), kind=repr(kind))
    n_heads = model.cfg["n_layers"] * model.cfg["n_heads"]
    if not isinstance(k, int) or not 1 <= k < n_heads:
        raise Problem("k must be a whole number from 1 to {most} (the model has {n} heads); got {k}",
                      most=n_heads - 1, n=n_heads, k=repr(k))
    repeat_half(idx)  # a text that repeats, before any forward
    scores, plain = scored_losses(model, idx)
    top = top_heads(scores, kind, k)
    top_losses = head_ablation(model, idx, top, how)
    others = [(layer, head) for layer in range(model.cfg["n_layers"]) for head in range(model.cfg["n_heads"])
              if (layer, head) not in top]
    rng = np.random.default_rng(seed)
    random_sets = [[others[i] for i in sorted(rng.choice(len(others), size=min(k, len(others)), replace=False))]
                   for _unused in range(n_random)]
    random_losses = [head_ablation(model, idx, heads, how) for heads in random_sets]
    losses = {"plain": plain.numpy(), "top": top_losses.numpy()}
    losses.update({f"random {i + 1}": r.numpy() for i, r in enumerate(random_losses)})
    return Knockout(kind, k, repeat_loss(plain, idx), top, repeat_loss(top_losses, idx), random_sets,
                    [repeat_loss(r, idx) for r in random_losses], scores, losses)


def top_next(model: TracedLM, idx: torch.Tensor, heads: list[tuple[int, int]], how: str = "zero",
             k: int = 5) -> list[tuple[int, float]]:
    """The ``k`` most likely next tokens (id, probability) after ``idx`` with ``heads`` knocked out."""
    model.check_ids(idx)
    hidden = edited_hidden(model, idx, {layer: knock_out(hs, how) for layer, hs in by_layer(model, heads).items()})
    return top_of(model, hidden, k)
