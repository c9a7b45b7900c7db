"""What the model view keeps of a pass: per layer, the heads' scores and each head's weights pooled to at most
``THUMB`` x ``THUMB`` cells (:class:`Collect`, handed each layer's weights as the pass runs), as one
:class:`ModelView` (:mod:`dashboard.state.models` runs the pass and keeps the views)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from attn_core.labs.scores import head_scores
from attn_core.tracing.views import pool
from dashboard.i18n import _

THUMB = 64  # the model view keeps each head's weights pooled to at most this many cells a side
Progress = Callable[[float, str], None] | None


@dataclass(frozen=True)
class ModelView:
    """Every head of a model on one token sequence: what the model view draws."""

    ids: tuple[int, ...]
    thumbs: np.ndarray  # (layers, heads, S, S) weights, max-pooled to S <= THUMB cells a side
    pooled: int  # the block side of the pooling (1: not pooled)
    scores: dict[str, np.ndarray]  # attn_core.labs.scores.head_scores: name -> (layers, heads)

    @property
    def T(self) -> int:
        return len(self.ids)


def view_nbytes(view: ModelView) -> int:
    return view.thumbs.nbytes + sum(s.nbytes for s in view.scores.values()) + 8 * len(view.ids) + 4096


class Collect:
    """What the model view keeps of each layer's weights as a pass hands them over: scores and pooled thumbnails
    (the (heads, T, T) weights themselves are dropped with the layer's trace)."""

    def __init__(self, ids: tuple[int, ...], n_layers: int, progress: Progress) -> None:
        self.ids, self.n_layers, self.progress = ids, n_layers, progress
        self.thumbs: list[np.ndarray] = []
        self.scores: list[dict[str, np.ndarray]] = []
        self.pooled = 1

    def __call__(self, i: int, weights: torch.Tensor) -> None:
        w = weights.numpy()  # (heads, T, T)
        self.scores.append(head_scores(w, self.ids))
        thumbs = [pool(m, THUMB, "max") for m in w]
        self.pooled = thumbs[0][1]
        self.thumbs.append(np.stack([t for t, _ in thumbs]))
        if self.progress is not None:
            self.progress((i + 1) / self.n_layers, _("layer {layer} of {n_layers}", layer=i + 1,
                                                     n_layers=self.n_layers))

    def view(self) -> ModelView:
        scores = {k: np.stack([s[k] for s in self.scores]) for k in self.scores[0]}
        return ModelView(self.ids, np.stack(self.thumbs), self.pooled, scores)
