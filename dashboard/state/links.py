"""Text that came from a user or a link, made safe to show, the one warning a bad link value gets, and how an
error is written on the screen (``error_text``).

Shared by the sidebar (controls.py) and the pages' own link parameters (url_state.py), so every
"this link value cannot be used" message reads the same way and is escaped the same way.
"""

from __future__ import annotations

from dashboard.i18n import _, message

_MD_SPECIAL = set("\\`*_{}[]()#+-.!|<>~$:=")


def md_escape(text: str) -> str:
    """User text made inert for st.markdown: every Markdown/LaTeX character backslash-escaped, so a
    sentence like "![x](http://...)" or "**bold**" is shown literally (HTML is never enabled)."""
    return "".join("\\" + c if c in _MD_SPECIAL else c for c in text)


def code_span(text: str) -> str:
    """``text`` as a Markdown code span: shown verbatim, never a link or an image. Escaping is not enough for a URL:
    Streamlit's Markdown autolinks a bare ``https://…`` or ``www.…`` even with every character around it escaped
    (markdown-it, which the AppTest tests read, does not: tests/test_browser_truth.py checks Streamlit's own)."""
    longest = max((len(run) for run in "".join(c if c == "`" else " " for c in text).split()), default=0)
    fence = "`" * (longest + 1)
    return f"{fence} {' '.join(text.splitlines())} {fence}"  # the spaces are dropped, and let a ` end the text


def shown_value(raw: str, limit: int = 80) -> str:
    """A link value as it may appear inside a message: shortened, verbatim in a code span (never a live link)."""
    return code_span(raw if len(raw) <= limit else raw[:limit] + "…")


def link_warning(param: str, raw: str, used: str, reason: str | BaseException = "") -> str:
    """"The link's **param** = “value” is not valid here (reason): using X instead." — in the session's language,
    all escaped. ``reason``: a :class:`~attn_core.messages.Problem` (translated) or text."""
    why = message(reason) if isinstance(reason, BaseException) else reason
    values = dict(param=md_escape(param), value=shown_value(raw), used=md_escape(used[:80]))
    if why:
        return _("The link's **{param}** = {value} is not valid here ({reason}): using {used} instead.",
                 reason=md_escape(why), **values)
    return _("The link's **{param}** = {value} is not valid here: using {used} instead.", **values)


def error_text(error: BaseException | str) -> str:
    """An error as a sentence on the screen, in the session's language (:func:`dashboard.i18n.message`): capital
    first letter, one final full stop (a Chinese one for a Chinese sentence). A message that starts with a code name
    (``d_out``, ``num_heads``) keeps it as written: "D_out" is not the book's name. Not escaped: escape it where
    it goes into Markdown."""
    text = (message(error) if isinstance(error, BaseException) else str(error)).strip().rstrip(".。")
    if not text:
        return ""
    if any("\u4e00" <= c <= "\u9fff" for c in text):  # a Chinese sentence: no capitals, a Chinese full stop
        return text + "。"
    end = "."
    first = text.split(" ", 1)[0]
    if first.isidentifier() and ("_" in first or any(c.isupper() for c in first[1:])):
        return text + end
    return text[:1].upper() + text[1:] + end
