"""A page's own link parameters (a cell, a zoom window, a choice): validated when a session first reads them, a bad
value named in a warning with what is shown instead. The sidebar's settings have their schema in controls.py.

A choice shown translated is drawn with :func:`linked_choice`: Streamlit's ``bind="query-params"`` writes the label
it shows, so a link made in Chinese (``?lab_section=错误``) would fail in English. Here the link holds the option's
English id in every language, and a link in the id or in any language's label opens the same option.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any, TypeVar

import streamlit as st

from dashboard.i18n import DEFAULT, LANGS, _, language
from dashboard.state.controls import BadValue, parse_int
from dashboard.state.links import link_warning, md_escape, shown_value


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


def url_text(key: str, limit: int) -> None:
    """Before a text box bound to the URL is drawn: warn when a new session's link ``?key=`` is over the ``limit``
    characters its page takes, with both counts (the box shows the text and its page refuses it, saying by how
    much to cut; a box that cut the link to its ``max_chars`` did it silently)."""
    if key in st.session_state:
        return
    raw = st.query_params.get(key)
    if raw is None or len(raw) <= limit:
        return
    st.warning(_("The link's **{param}** = {value} is {chars:,} characters long; this box takes up to {limit:,}. "
                 "Shorten it by {cut:,} characters (in the box, or in the link).", param=md_escape(key),
                 value=shown_value(raw), chars=len(raw), limit=limit, cut=len(raw) - limit))


T = TypeVar("T", bound=Hashable)


def english(fmt: Callable[[Any], str]) -> Callable[[Any], str]:
    """An option's link id: its label in English (an ``N_`` constant's own text, ``head 2``)."""
    def ident(option: Any) -> str:
        with language(DEFAULT):
            return fmt(option)
    return ident


def option_from_link(raw: str, options: Sequence[T], fmt: Callable[[T], str],
                     ident: Callable[[T], str]) -> T | None:
    """The option a link value names: its id, or its label in any language; None if none does."""
    for option in options:
        if raw == ident(option):
            return option
    for code in LANGS:
        with language(code):
            for option in options:
                if raw == fmt(option):
                    return option
    return None


def start_from_link(key: str, options: Sequence[T], default: T, fmt: Callable[[T], str] = _,
                    ident: Callable[[T], str] | None = None) -> T:
    """The part of :func:`linked_choice` before its widget is drawn (for a page that needs the choice first):
    in a new session, start the widget ``key`` at the option the link names, or at ``default`` with a warning;
    returns the option it starts at."""
    if key not in st.session_state:
        raw = st.query_params.get(key)
        option = None if raw is None else option_from_link(raw, options, fmt, ident or english(fmt))
        if raw is not None and option is None:
            warn_bad_link(key, raw, fmt(default))
        st.session_state[key] = default if option is None else option
    return st.session_state[key]


def linked_choice(widget: Callable[..., Any], label: str, options: Sequence[T], key: str, default: T,
                  fmt: Callable[[T], str] = _, ident: Callable[[T], str] | None = None, **kwargs: Any) -> T:
    """Draw ``widget`` (``st.segmented_control``, ``st.selectbox``, a column's …) over ``options`` shown as
    ``fmt(option)`` in this run's language and kept in the link as ``?key=ident(option)`` (default: the English
    label), none for ``default``. A new session starts at the option the link names (its id or any language's
    label); anything else is named once in a warning and ``default`` is shown. Returns the chosen option."""
    ident = ident or english(fmt)
    start_from_link(key, options, default, fmt, ident)
    shown = {option: fmt(option) for option in options}  # this run's language (format_func may be called later)
    if st.session_state[key] not in shown:  # kept from a run with other options (fewer heads, another variant)
        st.session_state[key] = default
    pick = widget(label, options, key=key, format_func=shown.__getitem__, **kwargs)
    pick = pick if pick in shown else default
    wanted = None if pick == default else ident(pick)
    if wanted is None:
        st.query_params.pop(key, None)
    elif st.query_params.get(key) != wanted:
        st.query_params[key] = wanted
    return pick


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
