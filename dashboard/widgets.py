"""Streamlit helpers shared by the pages: loading a run with friendly errors, and drawing
matrices as rect heatmaps or, when too large, as PNG rasters with a zoom window."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Hashable, Sequence

import altair as alt
import numpy as np
import streamlit as st

from attn_core import HAS_MASK, MAX_POSITIONS

from . import charts
from .cache import ByteLRU
from .compute import CACHE_IDLE_S, Run, cached_tokens, traced_run
from .controls import Settings
from .links import link_warning
from .present import chart_config, presenting

ZOOM_SIZES = (32, 64, 128)
RASTER_SIDE = 512  # a raster heatmap keeps at most this many pixels a side (pooled above)
THUMB_SIDE = 256  # the same for the small panels of a grid

# Built charts (Vega-Lite spec with Arrow data) and PNGs, keyed by what they show. Building an
# Altair chart and converting it costs ~50 ms a chart; a rerun that changes nothing in a chart
# (a click, another head) then sends the cached spec. Shared by sessions: entries are immutable.
DRAWN_CACHE_BYTES = 256 * 2**20  # a classroom server keeps at most this much of drawn data (runs: compute.py)


def _nbytes(value: object) -> int:
    if isinstance(value, np.ndarray):
        return value.nbytes
    if isinstance(value, bytes | bytearray):
        return len(value)
    if isinstance(value, list | tuple):
        return sum(_nbytes(v) for v in value)
    return 4096  # specs and small objects


_DRAWN: ByteLRU[object] = ByteLRU(DRAWN_CACHE_BYTES, _nbytes, idle_s=CACHE_IDLE_S)


def memo(key: Hashable | None, build: Callable[[], object]) -> object:
    """``build()``, remembered under ``key`` (None: not remembered); least recently used entries go
    first once the cache holds more than ``DRAWN_CACHE_BYTES``. Arrays are stored as copies, so an
    entry never pins a whole trace in memory."""
    if key is None:
        return build()

    def owned() -> object:
        value = build()
        return value.copy() if isinstance(value, np.ndarray) and value.base is not None else value

    return _DRAWN.get(key, owned)


def _to_spec(chart: alt.TopLevelMixin) -> dict:
    """Streamlit's own conversion of an Altair chart: a Vega-Lite dict with Arrow datasets."""
    from streamlit.elements.vega_charts import _convert_altair_to_vega_lite_spec

    return dict(_convert_altair_to_vega_lite_spec(chart))


def _arrow_bytes(df) -> bytes:
    """A frame as Arrow IPC bytes, converted on this thread (pyarrow's default thread pool costs
    ~10 ms a chart in thread start-up on a 2-core machine)."""
    import pyarrow as pa
    from streamlit.dataframe_util import convert_arrow_table_to_arrow_bytes

    return convert_arrow_table_to_arrow_bytes(pa.Table.from_pandas(df, nthreads=1))


def draw_chart(container, build: Callable[[], alt.TopLevelMixin], frame: Callable[[], object] | None = None,
               structure: Hashable | None = None, data_key: Hashable | None = None, *, key: str,
               selectable: bool = False):
    """Draw a chart from a cached spec template; return its selection event (or a DeltaGenerator).

    No chart spec depends on the data's values (see charts.color_scale), so the spec built once
    for a ``structure`` (shape, labels, scale, sizes) serves every run: a rerun only swaps in the
    new data (``frame()`` as Arrow bytes, cached under ``data_key``). Building and converting a
    chart costs ~50 ms; swapping data ~1 ms.
    """
    kw = dict(width="content", key=key)
    if selectable:
        kw.update(on_select="rerun", selection_mode=["cell"])
    if structure is None:  # a one-off chart: its own data, nothing remembered
        return container.vega_lite_chart(spec=styled(_to_spec(build())), **kw)
    template = memo(("spec", structure), lambda: _to_spec(build()))
    data = memo(None if data_key is None else ("arrow", data_key), lambda: _arrow_bytes(frame()))
    name = "d" + hashlib.sha1(data if data_key is None else repr(data_key).encode()).hexdigest()[:16]
    spec = {k: v for k, v in template.items() if k not in ("data", "datasets")}
    spec["data"] = {"name": name}
    spec["datasets"] = {name: data}
    return container.vega_lite_chart(spec=styled(spec), **kw)


