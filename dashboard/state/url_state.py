"""A page's own link parameters (a cell, a zoom window, a choice): validated when a session first reads them, a bad
value named in a warning with what is shown instead. The sidebar's settings have their schema in controls.py."""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st

from dashboard.i18n import _
from dashboard.state.controls import BadValue, parse_int
from dashboard.state.links import link_warning


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
        st.warning(link_warning(key, raw, str(used), e))


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
    warn_bad_link(key, raw, _("the default cell (it must be “row,column” with row 1–{rows} and column 1–{cols})",
                              rows=n_rows, cols=n_cols))
    del st.query_params[key]
    return None
