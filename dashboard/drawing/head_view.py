"""The line view of one head (what BertViz users love), as a pure chart builder: weights in, Altair out.

Tokens stand in two columns, queries on the left and keys on the right; a line joins each query to
each key it attends to, its opacity the attention weight. Pointing at a token keeps only its lines
(a query's on the left, a key's on the right). Masked pairs (weight exactly 0, or -inf) get no line.
"""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd

from dashboard.i18n import _

MAX_LINE_TOKENS = 64  # above this the lines are a grey fog: the view says so and draws a window
ROW_PX = 30
MIN_WEIGHT = 1e-3  # lines below this are invisible anyway; dropping them keeps the payload small


def line_frame(weights: np.ndarray, labels: Sequence[str], offset: int = 0) -> pd.DataFrame:
    """One row per (query, key) pair with a visible weight: positions, weight and both labels."""
    w = np.asarray(weights, dtype=np.float64)
    q, k = np.nonzero(np.isfinite(w) & (w >= MIN_WEIGHT))
    return pd.DataFrame({
        "q": (q + offset).astype(np.int32),
        "k": (k + offset).astype(np.int32),
        "weight": w[q, k],
        "query": np.asarray(labels, dtype=object)[q + offset] if len(q) else [],
        "key": np.asarray(labels, dtype=object)[k + offset] if len(k) else [],
    })


def token_frame(labels: Sequence[str], start: int, stop: int) -> pd.DataFrame:
    pos = np.arange(start, stop)
    return pd.DataFrame({"pos": pos.astype(np.int32), "label": [labels[i] for i in pos]})


def line_view(weights: np.ndarray, labels: Sequence[str], *, offset: int = 0, width: int = 360,
              title: str = "", ink: str = "#111111", line: str = "#1f5fa8", font_px: int = 15) -> alt.LayerChart:
    """The head view of a (T, T) weight matrix (a window of it when ``offset`` > 0): lines from each query
    (left) to the keys it attends to (right), opacity = weight; hover a token to isolate its lines.
    ``ink``, ``line``: the colours of a pointed-at token and of the lines (the theme's contrast colours)."""
    n = np.shape(weights)[0]
    lines = line_frame(weights, labels, offset)
    tokens = token_frame(labels, offset, offset + n)
    height = max(150, max(ROW_PX, font_px * 2) * n)
    y_scale = alt.Scale(domain=[offset - 0.5, offset + n - 0.5], reverse=True, nice=False, zero=False)
    x_scale = alt.Scale(domain=[0, 1], nice=False)
    hover_q = alt.selection_point(name="hq", fields=["q"], on="pointerover", clear="pointerout", empty=True)
    hover_k = alt.selection_point(name="hk", fields=["k"], on="pointerover", clear="pointerout", empty=True)
    no_axis = dict(axis=None)

    rules = alt.Chart(lines).mark_rule(strokeWidth=2.5, color=line).encode(
        x=alt.X("left:Q", scale=x_scale, **no_axis),
        x2="right:Q",
        y=alt.Y("q:Q", scale=y_scale, **no_axis),
        y2="k:Q",
        opacity=alt.when(hover_q & hover_k).then(
            alt.Opacity("weight:Q", scale=alt.Scale(domain=[0, 1], range=[0, 1]), legend=None)
        ).otherwise(alt.value(0.02)),
        tooltip=[alt.Tooltip("query:N", title=_("query")), alt.Tooltip("key:N", title=_("key")),
                 alt.Tooltip("weight:Q", title=_("weight"), format=".4f")],
    ).transform_calculate(left="0.28", right="0.72")
    text = dict(fontSize=font_px, baseline="middle")
    queries = alt.Chart(tokens).mark_text(align="right", **text).encode(
        x=alt.X("x:Q", scale=x_scale, **no_axis), y=alt.Y("pos:Q", scale=y_scale, **no_axis), text="label:N",
        color=alt.when(hover_q).then(alt.value(ink)).otherwise(alt.value("#9a9a9a")),
    ).transform_calculate(x="0.26", q="datum.pos").add_params(hover_q)
    keys = alt.Chart(tokens).mark_text(align="left", **text).encode(
        x=alt.X("x:Q", scale=x_scale, **no_axis), y=alt.Y("pos:Q", scale=y_scale, **no_axis), text="label:N",
        color=alt.when(hover_k).then(alt.value(ink)).otherwise(alt.value("#9a9a9a")),
    ).transform_calculate(x="0.74", k="datum.pos").add_params(hover_k)
    heads = alt.Chart(pd.DataFrame({"x": [0.26, 0.74], "t": [_("query"), _("key")], "a": ["right", "left"]})).mark_text(
        fontSize=font_px - 2, fontWeight="bold", color=ink, dy=-14).encode(
        x=alt.X("x:Q", scale=x_scale, **no_axis), y=alt.value(0), text="t:N")
    chart = alt.layer(rules, queries, keys, heads).properties(width=width, height=height)
    if title:
        chart = chart.properties(title=title)
    return chart.configure_view(stroke=None)
