"""Drawing matrices: rect heatmaps from the chart cache, or when too large PNG rasters with a zoom window; panels of
same-shaped matrices; a 2-d slice of a tensor of any rank. Each chart drawn is registered for the slide export."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import replace

import numpy as np

from dashboard.drawing import cells, heatmaps, rasters, scales
from dashboard.drawing.chart_cache import _arrow_bytes, _to_spec, memo, spec_key, vega
from dashboard.drawing.heatmaps import PANELS, PLAIN, Look  # noqa: F401  (Look: the pages' bundle, imported from here)
from dashboard.drawing.present import dark, presenting
from dashboard.drawing.sizes import grow, narrow
from dashboard.export import formats as export
from dashboard.export import slides
from dashboard.i18n import N_, _, lang
from dashboard.state.controls import colour_map
from dashboard.state.url_state import url_choice, url_int

ZOOM_SIZES = (32, 64, 128)
RASTER_SIDE = 512  # a raster heatmap keeps at most this many pixels a side (pooled above)
THUMB_SIDE = 256  # the same for the small panels of a grid
ROW, COLUMN = N_("row"), N_("column")  # a slice's axis titles when the tensor names none
SLICE = Look(max_px=420)  # tensor_slice's default


def on_screen(look: Look = PLAIN) -> Look:
    """``look`` as this run draws it: presentation mode, the screen's growth and width, the theme, the language and
    the colour map, read in the script (a chart prepared ahead is built on another thread)."""
    return replace(look, big=presenting(), grow=grow(), dark=dark(), lang=lang(), narrow=narrow(), cmap=colour_map())


def show_matrix(container, matrix: np.ndarray, row_labels: Sequence[str], col_labels: Sequence[str],
                look: Look = PLAIN, *, key: str, title: str = "", zoom: bool = False,
                cache_key: Hashable | None = None, name: str | None = None) -> tuple[int, int] | None:
    """Draw a matrix as ``look`` says (:func:`on_screen` adds this run's mode, screen, theme and language); return
    the clicked (row, col) when ``look.selectable`` and a cell was clicked. ``look.raster``: a PNG whatever the size;
    ``look.growing``: a chart a column longer each step, drawn so that most steps swap its data only.

    Above ``cells.MAX_RECT_CELLS`` cells it is a PNG (fast at any size); with ``zoom`` a window
    of up to 128 tokens is drawn below it as cells with tooltips.

    The chart is offered by :func:`page_downloads` as ``name`` (what it is, for the file name; default
    ``key``) with ``title`` (else ``look.slide_title``, a title for the slide alone; else the name in words) and the
    matrix as CSV.
    """
    n_rows, n_cols = np.shape(matrix)
    if title:
        container.markdown(f"**{title}**  \n`{n_rows} × {n_cols}`")
    look = on_screen(look)
    scale, max_px, x_title, y_title = look.scale, look.max_px, _(look.x_title), _(look.y_title)
    ck = look.data_key(cache_key)
    what = name or key
    slide_title = title or look.slide_title or slides.words(what)
    if not look.raster and not cells.matrix_needs_raster(n_rows, n_cols):
        event = vega(container, lambda: look.chart(matrix, row_labels, col_labels),
                     lambda: heatmaps.heatmap_frame(matrix, row_labels, col_labels, scale=scale),
                     look.structure("heatmap", n_rows, n_cols, col_labels), ck, key, look.selectable, lifted=True)
        kept = slides.own(matrix)
        slides.register_chart(export.PageChart(
            what, slide_title, table=slides.matrix_table(lambda: kept, row_labels, col_labels),
            chart=lambda: look.slide.chart(kept, row_labels, col_labels)))
        return _clicked(event)
    png = memo(None if ck is None else ("png", ck),
               lambda: rasters.raster_png(matrix, scale, max_side=RASTER_SIDE, dark=look.night, cmap=look.cmap))
    container.image(png, width=min(max_px, round(640 * look.grow)),
                    alt=_("{title}: a heatmap of {rows} × {cols} cells", title=slide_title, rows=n_rows, cols=n_cols))
    k = int(np.ceil(max(n_rows, n_cols) / RASTER_SIDE))
    cells_n = f"{n_rows * n_cols:,}"
    if not np.isfinite(np.asarray(matrix, dtype=np.float32)).all():  # grey pixels: say what they are
        note = _raster_note_grey(cells_n, y_title, x_title, k, scale)
    elif k == 1:
        note = _("{cells} cells: drawn as an image so the page stays fast (rows: {rows}, columns: {cols}).",
                 cells=cells_n, rows=y_title, cols=x_title)
    elif scale == "scores":
        note = _("{cells} cells: drawn as an image so the page stays fast (rows: {rows}, columns: {cols}; each pixel "
                 "is the mean of a {k}×{k} block).", cells=cells_n, rows=y_title, cols=x_title, k=k)
    else:
        note = _("{cells} cells: drawn as an image so the page stays fast (rows: {rows}, columns: {cols}; each pixel "
                 "is the max of a {k}×{k} block).", cells=cells_n, rows=y_title, cols=x_title, k=k)
    container.caption(note)
    if k == 1:
        slide_note = _("{rows} × {cols} cells", rows=n_rows, cols=n_cols)
    elif scale == "scores":
        slide_note = _("{rows} × {cols} cells; each pixel is the mean of a {k}×{k} block", rows=n_rows, cols=n_cols,
                       k=k)
    else:
        slide_note = _("{rows} × {cols} cells; each pixel is the max of a {k}×{k} block", rows=n_rows, cols=n_cols,
                       k=k)
    slides.register_chart(export.PageChart(
        what, slide_title, images=(("", png),), scale=scale, cmap=look.cmap, bound=_bound(matrix, scale, ck),
        x_title=x_title, y_title=y_title, note=slide_note,
        table=slides.matrix_table(slides.hold(matrix, ck), row_labels, col_labels)))
    if not zoom:
        return None
    url_choice(f"{key}_zoom_size", [str(z) for z in ZOOM_SIZES], "64 tokens")
    size = container.select_slider(_("Zoom window (tokens)"), ZOOM_SIZES, value=64, key=f"{key}_zoom_size",
                                   bind="query-params")
    size = min(size, n_rows)
    url_int(f"{key}_zoom_start", 1, n_rows - size + 1, 1)
    start = container.slider(_("Zoom window starts at token"), 1, n_rows - size + 1, 1, key=f"{key}_zoom_start",
                             bind="query-params") - 1
    cols = (start, start + size) if n_cols == n_rows else (0, min(n_cols, size))
    window = np.asarray(matrix)[start:start + size, cols[0]:cols[1]]
    event = vega(container, lambda: look.chart(window, row_labels, col_labels, start, cols[0]),
                 lambda: heatmaps.heatmap_frame(window, row_labels, col_labels, start, cols[0], scale),
                 look.structure("zoom", *window.shape, col_labels[cols[0]:cols[1]]),
                 None if ck is None else (ck, "zoom", start, size), key, look.selectable, lifted=True)
    container.caption(_("Zoom: tokens {first}–{last} drawn as cells (hover for values).", first=start + 1,
                        last=start + size))
    zoomed = slides.own(window)
    slides.register_chart(export.PageChart(
        f"{what}_zoom{start + 1}-{start + size}",
        _("{title}, tokens {first}–{last}", title=slide_title, first=start + 1, last=start + size),
        chart=lambda: look.slide.chart(zoomed, row_labels, col_labels, start, cols[0]),
        table=slides.matrix_table(lambda: zoomed, row_labels[start:start + size], col_labels[cols[0]:cols[1]])))
    return _clicked(event)


def _raster_note_grey(cells_n: str, y_title: str, x_title: str, k: int, scale: str) -> str:
    """The raster's caption when some cells are masked (−∞ / NaN, drawn grey)."""
    if k == 1:
        return _("{cells} cells: drawn as an image so the page stays fast (rows: {rows}, columns: {cols}; grey = "
                 "masked).", cells=cells_n, rows=y_title, cols=x_title)
    if scale == "scores":
        return _("{cells} cells: drawn as an image so the page stays fast (rows: {rows}, columns: {cols}; grey = "
                 "masked; each pixel is the mean of a {k}×{k} block).", cells=cells_n, rows=y_title, cols=x_title, k=k)
    return _("{cells} cells: drawn as an image so the page stays fast (rows: {rows}, columns: {cols}; grey = "
             "masked; each pixel is the max of a {k}×{k} block).", cells=cells_n, rows=y_title, cols=x_title, k=k)


def prepare_matrix(matrix: np.ndarray, row_labels: Sequence[str], col_labels: Sequence[str], look: Look,
                   cache_key: Hashable | None = None) -> None:
    """Build, ahead of time, what :func:`show_matrix` will send for this matrix drawn with ``look``: its spec
    template (for a new shape, the main server cost of a walkthrough step) and, with a ``cache_key``, its
    data. Take ``look`` from :func:`on_screen` in the script (mode, growth, theme, language): this may run on
    another thread. Rasters are not prepared."""
    n_rows, n_cols = np.shape(matrix)
    if cells.matrix_needs_raster(n_rows, n_cols):
        return
    memo(spec_key(look.structure("heatmap", n_rows, n_cols, col_labels), look.lang),
         lambda: _to_spec(look.chart(matrix, row_labels, col_labels)))
    if cache_key is not None:
        memo(("arrow", look.data_key(cache_key)),
             lambda: _arrow_bytes(heatmaps.heatmap_frame(matrix, row_labels, col_labels, scale=look.scale)))


def _bound(matrix: np.ndarray, scale: str, ck: Hashable | None) -> float | None:
    """A diverging raster's colour range (rasters.raster_rgb: ±max |finite value|), for its exported legend."""
    if scales.scale_parts(scale)[0] != "scores":
        return None

    def compute() -> float:
        m = np.asarray(matrix, dtype=np.float32)
        finite = m[np.isfinite(m)]
        return float(np.max(np.abs(finite))) if finite.size else 1.0

    return memo(None if ck is None else ("bound", ck), compute)


def _clicked(event) -> tuple[int, int] | None:
    """The (row, col) of a clicked cell from a chart's selection event, if any."""
    if not isinstance(event, dict):  # a plain chart (no selection) returns its DeltaGenerator
        return None
    points = (event.get("selection") or {}).get("cell")
    if points:
        p = points[0]
        return int(p["q"]), int(p["k"])
    return None


def show_panels(container, matrices: Sequence[np.ndarray], titles: Sequence[str], row_labels: Sequence[str],
                col_labels: Sequence[str] | None = None, *, look: Look = PANELS, key: str,
                cache_key: Hashable | None = None, name: str | None = None, title: str = "") -> None:
    """Same-shaped matrices side by side (``look.columns`` a row, each panel's cells within ``look.max_px``): one
    faceted chart, or one PNG each when too large.

    Offered by :func:`page_downloads` as one chart named ``name`` (default ``key``), titled ``title``
    (only in the export; default: the name in words), with every panel's numbers in one CSV."""
    col_labels = row_labels if col_labels is None else col_labels
    n_rows, n_cols = np.shape(matrices[0])
    look = on_screen(look)
    scale, columns, max_px = look.scale, look.columns, look.max_px
    ck = None if cache_key is None else (cache_key, tuple(titles), scale, max_px, look.cmap)
    what = name or key
    slide_title = title or slides.words(what)
    if not (cells.needs_raster(len(matrices) * n_rows * n_cols, cells.MAX_PANEL_CELLS)
            or max(n_rows, n_cols) > cells.MAX_RECT_SIDE):
        def build():
            return heatmaps.facet_grid(matrices, titles, row_labels, col_labels, look=look)
        structure = ("facet", len(matrices), cells.spec_signature(n_rows, n_cols, col_labels, max_px, look.big,
                                                                  look.grow), tuple(titles), replace(look, dark=False))
        vega(container, build, lambda: heatmaps.facet_frame(matrices, titles, row_labels, col_labels, scale),
              structure, ck, key, False, lifted=True)
        kept = [slides.own(m) for m in matrices]
        slides.register_chart(export.PageChart(
            what, slide_title, table=slides.panels_table([lambda m=m: m for m in kept], titles, row_labels, col_labels),
            chart=lambda: heatmaps.facet_grid(kept, titles, row_labels, col_labels, look=look.slide)))
        return
    container.caption(_("{panels} panels of {rows} × {cols} cells: each drawn as an image so the page stays fast.",
                        panels=len(matrices), rows=n_rows, cols=n_cols))
    cols = container.columns(min(columns, len(matrices)))
    pngs = []
    for i, (m, panel) in enumerate(zip(matrices, titles)):
        png = memo(None if ck is None else ("png", ck, i),
                   lambda m=m: rasters.raster_png(m, scale, target_px=max_px, max_side=THUMB_SIDE, cmap=look.cmap))
        cols[i % len(cols)].image(png, caption=panel, width=max_px)
        pngs.append((panel, png))
    held = [slides.hold(m, None if ck is None else (ck, i)) for i, m in enumerate(matrices)]
    bound = max((_bound(m, scale, None if ck is None else (ck, i)) or 0.0 for i, m in enumerate(matrices)),
                default=0.0) or None
    slides.register_chart(export.PageChart(
        what, slide_title, images=tuple(pngs), scale=scale, cmap=look.cmap, bound=bound, x_title=_(look.x_title),
        y_title=_(look.y_title), columns=len(cols),
        note=_("{panels} panels of {rows} × {cols} cells", panels=len(matrices), rows=n_rows, cols=n_cols),
        table=slides.panels_table(held, titles, row_labels, col_labels)))


def tensor_slice(container, tensor, axes: Sequence[str], labels: Sequence[str], look: Look = SLICE, *,
                 key: str, cache_key: Hashable | None = None, name: str | None = None) -> None:
    """A 2-d slice of a tensor of any rank as a heatmap drawn as ``look`` says (its axis titles: the tensor's axis
    names), with pickers for the leading axes (exported as ``name`` plus the picked positions, e.g.
    ``queries.view_b1_head2``). ``look.max_px`` bounds the cells' longer side (choose it for the column the slice
    is drawn in)."""
    t = tensor.float()  # bool masks become 0/1
    index = []
    picked = ""  # the picked positions, for the export's file name
    lead = t.ndim - 2
    if lead > 0:
        cols = container.columns(lead)
        for d in range(lead):
            axis = axes[d] if d < len(axes) else f"dim {d}"
            size = t.shape[d]
            label = "head" if axis == "num_heads" else axis  # heads are counted from 1 on every page
            shown = _("head") if axis == "num_heads" else axis
            i = (cols[d].number_input(_("{axis} (1–{size})", axis=shown, size=size), 1, size, 1, key=f"{key}_{d}")
                 if size > 1 else 1)
            index.append(int(i) - 1)
            picked += f"_{label.replace(' ', '')}{int(i)}" if size > 1 else ""
    m = t[tuple(index)] if index else t
    if m.ndim == 1:
        m = m.unsqueeze(0)
    m = m.numpy()
    row_axis = axes[-2] if len(axes) >= 2 else ROW
    col_axis = axes[-1] if axes else COLUMN
    # rows and columns that are not tokens are counted from 1, as every page counts heads and columns
    rows = labels if row_axis == "num_tokens" and len(labels) == m.shape[0] else [str(i + 1) for i in range(m.shape[0])]
    cols_l = (labels if col_axis == "num_tokens" and len(labels) == m.shape[1] else
              [str(i + 1) for i in range(m.shape[1])])
    show_matrix(container, m, rows, cols_l, replace(look, x_title=col_axis, y_title=row_axis), key=key,
                cache_key=None if cache_key is None else (cache_key, tuple(index)), name=(name or key) + picked)
