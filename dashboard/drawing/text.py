"""Tables of results that read on a projector (plural words and sentences: dashboard/state/links.py)."""

from __future__ import annotations

import math

import streamlit as st

from dashboard.drawing.present import presenting
from dashboard.state.links import code_span, md_escape

NUMBERS_KEY = "numbers_"  # a container keyed with this prefix right-aligns its tables' cells (present.NUMBERS_CSS)


def show_table(container, df, *, formats: dict[str, str] | None = None, na_rep: str = "",
               hide_index: bool | None = None, column_config: dict | None = None, **dataframe_kw) -> None:
    """A table of results: ``st.dataframe`` (sortable, searchable, downloadable), and in presentation mode a static
    ``st.table``, whose text the presentation style sets at 1.1 rem (the data grid draws ~12 px text on a canvas that
    no style reaches). ``formats``: printf formats by column (``{"median ms": "%.3f"}``), applied in both; ``na_rep``
    what a missing number shows in the static table. Text cells are Markdown-escaped there (st.table renders
    Markdown)."""
    import pandas as pd

    formats = {c: f for c, f in (formats or {}).items() if c in df.columns}
    if not presenting():
        config = {c: st.column_config.NumberColumn(format=f) for c, f in formats.items()} | (column_config or {})
        container.dataframe(df, hide_index=hide_index, column_config=config or None, **dataframe_kw)
        return
    shown = df.copy()
    for c in shown.columns:
        if not pd.api.types.is_numeric_dtype(shown[c]) or pd.api.types.is_bool_dtype(shown[c]):
            shown[c] = [v if v is None else md_escape(str(v)) for v in shown[c]]
    shown.index = pd.Index([md_escape(str(i)) for i in shown.index], name=df.index.name)
    shown.columns = [md_escape(str(c)) for c in shown.columns]
    style = shown.style.format({md_escape(str(c)): (lambda v, f=f: f % v) for c, f in formats.items()},
                               na_rep=na_rep)
    container.table(style, hide_index=hide_index if hide_index is not None else isinstance(df.index, pd.RangeIndex),
                    width="content")


def markdown_table(container, df, *, formats: dict[str, str] | None = None) -> None:
    """A small table as Markdown: no data grid to build, so a page that changes every step (Generate) redraws it
    cheaply. Every cell is escaped (a token like ``|`` or ``**`` stays literal); ``formats`` as :func:`show_table`."""
    formats = formats or {}

    def cell(column: str, value: object) -> str:
        return md_escape(formatted(formats[column], value) if column in formats else str(value))

    head = "| " + " | ".join(md_escape(str(c)) for c in df.columns) + " |"
    rule = "|" + "|".join("---:" if c in formats else "---" for c in df.columns) + "|"
    rows = ["| " + " | ".join(cell(c, v) for c, v in zip(df.columns, row)) + " |" for row in df.itertuples(index=False)]
    container.markdown("\n".join([head, rule, *rows]))


def row_tables(container, df, *, formats: dict[str, str] | None = None) -> None:
    """One small two-column Markdown table per row, headed by the row's first cell: on a phone, where a wide table's
    grid scrolled sideways inside itself, every cell wraps within the screen. ``formats`` as :func:`show_table`."""
    import pandas as pd

    formats = formats or {}
    first, rest = df.columns[0], list(df.columns[1:])
    for row in df.itertuples(index=False):
        values = dict(zip(df.columns, row))
        markdown_table(container, pd.DataFrame({first: rest, str(values[first]): [
            formatted(formats[c], values[c]) if c in formats else str(values[c]) for c in rest]}))


def markdown_px(df) -> int:
    """About how wide :func:`markdown_table` draws ``df`` (its columns, not its index) without wrapping a cell: each
    column its widest text (a CJK character twice a Latin one) plus the cell's padding; in presentation mode its
    larger text."""
    def px(text: object) -> int:
        return round(sum(15 if "\u2e80" <= ch <= "\uffef" else 7.5 for ch in str(text)))

    scale = 1.25 if presenting() else 1.0
    return round(sum(max(px(v) for v in [c, *df[c]]) + 26 for c in df.columns) * scale)


def formatted(fmt: str, value: object) -> str:
    """``fmt % value``; an infinite number as the chapter writes it (−∞, ∞), not printf's "-inf"."""
    if isinstance(value, float) and math.isinf(value):
        return "−∞" if value < 0 else "∞"
    return fmt % value


def wrapping_table(rows: list[dict[str, object]], literal: str) -> str:
    """``rows`` as a Markdown table, whose cells wrap (a data grid's do not: its pieces and the text were cut off at
    1280x720): column ``literal`` (the user's text) as code spans, so a URL in it stays text; the rest escaped;
    numbers right-aligned."""
    def cell(column: str, value: object) -> str:
        if column == literal:
            return code_span(str(value)).replace("|", "\\|")
        return md_escape(" ".join(str(value).splitlines()))

    columns = list(rows[0])
    rule = ["---:" if isinstance(rows[0][c], int) else "---" for c in columns]
    lines = ["| " + " | ".join(md_escape(c) for c in columns) + " |", "|" + "|".join(rule) + "|"]
    lines += ["| " + " | ".join(cell(c, row[c]) for c in columns) + " |" for row in rows]
    return "\n".join(lines)
