"""The chart cache: built Vega-Lite specs, Arrow data and PNGs, remembered by what they show and bounded in bytes (a
chart prepared ahead, ``dashboard/state/ahead.prefetch``, is found here). The one file that touches Streamlit's
internals (its Altair-to-Vega-Lite conversion, Arrow writer and script-run context; tests/test_streamlit_internals.py
says when they change)."""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import logging
from collections.abc import Callable, Hashable, Sequence

import altair as alt
import numpy as np

from dashboard.drawing.present import chart_config, presenting
from dashboard.drawing.sizes import grow
from dashboard.i18n import lang
from dashboard.state.cache import ByteLRU
from dashboard.state.compute import CACHE_IDLE_S

# Built charts (Vega-Lite spec with Arrow data) and PNGs, keyed by what they show. Building an
# Altair chart and converting it is slow (docs/measurements.md); a rerun that changes nothing in a chart
# (a click, another head) then sends the cached spec. Shared by sessions: entries are immutable.
DRAWN_CACHE_BYTES = 256 * 2**20  # a classroom server keeps at most this much of drawn data (runs: compute.py)


def _nbytes(value: object) -> int:
    if isinstance(value, np.ndarray):
        return value.nbytes
    if isinstance(value, bytes | bytearray | str):  # a str: a PNG as a data URL (the model view's grid)
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
    JSON-schema validation of the whole spec (a large part of a new heatmap's conversion, paid on every
    walkthrough step: docs/measurements.md). The chart builders' specs are validated by the tests
    (tests/test_charts.py)."""
    from streamlit.elements.vega_charts import _convert_altair_to_vega_lite_spec

    # Streamlit calls ``chart.to_dict()``: for this call only, that is ``to_dict(validate=False)``. Set on the
    # instance past SchemaBase.__setattr__ (which would store it as a chart property).
    object.__setattr__(chart, "to_dict", functools.partial(type(chart).to_dict, chart, validate=False))
    try:
        return dict(_convert_altair_to_vega_lite_spec(chart))
    finally:
        object.__delattr__(chart, "to_dict")


def _arrow_bytes(df) -> bytes:
    """A frame as Arrow IPC bytes, converted on this thread (pyarrow's default thread pool's start-up cost more
    than the conversion on a 2-core machine: docs/measurements.md)."""
    import pyarrow as pa
    from streamlit.dataframe_util import convert_arrow_table_to_arrow_bytes

    return convert_arrow_table_to_arrow_bytes(pa.Table.from_pandas(df, nthreads=1))


def spec_key(structure: Hashable, code: str | None = None) -> tuple:
    """What a spec template is remembered under: its ``structure`` in a language (default: this run's), as a chart's
    titles, legends and tooltips are text in it."""
    return ("spec", code or lang(), structure)


TEXTS = "lang_texts"  # the dataset a lifted spec reads its titles from (one row: t0, t1, ...)
_SEP = " · "  # between a lifted tooltip's parts


def _signal(i: int) -> str:
    return f"lang_t{i}"


def _lift_tooltip(mark: dict, items: list, lift: Callable[[str], str]) -> bool:
    """A layer's tooltip fields (titled) as one line the mark computes, each title read from a signal; and the same
    line as the mark's ARIA description (Vega-Lite would print a signal title as "[object Object]")."""
    parts = []
    for item in items:
        if not (isinstance(item, dict) and isinstance(item.get("title"), str) and isinstance(item.get("field"), str)):
            return False
        value = f"datum[{json.dumps(item['field'])}]"
        if "format" in item:
            value = f"format({value}, {json.dumps(item['format'])})"
        parts.append(f"{lift(item['title'])} + ' ' + {value}")
    line = f" + {json.dumps(_SEP)} + ".join(parts)
    mark["tooltip"] = {"expr": line}
    if mark.get("aria", True) is not False:
        mark["description"] = {"expr": line}
    return True


def _describe(mark: dict, encoding: dict) -> None:
    """A mark's ARIA description from its fields, "title: value; ...", as Vega-Lite writes it, with titles read from
    signals (Vega-Lite would print a signal title as "[object Object]")."""
    parts = []
    for fdef in encoding.values():
        if not (isinstance(fdef, dict) and isinstance(fdef.get("field"), str)):
            continue
        title = fdef.get("title")
        label = title["signal"] if isinstance(title, dict) else json.dumps(title if isinstance(title, str)
                                                                            else fdef["field"], ensure_ascii=False)
        value = f"datum[{json.dumps(fdef['field'])}]"
        if "format" in fdef:
            value = f"format({value}, {json.dumps(fdef['format'])})"
        parts.append(f"{label} + ': ' + {value}")
    if parts:
        mark["description"] = {"expr": " + '; ' + ".join(parts)}


def lift_texts(spec: dict) -> tuple[dict, tuple[str, ...]]:
    """A layered (or faceted layered) spec whose words are data: every title (axes, legend, tooltip) read through a
    signal from the one-row dataset :data:`TEXTS`, and those titles in order. The lifted spec is the same in every
    language, so a language switch swaps data and keeps the chart's Vega view (a new spec builds a new view:
    docs/measurements.md). Any other spec, or one with a tooltip this cannot lift, comes back as it is, with no
    titles. Words elsewhere (a mask's legend entries) stay in the spec: that chart still gets a new view."""
    out = copy.deepcopy({k: v for k, v in spec.items() if k not in ("data", "datasets")})  # the template stays
    layered = out if "layer" in out else out.get("spec") if "facet" in out else None  # a facet's panel: layers
    if not isinstance(layered, dict) or not isinstance(layered.get("layer"), list):
        return spec, ()
    texts: list[str] = []

    def lift(text: str) -> str:
        if text not in texts:
            texts.append(text)
        return _signal(texts.index(text))

    for part in (out.get("facet"), (out.get("facet") or {}).get("header")):
        if isinstance(part, dict) and isinstance(part.get("title"), str) and part["title"]:
            part["title"] = {"signal": lift(part["title"])}
    for layer in layered["layer"]:
        encoding = layer.get("encoding") or {}
        for channel, fdef in list(encoding.items()):
            if channel == "tooltip":
                mark = layer["mark"] if isinstance(layer.get("mark"), dict) else {"type": layer.get("mark")}
                if not isinstance(fdef, list) or not _lift_tooltip(mark, fdef, lift):
                    return spec, ()
                layer["mark"] = mark
                del encoding["tooltip"]
                continue
            if not isinstance(fdef, dict):
                continue
            for part in (fdef, fdef.get("axis"), fdef.get("legend")):
                if isinstance(part, dict) and isinstance(part.get("title"), str) and part["title"]:
                    part["title"] = {"signal": lift(part["title"])}
        mark = layer["mark"] if isinstance(layer.get("mark"), dict) else {"type": layer.get("mark")}
        if mark.get("aria", True) is not False and "description" not in mark:
            _describe(mark, encoding)
            layer["mark"] = mark
    if not texts:
        return spec, ()
    out["params"] = [*out.get("params", []),
                     *({"name": _signal(i), "expr": f"data({json.dumps(TEXTS)})[0].t{i}"} for i in range(len(texts)))]
    # the dataset is compiled into the view only when a layer reads it: an invisible, empty one does (in a facet,
    # one per panel: the panels come from the chart's own data)
    hidden = {"type": "point", "size": 0, "opacity": 0, "aria": False}
    layered["layer"].append({"data": {"name": TEXTS}, "mark": hidden})
    return out, tuple(texts)


def texts_frame(texts: Sequence[str]):
    """The one-row frame of :data:`TEXTS`: column ``t<i>`` holds title ``i``."""
    import pandas as pd

    return pd.DataFrame([{f"t{i}": t for i, t in enumerate(texts)}])


def vega(container, build: Callable[[], alt.TopLevelMixin], frame: Callable[[], object] | None,
          structure: Hashable | None, data_key: Hashable | None, key: str, selectable: bool,
          selection: str = "cell", on_select: Callable[[], None] | None = None, lifted: bool = False):
    """Draw a chart from a cached spec template (see :func:`draw_chart`); nothing is registered. ``selectable``: its
    ``selection`` parameter's clicks rerun the page, after ``on_select`` when given. ``lifted``: its titles travel as
    data (:func:`lift_texts`), so a language switch keeps its Vega view."""
    kw = dict(width="content", key=key)
    if selectable:
        kw.update(on_select=on_select or "rerun", selection_mode=[selection])
    if structure is None:  # a one-off chart: its own data, nothing remembered
        return container.vega_lite_chart(spec=styled(_to_spec(build())), **kw)
    template = memo(spec_key(structure), lambda: _to_spec(build()))
    texts: tuple[str, ...] = ()
    if lifted:
        template, texts = memo(("lifted",) + spec_key(structure), lambda: lift_texts(template))
    data = memo(None if data_key is None else ("arrow", data_key), lambda: _arrow_bytes(frame()))
    name = "d" + hashlib.sha1(data if data_key is None else repr(data_key).encode()).hexdigest()[:16]
    spec = {k: v for k, v in template.items() if k not in ("data", "datasets")}
    spec["data"] = {"name": name}
    spec["datasets"] = {name: data}
    if texts:
        spec["datasets"][TEXTS] = memo((TEXTS, texts), lambda: _arrow_bytes(texts_frame(texts)))
    return container.vega_lite_chart(spec=styled(spec), **kw)


def altair(container, chart: alt.TopLevelMixin, **kw):
    """``container.altair_chart(chart, **kw)`` in the page's chart style (:func:`styled`): a one-off chart, its own
    data, nothing remembered."""
    return container.vega_lite_chart(spec=styled(_to_spec(chart)), **kw)


def styled(spec: dict) -> dict:
    """The spec with the page's chart style: high-contrast labels for the theme, large in presentation mode, vertical
    axes' titles as the run's language reads them."""
    config = dict(spec.get("config") or {})
    for part, values in chart_config(presenting(), grow(), lang()).items():
        config[part] = {**config.get(part, {}), **values}
    return {**spec, "config": config}


def fragment_now() -> tuple[str | None, bool]:
    """(the fragment the caller runs in, whether this script run reruns fragments only). Streamlit 1.67
    internals (tests/test_streamlit_internals.py); without them, fragments are treated as the page."""
    try:
        from streamlit.runtime.scriptrunner_utils.script_run_context import ThreadState, get_script_run_ctx

        ctx = get_script_run_ctx(suppress_warning=True)
        return ThreadState.get().fragment_id, bool(ctx is not None and ctx.fragment_ids_this_run)
    except Exception:  # noqa: BLE001 - pragma: no cover - another Streamlit version
        return None, False


def run_token() -> tuple[bool, object | None]:
    """(whether the caller runs in a script run, an object Streamlit 1.67 creates afresh for every script run:
    ``ScriptRunContext.parallel_coordinator``; a fragment rerun is a run too). Keyed weakly by it, what a run drew
    goes with the run (tests/test_streamlit_internals.py)."""
    from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

    ctx = get_script_run_ctx(suppress_warning=True)
    if ctx is None:
        return False, None
    return True, getattr(ctx, "parallel_coordinator", None)


def holds(value: object) -> bool:
    """Whether the cache holds ``value`` itself (a page's memo'd matrix is not cached twice for the export)."""
    return _DRAWN.holds(value)
