"""The session's language, and the translation function every user-facing string goes through.

English is the source language: a string is marked where it is written, ``_("Attention weights of head {head}",
head=h)``, with named placeholders and whole sentences (never glued from pieces), and plural forms with
``ngettext``. Module-level constants are marked with ``N_`` and translated where they are shown (``_(CONST)``).
``_`` also takes an ``attn_core`` :class:`~attn_core.messages.Msg`, and :func:`message` renders any error
(an ``attn_core`` :class:`~attn_core.messages.Problem` in the session's language).

The catalogs are gettext ``.po`` files under ``dashboard/locale/`` (made with Babel: ``python -m dashboard.i18n
extract`` / ``update`` / ``compile``); a ``.mo`` older than its ``.po`` (or missing) is compiled in memory once per
process. The language is set once per script run by :func:`start_run` (the link's ``?lang=``, else the sidebar's
choice, else the browser's) and read by :func:`lang`; code outside a run (a worker thread, a test) gets English
unless it enters :func:`language`.
"""

from __future__ import annotations

import functools
import gettext
import io
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

from attn_core.messages import Msg, N_, Problem, fill  # noqa: F401  (N_ is re-exported for the pages)

LANGS = {"en": "English", "zh": "中文"}  # code -> its own name, as the switch shows it
DEFAULT = "en"
LOCALES = {"en": "en", "zh": "zh_CN"}  # code -> the catalog's folder
HTML_LANG = {"en": "en", "zh": "zh-CN"}  # code -> <html lang>
LOCALE_DIR = Path(__file__).resolve().parent / "locale"
DOMAIN = "messages"

_current: ContextVar[str] = ContextVar("attention_lab_lang", default=DEFAULT)


def po_path(code: str) -> Path:
    """The ``.po`` catalog of a language."""
    return LOCALE_DIR / LOCALES[code] / "LC_MESSAGES" / f"{DOMAIN}.po"


@functools.cache
def catalog(code: str) -> gettext.NullTranslations:
    """A language's translations, loaded once per process (English: the source strings themselves)."""
    if code == DEFAULT or code not in LANGS:
        return gettext.NullTranslations()
    po = po_path(code)
    mo = po.with_suffix(".mo")
    if mo.exists() and (not po.exists() or mo.stat().st_mtime_ns >= po.stat().st_mtime_ns):
        with mo.open("rb") as f:
            return gettext.GNUTranslations(f)
    fragments = sorted((LOCALE_DIR / "fragments").glob(f"*.{code}.po"))  # work in progress, folded into the .po
    if not po.exists() and not fragments:
        return gettext.NullTranslations()
    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po

    cat = None
    for path in [p for p in [po] if p.exists()] + fragments:
        with path.open("rb") as f:
            part = read_po(f, locale=LOCALES[code])
        if cat is None:
            cat = part
            continue
        for m in part:
            if m.id and (m.id not in cat or not cat[m.id].string):
                cat[m.id] = m
    buf = io.BytesIO()
    write_mo(buf, cat)
    buf.seek(0)
    return gettext.GNUTranslations(buf)


def lang() -> str:
    """The language of this run (``"en"`` or ``"zh"``)."""
    return _current.get()


def use(code: str) -> None:
    """Make ``code`` this thread's language (once per script run: :func:`start_run`)."""
    _current.set(code if code in LANGS else DEFAULT)


@contextmanager
def language(code: str) -> Iterator[None]:
    """Run a block in ``code`` (tests, exports made for another language)."""
    token = _current.set(code if code in LANGS else DEFAULT)
    try:
        yield
    finally:
        _current.reset(token)


def from_locale(locale: str | None) -> str:
    """The language for a browser's locale (``zh-CN``, ``zh-TW``, ``zh`` -> Chinese; anything else English)."""
    return "zh" if (locale or "").lower().replace("_", "-").split("-")[0] == "zh" else DEFAULT


def _(msgid: str | Msg, /, **values: object) -> str:
    """``msgid`` in this run's language, its named placeholders filled from ``values``."""
    if isinstance(msgid, Msg):
        msgid, values = msgid.msgid, {**msgid.values, **values}
    return fill(catalog(lang()).gettext(msgid), values)


def ngettext(singular: str, plural: str, n: int, /, **values: object) -> str:
    """The form of ``singular``/``plural`` for ``n`` in this run's language; ``{n}`` and ``values`` filled."""
    return fill(catalog(lang()).ngettext(singular, plural, n), {"n": n, **values})


def message(error: BaseException | Msg | str) -> str:
    """What an error says, in this run's language: an ``attn_core`` :class:`Problem` by its message id, anything
    else as its English text."""
    if isinstance(error, Problem):
        return _(error.msgid, **error.values)
    if isinstance(error, Msg):
        return _(error)
    return str(error)


def start_run() -> str:
    """Set this script run's language, once, first thing: the link's ``?lang=`` (kept for the session), else the
    session's choice, else the browser's language (``st.context.locale``)."""
    import streamlit as st

    asked = st.query_params.get("lang")
    if asked in LANGS:
        st.session_state["lang"] = asked
    code = st.session_state.get("lang")
    if code not in LANGS:
        code = from_locale(st.context.locale)
    use(code)
    return code