def styled(spec: dict) -> dict:
    """The spec with the page's chart style: high-contrast labels for the theme, large in presentation mode."""
    config = dict(spec.get("config") or {})
    for part, values in chart_config(presenting()).items():
        config[part] = {**config.get(part, {}), **values}
    return {**spec, "config": config}




def plural(n: int, word: str) -> str:
    """``1 token``, ``2 tokens``."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def sentence(message: object) -> str:
    """An error message as a sentence: capital first letter, one final full stop. A message that starts
    with a code name (``d_out``, ``num_heads``) keeps it as written: "D_out" is not the book's name."""
    text = str(message).strip().rstrip(".")
    first = text.split(" ", 1)[0]
    if first.isidentifier() and ("_" in first or any(c.isupper() for c in first[1:])):
        return text + "."
    return (text[:1].upper() + text[1:] + ".") if text else ""


def warn_bad_link(param: str, value: str, used: str) -> None:
    """Say that a link's ``?param=value`` was not usable and what is shown instead (all escaped)."""
    st.warning(link_warning(param, value, used))


def url_choice(key: str, shown: Sequence[str], used: str) -> None:
    """Before a widget bound to the URL is drawn: warn if the link's ``?key=`` is not one of the
    labels the widget shows (Streamlit would drop it silently). Only a new session reads the link."""
    if key in st.session_state:
        return
    raw = st.query_params.get(key)
    if raw is not None and raw not in shown:
        warn_bad_link(key, raw, used)


def url_int(key: str, lo: int, hi: int, used: int) -> None:
    """Like :func:`url_choice` for an integer widget with the range ``lo``..``hi``."""
    if key in st.session_state:
        return
    raw = st.query_params.get(key)
    if raw is None:
        return
    try:
        ok = lo <= int(raw) <= hi
    except ValueError:
        ok = False
    if not ok:
        warn_bad_link(key, raw, f"{used} (it must be a whole number from {lo} to {hi})")


def url_cell(key: str, n_rows: int, n_cols: int) -> tuple[int, int] | None:
    """A cell from the link's ``?key=row,col`` (1-based), validated; None (with a warning) if bad."""
    raw = st.query_params.get(key)
    if raw is None:
        return None
    parts = raw.split(",")
    try:
        i, j = (int(p) for p in parts) if len(parts) == 2 else (0, 0)
    except ValueError:
        i, j = 0, 0
    if 1 <= i <= n_rows and 1 <= j <= n_cols:
        return i - 1, j - 1
    warn_bad_link(key, raw, f"the default cell (it must be “row,column” with row 1–{n_rows} and column "
                            f"1–{n_cols})")
    del st.query_params[key]
    return None


def _set_state(key: str, value: object) -> None:
    st.session_state[key] = value


def show_messages(s: Settings) -> None:
    for level, text in s.messages:
        getattr(st, level)(text)


