"""A poll question answered by removing heads: "which head, knocked out, hurts the repeat most?" The choices are
the strongest head of each kind (induction, previous-token, first-token sink) and one other head, each knocked out
alone on words in random order, repeated once; the answer is the one whose removal raises the loss on the repeat
most. The sink head looks the hardest and usually matters least: α alone misleads."""

from __future__ import annotations

import numpy as np
import torch

from attn_core.labs.heads import head_ablation
from attn_core.labs.knockout import KINDS, repeat_loss, scored_losses, top_heads
from attn_core.labs.questions import TIE, Question, decimals_to_tell, printed
from attn_core.messages import Msg, Problem
from attn_core.models.traced import TracedLM


def harmful_head(model: TracedLM, idx: torch.Tensor, seed: int = 0) -> Question:
    """The question on token ids ``idx`` (a text repeated once): 1 scored run and one ablation per choice."""
    scores, plain = scored_losses(model, idx)
    picked: list[tuple[int, int]] = []
    for kind in KINDS:
        head = next(h for h in top_heads(scores, kind, len(picked) + 1) if h not in picked)
        picked.append(head)
    others = [(layer, head) for layer in range(model.cfg["n_layers"]) for head in range(model.cfg["n_heads"])
              if (layer, head) not in picked]
    picked.append(others[int(np.random.default_rng(seed).integers(len(others)))])
    losses = [repeat_loss(head_ablation(model, idx, [head]), idx) for head in picked]
    order = np.argsort(losses)[::-1]
    decimals = decimals_to_tell(losses[order[0]], losses[order[1]]) if losses[order[0]] - losses[order[1]] > TIE \
        else None
    if decimals is None:
        raise Problem("two heads hurt the repeat equally when knocked out: draw another text (seed)")
    labels = [Msg("layer {layer}, head {head}", layer=layer + 1, head=head + 1) for layer, head in picked]
    best = int(order[0])
    layer, head = picked[best]
    return Question(
        kind="harmful_head",
        prompt=Msg("Words in random order, then the same words again. Which head, knocked out alone, hurts the loss "
                   "on the repeat most?"),
        choices=tuple(labels), answer=best,
        explain=Msg("Loss on the repeat: {plain} nats with every head, {loss} without layer {layer}, head {head}, "
                    "the most of the four (each choice's loss is below).",
                    plain=printed(repeat_loss(plain, idx), decimals),
                    loss=printed(losses[best], decimals), layer=layer + 1, head=head + 1),
        proof={"title": Msg("loss on the repeat without each head (nats)"), "labels": labels,
               "values": [float(v) for v in losses], "highlight": best, "decimals": decimals},
    )
