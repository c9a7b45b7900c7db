"""The model view's grid: every head of a model as a thumbnail in one PNG, framed by its verdict, clickable.
Data in, Altair chart (or PNG bytes) out; no Streamlit here."""

from __future__ import annotations

import io
from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd
from PIL import Image

from dashboard.drawing.cells import layered, shown_labels
from dashboard.drawing.rasters import GREY, raster_index
from dashboard.drawing.scales import DEFAULT_COLOUR_MAP
from dashboard.i18n import N_, _

HEAD_TYPE_COLORS = {N_("previous-token"): "#e15759", N_("first-token (sink)"): "#4e79a7", N_("induction"): "#f28e2b",
                    N_("local"): "#59a14f", N_("broad"): "#b07aa1", N_("mixed"): "#9d9d9d"}
# Each type's frame also has its own dash, so previous-token (red, solid) and induction (orange, dashed) differ
# on a projector and for a colour-blind eye, not by hue alone.
HEAD_TYPE_DASHES = {N_("previous-token"): [1, 0], N_("first-token (sink)"): [1, 0], N_("induction"): [5, 3],
                    N_("local"): [2, 2], N_("broad"): [8, 2, 2, 2], N_("mixed"): [2, 4]}
GRID_LABEL_PX = 13  # the grid's axis and legend labels (16 in presentation mode), as every chart's at 1280×720
GRID_TILE_PX = 64  # each head's cell in the grid's PNG (drawn at about half that: sharp on a 2x screen)
GRID_MARGIN = 0.08  # of a cell, around each thumbnail: room for its verdict's frame
TRANSPARENT = GREY  # the margins' palette index: softmax weights are never masked, so no thumbnail cell is grey


def model_grid_png(thumbs: np.ndarray, tile_px: int = GRID_TILE_PX, margin: float = GRID_MARGIN,
                   transpose: bool = False, cmap: str = DEFAULT_COLOUR_MAP) -> bytes:
    """One PNG of (layers, heads, S, S) weights: row = layer, column = head (``transpose``: row = head, column =
    layer), each thumbnail colour-mapped on the fixed 0-1 scale in ``cmap`` and scaled (nearest) into its cell, the
    margins transparent. A palette image built in one array: a class of sessions each encodes its own grid."""
    n_layers, n_heads, side = thumbs.shape[:3]
    pad = round(tile_px * margin)
    inner = tile_px - 2 * pad
    index, palette = raster_index(thumbs.reshape(-1, side), "weights", cmap=cmap)
    index = index.reshape(n_layers, n_heads, side, side)
    if transpose:
        index = index.transpose(1, 0, 2, 3)  # (rows, cols, S, S): rows are heads, columns layers
    rows, cols = index.shape[:2]
    src = ((np.arange(inner) + 0.5) * side / inner).astype(int)  # nearest-neighbour, pixel centres as PIL's
    tiles = index[:, :, src][:, :, :, src]  # (rows, cols, inner, inner)
    canvas = np.full((rows, tile_px, cols, tile_px), TRANSPARENT, np.uint8)
    canvas[:, pad:pad + inner, :, pad:pad + inner] = tiles.transpose(0, 2, 1, 3)
    img = Image.fromarray(canvas.reshape(rows * tile_px, cols * tile_px), mode="P")
    img.putpalette(palette.tobytes())
    buf = io.BytesIO()
    img.save(buf, format="PNG", compress_level=1, transparency=TRANSPARENT)
    return buf.getvalue()


