"""Streamlit helpers shared by the pages: loading a run with friendly errors, and drawing
matrices as rect heatmaps or, when too large, as PNG rasters with a zoom window."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import streamlit as st

from attn_core import HAS_MASK, MAX_POSITIONS

from . import charts
from .compute import Run, cached_tokens, traced_run
from .controls import Settings

ZOOM_SIZES = (32, 64, 128)


def _set_state(key: str, value: object) -> None:
    st.session_state[key] = value


def show_messages(s: Settings) -> None:
    for level, text in s.messages:
        getattr(st, level)(text)


def load_run(s: Settings, cfg=None) -> Run | None:
    """The traced run for the sidebar settings, or None after explaining what to change."""
    cfg = cfg or s.cfg
    show_messages(s)
    try:
        tokens = cached_tokens(s.text)
    except ValueError as e:
        st.error(f"{e}.")
        return None
    n = len(tokens)
    if n > MAX_POSITIONS:
        st.error(f"Your text is {n} tokens long; Attention Lab shows up to {MAX_POSITIONS} tokens "
                 f"(GPT-2's context length). Shorten the text by about {n - MAX_POSITIONS} tokens.")
        return None
    mode = s.input_mode
    if mode == "book" and n != 6:
        st.info(f"The book's fixed 3-d inputs exist only for its 6-token sentence; your text has {n} tokens, "
                "so it uses learned token + position embeddings (d_in = 3) instead.")
        mode = "learned"
    if cfg.variant in HAS_MASK and n > cfg.context_length:
        st.error(f"Your text has {n} tokens but context_length is {cfg.context_length}: the causal mask "
                 f"(a {cfg.context_length} x {cfg.context_length} buffer) cannot cover it. The book's code "
                 "would fail with a shape error here.")
        st.button(f"Raise context_length to {n}", key="raise_context", on_click=_set_state,
                  args=("context_length", n), type="primary")
        return None
    if mode == "onehot" and cfg.d_in < len({t.id for t in tokens}):
        distinct = len({t.id for t in tokens})
        st.error(f"One-hot inputs need d_in ≥ the number of distinct tokens ({distinct}); d_in is {cfg.d_in}.")
        st.button(f"Set d_in to {distinct}", key="raise_d_in", on_click=_set_state, args=("d_in", distinct),
                  type="primary")
        return None
    try:
        return traced_run(s.text, mode, cfg)
    except ValueError as e:
        st.error(f"{e}.")
        return None


def show_matrix(
    container,
    matrix: np.ndarray,
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    *,
    key: str,
    scale: str = "scores",
    title: str = "",
    x_title: str = "key",
    y_title: str = "query",
    max_px: int = charts.CHART_PX,
    selectable: bool = False,
    zoom: bool = False,
) -> tuple[int, int] | None:
    """Draw a matrix; return the clicked (row, col) when ``selectable`` and a cell was clicked.

    Above ``charts.MAX_RECT_CELLS`` cells it is a PNG (fast at any size); with ``zoom`` a window
    of up to 128 tokens is drawn below it as cells with tooltips.
    """
    n_rows, n_cols = np.shape(matrix)
    if title:
        container.markdown(f"**{title}**  \n`{n_rows} × {n_cols}`")
    if not charts.needs_raster(n_rows * n_cols):
        chart = charts.heatmap(matrix, row_labels, col_labels, scale=scale, x_title=x_title, y_title=y_title,
                               max_px=max_px, selectable=selectable)
        return _draw(container, chart, key, selectable)
    container.image(charts.raster_png(matrix, scale), width=min(max_px, 640))
    container.caption(f"{n_rows * n_cols:,} cells: drawn as an image so the page stays fast "
                      f"(rows: {y_title}, columns: {x_title}; grey = masked).")
    if not zoom:
        return None
    size = container.select_slider("Zoom window (tokens)", ZOOM_SIZES, value=64, key=f"{key}_zoom_size")
    size = min(size, n_rows)
    start = container.slider("Zoom window starts at token", 1, n_rows - size + 1, 1, key=f"{key}_zoom_start") - 1
    cols = (start, start + size) if n_cols == n_rows else (0, min(n_cols, size))
    window = np.asarray(matrix)[start:start + size, cols[0]:cols[1]]
    chart = charts.heatmap(window, row_labels, col_labels, scale=scale, x_title=x_title, y_title=y_title,
                           max_px=max_px, selectable=selectable, offset_rows=start, offset_cols=cols[0])
    container.caption(f"Zoom: tokens {start + 1}–{start + size} drawn as cells (hover for values).")
    return _draw(container, chart, key, selectable)


def _draw(container, chart, key: str, selectable: bool) -> tuple[int, int] | None:
    if not selectable:
        container.altair_chart(chart, width="content", key=key)
        return None
    event = container.altair_chart(chart, width="content", key=key, on_select="rerun", selection_mode=["cell"])
    points = (event.selection or {}).get("cell") if event is not None else None
    if points:
        p = points[0]
        return int(p["q"]), int(p["k"])
    return None


def show_panels(container, matrices: Sequence[np.ndarray], titles: Sequence[str], row_labels: Sequence[str],
                col_labels: Sequence[str] | None = None, *, key: str, scale: str = "weights", columns: int = 4,
                max_px: int = 220, x_title: str = "key", y_title: str = "query") -> None:
    """Same-shaped matrices side by side: one faceted chart, or one PNG each when too large."""
    col_labels = row_labels if col_labels is None else col_labels
    n_rows, n_cols = np.shape(matrices[0])
    if not charts.needs_raster(len(matrices) * n_rows * n_cols):
        chart = charts.facet_grid(matrices, titles, row_labels, col_labels, scale=scale, columns=columns,
                                  max_px=max_px, x_title=x_title, y_title=y_title)
        container.altair_chart(chart, width="content", key=key)
        return
    container.caption(f"{len(matrices)} × {n_rows * n_cols:,} cells: each panel drawn as an image.")
    cols = container.columns(min(columns, len(matrices)))
    for i, (m, title) in enumerate(zip(matrices, titles)):
        cols[i % len(cols)].image(charts.raster_png(m, scale, target_px=max_px), caption=title, width=max_px)
