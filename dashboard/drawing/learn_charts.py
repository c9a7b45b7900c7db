"""Pure chart builders for the Learn page: training data in, Altair charts / frames out. No Streamlit."""

from __future__ import annotations

import re
from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd

from attn_core.labs.scores import SCORE_NAMES, SCORE_TITLES, verdict_msg
from dashboard.drawing.cells import layered
from dashboard.i18n import N_, _

PATTERN_SCORES = ("previous_token", "induction", "first_token")  # the 0-1 scores drawn over steps
SHORT_NAMES = {"previous_token": N_("previous"), "induction": N_("induction"), "first_token": N_("first-token")}


def head_name(layer: int, head: int) -> str:
    return f"L{layer + 1} H{head + 1}"


def loss_frame(losses: Sequence[float], at_step: int | None = None, window: int = 20) -> pd.DataFrame:
    """Per-step loss, its running mean over ``window`` steps (steps are 1-based), and ``at`` = True on
    the row of ``at_step`` (where the rule is drawn)."""
    loss = np.asarray(losses, dtype=np.float64)
    smooth = pd.Series(loss).rolling(window, min_periods=1).mean().to_numpy()
    steps = np.arange(1, len(loss) + 1, dtype=np.int32)
    df = pd.DataFrame({"step": steps, "loss": loss, "mean": smooth, "at": steps == (at_step or -1)})
    if at_step is not None and not df["at"].any():  # step 0 (before training) has no loss row
        df = pd.concat([pd.DataFrame({"step": [at_step], "loss": [np.nan], "mean": [np.nan], "at": [True]}), df],
                       ignore_index=True)
    return df


def loss_chart(losses: Sequence[float], *, max_steps: int, at_step: int | None = None, width: int = 330,
               height: int = 200) -> alt.LayerChart:
    """The loss per step (thin) and its running mean (thick) on a fixed step axis; a rule at ``at_step``.

    One dataset and no data-dependent scale, so the spec can be reused with new data."""
    df = loss_frame(losses, at_step)
    base = alt.Chart().encode(x=alt.X("step:Q", scale=alt.Scale(domain=[0, max_steps]), title=_("training step")))
    raw = base.mark_line(strokeWidth=1, opacity=0.35, color="#4c78a8").encode(
        y=alt.Y("loss:Q", title=_("loss (cross-entropy)"), scale=alt.Scale(zero=True)))
    smooth = base.mark_line(strokeWidth=2.5, color="#1f4e79").encode(
        y="mean:Q", tooltip=[alt.Tooltip("step:Q", title=_("step")),
                             alt.Tooltip("mean:Q", format=".3f", title=_("mean loss"))])
    rule = base.transform_filter("datum.at").mark_rule(color="#e4007c", strokeDash=[4, 3], strokeWidth=2)
    return layered(df, raw, smooth, rule).properties(width=width, height=height, title=_("Loss"))


def scores_frame(steps: Sequence[int], scores: Sequence[dict[str, np.ndarray]],
                 names: Sequence[str] = PATTERN_SCORES, at_step: int | None = None) -> pd.DataFrame:
    """Long frame: step, head ("L1 H2"), score (title), value, for every snapshot and head; ``at`` is
    the scrubbed step on every row (for the rule)."""
    rows = []
    for step, s in zip(steps, scores):
        n_layers, n_heads = s["entropy"].shape
        for name in names:
            for layer in range(n_layers):
                for h in range(n_heads):
                    value = float(s[name][layer, h])
                    if np.isfinite(value):
                        rows.append((int(step), head_name(layer, h), SCORE_TITLES[name], value))
    df = pd.DataFrame(rows, columns=["step", "head", "score", "value"])
    df["at"] = -1 if at_step is None else int(at_step)
    return df


def scores_chart(steps: Sequence[int], scores: Sequence[dict[str, np.ndarray]], *, max_steps: int,
                 names: Sequence[str] = PATTERN_SCORES, at_step: int | None = None, width: int = 200,
                 height: int = 170) -> alt.FacetChart:
    """Each pattern score of every head over training steps, one panel per score, one line per head."""
    df = scores_frame(steps, scores, names, at_step)
    order = [SCORE_TITLES[n] for n in names]
    x = alt.X("step:Q", scale=alt.Scale(domain=[0, max_steps]), title=_("training step"))
    lines = alt.Chart().mark_line(point=alt.OverlayMarkDef(size=14)).encode(
        x=x, y=alt.Y("value:Q", scale=alt.Scale(domain=[0, 1]), title=_("score")),
        color=alt.Color("head:N", scale=alt.Scale(scheme="tableau10"), title=_("head")),
        tooltip=[alt.Tooltip("head:N", title=_("head")), alt.Tooltip("score:N", title=_("score")),
                 alt.Tooltip("step:Q", title=_("step")), alt.Tooltip("value:Q", title=_("value"), format=".2f")],
    )
    rule = alt.Chart().transform_filter("datum.at >= 0").mark_rule(color="#e4007c", strokeDash=[4, 3]).encode(
        x=alt.X("max(at):Q"))
    chart = layered(df, lines, rule).properties(width=width, height=height)
    return chart.facet(column=alt.Column("score:N", title=None, sort=order, header=alt.Header(labelFontSize=13)))


def score_table(scores: dict[str, np.ndarray]) -> pd.DataFrame:
    """One row per head: every score and its one-line verdict (in this run's language: cache it by language)."""
    n_layers, n_heads = scores["entropy"].shape
    rows = []
    for layer in range(n_layers):
        for h in range(n_heads):
            row = {"layer": layer + 1, "head": h + 1}
            row |= {SCORE_TITLES[n]: float(scores[n][layer, h]) for n in SCORE_NAMES}
            key, line, value = verdict_msg(scores, layer, h)
            # without a pattern, the line's entropy and distance repeat the columns beside it (and were cut off);
            # with one, the line's "layer 1 head 2: " (Chinese "：") repeats the row's first two columns
            row["verdict"] = re.split(r": |：", _(line), maxsplit=1)[1] if key else _("no clear pattern")
            row["pattern"] = f"{_(SHORT_NAMES[key])} {value:.2f}" if key else _("no clear pattern")
            rows.append(row)
    df = pd.DataFrame(rows)
    return df.loc[:, df.notna().any()]  # a score the task has no use for (induction without repeats) is all NaN
