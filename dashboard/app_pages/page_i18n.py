"""What the pages need from the translation besides ``_``: a widget bound to the link whose options are shown
translated (:func:`from_link`), and a problem said as a sentence in this run's language (:func:`said`).

Streamlit writes and reads such a link as the option's *label* in this run's language, so a link made in English
(``?section=Scores``) would open the default in Chinese, and one made in Chinese would fail in English. Before the
widget is drawn in a new session, :func:`from_link` takes the link's value in any language's spelling (or the
option's id) and starts the widget there; anything else is named as a bad link, as ``url_choice`` does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import streamlit as st

from dashboard.i18n import DEFAULT, LANGS, lang, language, message
from dashboard.state.links import sentence
from dashboard.state.url_state import url_choice

T = TypeVar("T")


def spellings(option: object, fmt: Callable[[object], str]) -> set[str]:
    """How a link may spell ``option``: its label in every language, and a string option's own id."""
    out = {str(option)} if isinstance(option, str) else set()
    for code in LANGS:
        with language(code):
            out.add(fmt(option))
    return out


def from_link(key: str, options: Sequence[T], fmt: Callable[[T], str], used: str) -> None:
    """Start the widget ``key`` at the option the link's ``?key=`` names in any language (a new session only)."""
    if key in st.session_state:
        return
    raw = st.query_params.get(key)
    if raw is None:
        return
    for option in options:
        if raw in spellings(option, fmt):
            st.session_state[key] = option
            return
    url_choice(key, [fmt(o) for o in options], used)


def said(error: BaseException) -> str:
    """An error as one sentence of this run's language (English: capital first letter and final full stop; a
    Chinese sentence keeps its own 。)."""
    return sentence(message(error)) if lang() == DEFAULT else message(error)
