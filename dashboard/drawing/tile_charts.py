"""Charts of the tiled attention loop: data in, Altair chart out (no Streamlit here)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd

from attn_core.attention.flash import TilePlan
from dashboard.drawing.cells import shown_labels
from dashboard.i18n import N_, _

STATUS = (N_("done"), N_("this tile"), N_("to do"), N_("skipped (all masked)"), N_("masked cell"))
STATUS_COLOURS = ("#4c78a8", "#f58518", "#e8eef6", "#bdbdbd", "#f2f2f2")
LABEL_PX = 13  # the axes' label size: a token gets its label while its cell is at least this high


def tile_frame(plan: TilePlan, mask_bool: np.ndarray | None, current: int, weights: np.ndarray) -> pd.DataFrame:
    """One row per (query, key) cell: its tile's status at step ``current`` of ``plan.order()`` and the final
    attention weight (shown in tiles that are done)."""
    order = plan.order()
    position = {(i, j): n for n, (i, j, __) in enumerate(order)}
    rows = []
    for i, j, computed in order:
        n = position[(i, j)]
        if not computed:
            status = "skipped (all masked)"
        elif n == current:
            status = "this tile"
        else:
            status = "done" if n < current else "to do"
        for q in plan.rows(i):
            for k in plan.cols(j):
                hidden = mask_bool is not None and bool(mask_bool[q, k])
                cell = "masked cell" if hidden and computed else status
                value = float(weights[q, k]) if status in ("done", "this tile") and not hidden else np.nan
                rows.append((q, k, i, j, cell, value))
    return pd.DataFrame(rows, columns=["q", "k", "query_tile", "key_tile", "status", "weight"])


def label_every(n: int, size_px: int, font_px: int = LABEL_PX) -> int:
    """Every how many tokens an axis of ``n`` cells over ``size_px`` has room for a label ``font_px`` high: 1 (every
    token) while the cells are at least that high."""
    return max(1, math.ceil(font_px * n / max(size_px, 1)))


def tile_grid_chart(frame: pd.DataFrame, labels: Sequence[str], size_px: int, *, numbers: bool,
                    title: Sequence[str] = ()) -> alt.LayerChart:
    """The num_tokens x num_tokens grid coloured by tile status, tile borders drawn, weights on finished cells.
    Every token is labelled on both axes (upright keys), or every :func:`label_every`-th where the cells are
    smaller than a label. ``title``: its lines (a half column is too narrow for one long line)."""
    n = len(labels)
    every = label_every(n, size_px)
    ticks = list(range(0, n, every))
    label_expr = "[" + ",".join(_js(s) for s in labels) + "][datum.value]"
    # labelOverlap off: on an ordinal axis Vega-Lite drops every other label whose box touches the next
    axis_x = alt.Axis(labelExpr=label_expr, labelAngle=-90, title=_("key (tile column)"), labelFontSize=LABEL_PX,
                      titleFontSize=13, values=ticks, labelOverlap=False)
    axis_y = alt.Axis(labelExpr=label_expr, title=_("query (tile row)"), labelFontSize=LABEL_PX, titleFontSize=13,
                      values=ticks, labelOverlap=False)
    base = alt.Chart(frame).encode(
        x=alt.X("k:O", sort="ascending", axis=axis_x, scale=alt.Scale(domain=list(range(n)))),
        y=alt.Y("q:O", sort="ascending", axis=axis_y, scale=alt.Scale(domain=list(range(n)))),
    )
    # the tooltip shows the status in this run's language (the data keeps the English, as the legend's labelExpr)
    cells = base.mark_rect(stroke="white", strokeWidth=1).transform_calculate(
        shown_status=shown_labels(STATUS, "datum.status"), query_token=label_expr.replace("datum.value", "datum.q"),
        key_token=label_expr.replace("datum.value", "datum.k")).encode(
        color=alt.Color("status:N", scale=alt.Scale(domain=list(STATUS), range=list(STATUS_COLOURS)),
                        legend=alt.Legend(title=_("tile"), orient="bottom", columns=2, labelFontSize=13,
                                          labelExpr=shown_labels(STATUS),
                                          titleFontSize=13)),
        tooltip=[alt.Tooltip("query_token:N", title=_("query")), alt.Tooltip("key_token:N", title=_("key")),
                 alt.Tooltip("query_tile:Q", title=_("query tile")), alt.Tooltip("key_tile:Q", title=_("key tile")),
                 alt.Tooltip("shown_status:N", title=_("status")),
                 alt.Tooltip("weight:Q", format=".3f", title=_("weight"))],
    )
    layers = [cells]
    if numbers:
        layers.append(base.mark_text(fontSize=13).transform_filter("isValid(datum.weight)").encode(
            text=alt.Text("weight:Q", format=".2f"),
            color=alt.condition("datum.status == 'this tile'", alt.value("black"), alt.value("white"))))
    chart = alt.layer(*layers).properties(width=size_px, height=size_px, autosize=alt.AutoSizeParams(type="pad"))
    return chart.properties(title=alt.Title(list(title), fontSize=14, anchor="start")) if title else chart


def _js(text: str) -> str:
    """A JavaScript string literal for a label (quotes and backslashes escaped)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", " ") + "'"
