"""Slide export: every chart a page draws is registered (a builder, never a built chart) in a list that belongs
to the current script run, and ``page_downloads`` at the end of a page offers them as SVG, 2x PNG, CSV or one zip.
``draw_chart`` draws an Altair chart from the chart cache and registers it."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Hashable, Sequence

import altair as alt
import numpy as np
import streamlit as st

from dashboard.drawing.chart_cache import fragment_now, holds, memo, run_token, vega
from dashboard.export import formats as export
from dashboard.i18n import _, lang, language, ngettext

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
    """The current script run's record (None outside a script run). Keyed weakly by an object Streamlit creates
    afresh for every script run (:func:`~dashboard.drawing.chart_cache.run_token`), so the previous run's record goes
    with it."""
    in_run, token = run_token()
    if not in_run:
        return None
    if token is None:  # pragma: no cover - another Streamlit version
        return st.session_state.setdefault(_FALLBACK_KEY, _PageRun())
    with _RUNS_LOCK:
        run = _RUNS.get(token)
        if run is None:
            run = _RUNS[token] = _PageRun()
    return run


def words(what: str) -> str:
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
    fragment, fragment_run = fragment_now()
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
                    note: str = "", columns: int = 4, cmap: str | None = None) -> None:
    """Offer PNG rasters drawn with ``st.image`` (one or a grid, each with its caption, in the colour map ``cmap``)
    as one chart; with ``matrices`` (small ones: held until the next run) their numbers as CSV."""
    table = None
    if matrices is not None:
        held = [hold(m, None) for m in matrices]
        table = panels_table(held, [c for c, _png in images], row_labels, col_labels)
    register_chart(export.PageChart(what, title, images=tuple(images), scale=scale, cmap=cmap, x_title=x_title,
                                    y_title=y_title, note=note, table=table, columns=columns))


def own(matrix: np.ndarray) -> np.ndarray:
    """A small matrix the export may keep until the next run: a view is copied, so it never pins the
    tensor or trace it was cut from."""
    m = np.asarray(matrix)
    return m if m.base is None else m.copy()


def hold(matrix: np.ndarray, cache_key: Hashable | None) -> Callable[[], np.ndarray | None]:
    """How the export gets a matrix back when a CSV is asked for. Small ones are kept (copied if a view);
    a large one (a raster's) is held by the shared byte-bounded cache under ``cache_key`` and only weakly
    by the session, so 30 sessions on 1,024-token texts cannot hold GBs past the cache's bound. Returns
    None once the cache has let it go."""
    m = np.asarray(matrix)
    if m.nbytes <= KEEP_MATRIX_BYTES:
        kept = own(m)
        return lambda: kept
    if cache_key is not None and not holds(m):  # a page's memo'd matrix is not counted twice
        m = memo(("export_matrix", cache_key), lambda: m)
    return weakref.ref(m)


GONE_CSV = (b"# This chart's numbers are no longer in the server's memory (a busy server lets large matrices "
            b"go). Rerun the page (press R) and download again.\n")


def matrix_table(held, row_labels, col_labels) -> Callable[[], bytes]:
    def csv() -> bytes:
        m = held()
        return GONE_CSV if m is None else export.matrix_csv(m, row_labels, col_labels)
    return csv


def panels_table(held, titles, row_labels, col_labels) -> Callable[[], bytes]:
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
    popover = st.popover(_("Download ({n})", n=len(entries)), icon=":material/download:", key=f"{key}_open",
                         on_change="rerun", help=_("Every chart on this page as a slide: SVG or 2x PNG with its "
                                                   "title, labels and legend, and its numbers as CSV."))
    if not popover.open:  # closed (as on most reruns): its contents are not even drawn
        return
    stems = export.unique_stems(entries)
    labels = [e.label() for e in entries]
    code = lang()  # a download is built when clicked, maybe outside this run: in the language it was offered in
    with popover:
        i = st.selectbox(_("Chart"), range(len(entries)), format_func=labels.__getitem__, key=f"{key}_pick")
        i = min(int(i or 0), len(entries) - 1)
        e, stem = entries[i], stems[i]
        c1, c2, c3 = st.columns(3)
        c1.download_button("SVG", lambda: _in(code, export.entry_svg, e), file_name=f"{stem}.svg",
                           mime="image/svg+xml",
                           key=f"{key}_svg", on_click="ignore", icon=":material/download:", width="stretch")
        c2.download_button(_("PNG 2x"), lambda: _in(code, export.entry_png, e), file_name=f"{stem}.png",
                           mime="image/png",
                           key=f"{key}_png", on_click="ignore", icon=":material/download:", width="stretch")
        c3.download_button("CSV", lambda: _in(code, export.entry_csv, e) or b"", file_name=f"{stem}.csv",
                           mime="text/csv",
                           key=f"{key}_csv", on_click="ignore", icon=":material/download:", width="stretch",
                           disabled=e.table is None)
        st.download_button(ngettext("All {n} chart on this page (zip)", "All {n} charts on this page (zip)",
                                    len(entries)),
                           lambda: _in(code, export.page_zip, offered.charts),
                           file_name=zip_name, mime="application/zip", key=f"{key}_zip", on_click="ignore",
                           icon=":material/folder_zip:", width="stretch")
        example = f"`{stem}.svg`"
        st.caption(_("Files are named by what and which settings, e.g. {example}.", example=example))


def _in(code: str, build: Callable[[object], bytes | None], what: object) -> bytes | None:
    """``build(what)`` in language ``code`` (its subtitle, axis names and legend)."""
    with language(code):
        return build(what)


def draw_chart(container, build: Callable[[], alt.TopLevelMixin], frame: Callable[[], object] | None = None,
               structure: Hashable | None = None, data_key: Hashable | None = None, *, key: str,
               selectable: bool = False, name: str | None = None, title: str = "",
               table: Callable[[], object] | None = None, selection: str = "cell",
               on_select: Callable[[], None] | None = None):
    """Draw a chart from a cached spec template; return its selection event (or a DeltaGenerator).

    No chart spec depends on the data's values (see scales.color_scale), so the spec built once
    for a ``structure`` (shape, labels, scale, sizes) serves every run: a rerun only swaps in the
    new data (``frame()`` as Arrow bytes, cached under ``data_key``): swapping data costs a fraction of
    building and converting a chart (docs/measurements.md).

    The chart is offered by :func:`page_downloads` as ``name`` (default: ``key``) with ``title`` (default:
    its own title, else the name in words); its CSV is ``table()`` (a DataFrame), else ``frame()``, else
    the chart's own data.
    """
    event = vega(container, build, frame, structure, data_key, key, selectable, selection, on_select)
    source = table or frame

    def csv() -> bytes:
        df = source() if source is not None else export.chart_frame(build())
        return export.frame_csv(df) if df is not None else b""

    register_chart(export.PageChart(name or key, title or words(name or key), chart=build, table=csv))
    return event
