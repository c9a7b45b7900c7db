"""How wide a chart may be: the projector's column widths, and the cell size that keeps a heatmap
with its labels and legend inside its column.

A Vega-Lite heatmap with fixed cells does not shrink to its column; one wider than its column runs
into its neighbour (the weights chart ran over the Cell story at 1280×720). So every chart is
sized for the main column the browser measured (dashboard/drawing/screen.py), and until it has reported, for
the narrowest screen it must hold on: the main column at 1280×720 with the sidebar open
(``CONTENT_PX``, measured in Chromium; tests/test_browser_layout.py checks the result). On a larger
screen (1920×1080) everything grows by :func:`grow`: cells, caps, chart text.
"""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st

from dashboard.drawing import screen
from dashboard.drawing.cells import TEXT_MAX_TOKENS, label_chars
from dashboard.drawing.present import presenting

CONTENT_PX = screen.WIDTHS[0]  # main column at 1280×720, sidebar open: 980 px block minus 2 × 80 px padding
PRESENT_CONTENT_PX = screen.WIDTHS[1]  # the same in presentation mode: sidebar collapsed, 3 rem padding
GAP_PX = 16  # between st.columns (gap="small")
CHAR_PX = 8  # an axis label character at 13 px (present.NORMAL_LABEL_PX; 11 px: "2: journey" was 62 px)
BIG_CHAR_PX = 10  # the same at 16 px
# past cells.TEXT_MAX_TOKENS rows (no values in the cells) the row labels' room is at least LABEL_ROOM_CHARS, then
# whole steps of LABEL_STEP_CHARS: a sentence edited by a word keeps its heatmap's size and spec, and the browser
# swaps data instead of building a new Vega view
LABEL_ROOM_CHARS, LABEL_STEP_CHARS = 12, 4
LEGEND_PX = 80  # a gradient legend with its title and labels ("0.8", "÷ row max")
AXIS_TITLE_PX = 24
# A main column narrower than this is a phone's (320-340 px at 390 px): one panel a row, legends below the cells.
# The narrowest designed layout (1280×720, sidebar open) is 820 px; a tablet held upright ~700 px.
NARROW_PX = 600


def content_px() -> int:
    """Width of the page's main column (as measured; before that, on a 1280×720 projector in this run's mode)."""
    return screen.current(presenting()).width


def grow() -> float:
    """How much larger than on the 1280×720 projector charts are drawn (1.0 there; 1.5 at 1920×1080)."""
    return screen.current(presenting()).grow


def narrow() -> bool:
    """Whether the main column is a phone's (:data:`NARROW_PX`): charts then stack one above the other."""
    return content_px() < NARROW_PX


def panel_columns(wanted: int) -> int:
    """How many panels a row of ``wanted`` gets on this screen: one on a phone, where side by side each was too
    small to read and the last one was cut off."""
    return 1 if narrow() else wanted


def heads_per_row(n_heads: int, n_kv_heads: int, most: int = 4) -> int:
    """How many heads a row of the heads grid holds: with grouped K/V heads, one group a row (SmolLM2's 9 query
    heads on 3 K/V heads: rows of 3; in rows of 4 the groups broke across rows), else up to ``most``; one on a
    phone (:func:`panel_columns`)."""
    group = n_heads // max(n_kv_heads, 1)
    if 1 < group <= most and n_kv_heads < n_heads:
        return panel_columns(group)
    return panel_columns(min(n_heads, most))


