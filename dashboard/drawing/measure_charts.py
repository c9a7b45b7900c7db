"""Charts of measurements: bars (time per implementation, with each repeat's spread) and lines (time or memory
against sequence length), axes fitted to what one run measured. Data in, Altair out; no Streamlit."""

from __future__ import annotations

import altair as alt
import pandas as pd

from dashboard.drawing.cells import layered
from dashboard.i18n import _

LOG_Y_SPAN = 10  # a log time axis only once the times span this factor: below it a linear axis from 0 reads better


def bar_chart(df: pd.DataFrame, x: str, y: str, color: str | None = None, title: str = "",
              width: int = 520, spread: bool = False) -> alt.Chart | alt.LayerChart:
    """Horizontal bars of ``x`` per ``y``, grouped by ``color`` (benchmarks: ms per implementation).
    ``spread``: a thin line over each bar from ``{x}_min`` to ``{x}_max`` (the fastest and slowest repeat)."""
    # one slow repeat scaled a linear axis so that the book-size bars vanished (docs/measurements.md): once the
    # drawn times span LOG_Y_SPAN, a log axis fitted to them (bars then start at its low end)
    drawn = pd.concat([pd.to_numeric(df[c]) for c in (x, f"{x}_min", f"{x}_max") if spread or c == x])
    drawn = drawn[drawn > 0]
    # a linear axis from 0 runs a fifth past the longest line: room for the number written after it
    scale = alt.Scale(domain=[0, float(drawn.max()) * 1.2], nice=False) if len(drawn) else alt.Scale()
    if len(drawn) and drawn.max() >= LOG_Y_SPAN * drawn.min():
        scale = alt.Scale(type="log", domain=[float(drawn.min()) / 1.5, float(drawn.max()) * 3], nice=False)
    enc = dict(y=alt.Y(f"{y}:N", sort=alt.EncodingSortField(field=x, op="min", order="ascending"), title=None,
                       axis=alt.Axis(labelLimit=0)),
               x=alt.X(f"{x}:Q", title=_("{axis} (log scale)", axis=x) if scale.type == "log" else x, scale=scale),
               tooltip=list(df.columns))
    if color:
        enc["color"] = alt.Color(f"{color}:N", scale=alt.Scale(scheme="tableau10"), legend=alt.Legend(labelLimit=0))
        enc["yOffset"] = alt.YOffset(f"{color}:N")
    bars = alt.Chart().mark_bar().encode(**enc)
    # each bar's value (the median it draws) at its end: one slow implementation (the wrapper, at the book's size)
    # shrinks the others to slivers, whose numbers still read. With the spread line through the bar's middle, the
    # number goes past the line's end (the slowest repeat): set above the line, it ran into it.
    at = {k: v for k, v in enc.items() if k in ("y", "yOffset")}
    values = alt.Chart().mark_text(align="left", baseline="middle", dx=4, fontSize=11).encode(
        x=alt.X(f"{x}_max:Q" if spread else f"{x}:Q", scale=scale), text=alt.Text(f"{x}:Q", format=".3~g"), **at)
    layers = [bars, values]
    if spread:
        rule = {k: v for k, v in enc.items() if k in ("y", "yOffset", "tooltip")}
        layers.insert(1, alt.Chart().mark_rule(color="black", strokeWidth=2).encode(
            x=alt.X(f"{x}_min:Q", scale=scale), x2=alt.X2(f"{x}_max"), **rule))
    chart = layered(df, *layers)
    chart = chart.properties(width=width)
    return chart.properties(title=title) if title else chart


def line_chart(df: pd.DataFrame, x: str, y: str, color: str, log: bool | None = None,
               width: int = 520, height: int = 300, x_title: str | None = None,
               y_title: str | None = None, legend_columns: int = 1) -> alt.Chart:
    """Lines with large points (time vs sequence length), axes fitted to the data one run gives.

    x: a log axis (the sizes double) spanning the measured values exactly, ticks at them; a single value sits
    in the middle of a factor-4 span. y: with ``log`` None, logarithmic once the values span ``LOG_Y_SPAN``
    (fitted to them, not run on to the next power of 10), else linear from 0. A run cut short by its budget
    measures one or two sizes: on the old log axes (0.1-10 ms) they filled a thin band of an empty chart.
    Legend names are never cut; the plot keeps ``height`` whatever the legend below it takes (``legend_columns``
    side by side: fewer rows, so a chart low on the page keeps its legend above the fold)."""
    xs = pd.to_numeric(df[x])
    ys = pd.to_numeric(df[y])
    ys = ys[ys > 0]
    lo, hi = (float(xs.min()), float(xs.max())) if len(xs) else (1.0, 2.0)
    x_domain = [lo, hi] if hi > lo else [lo / 2, lo * 2]
    sc_x = alt.Scale(type="log", base=2, domain=x_domain, nice=False, padding=12)
    y_lo, y_hi = (float(ys.min()), float(ys.max())) if len(ys) else (1.0, 1.0)
    if log is None:
        log = y_hi >= LOG_Y_SPAN * y_lo
    if log:
        sc_y = alt.Scale(type="log", domain=[y_lo / 1.25, y_hi * 1.25], nice=False)
    else:
        sc_y = alt.Scale(domain=[0, y_hi * 1.1], nice=False, zero=True)
    ticks = sorted(set(xs.tolist()))
    chart = alt.Chart(df).mark_line(point=alt.OverlayMarkDef(size=80, filled=True), strokeWidth=2.5).encode(
        x=alt.X(f"{x}:Q", scale=sc_x, axis=alt.Axis(values=ticks, format="d", grid=False), title=x_title or x),
        y=alt.Y(f"{y}:Q", scale=sc_y, title=y_title or y),
        # tableau10 as the bars above: Streamlit's own palette drew two of three lines in two blues
        color=alt.Color(f"{color}:N", scale=alt.Scale(scheme="tableau10"),
                        # thin symbols, rows close: Streamlit's theme's thick strokes spaced the entries far apart
                        legend=alt.Legend(labelLimit=0, orient="bottom", columns=legend_columns, rowPadding=2,
                                          symbolStrokeWidth=1, symbolSize=60)),
        tooltip=list(df.columns),
    # "pad": Streamlit's default "fit" squeezed the legend below into the height: the plot was ~30 px tall
    ).properties(width=width, height=height, autosize=alt.AutoSizeParams(type="pad"))
    return chart  # its title: the page's (draw_chart), above it
