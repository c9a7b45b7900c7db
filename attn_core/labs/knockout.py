"""Knock out the strongest heads of one kind (induction, previous-token, first-token) vs as many random heads, on
random tokens repeated: on the repeat, a model that copies can predict every token, and its loss there says how much
the copying heads carry (:func:`knockout`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from attn_core.labs.heads import by_layer, check_tokens, edited_hidden, head_ablation, knock_out, token_losses, top_of
from attn_core.labs.scores import head_scores
from attn_core.messages import Problem
from attn_core.models.traced import TracedLM
from attn_core.tracing.trace import Trace

KINDS = ("induction", "previous_token", "first_token")
RANDOM_SETS = 3


def repeated_random_tokens(vocab_size: int, n: int = 50, seed: int = 0) -> torch.Tensor:
    """(1, 2n): ``n`` random token ids, then the same ``n`` again (ids from the upper 95% of the vocabulary, clear
    of the special and byte tokens most vocabularies start with)."""
    generator = torch.Generator().manual_seed(seed)
    half = torch.randint(vocab_size // 20, vocab_size, (1, n), generator=generator)
    return torch.cat([half, half], dim=1)


def repeat_loss(losses: torch.Tensor) -> float:
    """The mean loss on the second copy of a text repeated once: the tokens after the repeat's first
    (``losses[t]`` is the loss of token t + 1)."""
    n = (losses.shape[0] + 1) // 2
    return float(losses[n:].mean())


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
    on token ids ``idx`` (a text repeated once: :func:`repeated_random_tokens`). 2 + ``n_random`` forwards."""
    if kind not in KINDS:
        raise Problem("kind must be one of {kinds}; got {kind}", kinds=", ".join(KINDS), kind=repr(kind))
    n_heads = model.cfg["n_layers"] * model.cfg["n_heads"]
    if not isinstance(k, int) or not 1 <= k < n_heads:
        raise Problem("k must be a whole number from 1 to {most} (the model has {n} heads); got {k}",
                      most=n_heads - 1, n=n_heads, k=repr(k))
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
    return Knockout(kind, k, repeat_loss(plain), top, repeat_loss(top_losses), random_sets,
                    [repeat_loss(r) for r in random_losses], scores, losses)


def top_next(model: TracedLM, idx: torch.Tensor, heads: list[tuple[int, int]], how: str = "zero",
             k: int = 5) -> list[tuple[int, float]]:
    """The ``k`` most likely next tokens (id, probability) after ``idx`` with ``heads`` knocked out."""
    model.check_ids(idx)
    hidden = edited_hidden(model, idx, {layer: knock_out(hs, how) for layer, hs in by_layer(model, heads).items()})
    return top_of(model, hidden, k)
