"""Presentation mode: large type, high contrast and the whole width for a projector.

A toggle bound to the link (``?present=true``; 1, yes and on work too), so a prepared link opens in it.
It changes how things look, never what is computed: pages draw the same charts with bigger text (``big``), the sidebar
starts collapsed and the page navigation moves to the top. Both of Streamlit's themes (light and
dark, from the app menu's Settings) work; chart text takes the theme's contrast colour.
"""

from __future__ import annotations

import streamlit as st

from dashboard.drawing.cells import LABEL_PX as NORMAL_LABEL_PX
from dashboard.drawing.cells import axis_title_config
from dashboard.drawing.screen import layout_css
from dashboard.i18n import _
from dashboard.languages import SOURCE
from dashboard.state.links import link_warning

KEY = "present"
_BAD_KEY = "present_bad_link"  # an unreadable ?present= value, warned about once on the page
ON_WORDS = ("1", "true", "yes", "on")  # what a hand-written link may say (any case); Streamlit reads only true/false
OFF_WORDS = ("0", "false", "no", "off")
LABEL_PX = 16  # axis labels, legend labels and cell values in presentation mode
TITLE_PX = 20
NORMAL_TITLE_PX = 15  # chart titles outside presentation mode (labels: cells.LABEL_PX)

# Tables of numbers (``text.NUMBERS_KEY``): right-aligned, so decimal points line up; st.table aligns text left.
NUMBERS_CSS = """.stApp [class*="st-key-numbers_"] :is(td, thead th)
    {text-align: right !important; font-variant-numeric: tabular-nums;}
"""
# A chart's hover toolbar (fullscreen, ...) sits above the chart by default, over whatever is there: Explore's
# Download and Previous / Next buttons. Inside the chart's top-right corner it covers nothing to click.
TOOLBAR_CSS = """.stApp [data-testid="stElementToolbar"] {top: 0 !important;}
"""
# A static table (st.table) wider than its column scrolls inside its box, not the page (a phone's 390 px screen). A
# Markdown table's header keeps a Chinese word whole: the KV cache table's 相等 stood one character a line.
TABLE_CSS = """.stApp [data-testid="stTable"] {overflow-x: auto; max-width: 100%;}
.stApp [data-testid="stMarkdownContainer"] th {word-break: keep-all;}
"""
# A primary (red) button's shortcut hint ("PageDown") is drawn faded: pink on red, unreadable on a projector.
# Full white on a darker patch of the button's own red.
KBD_CSS = """.stApp [data-testid="stBaseButton-primary"] kbd
    {opacity: 1 !important; color: #ffffff !important; background: rgba(0, 0, 0, 0.3); border-radius: 0.25rem;
     padding: 0 0.3rem;}
"""
# Contrast (WCAG AA; tests/test_browser_a11y.py runs axe-core): Streamlit draws a selected pill's text in its red
# on a pale red, a shortcut hint faded far into the page and code tokens in one fixed palette on both themes (green
# on light grey: docs/measurements.md). Each is mixed with the inherited text colour (``currentColor`` in ``color``
# is the parent's), so the hue stays and the text darkens on the light theme and lightens on the dark one.
_TOKENS = {  # Streamlit's syntax colours (its StreamlitSyntaxHighlighter): selectors -> colour
    ".token.comment, .token.prolog, .token.doctype, .token.cdata, .token.punctuation, .token.unchanged.line": "#808495",
    ".token.attr-name, .token.property, .token.variable": "#00a4d4",
    ".token.boolean, .token.constant, .token.symbol, .token.inserted.line, .token.inserted.prefix": "#21c354",
    ".token.number, .token.regex": "#29b09d",
    ".token.string, .token.char, .token.attr-value": "#09ab3b",
    ".token.operator, .token.entity, .token.decorator, .token.atrule": "#ed6f13",
    ".token.url": "#6d3fc0",
    ".token.keyword, .token.tag, .token.function, .token.class-name, .token.selector": "#1c83e1",
    ".token.important, .token.deleted.line, .token.deleted.prefix": "#ff4b4b",
}
A11Y_CSS = "".join(
    f'.stApp [data-testid="stCode"] :is({sel}) {{color: color-mix(in srgb, {colour} 50%, currentColor) !important;}}\n'
    for sel, colour in _TOKENS.items()) + """.stApp button[data-selected="true"]
    {color: color-mix(in srgb, #c53948 60%, currentColor) !important;}
.stApp kbd {color: inherit !important; opacity: 0.75 !important;}
"""
# A phone has no Page Up key: no key hints there. A class name in a heading (`MultiHeadAttentionWrapper`) was cut
# mid-word at a phone's heading size: smaller there.
PHONE_CSS = """@media (hover: none) and (pointer: coarse), (max-width: 640px)
    {.stApp button kbd {display: none !important;}}
@media (max-width: 640px) {.stApp :is(h1, h2, h3) code {font-size: 0.6em;}}
"""
# Streamlit's page text is sized in rem: one rule scales it. A phone keeps 1 rem a side (3 rem took a quarter of
# its width). Captions lose their light grey. Tables (st.table) and
# code at >= 16 px: the book's numbers and code are read from the back of the room.
_CSS = """
<style>
.stApp [data-testid="stMainBlockContainer"] {padding-top: 4.5rem; padding-left: 3rem; padding-right: 3rem;}
.stApp [data-testid="stMarkdown"] p, .stApp [data-testid="stMarkdown"] li {font-size: 1.25rem;}
.stApp [data-testid="stCaptionContainer"], .stApp [data-testid="stCaptionContainer"] p,
.stApp [data-testid="stImageCaption"] {font-size: 1.1rem; color: inherit; opacity: 0.95;}
.stApp button[role="tab"] p {font-size: 1.25rem;}
.stApp h1 {font-size: 2.4rem;}
.stApp [data-testid="stWidgetLabel"] p {font-size: 1.1rem;}
.stApp .st-key-present_exit {position: fixed; top: 0.55rem; right: 3.5rem; z-index: 999991; width: auto;}
.stApp [data-testid="stTable"] :is(th, td), .stApp [data-testid="stTable"] :is(th, td) p {font-size: 1.1rem;}
.stApp [data-testid="stCode"] pre, .stApp [data-testid="stCode"] code {font-size: 1.05rem;}
@media (max-width: 640px) {.stApp [data-testid="stMainBlockContainer"] {padding-left: 1rem; padding-right: 1rem;}}
""" + NUMBERS_CSS + TABLE_CSS + TOOLBAR_CSS + A11Y_CSS + KBD_CSS + PHONE_CSS + layout_css(True) + """</style>
"""
# The normal page: less empty space above the title, so a section fits a 720-pixel-high projector. Captions in
# the page's own text colour, a little faded: Streamlit's 60 % grey read poorly on a projector, worst on the dark
# theme. ``inherit`` follows whichever theme is on.
_BASE_CSS = """
<style>
.stApp [data-testid="stMainBlockContainer"] {padding-top: 3rem;}
.stApp [data-testid="stCaptionContainer"], .stApp [data-testid="stImageCaption"] {color: inherit; opacity: 0.85;}
""" + NUMBERS_CSS + TABLE_CSS + TOOLBAR_CSS + A11Y_CSS + KBD_CSS + PHONE_CSS + layout_css(False) + """</style>
"""


