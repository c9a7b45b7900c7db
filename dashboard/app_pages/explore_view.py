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
from dashboard.i18n import N_, _, ngettext
from dashboard.state import models
from dashboard.state.compute import Run
from dashboard.state.controls import MASK_NAMES, Settings
from dashboard.state.links import md_escape


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

    def slide_title(self, what: str) -> str:
        """A chart's title on its exported slide, in this run's language: which head, when there are several."""
        return _("{what}, head {head}", what=what, head=self.head + 1) if self.H > 1 else what

    def head_label(self, h: int) -> str:
        """"head 3", or with grouped K/V heads "head 3 · K/V 2": which K/V head query head ``h`` reads."""
        if self.kv_heads < self.H:
            return _("head {head} · K/V {kv}", head=h + 1, kv=kv_head(self.run.trace, h) + 1)
        return _("head {head}", head=h + 1)

    @property
    def kv_heads(self) -> int:
        """How many K/V heads the query heads share (the registry entry says; = H without grouping)."""
        return self.run.cfg.spec.num_kv_heads(self.run.cfg) if self.H > 1 else 1

    def mat(self, kind: str, h: int | None = None) -> np.ndarray | None:
        """One head's 2-d matrix of a step kind (remembered: T=1024 traces are large)."""
        h = self.head if h is None else h
        trace = self.run.trace
        return memo((self.run.key, "matrix", kind, h), lambda: head_matrix(trace, kind, h))


# what the summary calls each kind of input vectors (the link's values stay as they are)
INPUT_WORDS = {"book": N_("the book's inputs (d_in {d_in})"), "learned": N_("learned inputs (d_in {d_in})"),
               "sinusoidal": N_("sinusoidal inputs (d_in {d_in})"), "onehot": N_("one-hot inputs (d_in {d_in})")}


def mask_words(cfg: AttentionConfig) -> str:
    """The summary's mask and bias: " · mask: causal, window 1 (−∞ before softmax)", " · no mask (causal off)",
    " · q/k/v biases"; nothing for a variant without a mask or biases."""
    spec, mk = cfg.spec, cfg.mask_kind
    words = ""
    if spec.masks:
        words = (" · " + _("mask: **{mask}** ({method})", mask=_(mk.name_msg),
                           method=_(MASK_NAMES[cfg.mask_method])) if mk.hides_anything
                 else " · " + _("**no mask** (causal off)"))
    if spec.uses("qkv_bias") and cfg.qkv_bias:
        words += " · " + _("q/k/v biases")
    return words


def summary(v: View) -> str:
    """The line over the page, its parts joined by " · ": model, variant, tokens, inputs, sizes, mask, output."""
    cfg, spec = v.run.cfg, v.run.cfg.spec
    model = (_("**{model}, layer {layer}**", model=md_escape(models.label(v.run.weights)), layer=v.run.layer + 1)
             + " · " if v.run.pretrained else "")
    mode = v.run.input_mode  # what the run used, whatever the link asked
    inputs = (_(INPUT_WORDS[mode], d_in=cfg.d_in) if mode in INPUT_WORDS
              else _("{inputs} inputs (d_in {d_in})", inputs=_(mode), d_in=cfg.d_in))  # a real model's layer input
    sizes = spec.sizes(cfg)
    return (f"{model}**{_(spec.label)}** · " + ngettext("{n} token", "{n} tokens", v.T) + f" · {inputs}"
            + (" · " + _(sizes) if sizes is not None else "") + mask_words(cfg) + " · "
            + _("output shape **{shape}** on {device}", shape=tuple(v.run.output.shape), device=cfg.device))


