"""What Explore's sections read and say: the View (the run, the head looked at, the weights' scale), the summary
line over the page, and one weight cell's story. Kept apart from the page so its sections stay short."""

from __future__ import annotations

import dataclasses

import numpy as np
import streamlit as st

from attn_core import AttentionConfig
from attn_core.attention.masks import MaskKind
from attn_core.tracing.views import CellStory, cell_story, head_matrix, kv_head
from dashboard.drawing.chart_cache import memo
from dashboard.i18n import _
from dashboard.state import models
from dashboard.state.compute import Run
from dashboard.state.controls import MASK_NAMES, Settings
from dashboard.state.links import md_escape, plural


@dataclasses.dataclass
class View:
    """What every section reads: the run, its labels, the head looked at and the weights' colour scale."""

    s: Settings
    run: Run
    head: int
    H: int
    wscale: str
    top: object = None  # the left of the section's first row (Previous / Next sit at its right)

    @property
    def labels(self) -> list[str]:
        return self.run.labels

    @property
    def T(self) -> int:
        return len(self.run.tokens)

    def name(self, what: str) -> str:
        """A chart's name in its download's file name: which head, when there are several."""
        return f"{what}_head{self.head + 1}" if self.H > 1 else what

    def head_label(self, h: int) -> str:
        """"head 3", or with grouped K/V heads "head 3 · K/V 2": which K/V head query head ``h`` reads."""
        kv = kv_head(self.run.trace, h)
        return f"head {h + 1}" + (f" · K/V {kv + 1}" if self.kv_heads < self.H else "")

    @property
    def kv_heads(self) -> int:
        """How many K/V heads the query heads share (the registry entry says; = H without grouping)."""
        return self.run.cfg.spec.num_kv_heads(self.run.cfg) if self.H > 1 else 1

    @property
    def head_title(self) -> str:
        return f" (head {self.head + 1})" if self.H > 1 else ""

    def mat(self, kind: str, h: int | None = None) -> np.ndarray | None:
        """One head's 2-d matrix of a step kind (remembered: T=1024 traces are large)."""
        h = self.head if h is None else h
        trace = self.run.trace
        return memo((self.run.key, "matrix", kind, h), lambda: head_matrix(trace, kind, h))


INPUT_WORDS = {"book": "the book's", "learned": "learned", "sinusoidal": "sinusoidal", "onehot": "one-hot"}


def mask_words(cfg: AttentionConfig) -> str:
    """The summary's mask and bias: " · mask: causal, window 1 (−∞ before softmax)", " · no mask (causal off)",
    " · q/k/v biases"; nothing for a variant without a mask or biases."""
    spec, mk = cfg.spec, cfg.mask_kind
    words = ""
    if spec.masks:
        words = (f" · mask: **{_(mk.name_msg)}** ({MASK_NAMES[cfg.mask_method]})" if mk.hides_anything
                 else " · **no mask** (causal off)")
    if spec.uses("qkv_bias") and cfg.qkv_bias:
        words += " · q/k/v biases"
    return words


def summary(v: View) -> str:
    cfg, spec = v.run.cfg, v.run.cfg.spec
    model = f"**{md_escape(models.label(v.run.weights))}, layer {v.run.layer + 1}** · " if v.run.pretrained else ""
    inputs = INPUT_WORDS.get(v.run.input_mode, v.run.input_mode)  # what the run used, whatever the link asked
    return (f"{model}**{spec.label}** · {plural(v.T, 'token')} · {inputs} inputs (d_in {cfg.d_in}){spec.sizes(cfg)}"
            + mask_words(cfg)
            + f" · output shape **{tuple(v.run.output.shape)}** on {cfg.device}")


def cell_story_text(v: View, pick: tuple[int, int] | None) -> None:
    """Score, scaling, mask, softmax share, dropout and contribution of one weight cell, as numbered steps."""
    labels = v.labels
    i, j = pick if pick is not None else (v.T - 1, 0)
    story = cell_story(v.run.trace, i, j, v.head)
    # no anchor: a heading's link id follows its text, and re-writing it after every new sentence was the page's
    # last DOM change, well after the chart (docs/measurements.md)
    st.subheader(f"Cell story: query **{md_escape(labels[i])}** → key **{md_escape(labels[j])}**", anchor=False)
    vec = lambda x: "[" + ", ".join(f"{a:.3f}" for a in x[:8]) + (", …]" if len(x) > 8 else "]")  # noqa: E731
    st.markdown(
        ("" if pick else "_(click a weight cell to pick another)_\n\n")
        + f"1. **Score** q{i + 1} · k{j + 1} = {vec(story.query)} · {vec(story.key)} = **{story.dot:.4f}**\n"
        + (f"2. **Scaled** by √d_k = √{story.d_k} = {story.d_k ** 0.5:.3f} → **{story.scaled:.4f}**\n"
           if story.scaled is not None else "2. No scaling in simplified attention.\n")
        + step3(story, v.run.cfg.mask_kind)
        + (f"4. **Dropout**: weight used = {story.weight_used:.4f}\n" if story.weight_used != story.weight else "")
        + f"5. **Contribution** to context z{i + 1} = {story.weight_used:.4f} × v{j + 1} = "
        f"{vec(story.contribution)}\n"
        + f"6. z{i + 1} (sum over all keys) = {vec(story.context)}"
    )
    finite = story.row_scaled[np.isfinite(story.row_scaled)]
    if finite.size:
        seen = (f"all {finite.size} keys (the renormalize method masks after softmax)" if story.renormalized
                else plural(finite.size, "visible key"))
        st.caption(f"Row {i + 1} of what softmax sees: {seen}, range {finite.min():.3f} … {finite.max():.3f}.")


def step3(story: CellStory, mk: MaskKind) -> str:
    """The cell story's masking / softmax step, in the words of the method that ran and of the mask it used."""
    i, j, n = story.i + 1, story.j + 1, story.row_scaled.size
    why = mk.why_hidden_msg(i, j)  # the mask's own words
    why = _(why) if why is not None else f"key {j} is hidden from query {i}"
    hidden = "the future" if mk == MaskKind() else "the hidden keys"
    if story.renormalized:
        if story.masked:
            return (f"3. **Softmax over all {n} keys** gives key {j} {story.share_all:.4f}; {why}, so it is "
                    f"**zeroed after softmax** → weight 0.\n")
        return (f"3. **Softmax over all {n} keys**: {story.share_all:.4f}; {hidden} zeroed, row {i} sums to "
                f"{story.kept:.4f}; ÷ that row sum → **{story.weight:.4f}** ({story.weight * 100:.1f}% of the "
                f"attention of token {i})\n")
    if story.masked:
        return f"3. **Masked**: {why}, so it is hidden (−∞ → weight 0).\n"
    return (f"3. **Softmax share** of this key in row {i}: **{story.weight:.4f}** "
            f"({story.weight * 100:.1f}% of the attention of token {i})\n")
