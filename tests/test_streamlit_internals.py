"""The chart cache (dashboard/drawing/chart_cache.py) calls two private Streamlit functions. Streamlit is pinned
to the version they were tested with; this test says in plain words when they change."""

from __future__ import annotations

import altair as alt
import pandas as pd
import pyarrow as pa
import streamlit

from apptest_utils import ROOT


def test_private_streamlit_functions_still_behave():
    try:
        from streamlit.dataframe_util import convert_arrow_table_to_arrow_bytes
        from streamlit.elements.vega_charts import _convert_altair_to_vega_lite_spec
    except ImportError as e:  # pragma: no cover - only on a Streamlit that renamed them
        raise AssertionError(
            "Streamlit's private chart helpers moved (dashboard/drawing/chart_cache.py: _to_spec, _arrow_bytes): "
            f"{e}. Pin the Streamlit version in pyproject.toml back, or port the chart cache.") from None
    df = pd.DataFrame({"q": [0, 1], "v": [0.5, 1.5]})
    spec = _convert_altair_to_vega_lite_spec(alt.Chart(df).mark_rect().encode(x="q:O", color="v:Q"))
    assert spec.get("datasets") and spec.get("mark") == {"type": "rect"}, \
        "Streamlit's _convert_altair_to_vega_lite_spec no longer returns a Vega-Lite dict with datasets"
    data = convert_arrow_table_to_arrow_bytes(pa.Table.from_pandas(df))
    assert pa.ipc.open_stream(data).read_all().to_pandas()["v"].tolist() == [0.5, 1.5], \
        "Streamlit's convert_arrow_table_to_arrow_bytes no longer writes an Arrow IPC stream"


def test_streamlit_is_pinned_to_the_tested_version():
    import tomllib

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["app"]
    assert f"streamlit=={streamlit.__version__}" in deps, \
        f"pyproject.toml must pin the Streamlit these private helpers were tested with ({streamlit.__version__})"


def test_every_script_run_has_its_own_parallel_coordinator():
    """dashboard/export/slides.py keys the charts a run drew (for page_downloads) weakly by the object Streamlit
    creates afresh for every script run, so a run's list goes when the next run starts."""
    from streamlit.testing.v1 import AppTest

    script = """
import streamlit as st
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx
st.session_state.setdefault("runs", []).append(id(get_script_run_ctx().parallel_coordinator))
"""
    at = AppTest.from_string(script, default_timeout=30)
    at.run()
    at.run()
    at.run()
    runs = at.session_state["runs"]
    assert len(runs) == 3 and len(set(runs)) == 3, \
        "ScriptRunContext.parallel_coordinator is no longer a new object per run: port chart_cache.run_token"


def test_code_can_tell_which_fragment_it_runs_in():
    """dashboard/export/slides.py: a chart drawn by a fragment that reruns alone replaces that fragment's charts in
    the page's download control; it finds the fragment through ThreadState and ctx.fragment_ids_this_run."""
    from streamlit.testing.v1 import AppTest

    script = """
import streamlit as st
from streamlit.runtime.scriptrunner_utils.script_run_context import ThreadState, get_script_run_ctx
st.session_state["page"] = (ThreadState.get().fragment_id, get_script_run_ctx().fragment_ids_this_run)

@st.fragment
def part():
    st.session_state["part"] = ThreadState.get().fragment_id

part()
"""
    at = AppTest.from_string(script, default_timeout=30)
    at.run()
    page_fragment, fragments_this_run = at.session_state["page"]
    assert page_fragment is None and not fragments_this_run, "outside a fragment: no fragment id, a full run"
    assert isinstance(at.session_state["part"], str) and at.session_state["part"], \
        "ThreadState.get().fragment_id no longer names the running fragment: port chart_cache.fragment_now"


def test_chart_cache_converts_like_streamlit_without_schema_validation(monkeypatch):
    """dashboard/drawing/chart_cache.py: _to_spec runs Streamlit's conversion with ``to_dict(validate=False)`` (Altair's
    JSON-schema validation was ~25 ms of a new 6 x 6 heatmap's ~85 ms); the result is Streamlit's own spec, and
    the chart keeps no trace of the override. tests/test_charts.py validates the builders' specs."""
    import numpy as np
    from altair.utils import schemapi
    from streamlit.elements.vega_charts import _convert_altair_to_vega_lite_spec

    from dashboard.drawing import chart_cache, heatmaps

    labels = [f"{i + 1}: w" for i in range(4)]
    chart = heatmaps.heatmap(np.eye(4), labels, labels, heatmaps.Look(scale="weights"))
    expected = dict(_convert_altair_to_vega_lite_spec(chart))

    def no_validation(*args, **kwargs):
        raise AssertionError("_to_spec validated the spec")

    monkeypatch.setattr(schemapi, "validate_jsonschema", no_validation)
    assert chart_cache._to_spec(chart) == expected
    assert "to_dict" not in vars(chart)


def test_the_runtime_still_counts_connected_sessions():
    """dashboard/state/cache.py (connected_sessions) reads ``Runtime.instance()._session_mgr.num_active_sessions()``
    to let the caches go once every tab is closed."""
    import inspect

    from streamlit.runtime import Runtime
    from streamlit.runtime.session_manager import SessionManager

    assert hasattr(Runtime, "exists") and hasattr(Runtime, "instance"), "Streamlit's Runtime lost exists()/instance()"
    assert "self._session_mgr" in inspect.getsource(Runtime.__init__), "Runtime no longer holds _session_mgr"
    assert callable(getattr(SessionManager, "num_active_sessions", None)), \
        "SessionManager.num_active_sessions is gone: port dashboard/state/cache.py's connected_sessions"
