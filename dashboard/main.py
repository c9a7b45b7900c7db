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

from dashboard.classroom.ui import teacher_link  # noqa: E402
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

from dashboard.classroom.follow import add_view_button  # noqa: E402
from dashboard.i18n import LANGS, _, declare_html_lang, lang, start_run  # noqa: E402
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

# Each page beside its uses_knobs flag: whether it reads the sidebar's knobs (False: a page with its own controls;
# the sidebar keeps every setting for the link and the way back, and names the pages that use them). Titles are in
# this run's language; url paths are not translated.
pages: list[tuple[st.Page, bool]] = [
    (st.Page(PAGES / "text_to_vectors.py", title=_("Text → vectors"), icon=":material/text_fields:",
             url_path="text-to-vectors"), True),
    (st.Page(PAGES / "explore.py", title=_("Explore"), icon=":material/search:", default=True), True),
    (st.Page(PAGES / "shape_flow.py", title=_("Shape flow"), icon=":material/account_tree:", url_path="shape-flow"),
     True),
    (st.Page(PAGES / "masking_lab.py", title=_("Masking lab"), icon=":material/visibility_off:",
             url_path="masking-lab"), True),
    (st.Page(PAGES / "tiled.py", title=_("Tiled attention"), icon=":material/grid_view:", url_path="tiled"), True),
    (st.Page(PAGES / "windows.py", title=_("Windows & sinks"), icon=":material/view_week:", url_path="windows"), True),
    (st.Page(PAGES / "walkthrough.py", title=_("Book walkthrough"), icon=":material/menu_book:",
             url_path="walkthrough"), True),
    (st.Page(PAGES / "learn.py", title=_("Learn"), icon=":material/school:", url_path="learn"), False),
    (st.Page(PAGES / "generate.py", title=_("Generate"), icon=":material/keyboard_double_arrow_right:",
             url_path="generate"), False),
    (st.Page(PAGES / "kv_cost.py", title=_("KV cache cost"), icon=":material/memory:", url_path="kv-cache"), False),
    (st.Page(PAGES / "benchmark.py", title=_("Benchmark"), icon=":material/timer:", url_path="benchmark"), False),
    # the phones' page: reached by the QR code or /answer; out of the menu, which shows twelve before "View more"
    (st.Page(PAGES / "answer.py", title=_("Answer a poll"), icon=":material/how_to_vote:", url_path="answer",
             visibility="hidden"), False),
    (st.Page(PAGES / "lesson.py", title=_("Lesson"), icon=":material/cast_for_education:", url_path="lesson"), False),
]
page = st.navigation([p for p, _knobs in pages], position="top" if present else "sidebar")
if page.url_path == "answer":  # a student's phone: the question alone, no settings to compute or draw
    st.navigation([p for p, _knobs in pages], position="hidden")  # nor the other pages: one tap off the lesson
    page.run()
    st.stop()
teacher_link()  # a teacher's poll stays in the link on every page, and comes back on another replica
language_switch(st.sidebar)  # at the top, with presentation mode: how the whole app is shown
presentation_controls(st.sidebar)
measure_screen(st.sidebar, presenting())  # before anything is sized: charts fit the measured column
uses_knobs = next(knobs for p, knobs in pages if p.url_path == page.url_path)
render_sidebar("all" if uses_knobs else "none", knob_pages=[p.title for p, knobs in pages if knobs])
add_view_button(st.sidebar, page.url_path)  # the teacher's lesson (dashboard/classroom/follow.py)
page.run()
