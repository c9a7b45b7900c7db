"""Pure chart builders for the "Text → vectors" page: data in, Altair chart out. No Streamlit here.

Rows and positions are integers in their own order (``sort="ascending"``), named through ``labelExpr``: repeated
tokens never collapse and Vega-Lite never sorts by a list of labels (docs/measurements.md).
"""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import pandas as pd

from dashboard.drawing.cells import label_expr, shown_labels
from dashboard.i18n import N_, _

KIND_COLORS = {N_("token"): "#e8e8e8", N_("input"): "#4c78a8", N_("target"): "#f58518"}  # tableau10 blue / orange
# Streamlit's default autosize ("fit") squeezes the plot so that labels + plot = width: 200 px of labels left a
# 15 px plot. "pad": width is the plot's, the labels come on top.
PAD = alt.AutoSizeParams(type="pad")
TEXT_MIN_PX = 30  # ids as text on the cells only from this cell width (5-digit ids at 10 px)


def window_frame(ids: Sequence[int], pieces: Sequence[str], windows: Sequence[tuple[int, Sequence[int],
                 Sequence[int]]]) -> pd.DataFrame:
    """One row per drawn cell: the token strip (row 0) and, for window b, its inputs (row 2b+1) and its targets
    (row 2b+2, one position further). ``windows``: (start, inputs, targets) for each."""
    rows = [{"row": 0, "pos": p, "id": int(t), "piece": pieces[p], "kind": "token"} for p, t in enumerate(ids)]
    for b, (start, inputs, targets) in enumerate(windows):
        for kind, offset, seq in (("input", 0, inputs), ("target", 1, targets)):
            for j, t in enumerate(seq):
                p = start + offset + j
                if p < len(ids):
                    rows.append({"row": 2 * b + 1 + (kind == "target"), "pos": p, "id": int(t),
                                 "piece": pieces[p], "kind": kind})
    return pd.DataFrame(rows)


def window_row_labels(n_windows: int) -> list[str]:
    labels = ["text"]
    for b in range(n_windows):
        labels += [f"x[{b}] input", f"y[{b}] target"]
    return labels


def window_strip(df: pd.DataFrame, pieces: Sequence[str], row_labels: Sequence[str], cell_px: int,
                 row_px: int = 20) -> alt.LayerChart:
    """The token strip with every window's input and target cells under it: overlap shows as cells stacked in one
    column (stride < max_length), gaps as skipped columns (stride > max_length)."""
    x = alt.X("pos:O", sort="ascending", title=_("token position (GPT-2 piece)"),
              axis=alt.Axis(labelExpr=label_expr([f"{i}: {p}" for i, p in enumerate(pieces)]), labelAngle=-90,
                            labelLimit=110, labelOverlap=False))
    y = alt.Y("row:O", sort="ascending", title=None, axis=alt.Axis(labelExpr=label_expr(list(row_labels)),
                                                                    labelOverlap=False))
    color = alt.Color("kind:N", title=None, scale=alt.Scale(domain=list(KIND_COLORS), range=list(KIND_COLORS.values())),
                      legend=alt.Legend(orient="top", labelExpr=shown_labels(KIND_COLORS)))
    base = alt.Chart().encode(x=x, y=y)
    rect = base.mark_rect(stroke="white", strokeWidth=1).encode(color=color, tooltip=["pos", "piece", "id", "kind"])
    layers = [rect]
    if cell_px >= TEXT_MIN_PX:
        layers.append(base.mark_text(fontSize=9).encode(
            text="id:Q", color=alt.condition("datum.kind == 'token'", alt.value("black"), alt.value("white"))))
    return alt.layer(*layers, data=df).properties(width=alt.Step(cell_px), height=alt.Step(row_px), autosize=PAD)


def weight_bars(df: pd.DataFrame, labels: Sequence[str], width: int, title: str = "",
                row_px: int = 20) -> alt.LayerChart:
    """Horizontal bars of ``weight`` (0-1) per integer ``row`` named by ``labels``, the weight written at each bar's
    end; a ``hard`` column (bool) outlines the row a hard lookup returns."""
    y = alt.Y("row:O", sort="ascending", title=None, axis=alt.Axis(labelExpr=label_expr(list(labels)),
                                                                    labelLimit=200, labelOverlap=False))
    x = alt.X("weight:Q", scale=alt.Scale(domain=[0, 1]), title=_("softmax weight"))
    tooltip = [c for c in df.columns if c != "row"]
    bars = alt.Chart().mark_bar(color="#4c78a8").encode(
        x=x, y=y, tooltip=tooltip,
        stroke=alt.condition("datum.hard", alt.value("#e45756"), alt.value(None)),
        strokeWidth=alt.condition("datum.hard", alt.value(3), alt.value(0)))
    text = alt.Chart().mark_text(align="left", dx=4, fontSize=11).encode(x=x, y=y, text=alt.Text("weight:Q",
                                                                                                  format=".3f"))
    chart = alt.layer(bars, text, data=df).properties(width=width, height=alt.Step(row_px), autosize=PAD)
    return chart.properties(title=title) if title else chart
