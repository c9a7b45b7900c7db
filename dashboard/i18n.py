"""The session's language, and the translation function every user-facing string goes through.

English is the source language: a string is marked where it is written, ``_("Attention weights of head {head}",
head=h)``, with named placeholders and whole sentences (never glued from pieces), and plural forms with
``ngettext``. Module-level constants are marked with ``N_`` and translated where they are shown (``_(CONST)``).
``_`` also takes an ``attn_core`` :class:`~attn_core.messages.Msg`, and :func:`message` renders any error
(an ``attn_core`` :class:`~attn_core.messages.Problem` in the session's language).

The languages are the folders of ``dashboard/locale/`` (:mod:`dashboard.languages`: a catalog and the data beside
it). The catalogs are gettext ``.po`` files (made with Babel: ``python -m dashboard.i18n_tools extract`` /
``update`` / ``compile`` / ``check``). The ``.mo`` is not committed: the set-up commands compile it; one still
missing, or older than its ``.po`` or a fragment, is compiled on first use (written beside the ``.po``, else kept in
memory). The language is set once per script run by :func:`start_run` (the link's ``?lang=``, else the switch's
choice, else the browser's) and written back into the link; :func:`lang` reads it (a fragment's rerun: the
session's); code outside a run (a worker thread, a test) gets English unless it enters :func:`language`.
"""

from __future__ import annotations

import functools
import gettext
import io
import json
import logging
import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

from attn_core.messages import N_, Msg, Problem, fill  # noqa: F401  (N_ is re-exported for the pages)
from dashboard.languages import BUILT_IN, DOMAIN, SOURCE, Language, declared, get, languages, locale_dir  # noqa: F401
from dashboard.languages import from_locale as _from_locale


class _Names(Mapping):
    """code -> the language's own name, as the switch shows it; read from the locale folder in use."""

    def __getitem__(self, code: str) -> str:
        return languages()[code].name

    def __iter__(self) -> Iterator[str]:
        return iter(languages())

    def __len__(self) -> int:
        return len(languages())


LANGS = _Names()
DEFAULT = SOURCE
LOCALE_DIR = BUILT_IN  # the app's own catalogs (the .pot lives here)
log = logging.getLogger(__name__)
_compiling = threading.Lock()  # startup's warm-up and a first visitor may ask at once: one compiles

SESSION_KEY = "lang"  # the session's language, kept across runs (fragment reruns read it: they skip main.py)
SWITCH_KEY = "lang_switch"  # the sidebar's / phone page's switch widget
URL_KEY = "lang"  # ?lang=zh

_current: ContextVar[str | None] = ContextVar("attention_lab_lang", default=None)


def po_path(code: str) -> Path:
    """The ``.po`` catalog of a language (declared by its data, the catalog maybe not yet made)."""
    return declared()[code].po


def fragments(code: str) -> list[Path]:
    """The helpers' translations of ``code`` not yet folded into its ``.po`` (work in progress)."""
    return sorted((locale_dir() / "fragments").glob(f"*.{code}.po"))


def catalog(code: str) -> gettext.NullTranslations:
    """A language's translations, loaded once per process (the source language: the msgids themselves)."""
    language = languages().get(code)
    if language is None or code == DEFAULT:
        return gettext.NullTranslations()
    return _catalog(language)


@functools.cache
def _catalog(language: Language) -> gettext.NullTranslations:
    data = compiled(language)
    if data is None:
        return gettext.NullTranslations()
    return gettext.GNUTranslations(io.BytesIO(data))


def fresh(language: Language) -> bool:
    """Whether the ``.mo`` was compiled after its ``.po`` and every fragment last changed."""
    sources = [p.stat().st_mtime_ns for p in [language.po, *fragments(language.code)] if p.exists()]
    return language.mo.exists() and language.mo.stat().st_mtime_ns >= max(sources, default=0)


