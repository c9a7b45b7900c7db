"""Streamlit helpers shared by the pages: loading a run with friendly errors, drawing matrices as rect
heatmaps or, when too large, as PNG rasters with a zoom window, and the slide export of every chart a
page drew (``page_downloads``)."""

from __future__ import annotations

import functools
import hashlib
import logging
import threading
import time
import weakref
from collections.abc import Callable, Hashable, Sequence

import altair as alt
import numpy as np
import streamlit as st

from attn_core import MAX_POSITIONS

from . import charts, export
from .cache import ByteLRU
from .compute import CACHE_IDLE_S, Run, cached_tokens, traced_run
from .controls import BadValue, Settings, parse_int
from .links import link_warning, md_escape
from .present import chart_config, dark, presenting
from .sizes import grow

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


_LOG = logging.getLogger(__name__)
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
    """Streamlit's own conversion of an Altair chart: a Vega-Lite dict with Arrow datasets, without Altair's
    JSON-schema validation of the whole spec (~25 ms of a new 6 x 6 heatmap's ~85 ms, measured; paid on every
    walkthrough step). The chart builders' specs are validated by the tests (tests/test_charts.py)."""
    from streamlit.elements.vega_charts import _convert_altair_to_vega_lite_spec

    # Streamlit calls ``chart.to_dict()``: for this call only, that is ``to_dict(validate=False)``. Set on the
    # instance past SchemaBase.__setattr__ (which would store it as a chart property).
    object.__setattr__(chart, "to_dict", functools.partial(type(chart).to_dict, chart, validate=False))
    try:
        return dict(_convert_altair_to_vega_lite_spec(chart))
    finally:
        object.__delattr__(chart, "to_dict")


def _arrow_bytes(df) -> bytes:
    """A frame as Arrow IPC bytes, converted on this thread (pyarrow's default thread pool costs
    ~10 ms a chart in thread start-up on a 2-core machine)."""
    import pyarrow as pa
    from streamlit.dataframe_util import convert_arrow_table_to_arrow_bytes

    return convert_arrow_table_to_arrow_bytes(pa.Table.from_pandas(df, nthreads=1))


def _vega(container, build: Callable[[], alt.TopLevelMixin], frame: Callable[[], object] | None,
          structure: Hashable | None, data_key: Hashable | None, key: str, selectable: bool):
    """Draw a chart from a cached spec template (see :func:`draw_chart`); nothing is registered."""
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
    for part, values in chart_config(presenting(), grow()).items():
        config[part] = {**config.get(part, {}), **values}
    return {**spec, "config": config}


def draw_chart(container, build: Callable[[], alt.TopLevelMixin], frame: Callable[[], object] | None = None,
               structure: Hashable | None = None, data_key: Hashable | None = None, *, key: str,
               selectable: bool = False, name: str | None = None, title: str = "",
               table: Callable[[], object] | None = None):
    """Draw a chart from a cached spec template; return its selection event (or a DeltaGenerator).

    No chart spec depends on the data's values (see charts.color_scale), so the spec built once
    for a ``structure`` (shape, labels, scale, sizes) serves every run: a rerun only swaps in the
    new data (``frame()`` as Arrow bytes, cached under ``data_key``). Building and converting a
    chart costs ~50 ms; swapping data ~1 ms.

    The chart is offered by :func:`page_downloads` as ``name`` (default: ``key``) with ``title`` (default:
    its own title, else the name in words); its CSV is ``table()`` (a DataFrame), else ``frame()``, else
    the chart's own data.
    """
    event = _vega(container, build, frame, structure, data_key, key, selectable)
    source = table or frame

    def csv() -> bytes:
        df = source() if source is not None else export.chart_frame(build())
        return export.frame_csv(df) if df is not None else b""

    register_chart(export.PageChart(name or key, title or _words(name or key), chart=build, table=csv))
    return event


# --- Slide export: every chart a page draws, offered by one control -------------------------------------
# Each drawing helper registers what it drew (a builder, never a built chart) in a list that belongs to
# the current script run; page_downloads() at the end of a page offers them. Cost per chart and run: one
# small object (~µs). A run's list is reachable only from that run's Streamlit object and, once drawn,
# from the download buttons of the session's latest run (Streamlit drops those when the next run ends or
# the session closes), so nothing accumulates across runs or sessions.
KEEP_MATRIX_BYTES = 2**20  # a raster's matrix above this is held by the shared bounded cache, not the session