def model_grid_frame(image_url: str, types: np.ndarray, verdicts: Sequence[str], open_head: tuple[int, int] | None,
                     margin: float = GRID_MARGIN, transpose: bool = False) -> pd.DataFrame:
    """The grid's data: one row per head (1-based layer and head, its frame's corners in cell units, its type and
    verdict, a wider frame for the open head), the first row also carrying the image. ``transpose``: layers along
    x, heads along y (a deep model with few heads: SmolLM2's 30 layers x 9 heads)."""
    n_layers, n_heads = types.shape
    layer, head = np.divmod(np.arange(n_layers * n_heads), n_heads)
    opened = np.zeros(layer.shape, bool) if open_head is None else (layer == open_head[0]) & (head == open_head[1])
    col, row = (layer, head) if transpose else (head, layer)
    return pd.DataFrame({
        "layer": layer + 1, "head": head + 1, "x0": col + margin, "x1": col + 1 - margin,
        "y0": row + margin, "y1": row + 1 - margin, "type": types.ravel(), "verdict": list(verdicts),
        "frame": np.where(opened, 5.0, 2.0), "url": [image_url] + [None] * (layer.size - 1)})


def model_grid(n_layers: int, n_heads: int, cell_px: int, *, big: bool = False,
               transpose: bool = False) -> alt.LayerChart:
    """Every head as a thumbnail (the image in the frame's first row), framed in its head type's colour; a click
    picks a head (selection ``head_pick``: its layer and head). Data from :func:`model_grid_frame` (the same
    ``transpose``: layers along x, heads along y)."""
    (n_x, x_title), (n_y, y_title) = ((n_layers, _("layer")), (n_heads, _("head"))) if transpose else (
        (n_heads, _("head")), (n_layers, _("layer")))
    width, height = n_x * cell_px, n_y * cell_px
    font = 16 if big else GRID_LABEL_PX
    x = alt.Scale(domain=[0, n_x], nice=False, zero=False)
    y = alt.Scale(domain=[0, n_y], nice=False, zero=False, reverse=True)
    x_axis = alt.Axis(orient="top", values=[h + 0.5 for h in range(n_x)], labelExpr="datum.value + 0.5",
                      title=x_title, grid=False, ticks=False, domain=False, labelFontSize=font, titleFontSize=font)
    y_axis = alt.Axis(values=[v + 0.5 for v in range(n_y)], labelExpr="datum.value + 0.5", title=y_title,
                      grid=False, ticks=False, domain=False, labelFontSize=font, titleFontSize=font)
    image = alt.Chart().mark_image(width=width, height=height, align="left", baseline="top").encode(
        x=alt.XValue(0), y=alt.YValue(0), url="url:N").transform_filter("isValid(datum.url)")
    pick = alt.selection_point(fields=["layer", "head"], name="head_pick", on="click", clear=False)
    # one legend for colour and dash (Vega-Lite merges the two channels of one field): each entry as it is framed,
    # its label whole (the Chinese sink's was cut)
    legend = alt.Legend(orient="bottom", title=None, symbolType="square", symbolFillColor=None, symbolStrokeWidth=3,
                        symbolSize=font * 16, labelFontSize=font, labelLimit=0,
                        columns=3 if width >= 420 else 2 if width >= 320 else 1,  # a phone's grid is narrow
                        labelExpr=shown_labels(HEAD_TYPE_COLORS))
    # a bar, not a rect: Vega-Lite drops a rect's strokeDash
    frames = alt.Chart().mark_bar(fill="#ffffff", fillOpacity=0.01, cursor="pointer").encode(
        x=alt.X("x0:Q", scale=x, axis=x_axis), x2="x1:Q",
        y=alt.Y("y0:Q", scale=y, axis=y_axis), y2="y1:Q",
        stroke=alt.Stroke("type:N", scale=alt.Scale(domain=list(HEAD_TYPE_COLORS),
                                                    range=list(HEAD_TYPE_COLORS.values())), legend=legend),
        strokeDash=alt.StrokeDash("type:N", scale=alt.Scale(domain=list(HEAD_TYPE_DASHES),
                                                            range=list(HEAD_TYPE_DASHES.values())), legend=legend),
        strokeWidth=alt.StrokeWidth("frame:Q", scale=None),
        tooltip=[alt.Tooltip("verdict:N", title=_("head"))]).add_params(pick)
    return layered(pd.DataFrame(), image, frames).properties(width=width, height=height,
                                                              autosize=alt.AutoSizeParams(type="pad"))