def compiled(language: Language, force: bool = False) -> bytes | None:
    """The language's ``.mo`` bytes: the file when it is fresh, else compiled now and written beside the ``.po``
    (a fresh clone, an edited ``.po``; kept in memory where the folder is read-only); None without a catalog."""
    with _compiling:
        if fresh(language) and not force:
            return language.mo.read_bytes()
        return _compile(language, force)


def _compile(language: Language, force: bool) -> bytes | None:
    cat = merged(language.code)
    if cat is None:
        return None
    from babel.messages.mofile import write_mo

    buf = io.BytesIO()
    write_mo(buf, cat)
    data = buf.getvalue()
    try:
        part = language.mo.with_name(f".{language.mo.name}.{os.getpid()}")  # whole or nothing: other servers read it
        part.write_bytes(data)
        os.replace(part, language.mo)
        if not force:
            log.log(logging.WARNING, "compiled %s (missing or older than its .po): `python -m "
                    "dashboard.i18n_tools compile` does it at set-up", language.mo)
    except OSError as e:
        log.log(logging.WARNING, "compiled %s in memory only: %s", language.mo, e)
    return data


def merged(code: str):
    """A language's ``.po`` with the helpers' fragments beside it folded in (a message the ``.po`` leaves
    untranslated takes a fragment's translation), as a Babel catalog; None when there is none."""
    from babel.messages.pofile import read_po

    language = declared()[code]
    cat = None
    for path in [p for p in [language.po] if p.exists()] + fragments(code):
        with path.open("rb") as f:
            part = read_po(f, locale=language.locale)
        if cat is None:
            cat = part
            continue
        for m in part:
            if m.id and (m.id not in cat or not cat[m.id].string):
                cat[m.id] = m
    return cat


def lang() -> str:
    """The language of this run (a code of :data:`LANGS`). A fragment's rerun (which skips main.py's
    :func:`start_run`, on a thread of its own) reads the session's choice."""
    code = _current.get()
    if code is not None:
        return code
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx(suppress_warning=True)
    if ctx is None:
        return DEFAULT
    code = ctx.session_state[SESSION_KEY] if SESSION_KEY in ctx.session_state else DEFAULT
    return code if code in LANGS else DEFAULT


def writes_cjk() -> bool:
    """Whether this run's language is written in Chinese, Japanese or Korean script."""
    return get(lang()).cjk


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
    """The language for a browser's locale (by the data's ``browser_locales``; anything else the source)."""
    return _from_locale(locale)


def _(msgid: str | Msg, /, **values: object) -> str:
    """``msgid`` in this run's language, its named placeholders filled from ``values``."""
    if isinstance(msgid, Msg):
        msgid, values = msgid.msgid, {**msgid.values, **values}
    values = {k: _(v) if isinstance(v, Msg) else v for k, v in values.items()}  # a mask's name inside a note
    if not msgid:  # gettext's "" is the catalog's header: an empty axis title became a broken Vega expression
        return fill(msgid, values)
    return fill(catalog(lang()).gettext(msgid), values)


def ngettext(singular: str, plural: str, n: int, /, **values: object) -> str:
    """The form of ``singular``/``plural`` for ``n`` in this run's language; ``{n}`` and ``values`` filled."""
    return fill(catalog(lang()).ngettext(singular, plural, n), {"n": n, **values})


def sentences(*parts: str) -> str:
    """Whole sentences, each translated on its own, joined as the language writes them (Chinese: no space)."""
    return get(lang()).sentence_separator.join(p for p in parts if p)


def message(error: BaseException | Msg | str) -> str:
    """What an error says, in this run's language: an ``attn_core`` :class:`Problem` (or any error that carries a
    ``msgid`` and ``values`` the same way, e.g. a poll's) by its message id, anything else as its English text."""
    if isinstance(error, Problem) or (isinstance(error, BaseException) and isinstance(getattr(error, "msgid", None),
                                                                                         str)):
        return _(error.msgid, **getattr(error, "values", {}))
    if isinstance(error, Msg):
        return _(error)
    return str(error)


