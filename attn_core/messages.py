"""Messages as whole templates: what ``attn_core`` says to a person, as a message id with named values.

A :class:`Problem` is still a ``ValueError`` whose ``str()`` is the English sentence, so Python users read it as
before; the dashboard renders its ``msgid`` in the session's language at one boundary
(:func:`dashboard.i18n.message`). A :class:`Msg` is the same for text that is not an error (a mask's
description, a step's note). Both are extracted into the translation catalog by ``pybabel extract``
(keywords ``Problem``, ``Msg``, ``N_``; see ``babel.cfg``). Placeholders are named (``{layer}``); a
template with values writes a literal brace as ``{{``.
"""

from __future__ import annotations

from dataclasses import dataclass, field


def fill(template: str, values: dict[str, object]) -> str:
    """``template`` with its named placeholders filled (a template without values is returned as written)."""
    return template.format(**values) if values else template


def N_(msgid: str) -> str:
    """Mark ``msgid`` for the translation catalog without translating it here (module-level constants)."""
    return msgid


@dataclass(frozen=True)
class Msg:
    """A sentence with named values, translated where it is shown; ``str()`` is the English."""

    msgid: str
    values: dict[str, object] = field(default_factory=dict)

    def __init__(self, msgid: str, /, **values: object):
        object.__setattr__(self, "msgid", msgid)
        object.__setattr__(self, "values", values)

    def __str__(self) -> str:
        return fill(self.msgid, self.values)

    def __hash__(self) -> int:
        return hash((self.msgid, tuple(sorted((k, repr(v)) for k, v in self.values.items()))))


class Problem(ValueError):
    """A ``ValueError`` that carries its message id and values: ``str(e)`` is the English sentence, and the
    dashboard shows ``e.msgid`` translated with ``e.values``."""

    def __init__(self, msgid: str, /, **values: object):
        self.msgid = msgid
        self.values = values
        super().__init__(fill(msgid, values))

    @property
    def msg(self) -> Msg:
        return Msg(self.msgid, **self.values)


def listed(values) -> Msg | str:
    """``values`` as a list in a sentence, "1, 2, 4" (Chinese "1、2、4")."""
    items = [v if isinstance(v, Msg) else str(v) for v in values]
    out: Msg | str = items[0] if items else ""
    for item in items[1:]:
        out = Msg("{items}, {item}", items=out, item=item)
    return out


def either(values) -> Msg | str:
    """The allowed ``values`` as a sentence says them, "1, 2, 4 or 8" (Chinese "1、2、4 或 8"): a printed list
    "[1, 5]" read as a range that includes 2."""
    items = list(values)
    return listed(items) if len(items) < 2 else Msg("{items} or {last}", items=listed(items[:-1]), last=items[-1])


def both(values) -> Msg | str:
    """``values`` all together as a sentence says them, "a, b and c" (Chinese "a、b 和 c")."""
    items = list(values)
    return listed(items) if len(items) < 2 else Msg("{items} and {last}", items=listed(items[:-1]), last=items[-1])