class _PageRun:
    """What one script run drew so far, and the settings its file names carry."""

    __slots__ = ("charts", "settings", "page_settings", "replaced", "__weakref__")

    def __init__(self) -> None:
        self.charts: list[export.PageChart] = []
        self.settings: export.SlideSettings | None = None
        self.page_settings: export.SlideSettings | None = None  # the first set: the page's own (the zip's name)
        self.replaced: dict[str, int] = {}  # fragment id -> where its next chart goes in the offered list


class _Offered:
    """What a page's download control offers. A rerun of a fragment alone (Shape flow's stepper, Explore's
    weights) replaces that fragment's charts here, so the control offers what the page shows now."""

    __slots__ = ("charts", "settings", "__weakref__")

    def __init__(self, charts: list[export.PageChart], settings: export.SlideSettings | None) -> None:
        self.charts = charts
        self.settings = settings


_OFFERED_KEY = "_page_downloads_offered"  # session state holds only a weak reference to the _Offered


def _fragment_now() -> tuple[str | None, bool]:
    """(the fragment the caller runs in, whether this script run reruns fragments only). Streamlit 1.67
    internals (tests/test_streamlit_internals.py); without them, fragments are treated as the page."""
    try:
        from streamlit.runtime.scriptrunner_utils.script_run_context import ThreadState, get_script_run_ctx

        ctx = get_script_run_ctx(suppress_warning=True)
        return ThreadState.get().fragment_id, bool(ctx is not None and ctx.fragment_ids_this_run)
    except Exception:  # noqa: BLE001 - pragma: no cover - another Streamlit version
        return None, False


def _offered_now() -> _Offered | None:
    ref = st.session_state.get(_OFFERED_KEY)
    return ref() if isinstance(ref, weakref.ref) else None


def _replace_in_offered(run: _PageRun, fragment: str, entry: export.PageChart, offered: _Offered) -> None:
    """A fragment reran alone: its first chart of this run drops the charts it drew before, at their place."""
    with _RUNS_LOCK:
        if fragment not in run.replaced:
            old = [i for i, e in enumerate(offered.charts) if e.fragment == fragment]
            run.replaced[fragment] = old[0] if old else len(offered.charts)
            offered.charts = [e for e in offered.charts if e.fragment != fragment]
        at = run.replaced[fragment]
        offered.charts = offered.charts[:at] + [entry] + offered.charts[at:]
        run.replaced[fragment] = at + 1


_RUNS: weakref.WeakKeyDictionary[object, _PageRun] = weakref.WeakKeyDictionary()
_RUNS_LOCK = threading.Lock()
_FALLBACK_KEY = "_page_charts"  # Streamlit without a per-run object: kept in session state, emptied by page_downloads


def _this_run() -> _PageRun | None:
    """The current script run's record (None outside a script run). Keyed weakly by the object Streamlit
    1.67 creates afresh for every script run (``ScriptRunContext.parallel_coordinator``; a fragment rerun
    is a run too), so the previous run's record goes with it (tests/test_streamlit_internals.py)."""
    from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

    ctx = get_script_run_ctx(suppress_warning=True)
    if ctx is None:
        return None
    token = getattr(ctx, "parallel_coordinator", None)
    if token is None:  # pragma: no cover - another Streamlit version
        return st.session_state.setdefault(_FALLBACK_KEY, _PageRun())
    with _RUNS_LOCK:
        run = _RUNS.get(token)
        if run is None:
            run = _RUNS[token] = _PageRun()
    return run


def _words(what: str) -> str:
    """``mistake_diff`` → ``mistake diff``: a name hint as a title."""
    return what.replace("_", " ").strip()


def slide_settings(variant: str | None = None, num_tokens: int | None = None, extra: str = "") -> None:
    """The settings of the charts a page draws from here on (in their file names and export subtitles),
    e.g. ``slide_settings(cfg.variant, T)`` → ``weights_head2_MultiHeadAttention_T10.svg``. Called with
    nothing: the charts that follow carry no settings."""
    run = _this_run()
    if run is not None:
        empty = variant is None and num_tokens is None and not extra
        run.settings = None if empty else export.SlideSettings(variant or "", num_tokens, extra)
        run.page_settings = run.page_settings or run.settings