def start_run() -> str | None:
    """Set this script run's language, once, first thing: the link's ``?lang=`` (kept for the session), else the
    session's choice, else the browser's language (``st.context.locale``). The language is then written into the
    link, so every link the app makes (a prepared link, a poll's join link) carries it. Returns a bad ``?lang=``
    value (for the bad-link warning), else None."""
    import streamlit as st

    asked = st.query_params.get(URL_KEY)
    bad = None
    if asked in LANGS:
        st.session_state[SESSION_KEY] = asked
    elif asked is not None and not st.session_state.get("_lang_warned"):
        bad = asked
        st.session_state["_lang_warned"] = True  # warned once, like the sidebar's link values
    code = st.session_state.get(SESSION_KEY)
    if code not in LANGS:
        code = from_locale(st.context.locale)
        st.session_state[SESSION_KEY] = code
    use(code)
    if st.query_params.get(URL_KEY) != code:
        st.query_params[URL_KEY] = code
    return bad


def _switched() -> None:
    """The switch was flipped: the session's language and the link follow (the rerun draws in it)."""
    import streamlit as st

    code = st.session_state.get(SWITCH_KEY)
    if code in LANGS:
        st.session_state[SESSION_KEY] = code
        st.query_params[URL_KEY] = code
        keep_choices(st.session_state)


def keep_choices(state) -> None:
    """Every choice set again as it is now, read in the old language: a selectbox sends back its shown label, which
    the rerun in the new language would not find among its options (the choice was lost and the link rewritten
    twice over). Only values a choice can hold: a button's (a bool) cannot be set."""
    for key in list(state):
        value = state[key]
        if key != SWITCH_KEY and isinstance(value, (str, int, float, list)) and not isinstance(value, bool):
            state[key] = value


def switch(container) -> None:
    """The language switch (each language by its own name) in ``container``; switching is a rerun in it."""
    import streamlit as st

    st.session_state[SWITCH_KEY] = lang()  # what the link or the session chose, also before the first click
    container.segmented_control(_("Language"), list(LANGS), format_func=LANGS.get, key=SWITCH_KEY,
                                on_change=_switched, label_visibility="collapsed", width="stretch")


# Streamlit's own English words no parameter replaces: a help icon's aria-label "Help for X", a selectbox's
# search placeholder "Choose an option" and a text box's hint under it while typing ("Press Ctrl+Enter to apply");
# the page's script puts this run's words in their place.
CHROME = {"Help for ": N_("Help for {label}"), "Choose an option": N_("Choose an option"),
          "Choose options": N_("Choose options"), "Press Ctrl+Enter to apply": N_("Press Ctrl+Enter to apply"),
          "Press ⌘+Enter to apply": N_("Press ⌘+Enter to apply"), "Press Enter to apply": N_("Press Enter to apply"),
          "Shortcut ": N_("Shortcut {key}"), "Skip to main content": N_("Skip to main content")}
# What a screen reader says of Streamlit's own controls and of every chart (its aria-label), word for word
ARIA = {"Collapse sidebar": N_("Collapse sidebar"), "Expand sidebar": N_("Expand sidebar"), "Sidebar": N_("Sidebar"),
        "App pages": N_("App pages"), "Main menu": N_("Main menu"), "Show data": N_("Show data"),
        "Fullscreen": N_("Fullscreen"), "Close fullscreen": N_("Close fullscreen"),
        "Exit fullscreen": N_("Exit fullscreen"), "Increment": N_("Increment"), "Decrement": N_("Decrement"),
        "Close": N_("Close"), "Clear value": N_("Clear value"), "Vega visualization": N_("Vega visualization")}
