"""Charts of "does this head matter": per-token loss along the text with and without heads, and where a token's
information came from (raw attention of two layers beside the rollout). Data in, Altair chart out; every word on a
chart comes in as an argument (already translated), so nothing here needs the session's language."""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd

from dashboard.drawing.cells import TOP_LEGEND_PX

FONT = dict(labelFontSize=13, titleFontSize=13)
PAD = alt.AutoSizeParams(type="pad")  # the sizes given are the plot's
LEVEL_LABEL_PX = 140  # a bar's band that holds "without random set 1" level at 13 px
COLOURS = ("#4c78a8", "#e45756", "#b5b5b5", "#9d9d9d", "#858585", "#54a24b")


def loss_frame(losses: dict[str, np.ndarray], pieces: Sequence[str]) -> pd.DataFrame:
    """Per-token losses of each setting as one long frame: ``losses[name][t]`` is the loss of token t + 1, shown at
    its 1-based position t + 2 with its text ``pieces[t + 1]``."""
    frames = []
    for name, values in losses.items():
        values = np.asarray(values, dtype=float)
        frames.append(pd.DataFrame({"position": np.arange(2, len(values) + 2), "token": list(pieces[1:len(values) + 1]),
                                    "loss": values, "setting": name}))
    return pd.concat(frames, ignore_index=True)


def loss_chart(frame: pd.DataFrame, width: int, x_title: str, y_title: str) -> alt.Chart:
    """Next-token loss along the text, one line per setting (the first plain, the second red, the rest grey)."""
    settings = list(dict.fromkeys(frame["setting"]))
    colours = list(COLOURS[:2]) + [COLOURS[2 + i % 3] for i in range(max(0, len(settings) - 2))]
    return alt.Chart(frame).mark_line(strokeWidth=2, point=alt.OverlayMarkDef(size=18)).encode(
        x=alt.X("position:Q", title=x_title, axis=alt.Axis(**FONT, tickMinStep=1)),
        y=alt.Y("loss:Q", title=y_title, axis=alt.Axis(**FONT)),
        color=alt.Color("setting:N", scale=alt.Scale(domain=settings, range=colours[:len(settings)]),
                        legend=alt.Legend(orient="top", offset=TOP_LEGEND_PX, title=None, labelFontSize=13,
                                          labelLimit=360)),
        tooltip=["setting:N", "position:Q", "token:N", alt.Tooltip("loss:Q", format=".2f")],
    ).properties(width=width, height=240, autosize=PAD)


def sources_frame(rows: dict[str, np.ndarray], pieces: Sequence[str]) -> pd.DataFrame:
    """Each named row (one query's weights over the keys, summing to 1) as rows position, token, share, view."""
    frames = [pd.DataFrame({"position": np.arange(1, len(r) + 1), "token": list(pieces[:len(r)]),
                            "share": np.asarray(r, dtype=float), "view": name}) for name, r in rows.items()]
    return pd.concat(frames, ignore_index=True)


def sources_chart(frame: pd.DataFrame, width: int, x_title: str, y_title: str) -> alt.FacetChart:
    """One bar per earlier token for each view (raw attention of a layer, the rollout), stacked one above the other
    on the same 0-1 scale so the rows compare at a glance."""
    views = list(dict.fromkeys(frame["view"]))
    return alt.Chart(frame).mark_bar().encode(
        x=alt.X("position:O", title=x_title, axis=alt.Axis(labelAngle=0, **FONT)),
        y=alt.Y("share:Q", title=y_title, scale=alt.Scale(domain=[0, 1]), axis=alt.Axis(format="%", **FONT)),
        color=alt.Color("view:N", scale=alt.Scale(domain=views, range=list(COLOURS[:1] + COLOURS[5:] + COLOURS[1:2])),
                        legend=None),
        tooltip=["view:N", "position:O", "token:N", alt.Tooltip("share:Q", format=".1%")],
    ).properties(width=width, height=90).facet(
        row=alt.Row("view:N", sort=views, title=None, header=alt.Header(labelFontSize=13, labelAngle=0,
                                                                         labelAlign="left", labelOrient="top")))


def ratio_frame(names: Sequence[str], losses: Sequence[float]) -> pd.DataFrame:
    """One bar per setting of the knockout comparison: its loss on the repeat."""
    return pd.DataFrame({"setting": list(names), "loss": [float(v) for v in losses]})


def ratio_chart(frame: pd.DataFrame, width: int, y_title: str) -> alt.Chart:
    """The loss on the repeat, plain, without the top heads, and without each random set (bars, values on them)."""
    settings = list(frame["setting"])
    colours = list(COLOURS[:2]) + [COLOURS[2 + i % 3] for i in range(max(0, len(settings) - 2))]
    # level labels where each bar has room for "without random set 1"; else slanted (level, every other one was hidden)
    angle = 0 if width / max(len(settings), 1) >= LEVEL_LABEL_PX else -30
    bars = alt.Chart(frame).mark_bar().encode(
        x=alt.X("setting:N", sort=settings, title=None, axis=alt.Axis(labelAngle=angle, labelLimit=200, **FONT)),
        y=alt.Y("loss:Q", title=y_title, axis=alt.Axis(**FONT)),
        color=alt.Color("setting:N", scale=alt.Scale(domain=settings, range=colours), legend=None),
        tooltip=["setting:N", alt.Tooltip("loss:Q", format=".2f")])
    text = bars.mark_text(dy=-8, fontSize=13).encode(text=alt.Text("loss:Q", format=".2f"), color=alt.value("#333"))
    return alt.layer(bars, text).properties(width=width, height=220, autosize=PAD)
