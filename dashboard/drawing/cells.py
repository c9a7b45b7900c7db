"""Sizes and axes of cell charts: how large a cell is, when its value is printed, when a chart becomes a PNG or a
canvas, the token axes and one-dataset layering. Pure: numbers in, sizes or Altair pieces out; no Streamlit."""

from __future__ import annotations

import json
import math
import unicodedata
from collections.abc import Sequence

import altair as alt
import pandas as pd

from dashboard.i18n import _
from dashboard.languages import get

MAX_RECT_CELLS = 16_384  # above this a chart is drawn as a PNG (rect marks cost browser time per cell)
MAX_PANEL_CELLS = 6_144  # the same for a grid of panels (heads, q/k/v): they are side shows, keep them quick
TEXT_MAX_TOKENS = 24  # value text on cells only up to this many rows/columns (and only in cells that hold it)
# From this many cells (16 x 16) a heatmap is drawn on a canvas and its cells carry no ARIA label: Vega's SVG
# renderer rewrote ~9,000 DOM attributes for a new 32-token sentence, and built a spoken label per cell. The
# chart keeps its title, tooltips and click selection; small charts (the book's 6 x 6) stay SVG.
CANVAS_CELLS = 256
CHART_PX = 480  # the longer side of a heatmap, in pixels
BIG_TEXT_PX = 16  # cell values and labels in presentation mode (a projector needs >= 16 px)
# Axis and legend labels outside presentation mode (dashboard/drawing/present.py's chart config): Vega-Lite's own 10 px
# could not be read from the back of a room at 1280×720; 13 px can, in rows at least 14 px high.
LABEL_PX = 13
MIN_TEXT_PX = 12  # the smallest cell value printed at all
NUMBER_LABELS_PX = 30  # how far a number axis's labels reach from its line ("0.25", "1,000" at 13 px)
TOP_LEGEND_PX = 30  # a legend above a plot keeps this far from it: clear of a level vertical axis title