def register_chart(entry: export.PageChart) -> None:
    """Offer one more chart of this run in :func:`page_downloads` (with the run's current settings unless
    the entry has its own). Drawing helpers call this; a page calls it for a chart it draws itself."""
    run = _this_run()
    if run is None:
        return
    fragment, fragment_run = _fragment_now()
    entry.fragment = fragment
    offered = _offered_now() if fragment_run and fragment is not None else None
    if entry.settings is None:
        entry.settings = run.settings or (offered.settings if offered is not None else None)
    run.charts.append(entry)
    if offered is not None:
        _replace_in_offered(run, fragment, entry, offered)


def take_page_charts() -> list[export.PageChart]:
    """The charts registered in this run so far; the run's list starts empty again."""
    run = _this_run()
    if run is None:
        return []
    charts_, run.charts = run.charts, []
    return charts_


def register_images(what: str, title: str, images: Sequence[tuple[str, bytes]], *, scale: str,
                    matrices: Sequence[np.ndarray] | None = None, row_labels: Sequence[str] = (),
                    col_labels: Sequence[str] = (), x_title: str = "key", y_title: str = "query",
                    note: str = "", columns: int = 4) -> None:
    """Offer PNG rasters drawn with ``st.image`` (one or a grid, each with its caption) as one chart; with
    ``matrices`` (small ones: held until the next run) their numbers as CSV."""
    table = None
    if matrices is not None:
        held = [_hold(m, None) for m in matrices]
        table = _panels_table(held, [c for c, _ in images], row_labels, col_labels)
    register_chart(export.PageChart(what, title, images=tuple(images), scale=scale, x_title=x_title,
                                    y_title=y_title, note=note, table=table, columns=columns))


def _own(matrix: np.ndarray) -> np.ndarray:
    """A small matrix the export may keep until the next run: a view is copied, so it never pins the
    tensor or trace it was cut from."""
    m = np.asarray(matrix)
    return m if m.base is None else m.copy()


def _hold(matrix: np.ndarray, cache_key: Hashable | None) -> Callable[[], np.ndarray | None]:
    """How the export gets a matrix back when a CSV is asked for. Small ones are kept (copied if a view);
    a large one (a raster's) is held by the shared byte-bounded cache under ``cache_key`` and only weakly
    by the session, so 30 sessions on 1,024-token texts cannot hold GBs past the cache's bound. Returns
    None once the cache has let it go."""
    m = np.asarray(matrix)
    if m.nbytes <= KEEP_MATRIX_BYTES:
        kept = _own(m)
        return lambda: kept
    if cache_key is not None and not _DRAWN.holds(m):  # a page's memo'd matrix is not counted twice
        m = memo(("export_matrix", cache_key), lambda: m)
    return weakref.ref(m)


GONE_CSV = (b"# This chart's numbers are no longer in the server's memory (a busy server lets large matrices "
            b"go). Rerun the page (press R) and download again.\n")


def _matrix_table(held, row_labels, col_labels) -> Callable[[], bytes]:
    def csv() -> bytes:
        m = held()
        return GONE_CSV if m is None else export.matrix_csv(m, row_labels, col_labels)
    return csv


def _panels_table(held, titles, row_labels, col_labels) -> Callable[[], bytes]:
    def csv() -> bytes:
        mats = [h() for h in held]
        return GONE_CSV if any(m is None for m in mats) else export.panels_csv(mats, titles, row_labels, col_labels)
    return csv


def page_downloads(container=None, *, page: str = "page", key: str = "page_downloads") -> None:
    """One compact control for every chart this run drew: pick a chart, download its SVG, 2x PNG or CSV, or
    all of them in one zip. Call it once, at the end of a page (``container``: where to draw it; default
    the page's main area). Nothing is built until a download is clicked; while the popover is closed a rerun
    draws only its button (open: a selectbox and four download buttons). ``page`` names the zip."""
    charts_ = take_page_charts()
    if not charts_:
        return
    run = _this_run()
    settings = run.page_settings if run else None
    zip_name = export.slide_name(f"{page}_charts", settings.variant if settings else "",
                                 settings.num_tokens if settings else None, "zip",
                                 extra=settings.slug() if settings else "")
    offered = _Offered(charts_, settings)  # held by the control (the fragment's arguments) until the next run
    st.session_state[_OFFERED_KEY] = weakref.ref(offered)
    if container is None:
        _download_panel(offered, zip_name, key)
    else:
        with container:
            _download_panel(offered, zip_name, key)


