"""Pure chart builders: NumPy data in, Altair chart (or PNG bytes) out. No Streamlit here.

Measured rules (docs/engineering.md) they follow:
- token axes are integer positions in token order (``sort="ascending"``), shown with a
  ``labelExpr``: sorting by a list of labels is O(T^3) in Vega-Lite, and repeated words
  would collapse on a nominal axis;
- fixed cell sizes (``alt.Step``): no stretched canvases;
- masked cells (-inf) become NaN + a ``masked`` flag, drawn in neutral grey with "−∞";
- weights on a fixed 0-1 sequential scale, scores on a diverging scale symmetric around 0 (±max |value|);
- value text black on light cells and white on dark ones, by the luminance of the colour drawn;
- rect marks only up to ``MAX_RECT_CELLS`` cells; above that a colour-mapped PNG;
- from ``CANVAS_CELLS`` cells a chart is drawn on a canvas, without an ARIA label per cell (:func:`many_cells`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd

MAX_RECT_CELLS = 16_384  # above this a chart is drawn as a PNG (about 1 s of browser time at 16k)
MAX_PANEL_CELLS = 6_144  # the same for a grid of panels (heads, q/k/v): they are side shows, keep them quick
TEXT_MAX_TOKENS = 24  # value text on cells only up to this many rows/columns (and only in cells that hold it)
# From this many cells (16 x 16) a heatmap is drawn on a canvas and its cells carry no ARIA label: Vega's SVG
# renderer rewrote ~9,000 DOM attributes for a new 32-token sentence, and built a spoken label per cell. The
# chart keeps its title, tooltips and click selection; small charts (the book's 6 x 6) stay SVG.
CANVAS_CELLS = 256
MASK_GREY = "#d0d0d0"
# A 0/1 mask's two colours (0, 1): 1 in the ink of the page, 0 close to its paper, on either theme. On the dark
# page the light theme's near-white 0 cells were a white block and the dark 1 swatch vanished into the page.
MASK_RANGE = ("#f7f7f7", "#404040")
MASK_RANGE_DARK = ("#2f333d", "#e6e6e6")
CHART_PX = 480  # the longer side of a heatmap, in pixels

# Colour-blind-safe schemes (Vega's viridis and blue-orange).
SCHEMES = {"weights": "viridis", "scores": "blueorange", "values": "blueorange", "mask": "greys"}

LEGEND_TITLES = {"weights": "weight", "scores": "value", "mask": "mask", "relative": "÷ row max",
                 "magnitude": "|difference|"}  # "size" said nothing of what is encoded (issue 33)
# Cells outside a sequential scale's 0..top (a mistaken mask's negative or > 1 "weights") in colours viridis never
# takes: clamped, they looked like 0 or 1. OUT_OF_RANGE_TOL keeps float rounding (a weight of 1.0000001) in range.
BELOW_RANGE, ABOVE_RANGE = "#d62728", "#e377c2"  # red, pink
OUT_OF_RANGE_TOL = 1e-6
# What a 0/1 mask's two values mean, as its legend's two entries (a gradient would claim values in between).
MASK_LABELS = ("0 = visible", "1 = hidden")  # the causal mask
DROPOUT_MASK_LABELS = ("0 = kept", "1 = zeroed")


def scale_parts(scale: str) -> tuple[str, float]:
    """A scale name and its top: "weights" (0-1), "weights:2" (0-2, dropout's scaled survivors),
    "relative" (each row divided by its largest value, 0-1), "magnitude:N" (sizes ≥ 0, sequential
    0-N), "scores", "mask"."""
    kind, _, top = scale.partition(":")
    return kind, float(top) if top else 1


def weights_scale(top: float = 1.0) -> str:
    """The scale name for weights that reach ``top`` (e.g. 1/(1-p) after dropout)."""
    return "weights" if top <= 1.0 else f"weights:{top:g}"

# Anchor colours for the PNG raster (viridis; and a blue-white-orange diverging map).
_VIRIDIS = np.array([[68, 1, 84], [72, 40, 120], [62, 74, 137], [49, 104, 142], [38, 130, 142],
                     [31, 158, 137], [53, 183, 121], [109, 205, 89], [180, 222, 44], [253, 231, 37]],
                    dtype=np.float64)
_DIVERGING = np.array([[5, 48, 97], [67, 147, 195], [209, 229, 240], [247, 247, 247],
                       [254, 224, 182], [224, 130, 20], [127, 59, 8]], dtype=np.float64)


BIG_TEXT_PX = 16  # cell values and labels in presentation mode (issue 9: >= 16 px on a projector)
# Axis and legend labels outside presentation mode (dashboard/drawing/present.py's chart config): Vega-Lite's own 10 px
# could not be read from the back of a room at 1280×720 (issue 33); 13 px can, in rows at least 14 px high.
LABEL_PX = 13
MIN_TEXT_PX = 12  # the smallest cell value printed at all


def full_cell_px(big: bool = False, grow: float = 1.0) -> int:
    """The largest cell: 44 px (64 in presentation mode, where a cell must hold a 16 px value), times
    ``grow`` on a screen larger than the 1280×720 projector (dashboard/drawing/screen.py)."""
    return round((64 if big else 44) * grow)


def cell_px(n_rows: int, n_cols: int, max_px: int = CHART_PX, big: bool = False, grow: float = 1.0) -> int:
    """Square cell size that keeps the longer side within ``max_px`` (2 px up to :func:`full_cell_px`)."""
    return int(max(2, min(full_cell_px(big, grow), max_px // max(n_rows, n_cols, 1))))


def text_px(px: int, big: bool, cap: int = 13, grow: float = 1.0, signed: bool = True) -> int | None:
    """Font size of the value printed in a ``px`` cell, or None when it does not fit (a 16 px "-0.25" is
    ~36 px wide: it needs a 40 px cell; a value that is never negative, "0.25", ~31 px: a 34 px cell, so a
    12-token grid keeps its weights in presentation mode; normal text shrinks with the cell down to 20 px
    cells). ``grow`` scales both."""
    if big:
        return round(BIG_TEXT_PX * grow) if px >= value_cell_px(big, grow, signed) else None
    # at least 12 px or none: a 20 px cell printed its value at 8 px, unreadable (issue 20); a 12 px "-0.25" is
    # ~27 px wide, "0.25" ~23 px
    return min(round(cap * grow), max(MIN_TEXT_PX, px // 3 + 2)) if px >= value_cell_px(big, 1, signed) else None


def value_cell_px(big: bool, grow: float = 1.0, signed: bool = True) -> float:
    """The smallest cell that holds its value (:func:`text_px`): 40 px for a 16 px "-0.25", 34 for "0.25" in
    presentation mode (times ``grow``); 30 and 26 px otherwise."""
    if big:
        return (40 if signed else 34) * grow
    return 30 if signed else 26


def rows_crowded(px: int, big: bool, grow: float = 1.0) -> bool:
    """Whether rows ``px`` high are lower than their labels (16 px in presentation mode, 13 px otherwise): then
    Vega drops every other label instead of drawing them over each other (22 tokens in presentation mode)."""
    return px < ((BIG_TEXT_PX + 2) if big else LABEL_PX) * grow


TILT_MIN_PX = 18  # key labels at -45° lie ~0.7 cell apart: in narrower cells they ran together ("1: one2: two")


def key_label_angle(px: int, widest: int) -> int:
    """The angle of the key (column) labels: level when the widest label (in characters, ~8 px each) fits a
    cell, -45° while cells are at least ``TILT_MIN_PX`` wide, upright (-90°, one cell apart) below that."""
    if widest * 8 <= px:  # e.g. the column numbers 0-7 of a 6 x 8 output in 25 px cells
        return 0
    return -45 if px >= TILT_MIN_PX else -90


MAX_RECT_SIDE = 128  # more rows or columns than this: cells under 4 px, unreadable as rects


def needs_raster(n_cells: int, limit: int = MAX_RECT_CELLS) -> bool:
    """Whether ``n_cells`` rect marks would be too slow to draw (then a PNG is used)."""
    return n_cells > limit


def matrix_needs_raster(n_rows: int, n_cols: int) -> bool:
    """A single heatmap is drawn as a PNG above 16k cells, or when a side exceeds 128 (a 6 x 768
    input matrix has only 4.6k cells, but 768 columns of sub-pixel rects help nobody)."""
    return needs_raster(n_rows * n_cols) or max(n_rows, n_cols) > MAX_RECT_SIDE


def many_cells(n_cells: int) -> bool:
    """Whether a chart of ``n_cells`` cells is drawn on a canvas, with no ARIA label per mark (``CANVAS_CELLS``)."""
    return n_cells >= CANVAS_CELLS


def drawn_for(chart: alt.TopLevelMixin, n_cells: int) -> alt.TopLevelMixin:
    """``chart`` with the renderer its cell count calls for: Streamlit reads ``usermeta.embedOptions.renderer``
    (vl-convert's exports ignore it)."""
    return chart.properties(usermeta={"embedOptions": {"renderer": "canvas"}}) if many_cells(n_cells) else chart


def label_expr(labels: Sequence[str]) -> str:
    """A Vega expression that maps an integer position to its label."""
    return f"{json.dumps(list(labels), ensure_ascii=False)}[datum.value]"


def matrix_frame(
    matrix: np.ndarray,
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    offset_rows: int = 0,
    offset_cols: int = 0,
    scale: str = "scores",
) -> pd.DataFrame:
    """Long-form frame of a 2-d matrix: integer ``q``/``k`` positions, ``value`` (NaN where -inf),
    ``masked`` (True where -inf), ``color`` (the value, or with the "relative" scale the value
    divided by its row's largest), and the row/column labels for tooltips."""
    m = np.asarray(matrix, dtype=np.float64)
    n_rows, n_cols = m.shape
    q, k = np.meshgrid(np.arange(n_rows), np.arange(n_cols), indexing="ij")
    flat = m.ravel()
    masked = np.isneginf(flat)
    shade = np.where(np.isfinite(m), m, 0.0)
    if scale_parts(scale)[0] == "relative":
        top = shade.max(axis=1, keepdims=True)
        shade = np.divide(shade, top, out=np.zeros_like(shade), where=top > 0)
    row_labels, col_labels = _distinct(row_labels), _distinct(col_labels)
    return pd.DataFrame({
        "q": (q.ravel() + offset_rows).astype(np.int32),
        "k": (k.ravel() + offset_cols).astype(np.int32),
        "value": np.where(np.isfinite(flat), flat, np.nan),
        "masked": masked,
        "color": shade.ravel(),  # for the colour channel (NaN rows would be dropped)
        "row": pd.Categorical(np.asarray(row_labels, dtype=object)[q.ravel()]),
        "col": pd.Categorical(np.asarray(col_labels, dtype=object)[k.ravel()]),
    })


def _distinct(labels: Sequence[str]) -> Sequence[str]:
    """Labels as axis values: a repeated label would merge two rows on a nominal axis, so repeats get
    their position ("3: the")."""
    if len(set(labels)) == len(labels):
        return labels
    return [f"{i + 1}: {label}" for i, label in enumerate(labels)]


def mask_range(dark: bool = False) -> list[str]:
    """The colours of a mask's 0 and 1 on the light or the dark page."""
    return list(MASK_RANGE_DARK if dark else MASK_RANGE)


def color_scale(scale: str, dark: bool = False) -> alt.Scale:
    """Weights: fixed sequential 0-1 (0 to 1/(1-p) after dropout; per-row 0-1 when "relative").
    Masks: 0/1 greys. Scores: diverging, centred on 0; :func:`symmetric_domain` makes it symmetric.

    No scale depends on the data's values, so one chart spec serves any data of its shape."""
    kind, top = scale_parts(scale)
    if kind in ("weights", "relative", "magnitude"):
        return alt.Scale(scheme=SCHEMES["weights"], domain=[0, top])
    if scale == "mask":
        return alt.Scale(domain=[0, 1], range=mask_range(dark))
    return alt.Scale(scheme=SCHEMES["scores"], domainMid=0)


def out_of_range_note(matrix: np.ndarray, scale: str) -> str:
    """A line naming the colours of the cells outside a sequential scale (empty when none is): for a caption right
    under the chart, as the legend's gradient cannot show them."""
    kind, top = scale_parts(scale)
    if diverging(scale) or kind in ("mask", "relative"):
        return ""
    m = np.asarray(matrix, dtype=np.float64)
    below, above = int((m < -OUT_OF_RANGE_TOL).sum()), int((m > top + OUT_OF_RANGE_TOL * top).sum())
    parts = ([f"red = below 0 ({below} cell{'s' * (below != 1)})"] if below else []) + (
        [f"pink = above {top:g} ({above} cell{'s' * (above != 1)})"] if above else [])
    return f"Outside the colour scale (0 to {top:g}): " + "; ".join(parts) + "." if parts else ""


def colour_conditions(scale: str) -> list[dict]:
    """The colour channel's conditions: a masked cell grey, and on a sequential scale a cell below 0 or above its
    top in :data:`BELOW_RANGE` / :data:`ABOVE_RANGE` (no data in the spec: one spec still serves any data)."""
    conditions = [{"test": "datum.masked", "value": MASK_GREY}]
    kind, top = scale_parts(scale)
    if not diverging(scale) and kind not in ("mask", "relative"):
        conditions += [{"test": f"datum.color < {-OUT_OF_RANGE_TOL}", "value": BELOW_RANGE},
                       {"test": f"datum.color > {top + OUT_OF_RANGE_TOL * top}", "value": ABOVE_RANGE}]
    return conditions


def layered(df: pd.DataFrame, *layers: alt.Chart) -> alt.LayerChart:
    """``layers`` drawn on one dataset ``df``, given once to the layered chart.

    Its layers are built without data (``alt.Chart()``). Had each layer the frame itself, Altair would
    name each one by hashing its JSON, frame included, and a frame's JSON is its printed table
    (``DataFrame.__repr__``): ~10 ms a layer, ~25 of a new 32-token heatmap's ~37 ms (measured)."""
    return alt.layer(*layers, data=df)


def diverging(scale: str) -> bool:
    """Whether ``scale`` is drawn on the diverging colours (every scale but weights, sizes and masks)."""
    return scale_parts(scale)[0] not in ("weights", "relative", "magnitude", "mask")


def symmetric_domain(scale: str, title: str, groupby: Sequence[str] = ()) -> alt.Chart:
    """An invisible layer (two points without position, one per panel and end) whose colours are -m and +m,
    m = max |value| of the unmasked cells: the layered chart's shared colour scale then spans [-m, m].

    A diverging scale fitted to the data with ``domainMid=0`` stretches each side of 0 separately: +0.16 came
    out as dark as -0.80. A fixed domain in the spec would make the spec depend on the data (a new Vega view
    per sentence, docs/engineering.md); computed by Vega from the data, the spec stays the same. It has no data
    of its own: it reads the layered chart's (see :func:`layered`)."""
    return (alt.Chart().transform_filter("!datum.masked")
            .transform_aggregate(lo="min(color)", hi="max(color)", groupby=list(groupby))
            .transform_calculate(top="max(abs(datum.lo), abs(datum.hi))", bottom="-max(abs(datum.lo), abs(datum.hi))")
            .transform_fold(["bottom", "top"], as_=["end", "color"])
            .mark_point(filled=True, opacity=0, size=0, tooltip=False)  # unfilled points: a legend of symbols
            .encode(color=alt.Color("color:Q", scale=color_scale(scale), title=title)))


def _legend_format(scale: str) -> dict:
    """A diverging legend's labels to two decimals: its ends are ±max |value| (0.87 was labelled "1")."""
    return {"format": ".2~f"} if diverging(scale) else {}


def heatmap_frame(matrix: np.ndarray, row_labels: Sequence[str], col_labels: Sequence[str],
                  offset_rows: int = 0, offset_cols: int = 0, scale: str = "scores") -> pd.DataFrame:
    """The data of :func:`heatmap`: a window of a matrix placed at its true token positions."""
    n_rows, n_cols = np.shape(matrix)
    return matrix_frame(matrix, row_labels[offset_rows:offset_rows + n_rows],
                        col_labels[offset_cols:offset_cols + n_cols], offset_rows, offset_cols, scale)


def facet_frame(matrices: Sequence[np.ndarray], panel_titles: Sequence[str], row_labels: Sequence[str],
                col_labels: Sequence[str] | None = None, scale: str = "scores") -> pd.DataFrame:
    """The data of :func:`facet_grid`: every panel's cells, tagged with its title and order."""
    col_labels = row_labels if col_labels is None else col_labels
    frames = []
    for order, (title, m) in enumerate(zip(panel_titles, matrices)):
        n_rows, n_cols = np.shape(m)
        f = matrix_frame(m, row_labels[:n_rows], col_labels[:n_cols], scale=scale)
        f["panel"] = title
        f["order"] = order
        frames.append(f)
    return pd.concat(frames, ignore_index=True)


def heatmap(
    matrix: np.ndarray,
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    *,
    scale: str = "scores",
    title: str = "",
    x_title: str = "key",
    y_title: str = "query",
    max_px: int = CHART_PX,
    show_text: bool | None = None,
    selectable: bool = False,
    offset_rows: int = 0,
    offset_cols: int = 0,
    text_format: str = ".2f",
    big: bool = False,
    mask_labels: tuple[str, str] = MASK_LABELS,
    grow: float = 1.0,
    dark: bool = False,
) -> alt.LayerChart:
    """A rect heatmap with fixed square cells, grey "−∞" masked cells and tooltips. ``big``: the
    presentation mode's larger cells and 16 px values; ``grow``: cells and values that much larger (a
    screen larger than the 1280×720 projector); ``dark``: a mask's colours for the dark page.

    ``offset_rows``/``offset_cols`` place a zoom window of a larger matrix at its true positions
    (labels are the full label lists). ``selectable`` adds a click selection named ``cell``.
    With ``scale="mask"`` the legend has two entries, ``mask_labels`` (what 0 and 1 mean).
    """
    m = np.asarray(matrix, dtype=np.float64)
    n_rows, n_cols = m.shape
    if needs_raster(n_rows * n_cols):
        raise ValueError(f"{n_rows} x {n_cols} cells is too many for rect marks: use raster_png")
    df = heatmap_frame(m, row_labels, col_labels, offset_rows, offset_cols, scale)
    px, width, height = cell_layout(n_rows, n_cols, max_px, big, grow)
    font = text_px(px, big, grow=grow, signed=diverging(scale))
    if show_text is None:
        show_text = max(n_rows, n_cols) <= TEXT_MAX_TOKENS and font is not None and scale != "mask"
    kind = scale_parts(scale)[0]
    aria = not many_cells(n_rows * n_cols)
    # every label while the cells are at least as high as the label (44 tokens on the whole 820 px column);
    # below that Vega drops every other one (issue 33: forced at 24+ tokens, only every 4th label showed)
    crowded = rows_crowded(px, big, grow)
    x, y = token_axes(n_rows, n_cols, px, col_labels, x_title, y_title, grow=grow,
                      x_axis=dict(labelOverlap=crowded), y_axis=dict(labelOverlap=crowded))
    tooltip = [alt.Tooltip("row:N", title=y_title), alt.Tooltip("col:N", title=x_title),
               alt.Tooltip("value:Q", title="value", format=".4f"), alt.Tooltip("masked:N", title="masked")]
    base = alt.Chart().encode(x=x, y=y)  # the data goes on the layer (see layered)
    if kind == "mask":
        cells = base.transform_calculate(meaning=f"datum.color > 0.5 ? {json.dumps(mask_labels[1])} : "
                                                 f"{json.dumps(mask_labels[0])}").mark_rect(aria=aria).encode(
            color=alt.Color("meaning:N", scale=alt.Scale(domain=list(mask_labels), range=mask_range(dark)),
                            title=LEGEND_TITLES[kind],
                            # below the cells, one entry above the other: never wider than the chart
                            legend=alt.Legend(orient="bottom", direction="vertical", symbolType="square",
                                              symbolStrokeColor="#8c8c8c", symbolStrokeWidth=1, labelLimit=0)),
            tooltip=tooltip,
        )
    else:
        cells = base.mark_rect(aria=aria).encode(
            color=alt.Color("color:Q", scale=color_scale(scale), title=LEGEND_TITLES[kind],
                            # one row still gets a readable legend (30 px showed only "1", "0")
                            legend=alt.Legend(orient="right", gradientLength=min(200, max(80, height)),
                                              **_legend_format(scale)),
                            condition=colour_conditions(scale)),  # not alt.condition: _value_text
            tooltip=tooltip,
        )
    if selectable:
        cell = alt.selection_point(fields=["q", "k"], name="cell", on="click", clear=False, empty=False)
        cells = cells.add_params(cell).encode(
            # channel objects, not alt.condition (see _value_text)
            stroke=alt.StrokeValue(None, condition={"param": cell.name, "empty": False, "value": "#e4007c"}),
            strokeWidth=alt.StrokeWidthValue(0, condition={"param": cell.name, "empty": False, "value": 3}),
        )
    layers = [cells]
    if px >= 20:  # smaller grey cells speak for themselves (the caption says grey = masked)
        layers.append(_masked_text(base, font or min(14, px // 2), aria))
    if show_text:
        layers.append(_value_text(base, font or 12, text_format, aria))
    if diverging(scale):  # last, so the cells stay layer 0 (its two points have no size: they catch no pointer)
        layers.append(symmetric_domain(scale, LEGEND_TITLES[kind]))
    # "pad": the cells keep their size and the labels and legend come on top (Streamlit's default "fit"
    # would squeeze everything into ``width``)
    chart = layered(df, *layers).properties(width=width, height=height, autosize=alt.AutoSizeParams(type="pad"))
    chart = drawn_for(chart, n_rows * n_cols)
    return chart.properties(title=title) if title else chart


def cell_layout(n_rows: int, n_cols: int, max_px: int = CHART_PX, big: bool = False,
                grow: float = 1.0) -> tuple[int, int, int]:
    """(cell side, width, height) of a heatmap: square cells of up to :func:`full_cell_px`; once cells must
    shrink, the longer side is exactly ``max_px``. A T x T chart's size then no longer depends on T, so a
    sentence one token longer keeps the same chart spec and the browser only swaps the data
    (docs/engineering.md)."""
    px = cell_px(n_rows, n_cols, max_px, big, grow)
    if px == full_cell_px(big, grow):  # full-size cells: the chart grows with the matrix
        return px, px * n_cols, px * n_rows
    side = max(2.0, max_px / max(n_rows, n_cols, 1))
    return int(side), round(side * n_cols), round(side * n_rows)


def spec_signature(n_rows: int, n_cols: int, col_labels: Sequence[str], max_px: int, big: bool,
                   grow: float = 1.0) -> tuple:
    """Everything about a matrix's shape and labels that its heatmap spec depends on (the labels only
    through the angle they are drawn at): charts with the same signature share one spec template."""
    px, width, height = cell_layout(n_rows, n_cols, max_px, big, grow)
    widest = max((len(str(c)) for c in col_labels), default=1)
    return (px, width, height, key_label_angle(round(px / grow), widest), rows_crowded(px, big, grow),
            max(n_rows, n_cols) <= TEXT_MAX_TOKENS, many_cells(n_rows * n_cols))


def token_axes(n_rows: int, n_cols: int, px: int, col_labels: Sequence[str], x_title: str, y_title: str,
               x_axis: dict | None = None, y_axis: dict | None = None, grow: float = 1.0) -> tuple[alt.X, alt.Y]:
    """The heatmap axes: the label fields (``col``/``row``) in token order (sorted by position ``k``/``q``).

    The labels travel in the data, not in the spec: a new sentence of the same length then changes
    only the data, which Streamlit's chart swaps in place instead of building a new Vega view (T=32:
    0.5 s instead of 1.1 s after a sentence change, measured). A sort by field is one aggregate
    (never sort by a list of labels: O(T^3)). ``grow``: labels (and cells) that much larger."""
    angle = key_label_angle(round(px / grow), max((len(str(c)) for c in col_labels), default=1))
    # upright labels' boxes are exact: Vega then drops only labels that would clash
    limit = round(120 * grow)
    xa = (dict(labelAngle=angle, labelLimit=limit, labelOverlap=n_cols > 24 or angle == -90, orient="top")
          | (x_axis or {}))
    # labelFlush off: the first row's label sat low, against the second's
    ya = dict(labelLimit=limit, labelOverlap=n_rows > 24, labelFlush=False) | (y_axis or {})
    x = alt.X("col:N", sort=alt.EncodingSortField("k", op="min"), title=x_title, axis=alt.Axis(**xa))
    y = alt.Y("row:N", sort=alt.EncodingSortField("q", op="min"), title=y_title, axis=alt.Axis(**ya))
    return x, y


# Is a cell's colour light, so that black text reads on it? One rule for every scale: Vega looks up the colour
# the cell is drawn in (a layered or faceted chart's shared colour scale is named "color") and compares its
# relative luminance with 0.179, where black and white text have the same contrast (WCAG: (L+0.05)/0.05 =
# 1.05/(L+0.05)). Viridis turns light at ~0.55 of its range; blue-orange is dark at both ends.
LIGHT_CELL = "luminance(scale('color', datum.color)) > 0.179"


def _masked_text(base: alt.Chart, size: int, aria: bool = True) -> alt.Chart:
    """"−∞" on each masked (grey) cell."""
    return (base.transform_filter("datum.masked").mark_text(fontSize=size, aria=aria)
            .encode(text=alt.TextValue("−∞"), color=alt.ColorValue("#555555")))


def _value_text(base: alt.Chart, size: int, text_format: str = ".2f", aria: bool = True) -> alt.Chart:
    """Each unmasked cell's value as text, black on light cells and white on dark ones (``LIGHT_CELL``). With
    the default format an exact zero prints "0" and a value that would round to "0.00" prints in
    scientific notation ("3e-3"), so no coloured cell claims a zero it does not hold."""
    # the channel object, not alt.condition(..., alt.value(...)): Altair 6.3 turns such a dict into a channel
    # through from_dict, rebuilding its table of ~570 schema classes each time (~8 ms a call, measured)
    color = alt.ColorValue("white", condition={"test": LIGHT_CELL, "value": "black"})
    if text_format != ".2f":
        return base.transform_filter("!datum.masked").mark_text(fontSize=size, aria=aria).encode(
            text=alt.Text("value:Q", format=text_format), color=color)
    label = ("datum.value === 0 ? '0' : abs(datum.value) < 0.005 ? format(datum.value, '.0e') "
             ": format(datum.value, '.2f')")
    return (base.transform_filter("!datum.masked").transform_calculate(label=label).mark_text(fontSize=size, aria=aria)
            .encode(text=alt.Text("label:N"), color=color))


def facet_grid(
    matrices: Sequence[np.ndarray],
    panel_titles: Sequence[str],
    row_labels: Sequence[str],
    col_labels: Sequence[str] | None = None,
    *,
    scale: str = "weights",
    columns: int = 4,
    max_px: int = 200,
    x_title: str = "key",
    y_title: str = "query",
    show_text: bool | None = None,
    big: bool = False,
    grow: float = 1.0,
) -> alt.FacetChart:
    """Several same-shaped heatmaps (heads, or steps) as one faceted chart sharing one colour scale.
    ``show_text`` (default: when cells are large enough) prints each value in its cell.

    One faceted chart draws much faster than one chart per panel (docs/engineering.md: 12 heads at T=32,
    1.67 s vs 2.06 s in the browser).
    """
    mats = [np.asarray(m, dtype=np.float64) for m in matrices]
    n_rows, n_cols = mats[0].shape
    col_labels = row_labels if col_labels is None else col_labels
    if needs_raster(len(mats) * n_rows * n_cols, MAX_PANEL_CELLS):
        raise ValueError("too many cells for one faceted chart: draw one raster per panel")
    df = facet_frame(mats, panel_titles, row_labels, col_labels, scale)
    px, width, height = cell_layout(n_rows, n_cols, max_px, big, grow)
    font = text_px(px, big, cap=12, grow=grow, signed=diverging(scale)) if big or px >= 26 * grow else None
    if show_text is None:
        show_text = max(n_rows, n_cols) <= TEXT_MAX_TOKENS and font is not None and scale_parts(scale)[0] != "mask"
    small = max(n_rows, n_cols) > 24
    axis = dict(labelLimit=round(90 * grow), labelOverlap=False, labels=not small, ticks=not small)
    # level when the labels fit a cell ("1", "2" for dims); upright labels' boxes are exact: Vega drops only clashes
    angle = key_label_angle(round(px / grow), max((len(str(c)) for c in col_labels), default=1))
    x, y = token_axes(n_rows, n_cols, px, col_labels, x_title, y_title,
                      x_axis=dict(axis, labelAngle=angle, labelOverlap=angle == -90, orient="bottom"),
                      y_axis=dict(axis, labelOverlap=rows_crowded(px, big, grow)))
    base = alt.Chart().encode(x=x, y=y)  # the data goes on the layer (see layered)
    n_cells = len(mats) * n_rows * n_cols
    aria = not many_cells(n_cells)
    cells = base.mark_rect(aria=aria).encode(
        color=alt.Color("color:Q", scale=color_scale(scale), title=LEGEND_TITLES[scale_parts(scale)[0]],
                        legend=alt.Legend(**_legend_format(scale)),
                        condition=colour_conditions(scale)),  # not alt.condition: _value_text
        tooltip=[alt.Tooltip("panel:N", title="panel"), alt.Tooltip("row:N", title=y_title),
                 alt.Tooltip("col:N", title=x_title), alt.Tooltip("value:Q", format=".4f"),
                 alt.Tooltip("masked:N")],
    )
    layers = [cells]
    if px >= 20:
        layers.append(_masked_text(base, font or min(12, px // 2), aria))
    if show_text:
        layers.append(_value_text(base, font or 12, aria=aria))
    if diverging(scale):  # one colour scale for every panel, symmetric around 0
        layers.append(symmetric_domain(scale, LEGEND_TITLES[scale_parts(scale)[0]], groupby=["panel"]))
    chart = layered(df, *layers).properties(width=width, height=height)
    header_px = round((BIG_TEXT_PX + 2 if big else 13) * grow)
    return drawn_for(chart.facet(
        facet=alt.Facet("panel:N", title=None, sort=alt.SortField("order"),
                        # panel titles, wrapped to the panel's width (a longer title widened its column)
                        header=alt.Header(labelFontSize=header_px, labelExpr=wrap_expr(width, header_px))),
        columns=columns,
    ).properties(autosize=alt.AutoSizeParams(type="pad")), n_cells)


def wrap_expr(width_px: int, font_px: int, field: str = "datum.label") -> str:
    """A Vega expression that breaks a text into lines of at most ~``width_px`` (at ``font_px``), at spaces."""
    chars = max(8, int(width_px / (0.55 * font_px)))
    return f"split(trim(replace({field}, regexp('(.{{1,{chars}}})(\\\\s+|$)', 'g'), '$1\\n')), '\\n')"


def heads_grid(matrices: np.ndarray, labels: Sequence[str], *, scale: str = "weights", columns: int = 4,
               max_px: int = 200) -> alt.FacetChart:
    """One small heatmap per head (head 1 ... head H) in one faceted chart."""
    mats = list(np.asarray(matrices, dtype=np.float64))
    return facet_grid(mats, [f"head {h + 1}" for h in range(len(mats))], labels, scale=scale,
                      columns=columns, max_px=max_px)


def numbered_cells(
    numbers: np.ndarray,
    groups: np.ndarray,
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    *,
    panels: Sequence[str] | None = None,
    group_title: str = "head",
    x_title: str = "column",
    y_title: str = "token",
    px: int = 30,
    columns: int | None = None,
) -> alt.Chart | alt.FacetChart:
    """Cells that show their number, coloured by group (e.g. which head a column belongs to).

    ``numbers``/``groups`` are (rows, cols), or (panels, rows, cols) with ``panels`` titles: the
    same numbers before and after a reshape, so learners can follow each one."""
    nums = np.asarray(numbers)
    grps = np.asarray(groups)
    if nums.ndim == 2:
        nums, grps, panels = nums[None], grps[None], [""]
    frames = []
    for p, title in enumerate(panels):
        n_rows, n_cols = nums[p].shape
        q, k = np.meshgrid(np.arange(n_rows), np.arange(n_cols), indexing="ij")
        frames.append(pd.DataFrame({"q": q.ravel(), "k": k.ravel(), "number": nums[p].ravel(),
                                    group_title: [f"{group_title} {g + 1}" for g in grps[p].ravel()],
                                    "panel": title, "order": p}))
    df = pd.concat(frames, ignore_index=True)
    ids = sorted({int(g) for g in grps.ravel()})
    names = [f"{group_title} {g + 1}" for g in ids]  # numeric order: head 2 before head 10
    base = alt.Chart().encode(  # the data goes on the layer (see layered)
        x=alt.X("k:O", title=x_title, axis=alt.Axis(labelExpr=label_expr(col_labels), labelAngle=0)),
        y=alt.Y("q:O", title=y_title, axis=alt.Axis(labelExpr=label_expr(row_labels))),
    )
    cells = base.mark_rect(stroke="white", strokeWidth=1).encode(
        color=alt.Color(f"{group_title}:N", scale=alt.Scale(domain=names, range=distinct_colors(len(names))),
                        sort=names, title=group_title),
        tooltip=["number:Q", f"{group_title}:N"])
    text = base.mark_text(fontSize=11, color="white").encode(text=alt.Text("number:Q", format=".0f"))
    chart = layered(df, cells, text).properties(width=alt.Step(px), height=alt.Step(px))
    if len(panels) == 1:
        return chart
    # Panels narrower than their x title (one head_dim column) need the room between them, or the titles of
    # neighbours run together ("head_dimhead_dim"); ~7 px a character.
    spacing = max(16, 7 * len(x_title) - px * nums.shape[-1] + 12)
    return chart.facet(facet=alt.Facet("panel:N", title=None, sort=alt.SortField("order")),
                       columns=columns or len(panels), spacing=spacing)


# Colour-blind-friendly categorical colours (Tableau 10, then its lighter partners): distinct up to 20.
_CATEGORICAL = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
                "#9c755f", "#bab0ac", "#a0cbe8", "#ffbe7d", "#ff9d9a", "#86bcb6", "#8cd17d", "#f1ce63",
                "#d4a6c8", "#fabfd2", "#d7b5a6", "#79706e"]


def distinct_colors(n: int) -> list[str]:
    """``n`` different colours (up to 20; beyond that they repeat, so callers show at most 20 groups)."""
    return [_CATEGORICAL[i % len(_CATEGORICAL)] for i in range(n)]


def bar_chart(df: pd.DataFrame, x: str, y: str, color: str | None = None, title: str = "",
              width: int = 520, spread: bool = False) -> alt.Chart | alt.LayerChart:
    """Horizontal bars of ``x`` per ``y``, grouped by ``color`` (benchmarks: ms per implementation).
    ``spread``: a thin line over each bar from ``{x}_min`` to ``{x}_max`` (the fastest and slowest repeat)."""
    # one slow repeat (18 ms) scaled a linear axis so that the book-size bars (0.04-0.11 ms) vanished: once the
    # drawn times span LOG_Y_SPAN, a log axis fitted to them (bars then start at its low end)
    drawn = pd.concat([pd.to_numeric(df[c]) for c in (x, f"{x}_min", f"{x}_max") if spread or c == x])
    drawn = drawn[drawn > 0]
    scale = alt.Scale()
    if len(drawn) and drawn.max() >= LOG_Y_SPAN * drawn.min():
        scale = alt.Scale(type="log", domain=[float(drawn.min()) / 1.5, float(drawn.max()) * 3], nice=False)
    enc = dict(y=alt.Y(f"{y}:N", sort=alt.EncodingSortField(field=x, op="min", order="ascending"), title=None,
                       axis=alt.Axis(labelLimit=0)),
               x=alt.X(f"{x}:Q", title=x + (" (log scale)" if scale.type == "log" else ""), scale=scale),
               tooltip=list(df.columns))
    if color:
        enc["color"] = alt.Color(f"{color}:N", scale=alt.Scale(scheme="tableau10"), legend=alt.Legend(labelLimit=0))
        enc["yOffset"] = alt.YOffset(f"{color}:N")
    bars = alt.Chart().mark_bar().encode(**enc)
    # each bar's value at its end (the median it draws, not the slowest repeat: issue 33): one slow implementation
    # (the wrapper, ~400x at the book's size) shrinks the others to slivers, whose numbers still read. With the
    # spread line through the bar's middle, the number sits just above that line.
    at = {k: v for k, v in enc.items() if k in ("y", "yOffset")}
    above = dict(baseline="bottom", dy=-2) if spread else {}
    values = alt.Chart().mark_text(align="left", dx=4, fontSize=11, **above).encode(
        x=alt.X(f"{x}:Q", scale=scale), text=alt.Text(f"{x}:Q", format=".3~g"), **at)
    layers = [bars, values]
    if spread:
        rule = {k: v for k, v in enc.items() if k in ("y", "yOffset", "tooltip")}
        layers.insert(1, alt.Chart().mark_rule(color="black", strokeWidth=2).encode(
            x=alt.X(f"{x}_min:Q", scale=scale), x2=alt.X2(f"{x}_max"), **rule))
    chart = layered(df, *layers)
    chart = chart.properties(width=width)
    return chart.properties(title=title) if title else chart


LOG_Y_SPAN = 10  # a log time axis only once the times span this factor: below it a linear axis from 0 reads better


def line_chart(df: pd.DataFrame, x: str, y: str, color: str, title: str = "", log: bool | None = None,
               width: int = 520, height: int = 300, x_title: str | None = None,
               y_title: str | None = None) -> alt.Chart:
    """Lines with large points (time vs sequence length), axes fitted to the data one run gives.

    x: a log axis (the sizes double) spanning the measured values exactly, ticks at them; a single value sits
    in the middle of a factor-4 span. y: with ``log`` None, logarithmic once the values span ``LOG_Y_SPAN``
    (fitted to them, not run on to the next power of 10), else linear from 0. A run cut short by its budget
    measures one or two sizes: on the old log axes (0.1-10 ms) they filled a thin band of an empty chart.
    Legend names are never cut; the plot keeps ``height`` whatever the legend below it takes."""
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
                        legend=alt.Legend(labelLimit=0, orient="bottom", columns=1)),
        tooltip=list(df.columns),
    # "pad": Streamlit's default "fit" squeezed the legend below into the height: the plot was ~30 px tall
    ).properties(width=width, height=height, autosize=alt.AutoSizeParams(type="pad"))
    return chart.properties(title=title) if title else chart