def axis_title_config(code: str) -> dict:
    """Vega-Lite ``config`` for every chart's vertical axes in language ``code``: where words read upright only
    (its data's ``upright``: Chinese turned 90° is read sideways), the axis title level, above the axis's labels
    with its end at the axis line (it covers no label and no cell); elsewhere nothing (the usual title turned 90°).
    Horizontal axes keep their titles."""
    if not get(code).upright:
        return {}
    level = {"titleAngle": 0, "titleBaseline": "bottom", "titleY": -10}
    # a token axis's labels are wide, its title short: the title ends at the axis line, over the labels; a number
    # axis's labels are narrow, its title ("next-token loss (nats)") long: it starts over the labels, above the plot
    return {"axisLeft": {**level, "titleAlign": "right", "titleX": 0},
            "axisRight": {**level, "titleAlign": "left", "titleX": 0},
            "axisYQuantitative": {**level, "titleAlign": "left", "titleX": -NUMBER_LABELS_PX}}


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
    # at least 12 px or none: a 20 px cell printed its value at 8 px, unreadable; a 12 px "-0.25" is
    # ~27 px wide, "0.25" ~23 px
    return min(round(cap * grow), max(MIN_TEXT_PX, px // 3 + 2)) if px >= value_cell_px(big, 1, signed) else None


def text_fitting(px: int, font: int | None, texts: Sequence[str]) -> int | None:
    """``font``, made smaller where the widest of ``texts`` would cross a ``px`` cell's edges (in the charts' Source
    Sans a digit or a minus sign is ~0.5 em, a point ~0.25 em; a little more here, and a 3 px margin), or None where
    it fits only below ``MIN_TEXT_PX``."""
    if font is None or not texts:
        return font
    em = max(sum(0.28 if c in ".,:" else 0.52 for c in text) for text in texts)
    fit = int((px - 3) / em)
    return min(font, fit) if fit >= MIN_TEXT_PX else None


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


def label_chars(labels: Sequence) -> int:
    """The widest of ``labels`` in Latin characters: a Chinese character (East Asian wide or full-width) is drawn
    about twice as wide, and counts two."""
    return max((sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in str(s)) for s in labels), default=1)


def key_label_angle(px: int, labels: Sequence) -> int:
    """The angle of the key (column) labels: level when the widest label (:func:`label_chars`, ~8 px each) fits a
    cell, -45° while cells are at least ``TILT_MIN_PX`` wide, upright (-90°, one cell apart) below that."""
    if label_chars(labels) * 8 <= px:  # e.g. the column numbers 0-7 of a 6 x 8 output in 25 px cells
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


def drawn_for(chart: alt.TopLevelMixin, n_cells: int, growing: bool = False) -> alt.TopLevelMixin:
    """``chart`` with the renderer its cell count (or ``growing``: whatever its size) calls for: Streamlit reads
    ``usermeta.embedOptions.renderer`` (vl-convert's exports ignore it)."""
    if growing or many_cells(n_cells):
        return chart.properties(usermeta={"embedOptions": {"renderer": "canvas"}})
    return chart


def label_expr(labels: Sequence[str]) -> str:
    """A Vega expression that maps an integer position to its label."""
    return f"{json.dumps(list(labels), ensure_ascii=False)}[datum.value]"


def shown_labels(names: Sequence[str], field: str = "datum.label") -> str:
    """A legend's ``labelExpr`` that shows each category (its data value: the ``N_``-marked English) in this run's
    language; the data, and so a cached frame, stays the same in every language. ``field``: another field (a
    tooltip's calculated copy, e.g. ``datum.status``)."""
    return f"{json.dumps({n: _(n) for n in names}, ensure_ascii=False)}[{field}] || {field}"


def layered(df: pd.DataFrame, *layers: alt.Chart) -> alt.LayerChart:
    """``layers`` drawn on one dataset ``df``, given once to the layered chart.

    Its layers are built without data (``alt.Chart()``). Had each layer the frame itself, Altair would
    name each one by hashing its JSON, frame included, and a frame's JSON is its printed table
    (``DataFrame.__repr__``): most of a new heatmap's build time (docs/measurements.md)."""
    return alt.layer(*layers, data=df)


def cell_layout(n_rows: int, n_cols: int, max_px: int = CHART_PX, big: bool = False,
                grow: float = 1.0, growing: bool = False) -> tuple[int, int | None, int]:
    """(cell side, width, height) of a heatmap: square cells of up to :func:`full_cell_px`; once cells must
    shrink, the longer side is exactly ``max_px``. A T x T chart's size then no longer depends on T, so a
    sentence one token longer keeps the same chart spec and the browser only swaps the data
    (docs/measurements.md). ``growing`` (a chart a column longer each step): the width is None, a Vega step of
    one cell per column, and cells keep their size until the columns no longer fit, then shrink by a fifth (the
    smallest cells that still print their values are one of the sizes), so most steps keep the spec too."""
    if growing:
        room = max(1, max_px // cell_px(n_rows, 1, max_px, big, grow))  # columns the first cell size has room for
        valued = max_px // math.ceil(value_cell_px(big, grow, signed=False))  # the most columns with values
        while room < n_cols:
            wider = max(room + 1, math.ceil(room * 1.25))
            room = valued if room < valued < wider else wider
        px = cell_px(n_rows, room, max_px, big, grow)
        return px, None, px * n_rows
    px = cell_px(n_rows, n_cols, max_px, big, grow)
    if px == full_cell_px(big, grow):  # full-size cells: the chart grows with the matrix
        return px, px * n_cols, px * n_rows
    side = max(2.0, max_px / max(n_rows, n_cols, 1))
    return int(side), round(side * n_cols), round(side * n_rows)


def spec_signature(n_rows: int, n_cols: int, col_labels: Sequence[str], max_px: int, big: bool,
                   grow: float = 1.0, growing: bool = False) -> tuple:
    """Everything about a matrix's shape and labels that its heatmap spec depends on (the labels only
    through the angle they are drawn at): charts with the same signature share one spec template."""
    px, width, height = cell_layout(n_rows, n_cols, max_px, big, grow, growing)
    return (px, width, height, key_label_angle(round(px / grow), col_labels), rows_crowded(px, big, grow),
            max(n_rows, n_cols) <= TEXT_MAX_TOKENS, many_cells(n_rows * n_cols))


def token_axes(n_rows: int, n_cols: int, px: int, col_labels: Sequence[str], x_title: str, y_title: str,
               x_axis: dict | None = None, y_axis: dict | None = None, grow: float = 1.0) -> tuple[alt.X, alt.Y]:
    """The heatmap axes: the label fields (``col``/``row``) in token order (sorted by position ``k``/``q``).

    The labels travel in the data, not in the spec: a new sentence of the same length then changes
    only the data, which Streamlit's chart swaps in place instead of building a new Vega view (much
    faster after a sentence change, docs/measurements.md). A sort by field is one aggregate
    (never sort by a list of labels: O(T^3)). ``grow``: labels (and cells) that much larger."""
    angle = key_label_angle(round(px / grow), col_labels)
    # upright labels' boxes are exact: Vega then drops only labels that would clash
    limit = round(120 * grow)
    xa = (dict(labelAngle=angle, labelLimit=limit, labelOverlap=n_cols > 24 or angle == -90, orient="top")
          | (x_axis or {}))
    # labelFlush off: the first row's label sat low, against the second's
    ya = dict(labelLimit=limit, labelOverlap=n_rows > 24, labelFlush=False) | (y_axis or {})
    x = alt.X("col:N", sort=alt.EncodingSortField("k", op="min"), title=x_title, axis=alt.Axis(**xa))
    y = alt.Y("row:N", sort=alt.EncodingSortField("q", op="min"), title=y_title, axis=alt.Axis(**ya))
    return x, y


def wrap_expr(width_px: int, font_px: int, field: str = "datum.label") -> str:
    """A Vega expression that breaks a text into lines of at most ~``width_px`` (at ``font_px``), at spaces."""
    chars = max(8, int(width_px / (0.55 * font_px)))
    return f"split(trim(replace({field}, regexp('(.{{1,{chars}}})(\\\\s+|$)', 'g'), '$1\\n')), '\\n')"