@st.fragment
def _download_panel(offered: _Offered, zip_name: str, key: str) -> None:
    """The popover; a fragment, so opening it or picking another chart reruns only this, not the page. Its
    contents are drawn only while it is open (Streamlit's lazy popover: ``on_change="rerun"``)."""
    entries = tuple(offered.charts)
    # short: "Download charts (1)" wrapped onto two lines at 1280×720
    popover = st.popover(f"Download ({len(entries)})", icon=":material/download:", key=f"{key}_open",
                         on_change="rerun", help="Every chart on this page as a slide: SVG or 2x PNG with its "
                                                 "title, labels and legend, and its numbers as CSV.")
    if not popover.open:  # closed (as on most reruns): its contents are not even drawn
        return
    stems = export.unique_stems(entries)
    labels = [e.label() for e in entries]
    with popover:
        i = st.selectbox("Chart", range(len(entries)), format_func=labels.__getitem__, key=f"{key}_pick")
        i = min(int(i or 0), len(entries) - 1)
        e, stem = entries[i], stems[i]
        c1, c2, c3 = st.columns(3)
        c1.download_button("SVG", lambda: export.entry_svg(e), file_name=f"{stem}.svg", mime="image/svg+xml",
                           key=f"{key}_svg", on_click="ignore", icon=":material/download:", width="stretch")
        c2.download_button("PNG 2x", lambda: export.entry_png(e), file_name=f"{stem}.png", mime="image/png",
                           key=f"{key}_png", on_click="ignore", icon=":material/download:", width="stretch")
        c3.download_button("CSV", lambda: export.entry_csv(e) or b"", file_name=f"{stem}.csv", mime="text/csv",
                           key=f"{key}_csv", on_click="ignore", icon=":material/download:", width="stretch",
                           disabled=e.table is None)
        st.download_button(f"All {len(entries)} charts on this page (zip)", lambda: export.page_zip(offered.charts),
                           file_name=zip_name, mime="application/zip", key=f"{key}_zip", on_click="ignore",
                           icon=":material/folder_zip:", width="stretch")
        st.caption(f"Files are named by what and which settings, e.g. `{stem}.svg`.")


NUMBERS_KEY = "numbers_"  # a container keyed with this prefix right-aligns its tables' cells (present.NUMBERS_CSS)


