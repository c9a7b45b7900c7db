"""Pure chart builders for the Learn page: training data in, Altair charts / frames out. No Streamlit."""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd

from attn_core.scores import SCORE_NAMES, SCORE_TITLES, verdict

PATTERN_SCORES = ("previous_token", "induction", "first_token")  # the 0-1 scores drawn over steps


def head_name(layer: int, head: int) -> str:
    return f"L{layer + 1} H{head + 1}"


def loss_frame(losses: Sequence[float], window: int = 20) -> pd.DataFrame:
    """Per-step loss and its running mean over ``window`` steps (steps are 1-based)."""
    loss = np.asarray(losses, dtype=np.float64)
    smooth = pd.Series(loss).rolling(window, min_periods=1).mean().to_numpy()
    return pd.DataFrame({"step": np.arange(1, len(loss) + 1, dtype=np.int32), "loss": loss, "mean": smooth})


def loss_chart(losses: Sequence[float], *, max_steps: int, at_step: int | None = None, width: int = 420,
               height: int = 220) -> alt.LayerChart:
    """The loss per step (thin) and its running mean (thick) on a fixed step axis; a rule at ``at_step``."""
    df = loss_frame(losses)
    x = alt.X("step:Q", scale=alt.Scale(domain=[0, max_steps]), title="training step")
    top = float(np.nanmax(df["loss"])) if len(df) else 1.0
    y_scale = alt.Scale(domain=[0, max(top, 0.5)])
    raw = alt.Chart(df).mark_line(strokeWidth=1, opacity=0.35, color="#4c78a8").encode(
        x=x, y=alt.Y("loss:Q", scale=y_scale, title="loss (cross-entropy)"))
    smooth = alt.Chart(df).mark_line(strokeWidth=2.5, color="#1f4e79").encode(
        x=x, y=alt.Y("mean:Q", scale=y_scale), tooltip=[alt.Tooltip("step:Q"), alt.Tooltip("mean:Q", format=".3f",
                                                                                             title="mean loss")])
    layers = [raw, smooth]
    if at_step is not None:
        layers.append(alt.Chart(pd.DataFrame({"step": [at_step]})).mark_rule(color="#e4007c", strokeDash=[4, 3])
                      .encode(x="step:Q"))
    return alt.layer(*layers).properties(width=width, height=height, title="Loss")


def scores_frame(steps: Sequence[int], scores: Sequence[dict[str, np.ndarray]],
                 names: Sequence[str] = PATTERN_SCORES) -> pd.DataFrame:
    """Long frame: step, head ("L1 H2"), score (title), value, for every snapshot and head."""
    rows = []
    for step, s in zip(steps, scores):
        n_layers, n_heads = s["entropy"].shape
        for name in names:
            for layer in range(n_layers):
                for h in range(n_heads):
                    value = float(s[name][layer, h])
                    if np.isfinite(value):
                        rows.append((int(step), head_name(layer, h), SCORE_TITLES[name], value))
    return pd.DataFrame(rows, columns=["step", "head", "score", "value"])


def scores_chart(steps: Sequence[int], scores: Sequence[dict[str, np.ndarray]], *, max_steps: int,
                 names: Sequence[str] = PATTERN_SCORES, at_step: int | None = None, width: int = 240,
                 height: int = 180) -> alt.FacetChart | alt.LayerChart:
    """Each pattern score of every head over training steps, one panel per score, one line per head."""
    df = scores_frame(steps, scores, names)
    present = [SCORE_TITLES[n] for n in names if SCORE_TITLES[n] in set(df["score"])]
    base = alt.Chart(df).mark_line(point=alt.OverlayMarkDef(size=14)).encode(
        x=alt.X("step:Q", scale=alt.Scale(domain=[0, max_steps]), title="training step"),
        y=alt.Y("value:Q", scale=alt.Scale(domain=[0, 1]), title="score"),
        color=alt.Color("head:N", scale=alt.Scale(scheme="tableau10"), title="head",
                        legend=alt.Legend(orient="right", columns=1)),
        tooltip=["head:N", "score:N", "step:Q", alt.Tooltip("value:Q", format=".2f")],
    )
    layers = [base]
    if at_step is not None:
        layers.append(alt.Chart(pd.DataFrame({"at": [at_step]})).mark_rule(color="#e4007c", strokeDash=[4, 3])
                      .encode(x="at:Q"))
    chart = alt.layer(*layers, data=df).properties(width=width, height=height)
    return chart.facet(column=alt.Column("score:N", title=None, sort=present,
                                         header=alt.Header(labelFontSize=13)))


def score_table(scores: dict[str, np.ndarray]) -> pd.DataFrame:
    """One row per head: every score and its one-line verdict."""
    n_layers, n_heads = scores["entropy"].shape
    rows = []
    for layer in range(n_layers):
        for h in range(n_heads):
            row = {"layer": layer + 1, "head": h + 1}
            row |= {SCORE_TITLES[n]: float(scores[n][layer, h]) for n in SCORE_NAMES}
            row["verdict"] = verdict(scores, layer, h)[1].split(": ", 1)[1]
            rows.append(row)
    return pd.DataFrame(rows)
