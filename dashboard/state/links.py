"""Text that came from a user or a link, made safe to show, the one warning a bad link value gets, and the words
messages are made of (``plural``, ``sentence``).

Shared by the sidebar (controls.py) and the pages' own link parameters (url_state.py), so every
"this link value cannot be used" message reads the same way and is escaped the same way.
"""

from __future__ import annotations

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


def link_warning(param: str, raw: str, used: str, reason: str = "") -> str:
    """"The link's **param** = “value” is not valid here (reason): using X instead." — all escaped."""
    why = f" ({md_escape(reason)})" if reason else ""
    return (f"The link's **{md_escape(param)}** = {shown_value(raw)} is not valid here{why}: "
            f"using {md_escape(used[:80])} instead.")


def plural(n: int, word: str) -> str:
    """``1 token``, ``2 tokens``."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def sentence(message: object) -> str:
    """An error message as a sentence: capital first letter, one final full stop. A message that starts
    with a code name (``d_out``, ``num_heads``) keeps it as written: "D_out" is not the book's name."""
    text = str(message).strip().rstrip(".")
    first = text.split(" ", 1)[0]
    if first.isidentifier() and ("_" in first or any(c.isupper() for c in first[1:])):
        return text + "."
    return (text[:1].upper() + text[1:] + ".") if text else ""