def show_table(container, df, *, formats: dict[str, str] | None = None, na_rep: str = "",
               hide_index: bool | None = None, column_config: dict | None = None, **dataframe_kw) -> None:
    """A table of results: ``st.dataframe`` (sortable, searchable, downloadable), and in presentation mode a static
    ``st.table``, whose text the presentation style sets at 1.1 rem (the data grid draws ~12 px text on a canvas that
    no style reaches). ``formats``: printf formats by column (``{"median ms": "%.3f"}``), applied in both; ``na_rep``
    what a missing number shows in the static table. Text cells are Markdown-escaped there (st.table renders
    Markdown)."""
    import pandas as pd

    formats = {c: f for c, f in (formats or {}).items() if c in df.columns}
    if not presenting():
        config = {c: st.column_config.NumberColumn(format=f) for c, f in formats.items()} | (column_config or {})
        container.dataframe(df, hide_index=hide_index, column_config=config or None, **dataframe_kw)
        return
    shown = df.copy()
    for c in shown.columns:
        if not pd.api.types.is_numeric_dtype(shown[c]) or pd.api.types.is_bool_dtype(shown[c]):
            shown[c] = [v if v is None else md_escape(str(v)) for v in shown[c]]
    shown.index = pd.Index([md_escape(str(i)) for i in shown.index], name=df.index.name)
    shown.columns = [md_escape(str(c)) for c in shown.columns]
    style = shown.style.format({md_escape(str(c)): (lambda v, f=f: f % v) for c, f in formats.items()},
                               na_rep=na_rep)
    container.table(style, hide_index=hide_index if hide_index is not None else isinstance(df.index, pd.RangeIndex),
                    width="content")


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
        parse_int(raw, lo, hi)
    except BadValue as e:
        st.warning(link_warning(key, raw, str(used), str(e)))


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
    if cfg.spec.masks and n > cfg.context_length:
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
    name: str | None = None,
    mask_labels: tuple[str, str] = charts.MASK_LABELS,
) -> tuple[int, int] | None:
    """Draw a matrix; return the clicked (row, col) when ``selectable`` and a cell was clicked.
    ``text_format`` is the d3 format of the values printed in cells (when they fit); ``mask_labels``
    what a 0/1 mask's values mean (``scale="mask"``).

    Above ``charts.MAX_RECT_CELLS`` cells it is a PNG (fast at any size); with ``zoom`` a window
    of up to 128 tokens is drawn below it as cells with tooltips.

    The chart is offered by :func:`page_downloads` as ``name`` (what it is, for the file name; default
    ``key``) with ``title`` (default: the name in words) and the matrix as CSV.
    """
    n_rows, n_cols = np.shape(matrix)
    if title:
        container.markdown(f"**{title}**  \n`{n_rows} × {n_cols}`")
    night = scale == "mask" and dark()  # a mask's colours follow the page's theme (the export stays light)
    ck = None if cache_key is None else (cache_key, scale, max_px) + (("dark",) if night else ())
    what = name or key
    slide_title = title or _words(what)
    big, g = presenting(), grow()
    if not charts.matrix_needs_raster(n_rows, n_cols):
        structure, build, frame = _heatmap_parts(matrix, row_labels, col_labels, scale=scale, x_title=x_title,
                                                 y_title=y_title, max_px=max_px, selectable=selectable,
                                                 text_format=text_format, big=big, mask_labels=mask_labels, grow=g,
                                                 night=night)
        event = _vega(container, build, frame, structure, ck, key, selectable)
        kept = _own(matrix)
        register_chart(export.PageChart(
            what, slide_title, table=_matrix_table(lambda: kept, row_labels, col_labels),
            chart=lambda: charts.heatmap(kept, row_labels, col_labels, scale=scale, x_title=x_title,
                                         y_title=y_title, max_px=max_px, text_format=text_format,
                                         mask_labels=mask_labels)))
        return _clicked(event)
    png = memo(None if ck is None else ("png", ck),
               lambda: charts.raster_png(matrix, scale, max_side=RASTER_SIDE, dark=night))
    container.image(png, width=min(max_px, round(640 * grow())))
    k = int(np.ceil(max(n_rows, n_cols) / RASTER_SIDE))
    pooled = f"; each pixel is the {'mean' if scale == 'scores' else 'max'} of a {k}×{k} block" if k > 1 else ""
    container.caption(f"{n_rows * n_cols:,} cells: drawn as an image so the page stays fast "
                      f"(rows: {y_title}, columns: {x_title}; grey = masked{pooled}).")
    register_chart(export.PageChart(
        what, slide_title, images=(("", png),), scale=scale, bound=_bound(matrix, scale, ck), x_title=x_title,
        y_title=y_title, note=f"{n_rows} × {n_cols} cells" + pooled,
        table=_matrix_table(_hold(matrix, ck), row_labels, col_labels)))
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
                              mask_labels=mask_labels, grow=g, dark=night)
    structure = ("zoom", charts.spec_signature(*window.shape, col_labels[cols[0]:cols[1]], max_px, big, g), scale,
                 x_title, y_title, max_px, selectable, big, mask_labels, night)
    event = _vega(container, build_zoom,
                  lambda: charts.heatmap_frame(window, row_labels, col_labels, start, cols[0], scale),
                  structure, None if ck is None else (ck, "zoom", start, size), key, selectable)
    container.caption(f"Zoom: tokens {start + 1}–{start + size} drawn as cells (hover for values).")
    zoomed = _own(window)
    register_chart(export.PageChart(
        f"{what}_zoom{start + 1}-{start + size}", f"{slide_title}, tokens {start + 1}–{start + size}",
        chart=lambda: charts.heatmap(zoomed, row_labels, col_labels, scale=scale, x_title=x_title, y_title=y_title,
                                     max_px=max_px, offset_rows=start, offset_cols=cols[0]),
        table=_matrix_table(lambda: zoomed, row_labels[start:start + size], col_labels[cols[0]:cols[1]])))
    return _clicked(event)