def cells_across(n: int, width_px: int, chrome_px: int, most_px: int, least_px: int = 8) -> int:
    """The side of ``n`` square cells in a row that, with ``chrome_px`` of axes and legend, fit ``width_px``: at
    most ``most_px`` (the size designed for the projector), at least ``least_px``."""
    return max(least_px, min(most_px, (width_px - chrome_px) // max(n, 1)))


def cap(px: int) -> int:
    """A size limit designed for the 1280×720 projector, on this screen."""
    return round(px * grow())


def room(normal_px: int, top_px: int, below_px: int = 0) -> int:
    """The longest side a section's main chart may have: ``normal_px`` on this screen (:func:`cap`) and, in
    presentation mode, the height between the chart's cells (their top at ``top_px`` at 1280×720, their
    labels taking ``below_px`` under them) and the screen's bottom edge: the class sees the whole matrix
    without scrolling, as large as it fits."""
    if not presenting():
        return cap(normal_px)
    return round((screen.BASE_HEIGHT - top_px - below_px) * grow()) - 8


def column_px(weights: Sequence[float], index: int, total: int | None = None) -> int:
    """Width of column ``index`` of ``st.columns(weights)`` in a container ``total`` px wide (default: the
    main column). On a phone Streamlit stacks columns, each as wide as the container."""
    if narrow():
        return content_px() if total is None else total
    usable = (content_px() if total is None else total) - GAP_PX * (len(weights) - 1)
    return int(usable * weights[index] / sum(weights))


def label_px(labels: Sequence[str], limit: int = 120) -> int:
    """The room for the widest axis label (Vega cuts labels at ``limit`` px); for more labels than cells print values
    for, :data:`LABEL_ROOM_CHARS` at least, then whole steps of :data:`LABEL_STEP_CHARS`."""
    char = (BIG_CHAR_PX if presenting() else CHAR_PX) * grow()
    chars = label_chars(labels)
    if len(labels) > TEXT_MAX_TOKENS:
        chars = max(LABEL_ROOM_CHARS, -(-chars // LABEL_STEP_CHARS) * LABEL_STEP_CHARS)
    return round(min(limit * grow(), char * chars)) + 8


def cell_area(avail_px: int, row_labels: Sequence[str], *, legend: bool = True, panels: int = 1,
              limit: int = 120, spacing: int = 20) -> int:
    """The ``max_px`` (side of one panel's cell area) that keeps ``panels`` heatmaps in a row, with
    their row labels, axis title and legend, inside ``avail_px`` (on a phone the legend is below the cells)."""
    beside = legend and not narrow()
    chrome = label_px(row_labels, limit) + round((AXIS_TITLE_PX + (LEGEND_PX if beside else 0) + 10) * grow())
    per_panel = (avail_px - chrome - spacing * (panels - 1)) // max(panels, 1)
    return max(40, int(per_panel))


def fit(limit_px: int, row_labels: Sequence[str], *, legend: bool = True, panels: int = 1,
        width_px: int | None = None) -> int:
    """The ``max_px`` of a chart drawn in a column ``width_px`` wide (default: the whole main column; a column of
    :func:`sized_columns` has its own :meth:`Column.fit`): at most ``limit_px`` (:func:`cap` or :func:`room`), and
    small enough that ``panels`` heatmaps with their row labels and legend fit the column (:func:`cell_area`). The
    one place column widths meet charts."""
    width = column_px((1,), 0) if width_px is None else width_px
    return min(limit_px, cell_area(width, row_labels, legend=legend, panels=panels))


class Column:
    """A column of :func:`sized_columns`: used as the Streamlit column itself (``col.markdown(...)``, ``with col:``,
    a container to draw in), and knowing its width for the charts drawn in it."""

    def __init__(self, box, px: int):
        self.box = box  # the st.columns column
        self.px = px  # its width on this screen

    def fit(self, limit_px: int, row_labels: Sequence[str], *, legend: bool = True, panels: int = 1) -> int:
        """:func:`fit` for this column."""
        return fit(limit_px, row_labels, legend=legend, panels=panels, width_px=self.px)

    def __getattr__(self, name: str):
        return getattr(self.box, name)

    def __enter__(self):
        return self.box.__enter__()

    def __exit__(self, *exc):
        return self.box.__exit__(*exc)


def sized_columns(weights: Sequence[float] | int, where=None, **options) -> list[Column]:
    """``st.columns(weights, **options)`` (in ``where``, default the page) with each column's width: a page states
    its column weights once. In a :class:`Column`, widths are shares of that column."""
    weights = [1] * weights if isinstance(weights, int) else list(weights)
    total = where.px if isinstance(where, Column) else None
    boxes = (where or st).columns(weights, **options)
    return [Column(box, column_px(weights, i, total)) for i, box in enumerate(boxes)]