def parse(raw: str) -> bool | None:
    """What a link's ``present`` value asks for: True (1, true, yes, on), False (0, false, no, off, empty), None
    for anything else. Case and surrounding spaces do not matter."""
    word = raw.strip().lower()
    if word in ON_WORDS:
        return True
    if word in OFF_WORDS or not word:
        return False
    return None


def requested() -> bool:
    """Whether the link or the session asks for presentation mode (read before the toggle is drawn). On a session's
    first run the link's value seeds the toggle: Streamlit's own binding drops anything but true/false silently."""
    if KEY in st.session_state:
        return bool(st.session_state[KEY])
    raw = st.query_params.get(KEY)
    if raw is None:
        return False
    on = parse(raw)
    if on is None:
        st.session_state[_BAD_KEY] = raw
    st.session_state[KEY] = bool(on)
    return bool(on)


def presenting() -> bool:
    """Whether this run draws in presentation mode."""
    return bool(st.session_state.get(KEY, False))


def dark() -> bool:
    return getattr(st.context.theme, "type", "light") == "dark"


def ink() -> str:
    """The high-contrast text colour for charts on the current theme."""
    return "#f5f5f5" if dark() else "#111111"


def chart_config(big: bool, grow: float = 1.0, code: str = SOURCE) -> dict:
    """A Vega-Lite ``config`` for every chart: labels in the theme's contrast colour, in presentation
    mode large enough to read from the back of a classroom, and ``grow`` times larger on a screen
    larger than the 1280×720 projector (as the charts' cells are); vertical axes' titles as language ``code``
    reads them (:func:`cells.axis_title_config`)."""
    color = ink()
    axis = {"labelColor": color, "titleColor": color}
    legend = {"labelColor": color, "titleColor": color}
    config: dict = {"axis": axis, "legend": legend, "header": {"labelColor": color, "titleColor": color},
                    "title": {"color": color}, "text": {"color": color}}  # text marks without their own colour
    label, title, heading = ((LABEL_PX, LABEL_PX + 2, TITLE_PX) if big
                             else (NORMAL_LABEL_PX, NORMAL_LABEL_PX + 1, NORMAL_TITLE_PX))
    axis.update(labelFontSize=round(label * grow), titleFontSize=round(title * grow))
    legend.update(labelFontSize=round(label * grow), titleFontSize=round(label * grow),
                  gradientThickness=round((18 if big else 16) * grow))
    config["header"].update(labelFontSize=round(title * grow))
    config["title"].update(fontSize=round(heading * grow))
    for part, values in axis_title_config(code).items():
        config[part] = {**config.get(part, {}), **values}
    return config


def _exit() -> None:
    st.session_state[KEY] = False


def controls(sidebar) -> None:
    """The toggle (in the sidebar) and, while presenting, a page style and an exit button on the page."""
    sidebar.toggle(_("Presentation mode"), key=KEY, bind="query-params",
                   help=_("Large type, high contrast, the sidebar out of the way. The link keeps it: "
                          "prepare a link and open it on the projector."))
    st.html(_CSS if presenting() else _BASE_CSS)
    bad = st.session_state.pop(_BAD_KEY, None)
    if bad is not None:
        st.warning(link_warning(KEY, bad, _("normal mode"),
                                _("presentation mode takes 1, true, yes or on; 0, false, no or off")))
    if presenting():
        # one small button in the top bar (fixed, beside the app menu): every line above the chart costs a row
        # of the chart at 720 pixels
        st.button(_("Exit presentation"), key="present_exit", on_click=_exit, icon=":material/close_fullscreen:",
                  type="tertiary", help=_("The settings are in the sidebar (» at the top left); Page Up / Page Down "
                                          "step through sections."))