def _heatmap_parts(matrix: np.ndarray, row_labels: Sequence[str], col_labels: Sequence[str], *, scale: str,
                   x_title: str, y_title: str, max_px: int, selectable: bool, text_format: str, big: bool,
                   mask_labels: tuple[str, str], grow: float, night: bool,
                   ) -> tuple[tuple, Callable[[], alt.TopLevelMixin], Callable]:
    """A matrix's rect heatmap as :func:`show_matrix` draws it: (the key of its spec template, the chart, its data).
    ``night``: a mask drawn in the dark page's colours."""
    n_rows, n_cols = np.shape(matrix)

    def build() -> alt.TopLevelMixin:
        return charts.heatmap(matrix, row_labels, col_labels, scale=scale, x_title=x_title, y_title=y_title,
                              max_px=max_px, selectable=selectable, text_format=text_format, big=big,
                              mask_labels=mask_labels, grow=grow, dark=night)

    structure = ("heatmap", charts.spec_signature(n_rows, n_cols, col_labels, max_px, big, grow), scale, x_title,
                 y_title, max_px, selectable, text_format, big, mask_labels, night)
    return structure, build, lambda: charts.heatmap_frame(matrix, row_labels, col_labels, scale=scale)


def prepare_matrix(matrix: np.ndarray, row_labels: Sequence[str], col_labels: Sequence[str], *, big: bool,
                   grow: float = 1.0, dark: bool = False, scale: str = "scores", x_title: str = "key",
                   y_title: str = "query", max_px: int = charts.CHART_PX, cache_key: Hashable | None = None,
                   selectable: bool = False, text_format: str = ".2f",
                   mask_labels: tuple[str, str] = charts.MASK_LABELS) -> None:
    """Build, ahead of time, what :func:`show_matrix` with these arguments will send: its spec template (~30-60 ms
    for a new shape: the main server cost of a walkthrough step) and, with a ``cache_key``, its data. ``big``,
    ``grow``, ``dark``: presentation mode, the screen's growth and the page's theme (read them in the script: this
    may run on another thread). Rasters are not prepared."""
    if charts.matrix_needs_raster(*np.shape(matrix)):
        return
    night = scale == "mask" and dark
    structure, build, frame = _heatmap_parts(matrix, row_labels, col_labels, scale=scale, x_title=x_title,
                                             y_title=y_title, max_px=max_px, selectable=selectable,
                                             text_format=text_format, big=big, mask_labels=mask_labels, grow=grow,
                                             night=night)
    memo(("spec", structure), lambda: _to_spec(build()))
    if cache_key is not None:
        memo(("arrow", (cache_key, scale, max_px) + (("dark",) if night else ())), lambda: _arrow_bytes(frame()))


PREFETCH_DELAY_S = 0.3  # after the run: the browser draws the page it was sent first (2 cores)
PREFETCH_THREAD = "attention-lab-prefetch"


def prefetch(work: Callable[[], None]) -> threading.Thread:
    """Run ``work`` (e.g. :func:`prepare_matrix` for the next step of a stepper) on a daemon thread after
    ``PREFETCH_DELAY_S``, while the user reads the page; a failure only costs the prefetch (the page builds on a
    miss). Returns the thread."""
    delay_s = PREFETCH_DELAY_S

    def run() -> None:
        time.sleep(delay_s)
        try:
            work()
        except Exception:  # noqa: BLE001 - a prefetch must never fail a page
            _LOG.debug("prefetch failed", exc_info=True)

    thread = threading.Thread(target=run, name=PREFETCH_THREAD, daemon=True)
    thread.start()
    return thread


