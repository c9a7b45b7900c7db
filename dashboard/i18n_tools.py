"""The translation catalogs' tools: ``python -m dashboard.i18n_tools extract|update|compile|check``.

- ``extract``: every marked string of the app and of ``attn_core`` (keywords ``_``, ``ngettext``, ``N_``, ``Msg``,
  ``Problem``; files from ``babel.cfg``) into ``dashboard/locale/messages.pot``.
- ``update``: each language's ``.po`` from the ``.pot``: new messages added, gone ones dropped, translations kept;
  a translation still waiting in a fragment (``dashboard/locale/fragments/*.<code>.po``) is folded in.
- ``compile``: each ``.po`` (with its fragments) into its ``.mo``, beside it: the README's set-up commands run it (the
  app compiles a ``.mo`` still missing or older than its ``.po`` on first use, with a line in the log).
- ``check``: exit 1 when a message has no translation (the ``.po`` and the fragments read together), when a
  translation's placeholders differ from its English, or when its braces do not format.
"""

from __future__ import annotations

import io
import string
import sys
from collections.abc import Iterable
from pathlib import Path

from babel.messages.catalog import Catalog, Message
from babel.messages.extract import extract_from_dir
from babel.messages.frontend import parse_mapping_cfg
from babel.messages.pofile import read_po, write_po

from dashboard.i18n import DEFAULT, LOCALE_DIR, compiled, declared, fragments, merged, po_path  # noqa: F401

ROOT = LOCALE_DIR.parent.parent
POT = LOCALE_DIR / "messages.pot"
KEYWORDS = {"_": None, "ngettext": (1, 2), "N_": None, "Msg": None, "Problem": None}
PROJECT = "Attention Lab"


def extracted() -> Catalog:
    """Every marked string, as ``pybabel extract -F babel.cfg -k N_ -k Msg -k Problem`` finds it."""
    with (ROOT / "babel.cfg").open() as f:
        method_map, options_map = parse_mapping_cfg(f)
    cat = Catalog(project=PROJECT, charset="utf-8")
    for filename, lineno, msg, comments, context in extract_from_dir(
            str(ROOT), method_map, options_map, keywords=KEYWORDS, strip_comment_tags=True):
        if not msg or (isinstance(msg, tuple) and not msg[0]):
            continue
        cat.add(msg, None, [(filename, lineno)], auto_comments=comments, context=context,
                flags=("python-brace-format",) if any("{" in m for m in _texts(msg)) else ())
    return cat


def _texts(msg: str | tuple[str, ...]) -> tuple[str, ...]:
    return msg if isinstance(msg, tuple) else (msg,)


def read(path: Path, code: str) -> Catalog:
    with path.open("rb") as f:
        return read_po(f, locale=declared()[code].locale if code in declared() else None)


def translations(code: str) -> dict[str, Message]:
    """msgid -> its translated message, from the ``.po`` and then the fragments (the first translation wins)."""
    out: dict[str, Message] = {}
    paths = ([po_path(code)] if po_path(code).exists() else []) + fragments(code)
    for path in paths:
        for m in read(path, code):
            key = m.id[0] if isinstance(m.id, tuple) else m.id
            if key and key not in out and any(_texts(m.string)):
                out[key] = m
    return out


def names(text: str) -> set[str]:
    """The named placeholders of a brace-format template (ValueError when its braces do not parse)."""
    return {field.split(".")[0].split("[")[0] for _lit, field, _spec, _conv in string.Formatter().parse(text)
            if field is not None}


class _Any:
    def __format__(self, spec: str) -> str:
        return ""


def problems(code: str, template: Catalog | None = None) -> list[str]:
    """What ``check`` reports for ``code``: untranslated messages, placeholders that differ, broken braces."""
    template = template or extracted()
    done = translations(code)
    out: list[str] = []
    for m in template:
        key = m.id[0] if isinstance(m.id, tuple) else m.id
        if not key:
            continue
        where = f"{m.locations[0][0]}:{m.locations[0][1]}" if m.locations else "?"
        t = done.get(key)
        if t is None:
            out.append(f"{where}: no {declared()[code].name} translation: {key!r}")
            continue
        english = _texts(m.id)
        wanted = names(english[-1])  # a plural's English plural form names every value
        for s in _texts(t.string):
            try:
                got = names(s)
                s.format(**{n: _Any() for n in got}) if got else None
            except (ValueError, IndexError, KeyError) as e:
                out.append(f"{where}: the translation of {key!r} does not format ({e}): {s!r}")
                continue
            if got != wanted and (got or "{" in english[-1]):
                out.append(f"{where}: placeholders {sorted(got)} in the translation of {key!r}, "
                           f"{sorted(wanted)} in the English")
    return out


def extract() -> None:
    buf = io.BytesIO()
    write_po(buf, extracted(), width=120, sort_output=True, no_location=True)  # stable: no file:line churn
    POT.write_bytes(buf.getvalue())
    print(f"wrote {POT.relative_to(ROOT)}")


def update(codes: Iterable[str]) -> None:
    template = read(POT, DEFAULT) if POT.exists() else extracted()
    for code in codes:
        po = po_path(code)
        cat = read(po, code) if po.exists() else Catalog(locale=declared()[code].locale, project=PROJECT,
                                                        charset="utf-8")
        cat.update(template, no_fuzzy_matching=True)
        cat.fuzzy = False  # a reviewed catalog: its header is not a guess
        cat.last_translator = cat.language_team = "Attention Lab developers"
        waiting = translations(code)
        for m in cat:
            key = m.id[0] if isinstance(m.id, tuple) else m.id
            if key and not any(_texts(m.string)) and key in waiting:
                m.string = waiting[key].string
        po.parent.mkdir(parents=True, exist_ok=True)
        buf = io.BytesIO()
        write_po(buf, cat, width=120, sort_output=True, no_location=True, ignore_obsolete=True)
        po.write_bytes(buf.getvalue())
        print(f"wrote {po}")


def compile_mo(codes: Iterable[str]) -> None:
    """Each language's ``.mo``: its ``.po`` with the fragments folded in, as the app reads them."""
    for code in codes:
        language = declared()[code]
        if compiled(language, force=True) is None:
            print(f"no catalog for {code}")
            continue
        print(f"wrote {language.mo}")


def main(argv: list[str]) -> int:
    codes = [c for c in declared() if c != DEFAULT]  # a new language's folder: update makes its catalog
    command = argv[0] if argv else ""
    if command == "extract":
        extract()
    elif command == "update":
        update(codes)
    elif command == "compile":
        compile_mo(codes)
    elif command == "check":
        template = extracted()
        found = [p for code in codes for p in problems(code, template)]
        print("\n".join(found) or f"{len(template)} messages, every one translated")
        return 1 if found else 0
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
