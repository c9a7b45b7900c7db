"""Attention Lab's script: what every visit runs (served by ``streamlit run dashboard/app.py``).

It sets the page up, refuses requests addressed to a foreign host name, draws the shared sidebar, and
runs the chosen page.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402

from dashboard import startup  # noqa: E402

startup.prepare()  # the heavy imports, once per server: usually done while the browser loaded the page

from dashboard.drawing.present import controls as presentation_controls  # noqa: E402
from dashboard.drawing.present import presenting  # noqa: E402
from dashboard.drawing.present import requested as presentation_requested  # noqa: E402
from dashboard.drawing.screen import measure as measure_screen  # noqa: E402
from dashboard.guard import ALLOWED_HOSTS_ENV, foreign_host  # noqa: E402
from dashboard.state.cache import tune_allocator  # noqa: E402
from dashboard.state.compute import tune_torch  # noqa: E402
from dashboard.state.controls import render_sidebar, write_link_early  # noqa: E402

# Not "pages/": a folder of that name beside the entry script turns on Streamlit's old
# auto-discovered multipage mode, which fights st.navigation.
PAGES = Path(__file__).resolve().parent / "app_pages"
FAVICON = ROOT / "assets" / "favicon.png"  # shipped: a Material-icon favicon is fetched from a font host

from dashboard.i18n import start_run as start_language  # noqa: E402

start_language()  # before any text: every string of this run is in the session's language
tune_allocator()
tune_torch()
present = presentation_requested()  # a prepared link opens on the projector with the sidebar out of the way
st.set_page_config(page_title="Attention Lab", page_icon=str(FAVICON), layout="wide",
                   initial_sidebar_state="collapsed" if present else "auto")
foreign = foreign_host(dict(st.context.headers))
if foreign is not None:
    from dashboard.state.links import shown_value

    st.error(f"This server does not answer to the host name {shown_value(foreign)}. Open it by this "
             f"machine's name or IP address, or add the name to {ALLOWED_HOSTS_ENV} when starting the server.")
    st.stop()
write_link_early()  # first: the browser's redraw for a new link falls before the page's own
page = st.navigation([
    st.Page(PAGES / "text_to_vectors.py", title="Text → vectors", icon=":material/text_fields:",
            url_path="text-to-vectors"),
    st.Page(PAGES / "explore.py", title="Explore", icon=":material/search:", default=True),
    st.Page(PAGES / "shape_flow.py", title="Shape flow", icon=":material/account_tree:", url_path="shape-flow"),
    st.Page(PAGES / "masking_lab.py", title="Masking lab", icon=":material/visibility_off:", url_path="masking-lab"),
    st.Page(PAGES / "tiled.py", title="Tiled attention", icon=":material/grid_view:", url_path="tiled"),
    st.Page(PAGES / "windows.py", title="Windows & sinks", icon=":material/view_week:", url_path="windows"),
    st.Page(PAGES / "walkthrough.py", title="Book walkthrough", icon=":material/menu_book:", url_path="walkthrough"),
    st.Page(PAGES / "learn.py", title="Learn", icon=":material/school:", url_path="learn"),
    st.Page(PAGES / "generate.py", title="Generate", icon=":material/keyboard_double_arrow_right:",
            url_path="generate"),
    st.Page(PAGES / "kv_cost.py", title="KV cache cost", icon=":material/memory:", url_path="kv-cache"),
    st.Page(PAGES / "benchmark.py", title="Benchmark", icon=":material/timer:", url_path="benchmark"),
    st.Page(PAGES / "answer.py", title="Answer a poll", icon=":material/how_to_vote:", url_path="answer"),
], position="top" if present else "sidebar")
if page.url_path == "answer":  # a student's phone: the question alone, no settings to compute or draw
    page.run()
    st.stop()
presentation_controls(st.sidebar)
measure_screen(st.sidebar, presenting())  # before anything is sized: charts fit the measured column
OWN_CONTROLS = {"learn", "generate", "kv-cache", "benchmark"}  # pages that read none of the sidebar's knobs
render_sidebar("none" if page.url_path in OWN_CONTROLS else "all")
page.run()