def _bound(matrix: np.ndarray, scale: str, ck: Hashable | None) -> float | None:
    """A diverging raster's colour range (charts.raster_rgb: ±max |finite value|), for its exported legend."""
    if charts.scale_parts(scale)[0] != "scores":
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
                col_labels: Sequence[str] | None = None, *, key: str, scale: str = "weights", columns: int = 4,
                max_px: int = 220, x_title: str = "key", y_title: str = "query",
                cache_key: Hashable | None = None, name: str | None = None, title: str = "") -> None:
    """Same-shaped matrices side by side: one faceted chart, or one PNG each when too large.

    Offered by :func:`page_downloads` as one chart named ``name`` (default ``key``), titled ``title``
    (only in the export; default: the name in words), with every panel's numbers in one CSV."""
    col_labels = row_labels if col_labels is None else col_labels
    n_rows, n_cols = np.shape(matrices[0])
    ck = None if cache_key is None else (cache_key, tuple(titles), scale, max_px)
    what = name or key
    slide_title = title or _words(what)
    big, g = presenting(), grow()
    if not (charts.needs_raster(len(matrices) * n_rows * n_cols, charts.MAX_PANEL_CELLS)
            or max(n_rows, n_cols) > charts.MAX_RECT_SIDE):
        def build():
            return charts.facet_grid(matrices, titles, row_labels, col_labels, scale=scale, columns=columns,
                                     max_px=max_px, x_title=x_title, y_title=y_title, big=big, grow=g)
        structure = ("facet", len(matrices), charts.spec_signature(n_rows, n_cols, col_labels, max_px, big, g),
                     tuple(titles), scale, columns, max_px, x_title, y_title, big)
        _vega(container, build, lambda: charts.facet_frame(matrices, titles, row_labels, col_labels, scale),
              structure, ck, key, False)
        kept = [_own(m) for m in matrices]
        register_chart(export.PageChart(
            what, slide_title, table=_panels_table([lambda m=m: m for m in kept], titles, row_labels, col_labels),
            chart=lambda: charts.facet_grid(kept, titles, row_labels, col_labels, scale=scale, columns=columns,
                                            max_px=max_px, x_title=x_title, y_title=y_title)))
        return
    container.caption(f"{len(matrices)} panels of {n_rows} × {n_cols} cells: each drawn as an image "
                      "so the page stays fast.")
    cols = container.columns(min(columns, len(matrices)))
    pngs = []
    for i, (m, panel) in enumerate(zip(matrices, titles)):
        png = memo(None if ck is None else ("png", ck, i),
                   lambda m=m: charts.raster_png(m, scale, target_px=max_px, max_side=THUMB_SIDE))
        cols[i % len(cols)].image(png, caption=panel, width=max_px)
        pngs.append((panel, png))
    held = [_hold(m, None if ck is None else (ck, i)) for i, m in enumerate(matrices)]
    bound = max((_bound(m, scale, None if ck is None else (ck, i)) or 0.0 for i, m in enumerate(matrices)),
                default=0.0) or None
    register_chart(export.PageChart(
        what, slide_title, images=tuple(pngs), scale=scale, bound=bound, x_title=x_title, y_title=y_title,
        note=f"{len(matrices)} panels of {n_rows} × {n_cols} cells", columns=len(cols),
        table=_panels_table(held, titles, row_labels, col_labels)))


def _link_step(key: str, shown: Sequence[str]) -> None:
    """Write a stepper's step into the link (``?key=`` its label; none for step 1). Called from the buttons' and
    the slider's callbacks, before the run: a new link makes the browser redraw the whole page once more, and
    that redraw then comes before the run's own instead of after it. (The slider bound to the link wrote it after
    the run: that redraw and the thumb moving again were a step's last changes, ~40 ms after the rest.)"""
    i = st.session_state.get(key, 0)
    if i:
        st.query_params[key] = shown[i]
    else:
        st.query_params.pop(key, None)


def _slid(key: str, slider: str, shown: Sequence[str]) -> None:
    st.session_state[key] = st.session_state[slider]
    _link_step(key, shown)


def _step(key: str, delta: int, shown: Sequence[str]) -> None:
    st.session_state[key] = min(len(shown) - 1, max(0, st.session_state.get(key, 0) + delta))
    _link_step(key, shown)


PREV_KEY, NEXT_KEY = "PageUp", "PageDown"  # what a presentation clicker sends


def _go(key: str, value: str) -> None:
    st.session_state[key] = value


def section_steps(key: str, names: Sequence[str]) -> tuple:
    """Previous / Next buttons (and Page Up / Page Down) over sections picked by the widget ``key``, named after
    the section they lead to, at the right of the section's first row; returns that row's left part for the
    section's own controls and the middle part (for the page's download control)."""
    current = st.session_state.get(key)
    i = names.index(current) if current in names else 0
    # the middle holds "Download (N)" on one line at 1280×720 (a 2/11 column wrapped it)
    left, middle, right = st.columns([4, 3, 4], vertical_alignment="center")
    row = right.container(horizontal=True, horizontal_alignment="right", gap="small")
    row.button(f"◀ {names[i - 1]}" if i > 0 else "◀ Previous", key=f"{key}_prev", on_click=_go,
               args=(key, names[max(i - 1, 0)]), disabled=i == 0, shortcut=PREV_KEY, type="tertiary",
               help="Previous section (Page Up)")
    row.button(f"{names[i + 1]} ▶" if i < len(names) - 1 else "Next ▶", key=f"{key}_next", on_click=_go,
               args=(key, names[min(i + 1, len(names) - 1)]), disabled=i == len(names) - 1, shortcut=NEXT_KEY,
               type="tertiary", help="Next section (Page Down)")
    return left, middle


