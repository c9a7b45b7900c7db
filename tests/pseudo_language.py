"""A third language made from the catalog alone: ``xx``, every message wrapped in ⟦…⟧ with its placeholders intact,
and its data file, in a copy of the locale folder that ``ATTENTION_LAB_LOCALE_DIR`` points the app at."""

from __future__ import annotations

import io
import re
import shutil
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.pofile import write_po

from dashboard import i18n_tools
from dashboard.languages import BUILT_IN, DATA, DOMAIN

CODE = "xx"
OPEN, CLOSE = "⟦", "⟧"
DATA_TEXT = f"""code = "{CODE}"
name = "{OPEN}Pseudo{CLOSE}"
html_lang = "{CODE}"
browser_locales = ["{CODE}"]
"""
_MARKED = re.compile(f"{OPEN}[^{OPEN}{CLOSE}]*{CLOSE}")


def pseudo(text: str) -> str:
    """``text`` marked as translated; its ``{name}`` / ``%(name)s`` placeholders stay as they are."""
    return f"{OPEN}{text}{CLOSE}" if text else text


def generate(dest: Path) -> Path:
    """A copy of the app's locale folder (the source's data, the real languages) plus ``xx``; ``dest``."""
    shutil.copytree(BUILT_IN, dest, ignore=shutil.ignore_patterns("*.mo"))
    folder = dest / CODE
    (folder / "LC_MESSAGES").mkdir(parents=True)
    (folder / DATA).write_text(DATA_TEXT, encoding="utf-8")
    cat = Catalog(locale=None, project=i18n_tools.PROJECT, charset="utf-8")
    for m in i18n_tools.extracted():
        if m.id:
            string = tuple(pseudo(s) for s in m.id) if isinstance(m.id, tuple) else pseudo(m.id)
            cat.add(m.id, string, flags=m.flags)
    buf = io.BytesIO()
    write_po(buf, cat, no_location=True)
    (folder / "LC_MESSAGES" / f"{DOMAIN}.po").write_bytes(buf.getvalue())
    return dest


def unmarked(text: str) -> str:
    """``text`` without its marked (translated) parts, the innermost first: a translation holds translated values."""
    while True:
        out = _MARKED.sub(" ", text)
        if out == text:
            return out
        text = out
