"""Charts of the Windows & sinks page: data in, Altair chart out (no Streamlit here)."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from dashboard.drawing.cells import TOP_LEGEND_PX, shown_labels
from dashboard.i18n import N_, _

FONT = dict(labelFontSize=13, titleFontSize=13)
SEEN = [N_("visible"), N_("hidden")]  # a mask cell's two values, as the data holds them
PAD = alt.AutoSizeParams(type="pad")  # the sizes given are the plot's: Streamlit's default "fit" squeezed them
SETTING_COLOURS = ("#4c78a8", "#e45756", "#54a24b")  # full | window | window + sinks
LOSS_HEIGHT = 260  # the loss chart's plot, px


def loss_frame(losses: dict[str, np.ndarray], smooth: int) -> pd.DataFrame:
    """Per-token losses of each setting as one long frame, smoothed by a running mean of ``smooth`` tokens."""
    frames = []
    for name, values in losses.items():
        series = pd.Series(values).rolling(smooth, min_periods=1).mean()
        frames.append(pd.DataFrame({"position": np.arange(2, len(values) + 2), "loss": series, "setting": name}))
    return pd.concat(frames, ignore_index=True)


def loss_curve_chart(frame: pd.DataFrame, width: int, window: int | None) -> alt.LayerChart:
    """Next-token loss along the text, one line per setting; a rule where the first tokens leave the window."""
    settings = list(dict.fromkeys(frame["setting"]))
    lines = alt.Chart(frame).mark_line(strokeWidth=2).encode(
        x=alt.X("position:Q", title=_("token position"), axis=alt.Axis(**FONT)),
        # short enough for the plot's height: Vega cuts an axis title at its axis's length (the caption says
        # "running mean")
        y=alt.Y("loss:Q", title=_("next-token loss (nats)"), axis=alt.Axis(**FONT)),
        color=alt.Color("setting:N", scale=alt.Scale(domain=settings, range=list(SETTING_COLOURS[:len(settings)])),
                        # one entry a line on a narrow (phone) chart: in one row they ran past its right edge
                        legend=alt.Legend(orient="top", offset=TOP_LEGEND_PX, title=None, labelFontSize=13,
                                          labelLimit=360,
                                          columns=1 if width < 420 else alt.Undefined)),
        tooltip=["setting:N", "position:Q", alt.Tooltip("loss:Q", format=".2f")])
    layers = [lines]
    if window:
        rule = pd.DataFrame({"position": [window + 1], "label": [f"token 1 leaves the window (position {window + 1})"]})
        layers.append(alt.Chart(rule).mark_rule(strokeDash=[4, 4], color="#888").encode(
            x="position:Q", tooltip=["label:N"]))
    return alt.layer(*layers).properties(width=width, height=LOSS_HEIGHT, autosize=PAD)


def mask_picture(num_tokens: int, window: int, sinks: int, positions: int = 20) -> tuple[int, int, int]:
    """(positions, window, sinks) to draw the masks with: the first ``positions`` tokens, and the setting itself
    when its window and sinks show there; else scaled down (a window of half the positions, at most a fifth of them
    as sinks) so that "window" differs from "full causal" and "window + sinks" from both."""
    n = min(num_tokens, positions)
    k = min(sinks, max(1, n // 5))
    w = window if window + k < n else max(1, (n - k) // 2)  # the last query must lose a key that is no sink
    return n, w, k


def masks_frame(masks: dict[str, np.ndarray]) -> pd.DataFrame:
    """Each mask (True where hidden) as rows q, k, panel, seen."""
    rows = []
    for panel, hidden in masks.items():
        q, k = np.indices(hidden.shape)
        rows.append(pd.DataFrame({"q": q.ravel() + 1, "k": k.ravel() + 1, "panel": panel,
                                  "seen": np.where(hidden.ravel(), "hidden", "visible")}))
    return pd.concat(rows, ignore_index=True)


def masks_chart(frame: pd.DataFrame, cell_px: int, columns: int = 3) -> alt.FacetChart:
    """The masks side by side, ``columns`` a row: which key (column) each query (row) may see."""
    n = int(frame["q"].max())
    return alt.Chart(frame).mark_rect(stroke="white", strokeWidth=0.5).encode(
        x=alt.X("k:O", title=_("key position"), axis=alt.Axis(labelAngle=0, **FONT, values=_ticks(n))),
        y=alt.Y("q:O", title=_("query position"), axis=alt.Axis(**FONT, values=_ticks(n))),
        color=alt.Color("seen:N", scale=alt.Scale(domain=SEEN, range=["#4c78a8", "#eeeeee"]),
                        legend=alt.Legend(orient="top", title=None, labelFontSize=13, labelExpr=shown_labels(SEEN))),
        tooltip=["panel:N", "q:O", "k:O", "seen:N"],
    ).properties(width=cell_px * n, height=cell_px * n).facet(
        facet=alt.Facet("panel:N", sort=list(dict.fromkeys(frame["panel"])), title=None,
                        header=alt.Header(labelFontSize=14)), columns=columns)


def _ticks(n: int) -> list[int]:
    step = 1 if n <= 12 else 4
    return [1, *range(step, n + 1, step)] if step > 1 else list(range(1, n + 1))


def layer_head_chart(shares: np.ndarray, title: str, cell_px: int) -> alt.Chart:
    """Attention on token 1 for every layer (row) and head (column), 0..1."""
    layers, heads = shares.shape
    frame = pd.DataFrame({"layer": np.repeat(np.arange(1, layers + 1), heads),
                          "head": np.tile(np.arange(1, heads + 1), layers), "share": shares.ravel()})
    return alt.Chart(frame, title=alt.Title(title, fontSize=14)).mark_rect().encode(
        x=alt.X("head:O", title=_("head"), axis=alt.Axis(labelAngle=0, **FONT)),
        y=alt.Y("layer:O", title=_("layer"), axis=alt.Axis(**FONT, values=_ticks(layers))),
        color=alt.Color("share:Q", scale=alt.Scale(domain=[0, 1], scheme="blues"),
                        legend=alt.Legend(title=_("on token 1"), labelFontSize=12, titleFontSize=12)),
        tooltip=["layer:O", "head:O", alt.Tooltip("share:Q", format=".2f")],
    ).properties(width=cell_px * heads, height=min(cell_px, 16) * layers, autosize=PAD)


def curve_chart(frame: pd.DataFrame, x: str, y: str, colour: str | None, width: int, height: int = 220, *,
                x_title: str, y_title: str) -> alt.Chart:
    """A plain line chart (RoPE's angles and scores), one line per ``colour`` value."""
    enc = dict(x=alt.X(f"{x}:Q", title=x_title, axis=alt.Axis(**FONT)),
               y=alt.Y(f"{y}:Q", title=y_title, axis=alt.Axis(**FONT)),
               tooltip=[alt.Tooltip(f"{x}:Q"), alt.Tooltip(f"{y}:Q", format=".3f")])
    if colour:
        enc["color"] = alt.Color(f"{colour}:N", legend=alt.Legend(orient="top", offset=TOP_LEGEND_PX, title=None,
                                                                     labelFontSize=13, labelLimit=300))
    return alt.Chart(frame).mark_line(strokeWidth=2).encode(**enc).properties(width=width, height=height, autosize=PAD)


def similarity_chart(matrix: np.ndarray, title: str, side_px: int) -> alt.Chart:
    """A positions x positions similarity matrix, −1..1."""
    n = matrix.shape[0]
    q, k = np.indices(matrix.shape)
    frame = pd.DataFrame({"i": q.ravel(), "j": k.ravel(), "similarity": matrix.ravel()})
    return alt.Chart(frame, title=alt.Title(title, fontSize=14)).mark_rect().encode(
        x=alt.X("j:O", title=_("position"), axis=alt.Axis(values=list(range(0, n, 16)), labelAngle=0, **FONT)),
        y=alt.Y("i:O", title=_("position"), axis=alt.Axis(values=list(range(0, n, 16)), **FONT)),
        color=alt.Color("similarity:Q", scale=alt.Scale(domain=[-1, 1], scheme="redblue", reverse=True),
                        title=_("similarity"), legend=alt.Legend(labelFontSize=12, titleFontSize=12)),
        tooltip=["i:O", "j:O", alt.Tooltip("similarity:Q", title=_("similarity"), format=".2f")],
    ).properties(width=side_px, height=side_px, autosize=PAD)