def cell_story_text(v: View, pick: tuple[int, int] | None) -> None:
    """Score, scaling, mask, softmax share, dropout and contribution of one weight cell, as numbered steps."""
    labels = v.labels
    i, j = pick if pick is not None else (v.T - 1, 0)
    story = cell_story(v.run.trace, i, j, v.head)
    # no anchor: a heading's link id follows its text, and re-writing it after every new sentence was the page's
    # last DOM change, well after the chart (docs/measurements.md)
    st.subheader(_("Cell story: query **{query}** → key **{key}**", query=md_escape(labels[i]),
                   key=md_escape(labels[j])), anchor=False)
    vec = lambda x: "[" + ", ".join(f"{a:.3f}" for a in x[:8]) + (", …]" if len(x) > 8 else "]")  # noqa: E731
    lines = [] if pick else [_("_(click a weight cell to pick another)_") + "\n"]  # one numbered step a line
    lines.append(_("1. **Score** q{i} · k{j} = {q} · {k} = **{dot}**", i=i + 1, j=j + 1, q=vec(story.query),
                   k=vec(story.key), dot=format(story.dot, ".4f")))
    lines.append(_("2. **Scaled** by √d_k = √{d_k} = {root} → **{scaled}**", d_k=story.d_k,
                   root=format(story.d_k ** 0.5, ".3f"), scaled=format(story.scaled, ".4f"))
                 if story.scaled is not None else _("2. No scaling in simplified attention."))
    lines.append(step3(story, v.run.cfg.mask_kind))
    if story.weight_used != story.weight:
        lines.append(_("4. **Dropout**: weight used = {used}", used=format(story.weight_used, ".4f")))
    lines.append(_("5. **Contribution** to context z{i} = {used} × v{j} = {part}", i=i + 1, j=j + 1,
                   used=format(story.weight_used, ".4f"), part=vec(story.contribution)))
    lines.append(_("6. z{i} (sum over all keys) = {z}", i=i + 1, z=vec(story.context)))
    st.markdown("\n".join(lines))
    finite = story.row_scaled[np.isfinite(story.row_scaled)]
    if finite.size:
        low, high = f"{finite.min():.3f}", f"{finite.max():.3f}"
        if story.renormalized:
            st.caption(_("Row {i} of what softmax sees: all {n} keys (the renormalize method masks after softmax), "
                         "range {low} … {high}.", i=i + 1, n=finite.size, low=low, high=high))
        else:
            st.caption(ngettext("Row {i} of what softmax sees: {n} visible key, range {low} … {high}.",
                                "Row {i} of what softmax sees: {n} visible keys, range {low} … {high}.",
                                finite.size, i=i + 1, low=low, high=high))


def step3(story: CellStory, mk: MaskKind) -> str:
    """The cell story's masking / softmax step, in the words of the method that ran and of the mask it used."""
    i, j, n = story.i + 1, story.j + 1, story.row_scaled.size
    why = mk.why_hidden_msg(i, j)  # the mask's own words
    why = _(why) if why is not None else _("key {j} is hidden from query {i}", j=j, i=i)
    weight, percent = f"{story.weight:.4f}", f"{story.weight * 100:.1f}"
    if story.renormalized:
        if story.masked:
            return _("3. **Softmax over all {n} keys** gives key {j} {share}; {why}, so it is **zeroed after "
                     "softmax** → weight 0.", n=n, j=j, share=format(story.share_all, ".4f"), why=why)
        if mk == MaskKind():
            return _("3. **Softmax over all {n} keys**: {share}; the future zeroed, row {i} sums to {kept}; ÷ that "
                     "row sum → **{weight}** ({percent}% of the attention of token {i})", n=n, i=i,
                     share=format(story.share_all, ".4f"), kept=format(story.kept, ".4f"), weight=weight,
                     percent=percent)
        return _("3. **Softmax over all {n} keys**: {share}; the hidden keys zeroed, row {i} sums to {kept}; ÷ that "
                 "row sum → **{weight}** ({percent}% of the attention of token {i})", n=n, i=i,
                 share=format(story.share_all, ".4f"), kept=format(story.kept, ".4f"), weight=weight, percent=percent)
    if story.masked:
        return _("3. **Masked**: {why}, so it is hidden (−∞ → weight 0).", why=why)
    return _("3. **Softmax share** of this key in row {i}: **{weight}** ({percent}% of the attention of token {i})",
             i=i, weight=weight, percent=percent)