def load_run(s: Settings, cfg=None, *, quiet: bool = False) -> Run | None:
    """The traced run for the sidebar settings, or None after explaining what to change.

    ``quiet``: a second run on the same page (another method, dropout on) repeats no notes."""
    cfg = cfg or s.cfg
    if not quiet:
        show_messages(s)
    try:
        tokens = cached_tokens(s.text)
    except ValueError as e:
        st.error(sentence(e))
        return None
    n = len(tokens)
    if n > MAX_POSITIONS:
        st.error(f"Your text is {n} tokens long; Attention Lab shows up to {MAX_POSITIONS} tokens "
                 f"(GPT-2's context length). Shorten the text by about {n - MAX_POSITIONS} tokens.")
        return None
    mode = s.input_mode
    if mode == "book" and n != 6:
        if not quiet:  # one line, not a box: it shows on every page
            st.caption(f":material/info: The book's fixed inputs exist only for its 6-token sentence: these "
                       f"{plural(n, 'token')} use learned token + position embeddings (d_in = 3).")
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
        st.error(sentence(e))
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
    cache_key: Hashable | None = None,
    text_format: str = ".2f",
    mask_labels: tuple[str, str] = charts.MASK_LABELS,
) -> tuple[int, int] | None:
    """Draw a matrix; return the clicked (row, col) when ``selectable`` and a cell was clicked.
    ``text_format`` is the d3 format of the values printed in cells (when they fit); ``mask_labels``
    what a 0/1 mask's values mean (``scale="mask"``).

    Above ``charts.MAX_RECT_CELLS`` cells it is a PNG (fast at any size); with ``zoom`` a window
    of up to 128 tokens is drawn below it as cells with tooltips.
    """
    n_rows, n_cols = np.shape(matrix)
    if title:
        container.markdown(f"**{title}**  \n`{n_rows} × {n_cols}`")
    ck = None if cache_key is None else (cache_key, scale, max_px)
    big = presenting()
    if not charts.matrix_needs_raster(n_rows, n_cols):
        def build(m=matrix):
            return charts.heatmap(m, row_labels, col_labels, scale=scale, x_title=x_title, y_title=y_title,
                                  max_px=max_px, selectable=selectable, text_format=text_format, big=big,
                                  mask_labels=mask_labels)
        structure = ("heatmap", charts.spec_signature(n_rows, n_cols, col_labels, max_px, big), scale, x_title,
                     y_title, max_px, selectable, text_format, big, mask_labels)
        event = draw_chart(container, build, lambda: charts.heatmap_frame(matrix, row_labels, col_labels, scale=scale),
                           structure, ck, key=key, selectable=selectable)
        return _clicked(event)
    png = memo(None if ck is None else ("png", ck), lambda: charts.raster_png(matrix, scale, max_side=RASTER_SIDE))
    container.image(png, width=min(max_px, 640))
    k = int(np.ceil(max(n_rows, n_cols) / RASTER_SIDE))
    pooled = f"; each pixel is the {'mean' if scale == 'scores' else 'max'} of a {k}×{k} block" if k > 1 else ""
    container.caption(f"{n_rows * n_cols:,} cells: drawn as an image so the page stays fast "
                      f"(rows: {y_title}, columns: {x_title}; grey = masked{pooled}).")
    if not zoom:
        return None
    url_choice(f"{key}_zoom_size", [str(z) for z in ZOOM_SIZES], "64 tokens")
    size = container.select_slider("Zoom window (tokens)", ZOOM_SIZES, value=64, key=f"{key}_zoom_size",
                                   bind="query-params")
    size = min(size, n_rows)
    url_int(f"{key}_zoom_start", 1, n_rows - size + 1, 1)
    start = container.slider("Zoom window starts at token", 1, n_rows - size + 1, 1, key=f"{key}_zoom_start",
                             bind="query-params") - 1
    cols = (start, start + size) if n_cols == n_rows else (0, min(n_cols, size))
    window = np.asarray(matrix)[start:start + size, cols[0]:cols[1]]
    def build_zoom():
        return charts.heatmap(window, row_labels, col_labels, scale=scale, x_title=x_title, y_title=y_title,
                              max_px=max_px, selectable=selectable, offset_rows=start, offset_cols=cols[0], big=big,
                              mask_labels=mask_labels)
    structure = ("zoom", charts.spec_signature(*window.shape, col_labels[cols[0]:cols[1]], max_px, big), scale,
                 x_title, y_title, max_px, selectable, big, mask_labels)
    event = draw_chart(container, build_zoom,
                       lambda: charts.heatmap_frame(window, row_labels, col_labels, start, cols[0], scale),
                       structure, None if ck is None else (ck, "zoom", start, size), key=key, selectable=selectable)
    container.caption(f"Zoom: tokens {start + 1}–{start + size} drawn as cells (hover for values).")
    return _clicked(event)


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
                col_labels: Sequence[str] | None = None, *, key: str, scale: str = "weights", columns: int = 4,
                max_px: int = 220, x_title: str = "key", y_title: str = "query",
                cache_key: Hashable | None = None) -> None:
    """Same-shaped matrices side by side: one faceted chart, or one PNG each when too large."""
    col_labels = row_labels if col_labels is None else col_labels
    n_rows, n_cols = np.shape(matrices[0])
    ck = None if cache_key is None else (cache_key, tuple(titles), scale, max_px)
    big = presenting()
    if not (charts.needs_raster(len(matrices) * n_rows * n_cols, charts.MAX_PANEL_CELLS)
            or max(n_rows, n_cols) > charts.MAX_RECT_SIDE):
        def build():
            return charts.facet_grid(matrices, titles, row_labels, col_labels, scale=scale, columns=columns,
                                     max_px=max_px, x_title=x_title, y_title=y_title, big=big)
        structure = ("facet", len(matrices), charts.spec_signature(n_rows, n_cols, col_labels, max_px, big),
                     tuple(titles), scale, columns, max_px, x_title, y_title, big)
        draw_chart(container, build, lambda: charts.facet_frame(matrices, titles, row_labels, col_labels, scale),
                   structure, ck, key=key)
        return
    container.caption(f"{len(matrices)} panels of {n_rows} × {n_cols} cells: each drawn as an image "
                      "so the page stays fast.")
    cols = container.columns(min(columns, len(matrices)))
    for i, (m, title) in enumerate(zip(matrices, titles)):
        png = memo(None if ck is None else ("png", ck, i),
                   lambda m=m: charts.raster_png(m, scale, target_px=max_px, max_side=THUMB_SIDE))
        cols[i % len(cols)].image(png, caption=title, width=max_px)


