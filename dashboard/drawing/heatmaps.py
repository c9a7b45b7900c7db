"""Heatmaps of matrices (one, or a faceted grid of panels): NumPy data in, Altair chart out. No Streamlit here.

Measured rules (docs/measurements.md) they follow:
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
from collections.abc import Hashable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field, replace

import altair as alt
import numpy as np
import pandas as pd

from dashboard.drawing.cells import (
    BIG_TEXT_PX,
    CHART_PX,
    MAX_PANEL_CELLS,
    TEXT_MAX_TOKENS,
    cell_layout,
    drawn_for,
    key_label_angle,
    layered,
    many_cells,
    needs_raster,
    rows_crowded,
    spec_signature,
    text_fitting,
    text_px,
    token_axes,
    wrap_expr,
)
from dashboard.drawing.scales import (
    DEFAULT_COLOUR_MAP,
    LEGEND_TITLES,
    LIGHT_CELL,
    MASK_LABELS,
    color_scale,
    colour_conditions,
    diverging,
    legend_format,
    mask_range,
    scale_parts,
    symmetric_domain,
)
from dashboard.i18n import N_, _, language

KEY, QUERY = N_("key"), N_("query")  # the default axis titles (columns: keys, rows: queries)


@dataclass(frozen=True)
class Look:
    """How a matrix is drawn: every option its chart depends on besides the matrix's shape and labels, as one bundle
    from the page to :func:`heatmap` / :func:`facet_grid` (hashable: part of the spec template's key). Titles and
    mask labels are shown through ``_()``: an ``N_``-marked English text or one the page translated."""

    scale: str = "scores"
    x_title: str = KEY
    y_title: str = QUERY
    max_px: int = CHART_PX  # the cells' longer side (a panel's, for panels)
    selectable: bool = False  # clicks select a cell (a selection named ``cell``)
    text_format: str = ".2f"  # the d3 format of the values printed in cells (when they fit)
    mask_labels: tuple[str, str] = MASK_LABELS  # what a 0/1 mask's values mean (scale="mask"), its legend's entries
    big: bool = False  # presentation mode: larger cells and 16 px values
    grow: float = 1.0  # the screen's growth over the 1280x720 projector: cells and text that much larger
    dark: bool = False  # the page's theme: a mask's colours follow it
    growing: bool = False  # a column longer each step (Generate's new row): see cells.cell_layout
    raster: bool = False  # a PNG whatever the size (a chart redrawn at a new size every step)
    columns: int = 4  # panels in a row (facet_grid)
    lang: str | None = None  # the language of its text (None: this thread's); read in the script, for work ahead
    narrow: bool = False  # a phone's column: the colour legend goes below the cells, leaving them the width
    cmap: str = DEFAULT_COLOUR_MAP  # the colour map of values 0..top (the sidebar's Colour map: scales.color_scale)
    slide_title: str = field(default="", compare=False)  # its exported slide's title (no heading on the page)

    @property
    def night(self) -> bool:
        """A mask drawn in the dark page's colours (other scales look the same on both themes)."""
        return self.scale == "mask" and self.dark

    def chart(self, matrix: np.ndarray, row_labels: Sequence[str], col_labels: Sequence[str],
              offset_rows: int = 0, offset_cols: int = 0) -> alt.TopLevelMixin:
        """The rect heatmap of ``matrix`` in this look (in its language, on whatever thread builds it)."""
        with language(self.lang) if self.lang else nullcontext():
            return heatmap(matrix, row_labels, col_labels, self, offset_rows=offset_rows, offset_cols=offset_cols)

    def structure(self, what: str, n_rows: int, n_cols: int, col_labels: Sequence[str]) -> tuple:
        """The key of the spec template a ``what`` chart of this shape shares."""
        return (what, spec_signature(n_rows, n_cols, col_labels, self.max_px, self.big, self.grow, self.growing),
                self)

    def data_key(self, cache_key: Hashable | None) -> Hashable | None:
        """What a chart's data (and raster) is remembered under: the page's key, the colours and the size."""
        return None if cache_key is None else ((cache_key, self.scale, self.max_px, self.cmap)
                                               + (("dark",) if self.night else ()))

    @property
    def slide(self) -> Look:
        """The same chart for the slide export: light, at the projector's size, not clickable."""
        return replace(self, big=False, grow=1.0, dark=False, selectable=False, narrow=False)


PLAIN = Look()  # a heatmap's default: scores, key and query axes
PANELS = Look(scale="weights", max_px=200)  # facet_grid's default: small weights panels


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


def heatmap(matrix: np.ndarray, row_labels: Sequence[str], col_labels: Sequence[str], look: Look = PLAIN, *,
            title: str = "", show_text: bool | None = None, offset_rows: int = 0,
            offset_cols: int = 0) -> alt.LayerChart:
    """A rect heatmap with fixed square cells, grey "−∞" masked cells and tooltips, drawn as ``look`` says.

    ``offset_rows``/``offset_cols`` place a zoom window of a larger matrix at its true positions
    (labels are the full label lists). ``show_text``: print each value in its cell (default: when it fits).
    ``look.growing``: on a canvas whatever its size (SVG rebuilt every mark's DOM node each step), one cell a
    column (``cells.cell_layout``): a step that keeps the cell size swaps data only.
    """
    scale, max_px, big, grow, growing = look.scale, look.max_px, look.big, look.grow, look.growing
    x_title, y_title = _(look.x_title), _(look.y_title)
    mask_labels = tuple(_(label) for label in look.mask_labels)
    m = np.asarray(matrix, dtype=np.float64)
    n_rows, n_cols = m.shape
    if needs_raster(n_rows * n_cols):
        raise ValueError(f"{n_rows} x {n_cols} cells is too many for rect marks: use raster_png")
    df = heatmap_frame(m, row_labels, col_labels, offset_rows, offset_cols, scale)
    px, width, height = cell_layout(n_rows, n_cols, max_px, big, grow, growing)
    font = text_px(px, big, grow=grow, signed=diverging(scale))
    text_format, fixed = look.text_format, look.text_format != ".2f"
    if fixed:  # text_px is sized for "-0.25": a wider "-0.123" shrinks, or keeps 2 decimals
        # from the scale, not the values: one spec template serves every sentence of this shape (Look.structure)
        widest = -0.5 if diverging(scale) else 0.5
        fitted = text_fitting(px, font, [format(widest, text_format)])
        if fitted is None and font is not None:
            text_format = ".2f"
            fitted = text_fitting(px, font, [format(widest, text_format)])
        font = fitted
    if show_text is None:
        show_text = max(n_rows, n_cols) <= TEXT_MAX_TOKENS and font is not None and scale != "mask"
    kind = scale_parts(scale)[0]
    aria = not (growing or many_cells(n_rows * n_cols))
    # every label while the cells are at least as high as the label (44 tokens on the whole 820 px column);
    # below that Vega drops every other one (forced at 24+ tokens, only every 4th label showed)
    crowded = rows_crowded(px, big, grow)
    x, y = token_axes(n_rows, n_cols, px, col_labels, x_title, y_title, grow=grow,
                      x_axis=dict(labelOverlap=crowded), y_axis=dict(labelOverlap=crowded))
    tooltip = [alt.Tooltip("row:N", title=y_title), alt.Tooltip("col:N", title=x_title),
               alt.Tooltip("value:Q", title=_("value"), format=".4f"), alt.Tooltip("masked:N", title=_("masked"))]
    base = alt.Chart().encode(x=x, y=y)  # the data goes on the layer (see layered)
    if kind == "mask":
        cells = base.transform_calculate(meaning=f"datum.color > 0.5 ? {json.dumps(mask_labels[1])} : "
                                                 f"{json.dumps(mask_labels[0])}").mark_rect(aria=aria).encode(
            color=alt.Color("meaning:N", scale=alt.Scale(domain=list(mask_labels), range=mask_range(look.night)),
                            title=_(LEGEND_TITLES[kind]),
                            # below the cells, one entry above the other: never wider than the chart
                            legend=alt.Legend(orient="bottom", direction="vertical", symbolType="square",
                                              symbolStrokeColor="#8c8c8c", symbolStrokeWidth=1, labelLimit=0)),
            tooltip=tooltip,
        )
    else:
        cells = base.mark_rect(aria=aria).encode(
            color=alt.Color("color:Q", scale=color_scale(scale, cmap=look.cmap), title=_(LEGEND_TITLES[kind]),
                            # one row still gets a readable legend (30 px showed only "1", "0")
                            legend=_legend(look.narrow, px * n_cols if look.narrow else height, scale),
                            condition=colour_conditions(scale)),  # not alt.condition: _value_text
            tooltip=tooltip,
        )
    if look.selectable:
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
        layers.append(_value_text(base, font or 12, text_format, aria, fixed))
    if diverging(scale):  # last, so the cells stay layer 0 (its two points have no size: they catch no pointer)
        layers.append(symmetric_domain(scale, _(LEGEND_TITLES[kind])))
    # "pad": the cells keep their size and the labels and legend come on top (Streamlit's default "fit"
    # would squeeze everything into ``width``)
    chart = layered(df, *layers).properties(width=alt.Step(px) if width is None else width, height=height,
                                            autosize=alt.AutoSizeParams(type="pad"))
    chart = drawn_for(chart, n_rows * n_cols, growing)
    return chart.properties(title=title) if title else chart


def _legend(narrow: bool, side_px: int, scale: str) -> alt.Legend:
    """The colour legend, as long as the cells' side ``side_px`` (80 to 200 px): right of the cells, or on a phone's
    narrow column below them (beside them it took a quarter of the width the cells need)."""
    length = min(200, max(80, side_px))
    if narrow:
        return alt.Legend(orient="bottom", direction="horizontal", gradientLength=length, **legend_format(scale))
    return alt.Legend(orient="right", gradientLength=length, **legend_format(scale))


def _masked_text(base: alt.Chart, size: int, aria: bool = True) -> alt.Chart:
    """"−∞" on each masked (grey) cell."""
    return (base.transform_filter("datum.masked").mark_text(fontSize=size, aria=aria)
            .encode(text=alt.TextValue("−∞"), color=alt.ColorValue("#555555")))


def _value_text(base: alt.Chart, size: int, text_format: str = ".2f", aria: bool = True,
                fixed: bool = False) -> alt.Chart:
    """Each unmasked cell's value as text, black on light cells and white on dark ones (``LIGHT_CELL``). Unless
    ``fixed`` (every value in ``text_format``), an exact zero prints "0" and a value that would round to "0.00"
    prints in scientific notation ("3e-3"), so no coloured cell claims a zero it does not hold."""
    # the channel object, not alt.condition(..., alt.value(...)): Altair 6.3 turns such a dict into a channel
    # through from_dict, rebuilding its table of ~570 schema classes each time (slow: docs/measurements.md)
    color = alt.ColorValue("white", condition={"test": LIGHT_CELL, "value": "black"})
    if fixed:
        return base.transform_filter("!datum.masked").mark_text(fontSize=size, aria=aria).encode(
            text=alt.Text("value:Q", format=text_format), color=color)
    label = ("datum.value === 0 ? '0' : abs(datum.value) < 0.005 ? format(datum.value, '.0e') "
             ": format(datum.value, '.2f')")
    return (base.transform_filter("!datum.masked").transform_calculate(label=label).mark_text(fontSize=size, aria=aria)
            .encode(text=alt.Text("label:N"), color=color))


def facet_grid(matrices: Sequence[np.ndarray], panel_titles: Sequence[str], row_labels: Sequence[str],
               col_labels: Sequence[str] | None = None, *, look: Look = PANELS,
               show_text: bool | None = None) -> alt.FacetChart:
    """Several same-shaped heatmaps (heads, or steps) as one faceted chart sharing one colour scale, ``look.columns``
    panels a row. ``show_text`` (default: when cells are large enough) prints each value in its cell.

    One faceted chart draws faster than one chart per panel (docs/measurements.md).
    """
    scale, columns, max_px, big, grow = look.scale, look.columns, look.max_px, look.big, look.grow
    x_title, y_title = _(look.x_title), _(look.y_title)
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
    angle = key_label_angle(round(px / grow), col_labels)
    x, y = token_axes(n_rows, n_cols, px, col_labels, x_title, y_title,
                      x_axis=dict(axis, labelAngle=angle, labelOverlap=angle == -90, orient="bottom"),
                      y_axis=dict(axis, labelOverlap=rows_crowded(px, big, grow)))
    base = alt.Chart().encode(x=x, y=y)  # the data goes on the layer (see layered)
    n_cells = len(mats) * n_rows * n_cols
    aria = not many_cells(n_cells)
    cells = base.mark_rect(aria=aria).encode(
        color=alt.Color("color:Q", scale=color_scale(scale, cmap=look.cmap),
                        title=_(LEGEND_TITLES[scale_parts(scale)[0]]),
                        legend=_legend(True, width, scale) if look.narrow else alt.Legend(**legend_format(scale)),
                        condition=colour_conditions(scale)),  # not alt.condition: _value_text
        tooltip=[alt.Tooltip("panel:N", title=_("panel")), alt.Tooltip("row:N", title=y_title),
                 alt.Tooltip("col:N", title=x_title), alt.Tooltip("value:Q", title=_("value"), format=".4f"),
                 alt.Tooltip("masked:N", title=_("masked"))],
    )
    layers = [cells]
    if px >= 20:
        layers.append(_masked_text(base, font or min(12, px // 2), aria))
    if show_text:
        layers.append(_value_text(base, font or 12, aria=aria))
    if diverging(scale):  # one colour scale for every panel, symmetric around 0
        layers.append(symmetric_domain(scale, _(LEGEND_TITLES[scale_parts(scale)[0]]), groupby=["panel"]))
    chart = layered(df, *layers).properties(width=width, height=height)
    header_px = round((BIG_TEXT_PX + 2 if big else 13) * grow)
    grid = chart.facet(
        facet=alt.Facet("panel:N", title=None, sort=alt.SortField("order"),
                        # panel titles, wrapped to the panel's width (a longer title widened its column)
                        header=alt.Header(labelFontSize=header_px, labelExpr=wrap_expr(width, header_px))),
        columns=columns,
    ).properties(autosize=alt.AutoSizeParams(type="pad"))
    if look.narrow:  # panels stacked on a phone: each keeps its key labels, not only the last one far below
        grid = grid.resolve_axis(x="independent")
    return drawn_for(grid, n_cells)


def heads_grid(matrices: np.ndarray, labels: Sequence[str], look: Look = PANELS) -> alt.FacetChart:
    """One small heatmap per head (head 1 ... head H) in one faceted chart."""
    mats = list(np.asarray(matrices, dtype=np.float64))
    return facet_grid(mats, [_("head {head}", head=h + 1) for h in range(len(mats))], labels, look=look)
