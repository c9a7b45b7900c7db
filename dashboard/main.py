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

from dashboard.i18n import LANGS, N_, _, declare_html_lang, lang, start_run  # noqa: E402
from dashboard.i18n import switch as language_switch  # noqa: E402
from dashboard.state.links import link_warning, shown_value  # noqa: E402

bad_lang = start_run()  # before any text: every string of this run is in the session's language
tune_allocator()
tune_torch()
present = presentation_requested()  # a prepared link opens on the projector with the sidebar out of the way
st.set_page_config(page_title="Attention Lab", page_icon=str(FAVICON), layout="wide",
                   initial_sidebar_state="collapsed" if present else "auto")
declare_html_lang()
foreign = foreign_host(dict(st.context.headers))
if foreign is not None:
    variable = f"`{ALLOWED_HOSTS_ENV}`"
    st.error(_("This server does not answer to the host name {host}. Open it by this machine's name or IP address, "
               "or add the name to {variable} when starting the server.", host=shown_value(foreign),
               variable=variable))
    st.stop()
if bad_lang is not None:
    st.warning(link_warning("lang", bad_lang, LANGS[lang()]))
write_link_early()  # first: the browser's redraw for a new link falls before the page's own

# Each page, and whether it reads the sidebar's knobs (False: a page with its own controls; the sidebar keeps every
# setting for the link and the way back, and says which pages use them). Titles are translated; url paths are not.
PAGE_LIST: list[tuple[dict, bool]] = [
    (dict(page="text_to_vectors.py", title=N_("Text → vectors"), icon=":material/text_fields:",
          url_path="text-to-vectors"), True),
    (dict(page="explore.py", title=N_("Explore"), icon=":material/search:", default=True), True),
    (dict(page="shape_flow.py", title=N_("Shape flow"), icon=":material/account_tree:", url_path="shape-flow"), True),
    (dict(page="masking_lab.py", title=N_("Masking lab"), icon=":material/visibility_off:", url_path="masking-lab"),
     True),
    (dict(page="tiled.py", title=N_("Tiled attention"), icon=":material/grid_view:", url_path="tiled"), True),
    (dict(page="windows.py", title=N_("Windows & sinks"), icon=":material/view_week:", url_path="windows"), True),
    (dict(page="walkthrough.py", title=N_("Book walkthrough"), icon=":material/menu_book:", url_path="walkthrough"),
     True),
    (dict(page="learn.py", title=N_("Learn"), icon=":material/school:", url_path="learn"), False),
    (dict(page="generate.py", title=N_("Generate"), icon=":material/keyboard_double_arrow_right:",
          url_path="generate"), False),
    (dict(page="kv_cost.py", title=N_("KV cache cost"), icon=":material/memory:", url_path="kv-cache"), False),
    (dict(page="benchmark.py", title=N_("Benchmark"), icon=":material/timer:", url_path="benchmark"), False),
    (dict(page="answer.py", title=N_("Answer a poll"), icon=":material/how_to_vote:", url_path="answer"), False),
]


def _st_page(spec: dict) -> st.Page:
    """The page with its title in this run's language."""
    rest = {k: v for k, v in spec.items() if k not in ("page", "title")}
    return st.Page(PAGES / spec["page"], title=_(spec["title"]), **rest)


pages = [(_st_page(spec), uses_knobs) for spec, uses_knobs in PAGE_LIST]
page = st.navigation([p for p, _knobs in pages], position="top" if present else "sidebar")
if page.url_path == "answer":  # a student's phone: the question alone, no settings to compute or draw
    page.run()
    st.stop()
language_switch(st.sidebar)  # at the top, with presentation mode: how the whole app is shown
presentation_controls(st.sidebar)
measure_screen(st.sidebar, presenting())  # before anything is sized: charts fit the measured column
uses_knobs = next(knobs for p, knobs in pages if p.url_path == page.url_path)
render_sidebar("all" if uses_knobs else "none", knob_pages=[p.title for p, knobs in pages if knobs])
page.run()