def _step(key: str, delta: int, n: int) -> None:
    st.session_state[key] = min(n - 1, max(0, st.session_state.get(key, 0) + delta))


PREV_KEY, NEXT_KEY = "PageUp", "PageDown"  # what a presentation clicker sends


def _go(key: str, value: str) -> None:
    st.session_state[key] = value


def section_steps(key: str, names: Sequence[str]):
    """Previous / Next buttons (and Page Up / Page Down) over tabs bound to ``key``, named after the
    section they lead to, at the right of the open tab's first row; returns that row's left part for the
    section's own controls."""
    current = st.session_state.get(key)
    i = names.index(current) if current in names else 0
    left, right = st.columns([3, 2], vertical_alignment="center")
    row = right.container(horizontal=True, horizontal_alignment="right", gap="small")
    row.button(f"◀ {names[i - 1]}" if i > 0 else "◀ Previous", key=f"{key}_prev", on_click=_go,
               args=(key, names[max(i - 1, 0)]), disabled=i == 0, shortcut=PREV_KEY, type="tertiary",
               help="Previous section (Page Up)")
    row.button(f"{names[i + 1]} ▶" if i < len(names) - 1 else "Next ▶", key=f"{key}_next", on_click=_go,
               args=(key, names[min(i + 1, len(names) - 1)]), disabled=i == len(names) - 1, shortcut=NEXT_KEY,
               type="tertiary", help="Next section (Page Down)")
    return left