def stepper(key: str, labels: Sequence[str]) -> int:
    """Previous / Next buttons and a slider over ``labels``; returns the chosen index.

    Buttons and slider share one session-state value, so a projector user can click or drag. The
    step is in the link (``?key=`` the slider's label, or a plain step number in a hand-written
    link; :func:`_link_step`); a bad value is reported and step 1 shown."""
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
    i = st.session_state[key]
    # One row that sizes each button to its label (fixed column ratios cut "◀ Previous" to "◀ Pre…" at
    # 1280 px with the sidebar open); the slider takes the rest.
    row = st.container(horizontal=True, vertical_alignment="center", gap="small")
    row.button("◀ Previous", key=f"{key}_prev", on_click=_step, args=(key, -1, shown), width="content",
               disabled=i == 0, shortcut=PREV_KEY)
    if n > 1:
        # The position as its own line above the track ("Step 3 of 20 · x"): the slider's value rode on its
        # thumb, which covered it. The slider keeps its formatted options for the link (``?key=3/20 · x``).
        middle = row.container(gap=None, width="stretch")
        middle.html(f"<style>[class*='st-key-{key}_slider'] [data-testid='stSliderThumbValue'] {{display: none;}}"
                    "</style>")
        middle.markdown(f"**Step {i + 1} of {n}** · {md_escape(labels[i])}", width="stretch")
        # A new slider each time the step is moved other than by the slider (the buttons, a test): a slider whose
        # value the script changes shows it only after the run (its thumb moved ~20 ms after the rest of the
        # page, measured), a new one is drawn at its value. Dragging keeps the slider (and the keyboard focus).
        moves = f"{key}_moves"
        if st.session_state.get(f"{key}_slider{st.session_state.get(moves, 0)}", i) != i:
            st.session_state[moves] = st.session_state.get(moves, 0) + 1
        slider = f"{key}_slider{st.session_state.get(moves, 0)}"
        middle.select_slider("Step", options=list(range(n)), value=i, key=slider, on_change=_slid,
                             args=(key, slider, shown), format_func=shown.__getitem__,
                             label_visibility="collapsed", width="stretch")
    row.button("Next ▶", key=f"{key}_next", on_click=_step, args=(key, 1, shown), width="content",
               disabled=i == n - 1, shortcut=NEXT_KEY)
    return int(i)


def tensor_slice(container, tensor, axes: Sequence[str], labels: Sequence[str], *, key: str,
                 scale: str = "scores", cache_key: Hashable | None = None, name: str | None = None,
                 max_px: int = 420, mask_labels: tuple[str, str] = charts.MASK_LABELS) -> None:
    """A 2-d slice of a tensor of any rank as a heatmap, with pickers for the leading axes (exported as
    ``name`` plus the picked positions, e.g. ``queries.view_b1_head2``). ``max_px`` bounds the cells'
    longer side (choose it for the column the slice is drawn in)."""
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
            i = cols[d].number_input(f"{label} (1–{size})", 1, size, 1, key=f"{key}_{d}") if size > 1 else 1
            index.append(int(i) - 1)
            picked += f"_{label.replace(' ', '')}{int(i)}" if size > 1 else ""
    m = t[tuple(index)] if index else t
    if m.ndim == 1:
        m = m.unsqueeze(0)
    m = m.numpy()
    row_axis = axes[-2] if len(axes) >= 2 else "row"
    col_axis = axes[-1] if axes else "column"
    rows = labels if row_axis == "num_tokens" and len(labels) == m.shape[0] else [str(i) for i in range(m.shape[0])]
    cols_l = labels if col_axis == "num_tokens" and len(labels) == m.shape[1] else [str(i) for i in range(m.shape[1])]
    show_matrix(container, m, rows, cols_l, key=key, scale=scale, x_title=col_axis, y_title=row_axis, max_px=max_px,
                cache_key=None if cache_key is None else (cache_key, tuple(index)), name=(name or key) + picked,
                mask_labels=mask_labels)