_RENAME = """(() => {
const words = %s; window.attnLabWords = words;
if (window.attnLabRename) { window.attnLabRename(document); return; }
const put = (el, attr, said) => {  // the English it replaces kept beside it: a switch back to English restores it
  const key = attr.replace(/(^|-)(.)/g, (m, a, c) => c.toUpperCase());  // data-attn-en-aria-label
  el.dataset['attnEn' + key] = el.getAttribute(attr); el.dataset['attnSaid' + key] = said;
  el.setAttribute(attr, said); };
const rename = (root) => { const w = window.attnLabWords; if (!w) return;
  for (const el of root.querySelectorAll('[aria-label^="Help for "]'))
    put(el, 'aria-label', w["Help for "].replace('{label}', el.getAttribute('aria-label').slice(9)));
  for (const el of root.querySelectorAll('input[placeholder="Choose an option"], input[placeholder="Choose options"]'))
    put(el, 'placeholder', w[el.getAttribute('placeholder')]);
  for (const [en, said] of Object.entries(w.aria))
    for (const el of root.querySelectorAll(`[aria-label="${en}"]`)) put(el, 'aria-label', said);
  for (const el of root.querySelectorAll('[aria-label^="Shortcut "]'))
    put(el, 'aria-label', w["Shortcut "].replace('{key}', el.getAttribute('aria-label').slice(9)));
  for (const el of root.querySelectorAll('[data-testid="InputInstructions"] span, [data-testid="stSkipToContent"]'))
    for (const t of el.childNodes)  // the text node React keeps: its next update is seen and renamed again
      if (t.nodeType === 3 && w[t.nodeValue] && /^(Press|Skip) /.test(t.nodeValue)) {
        el.dataset.attnEnText = t.nodeValue;
        t.nodeValue = w[t.nodeValue]; } };
window.attnLabRename = rename; rename(document);
new MutationObserver(() => rename(document)).observe(document.body, {subtree: true, childList: true,
  characterData: true, attributes: true, attributeFilter: ['aria-label', 'placeholder']});
})();"""
# Back in English: Streamlit's words as it wrote them (a control it does not draw again keeps what was put there)
_RESTORE = """window.attnLabWords = null;
for (const [attr, key] of [['aria-label', 'AriaLabel'], ['placeholder', 'Placeholder']])
  for (const el of document.querySelectorAll(`[data-attn-en-${attr}]`)) {
    // only what still reads as put there: a label Streamlit has already redrawn in English ("Help for Variant") stays
    if (el.getAttribute(attr) === el.dataset['attnSaid' + key]) el.setAttribute(attr, el.dataset['attnEn' + key]);
    delete el.dataset['attnEn' + key]; delete el.dataset['attnSaid' + key]; }
for (const el of document.querySelectorAll('[data-attn-en-text]')) {
  for (const t of el.childNodes) if (t.nodeType === 3) t.nodeValue = el.dataset.attnEnText;
  delete el.dataset.attnEnText; }"""


def html_lang_script(code: str) -> str:
    """The script that declares the page's language (``<html lang="zh-CN">``) to the browser, screen readers and
    fonts (Streamlit has no setting for it; ``st.html`` runs the script in the page itself), and, in a language
    other than English, puts this run's words in place of Streamlit's own English ones (:data:`CHROME`)."""
    script = f'document.documentElement.lang = "{get(code).html_lang}";'
    if code != DEFAULT:
        with language(code):
            words: dict = {k: _(v, label="{label}", key="{key}") for k, v in CHROME.items()}
            words["aria"] = {k: _(v) for k, v in ARIA.items()}
        script += _RENAME % json.dumps(words, ensure_ascii=False)
    else:
        script += _RESTORE  # back in English: Streamlit's own words stand
    return f"<script>{script}</script>"


HTML_LANG_KEY = "html_lang"
# in no layout, nor its wrapper: a zero-height block still took a flex gap above the page
_HIDDEN = f"<style>.st-key-{HTML_LANG_KEY}, div:has(> .st-key-{HTML_LANG_KEY}) {{display: none;}}</style>"


def declare_html_lang() -> None:
    """Set ``<html lang>`` to this run's language (every run: a switch back to English resets it)."""
    import streamlit as st

    st.html(_HIDDEN)
    with st.container(key=HTML_LANG_KEY):
        st.html(html_lang_script(lang()), unsafe_allow_javascript=True)