def stepper(key: str, labels: Sequence[str]) -> int:
    """Previous / Next buttons and a slider over ``labels``; returns the chosen index.

    Buttons and slider share one session-state value, so a projector user can click or drag. The
    step is bound to the URL (``?key=`` the slider's label, or a plain step number in a hand-written
    link); a bad value is reported and step 1 shown."""
    n = len(labels)
    shown = [f"{i + 1}/{n} · {labels[i]}" for i in range(n)]
    if key not in st.session_state:  # a new session: the link may name a step (its label or its number)
        raw = st.query_params.get(key)
        st.session_state[key] = 0
        if raw is not None:
            if raw in shown:
                st.session_state[key] = shown.index(raw)
            elif raw.isdigit() and 1 <= int(raw) <= n:
                st.session_state[key] = int(raw) - 1
            else:
                warn_bad_link(key, raw, f"step 1 (a step is a number from 1 to {n})")
    st.session_state[key] = min(st.session_state[key], n - 1)
    # 1.5 parts of 10: "◀ Previous" needs ~110 px, and at 1280x720 with the sidebar open 1 part is 66 px ("◀ Pre…")
    c_prev, c_slider, c_next = st.columns([1.5, 7, 1.5], vertical_alignment="bottom")
    c_prev.button("◀ Previous", key=f"{key}_prev", on_click=_step, args=(key, -1, n), width="stretch",
                  disabled=st.session_state[key] == 0, shortcut=PREV_KEY)
    c_next.button("Next ▶", key=f"{key}_next", on_click=_step, args=(key, 1, n), width="stretch",
                  disabled=st.session_state[key] == n - 1, shortcut=NEXT_KEY)
    if n > 1:
        c_slider.select_slider("Step", options=list(range(n)), key=key, bind="query-params",
                               format_func=shown.__getitem__, label_visibility="collapsed")
    return int(st.session_state[key])


def tensor_slice(container, tensor, axes: Sequence[str], labels: Sequence[str], *, key: str,
                 scale: str = "scores", cache_key: Hashable | None = None, max_px: int = 420,
                 mask_labels: tuple[str, str] = charts.MASK_LABELS) -> None:
    """A 2-d slice of a tensor of any rank as a heatmap, with pickers for the leading axes. ``max_px``
    bounds the cells' longer side (choose it for the column the slice is drawn in)."""
    t = tensor.float()  # bool masks become 0/1
    index = []
    lead = t.ndim - 2
    if lead > 0:
        cols = container.columns(lead)
        for d in range(lead):
            name = axes[d] if d < len(axes) else f"dim {d}"
            size = t.shape[d]
            label = "head" if name == "num_heads" else name  # heads are counted from 1 on every page
            i = cols[d].number_input(f"{label} (1–{size})", 1, size, 1, key=f"{key}_{d}") if size > 1 else 1
            index.append(int(i) - 1)
    m = t[tuple(index)] if index else t
    if m.ndim == 1:
        m = m.unsqueeze(0)
    m = m.numpy()
    row_axis = axes[-2] if len(axes) >= 2 else "row"
    col_axis = axes[-1] if axes else "column"
    rows = labels if row_axis == "num_tokens" and len(labels) == m.shape[0] else [str(i) for i in range(m.shape[0])]
    cols_l = labels if col_axis == "num_tokens" and len(labels) == m.shape[1] else [str(i) for i in range(m.shape[1])]
    show_matrix(container, m, rows, cols_l, key=key, scale=scale, x_title=col_axis, y_title=row_axis, max_px=max_px,
                cache_key=None if cache_key is None else (cache_key, tuple(index)), mask_labels=mask_labels)


def slide_downloads(container, build: Callable[[], alt.TopLevelMixin], matrix: np.ndarray,
                    row_labels: Sequence[str], col_labels: Sequence[str], name: Callable[[str], str], *,
                    key: str) -> None:
    """SVG, 2x PNG and CSV downloads of one chart, built only when clicked (vl-convert, offline)."""
    from . import export

    c1, c2, c3 = container.columns(3)
    c1.download_button("SVG", lambda: export.chart_svg(build()), file_name=name("svg"), mime="image/svg+xml",
                       key=f"{key}_svg", on_click="ignore", icon=":material/download:", width="stretch")
    c2.download_button("PNG 2x", lambda: export.chart_png(build()), file_name=name("png"), mime="image/png",
                       key=f"{key}_png", on_click="ignore", icon=":material/download:", width="stretch")
    c3.download_button("CSV", lambda: export.matrix_csv(matrix, row_labels, col_labels), file_name=name("csv"),
                       mime="text/csv", key=f"{key}_csv", on_click="ignore", icon=":material/download:",
                       width="stretch")
