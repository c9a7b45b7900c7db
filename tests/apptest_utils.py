"""Helpers for Streamlit AppTest tests."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import streamlit as st
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
# the script that app.py serves; absolute: AppTest resolves relative paths against the test file
APP = str(ROOT / "dashboard" / "main.py")
TIMEOUT = 60  # seconds: a busy machine's first run imports torch (docs/measurements.md)


def clear_caches() -> None:
    from dashboard.state.ahead import settle
    from dashboard.state.compute import clear_caches as clear_runs
    from dashboard.state.models import forget_found

    settle()  # a page's work ahead (Generate's next token) finishes before the next test counts passes
    st.cache_data.clear()
    st.cache_resource.clear()
    clear_runs()
    forget_found()  # a test that hid a model's files must not leave the next one a stale list for FIND_EVERY_S


def new_app(**query: str) -> AppTest:
    """An AppTest whose URL carries ``query`` (option values are written as the URL shows them)."""
    from dashboard.state.controls import INPUT_NAMES, MASK_NAMES, VARIANT_NAMES

    shown = {"variant": VARIANT_NAMES, "mask_method": MASK_NAMES, "input_mode": INPUT_NAMES}
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    for k, v in query.items():
        at.query_params[k] = shown[k].get(v, v) if k in shown else v
    return at


def table_text(el):
    """What an ``st.table`` element shows: its cells as the browser draws them (a Styler's display values, else the
    data), as a DataFrame of strings whose index holds the (Markdown) row labels."""
    from streamlit import dataframe_util

    arrow = el.proto.arrow_data
    raw = arrow.styler.display_values if arrow.HasField("styler") else arrow.data
    return dataframe_util.convert_arrow_bytes_to_pandas_df(raw).astype(str)


def spec_nodes(node) -> list[dict]:
    """Every dict inside a chart spec (layers, facets, encodings), depth first."""
    if isinstance(node, dict):
        return [node] + [d for v in node.values() for d in spec_nodes(v)]
    if isinstance(node, list):
        return [d for v in node for d in spec_nodes(v)]
    return []


def spec_json(el) -> str:
    """A chart element's spec as JSON, its titles in place: a heatmap's titles travel as data (the one-row dataset
    ``chart_cache.TEXTS``, read through signals ``lang_t<i>``: chart_cache.lift_texts) and are written back here."""
    import pyarrow as pa

    from dashboard.drawing.chart_cache import TEXTS

    texts = next((pa.ipc.open_stream(d.data.data).read_all().to_pylist()[0] for d in el.proto.datasets
                  if d.name == TEXTS), None)
    if texts is None:
        return el.proto.spec

    def fill(node):
        if isinstance(node, dict):
            if set(node) == {"signal"} and node["signal"].startswith("lang_t"):
                return texts[node["signal"][len("lang_"):]]
            return {k: fill(v) for k, v in node.items()}
        if isinstance(node, list):
            return [fill(v) for v in node]
        return node

    return json.dumps(fill(json.loads(el.proto.spec)))


def specs(at: AppTest) -> list[dict]:
    return [json.loads(spec_json(el)) for el in at.get("vega_lite_chart")]


def chart_data(at: AppTest, key: str) -> list[dict]:
    """The rows of the (first) dataset of the chart drawn with widget key ``key``."""
    for el in at.get("vega_lite_chart"):
        if el.proto.id and el.proto.id.endswith(key) or getattr(el, "key", None) == key:
            return _rows(el)
    raise KeyError(f"no chart with key {key!r}")


def chart_with(at: AppTest, text: str) -> list[dict]:
    """The rows of the first chart whose spec mentions ``text`` (a panel or axis title)."""
    for el in at.get("vega_lite_chart"):
        rows = _rows(el)
        if text in spec_json(el) or any(text == v for r in rows for v in r.values() if isinstance(v, str)):
            return rows
    raise KeyError(f"no chart mentions {text!r}")


def _rows(el) -> list[dict]:
    import pyarrow as pa

    proto = el.proto
    if proto.datasets:
        table = pa.ipc.open_stream(proto.datasets[0].data.data).read_all()
        return table.to_pylist()
    if proto.data.data:
        return pa.ipc.open_stream(proto.data.data).read_all().to_pylist()
    spec = json.loads(proto.spec)
    return next(iter(spec.get("datasets", {}).values()))


def messages(at: AppTest) -> dict[str, list[str]]:
    return {"error": [e.value for e in at.error], "warning": [w.value for w in at.warning],
            "info": [i.value for i in at.info], "exception": [e.value for e in at.exception]}


def open_page(page: str | None = None, **query: str) -> AppTest:
    """Run the app with ``query`` in its URL, switch to ``page`` (None: Explore); no exception allowed."""
    at = new_app(**query)
    at.run()
    if page:
        at.switch_page(page).run()
    assert not messages(at)["exception"], messages(at)
    return at


def phone_page(page: str, **query: str) -> AppTest:
    """:func:`open_page` as a phone's 340 px main column gets it (what dashboard/drawing/screen.py reports)."""
    from dashboard.drawing import screen

    at = new_app(**query)
    at.session_state[screen.KEY] = {"size": [340, 100]}
    at.run()
    at.switch_page(page).run()
    assert not messages(at)["exception"], messages(at)
    return at


def show_section(at: AppTest, name: str) -> AppTest:
    """Open one of Explore's sections (its tabs draw only the open one) and rerun."""
    at.session_state["section"] = name
    return at.run()


def md_tables(at) -> list[dict[str, dict[str, str]]]:
    """The Markdown tables on the page (BPE side by side draws its two so that their cells wrap), each as
    {row's text: {column: cell as shown}}: code spans and escapes taken off, pipes inside cells kept."""
    tables = []
    for m in at.markdown:
        lines = m.value.splitlines()
        if len(lines) < 3 or not lines[0].startswith("| ") or not set(lines[1]) <= set("|-: "):
            continue
        split = [[re.sub(r"\\(.)", r"\1", re.sub(r"^(`+) (.*) \1$", r"\2", c.strip()))
                  for c in re.split(r"(?<!\\)\|", line.strip()[1:-1])] for line in lines]
        header = split[0]
        tables.append({row[0]: dict(zip(header, row)) for row in split[2:]})
    return tables


def by_column(tables: list[dict[str, dict[str, str]]]) -> dict[str, dict[str, str]]:
    """Markdown tables whose columns after the first are one thing each (a query), merged: {column: {row: cell}};
    one table with a column a query and one small table a query read the same."""
    out: dict[str, dict[str, str]] = {}
    for table in tables:
        header = list(next(iter(table.values())))
        for column in header[1:]:
            out.setdefault(column, {}).update({row: cells[column] for row, cells in table.items()})
    return out


def tile_tables(at: AppTest):
    """Tiled attention's two tables as shown (text), a row a query: the tile's scores S (the first Markdown table)
    and the running max and sum (the tables with an α row, a column a query)."""
    import pandas as pd

    tables = md_tables(at)
    scores = pd.DataFrame({q: dict(list(cells.items())[1:]) for q, cells in tables[0].items()}).T
    running = pd.DataFrame(by_column([t for t in tables if "α" in t])).T
    return scores, running


def shown_number(text: str) -> float:
    """A number as a table shows it; −∞ as the chapter writes it."""
    return {"−∞": float("-inf"), "∞": float("inf")}[text] if text in ("−∞", "∞") else float(text)
