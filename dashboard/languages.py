"""The languages of the interface, read from the locale folder: a language is its folder there.

``dashboard/locale/<folder>/language.toml`` says what the code needs to know about a language (its code, its name
in the switch, the browser locales it answers to, export fonts, sample text, punctuation); beside it,
``LC_MESSAGES/messages.po`` is its catalog (the folder's name is the catalog's locale, e.g. ``zh_CN``). A language
exists when its folder has both; the source language (English: every msgid is its text) needs only the data.
``ATTENTION_LAB_LOCALE_DIR`` points the whole app at another locale folder (a test's generated language).
No module but this one names a language's code.
"""

from __future__ import annotations

import functools
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

SOURCE = "en"  # the source language: the msgids are its text, and the fallback for anything unknown
DATA = "language.toml"
DOMAIN = "messages"
LOCALE_ENV = "ATTENTION_LAB_LOCALE_DIR"
BUILT_IN = Path(__file__).resolve().parent / "locale"


@dataclass(frozen=True)
class Language:
    """One language's facts, as its ``language.toml`` states them (the fields' meanings are written there)."""
    code: str
    name: str
    folder: Path
    html_lang: str
    browser_locales: tuple[str, ...] = ()
    cjk: bool = False
    upright: bool = False
    sentence_separator: str = " "
    aside: str = " ("
    export_fonts: tuple[str, ...] = ()
    font_dirs: tuple[str, ...] = ()
    sample_text: str = ""
    sample_label: str = ""
    sample_name: str = ""

    @property
    def locale(self) -> str:
        """The catalog's locale (``zh_CN``): the folder's name."""
        return self.folder.name

    @property
    def po(self) -> Path:
        return self.folder / "LC_MESSAGES" / f"{DOMAIN}.po"

    @property
    def mo(self) -> Path:
        return self.po.with_suffix(".mo")


def locale_dir() -> Path:
    """The locale folder in use: ``ATTENTION_LAB_LOCALE_DIR``, else the app's own."""
    return Path(os.environ.get(LOCALE_ENV) or BUILT_IN)


def _read(path: Path) -> Language:
    with path.open("rb") as f:
        data = tomllib.load(f)
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
    return Language(folder=path.parent, **values)  # a key it does not know is a TypeError, not silently lost


@functools.cache
def _declared(where: str) -> dict[str, Language]:
    found = [_read(p) for p in sorted(Path(where).glob(f"*/{DATA}"))]
    found.sort(key=lambda lang: (lang.code != SOURCE, lang.code))  # the source first, then by code
    return {lang.code: lang for lang in found}


def declared() -> dict[str, Language]:
    """Every folder with a data file, catalog or not (the catalog tools create a new language's ``.po``)."""
    return _declared(str(locale_dir()))


def languages() -> dict[str, Language]:
    """code -> :class:`Language`: the source, then every language whose folder holds a catalog (read once per
    process and locale folder: every translated string asks)."""
    return _available(str(locale_dir()))


@functools.cache
def _available(where: str) -> dict[str, Language]:
    return {c: lang for c, lang in _declared(where).items() if c == SOURCE or lang.po.exists()}


def source() -> Language:
    return declared()[SOURCE]


def get(code: str) -> Language:
    """The language ``code``, or the source for a code the folder does not hold."""
    return languages().get(code) or source()


def from_locale(locale: str | None) -> str:
    """The language a browser's locale asks for (``zh-CN``, ``zh_TW``, ``ZH`` -> the language answering to
    ``zh``); the source language for any other."""
    first = (locale or "").lower().replace("_", "-").split("-")[0]
    return next((c for c, lang in languages().items() if first in lang.browser_locales), SOURCE)


def _union(values) -> tuple[str, ...]:
    return tuple(dict.fromkeys(v for vs in values for v in vs))


def export_fonts(cjk_only: bool = False) -> tuple[str, ...]:
    """Every language's export fonts, the source's first (``cjk_only``: the CJK-script languages' only)."""
    return _union(lang.export_fonts for lang in languages().values() if lang.cjk or not cjk_only)


def font_dirs() -> tuple[str, ...]:
    """Every language's font folders, in order."""
    return _union(lang.font_dirs for lang in languages().values())


def before_aside(text: str) -> str:
    """``text`` up to the first aside it opens, in any language's way ("X (Y)", "X（Y）"): a label named short."""
    for opener in _union([lang.aside] for lang in languages().values() if lang.aside):
        text = text.split(opener)[0]
    return text
