"""Pure chart builders for polls: data in, an Altair chart out (no Streamlit)."""

from __future__ import annotations

import json
import re

import altair as alt
import pandas as pd

RIGHT, OTHER, PENDING = "#1a9850", "#9e9e9e", "#4575b4"  # colour-blind-safe enough beside the ✓ text marks
TALLY_LABEL_PX = 180  # a tally's choice labels wrap to this width (a phone keeps the rest for the bars)
PHONE_BARS_PX = 220  # a proving row's bars on a phone: with the labels beside them it fits a 360-px screen
BAR_PX = 26  # one bar of a proving row: a finger's width, its value printed at 13 px
PAD = alt.AutoSizeParams(type="pad")  # the sizes given are the plot's
FIT_X = alt.AutoSizeParams(type="fit-x", contains="padding")  # the page's width; the height given is the plot's
# Streamlit's theme hides an axis label whose box touches the next one's (and flushes the end ones): a bar unnamed
NAMED = {"labelOverlap": False, "labelFlush": False, "labelBound": False}
METHOD_BAR_PX = 20  # a masking proof draws a row per method: thinner bars keep the four on about one phone screen


def _lines(text: str, width_px: int, font_px: int) -> list[str]:
    """``text`` in lines about ``width_px`` wide at ``font_px``: broken at spaces, and between CJK characters (a
    Chinese choice has no spaces; each character about twice a Latin letter's width)."""
    lines, line, used = [], "", 0.0
    for piece in re.findall(r"[\u2e80-\uffef][）」』，、。：；]*|[^\s\u2e80-\uffef]+\s*|\s+", text):
        w = sum(font_px if "\u2e80" <= ch <= "\uffef" else 0.55 * font_px for ch in piece)
        if line and used + w > width_px:
            lines.append(line.rstrip())
            line, used = "", 0.0
        line, used = line + piece, used + w
    return [*lines, line.rstrip()] if line.strip() else lines or [""]


def tally_chart(choices: list[str], counts: list[int], answer: int | None = None,
                width: int | None = None, x_title: str = "answers") -> alt.Chart:
    """Horizontal bars, one per choice in the question's order; after the reveal (``answer`` given) the right
    choice is green and marked ✓, the others grey. The counts are written at the bars' ends. ``x_title``: the
    axis's title, in the page's language (a pure builder translates nothing)."""
    total = max(1, sum(counts))
    names = [("✓ " if answer == k else "") + c for k, c in enumerate(choices)]
    frame = pd.DataFrame({"choice": names, "order": range(len(choices)), "count": counts,
                          "share": [n / total for n in counts],
                          "colour": [RIGHT if answer == k else (OTHER if answer is not None else PENDING)
                                     for k in range(len(choices))]})
    # whole labels, wrapped: cut at their limit, "renormalize raw scores (no s…" hid where the choices differ
    lines = max(len(_lines(n, TALLY_LABEL_PX, 14)) for n in names)
    y = alt.Y("choice:N", sort=alt.EncodingSortField("order", op="min"), title=None,
              axis=alt.Axis(labelExpr=f"{json.dumps(dict(zip(names, (_lines(n, TALLY_LABEL_PX, 14) for n in names))))}"
                                      "[datum.label]", labelLimit=TALLY_LABEL_PX + 40, labelFontSize=14, **NAMED))
    x_max = max(1, max(counts)) * 1.2
    bars = alt.Chart().mark_bar().encode(y=y, x=alt.X("count:Q", title=x_title,
                                                          scale=alt.Scale(domain=[0, x_max]),
                                                          axis=alt.Axis(tickMinStep=1, format="d")),
                                         color=alt.Color("colour:N", scale=None),
                                         tooltip=["choice:N", "count:Q", alt.Tooltip("share:Q", format=".0%")])
    text = alt.Chart().mark_text(align="left", dx=4, fontSize=14).encode(y=y, x="count:Q", text="count:Q")
    return alt.layer(bars, text, data=frame).properties(  # the x axis below the bars, not in their height
        width=width or "container", height=max(44, 18 * lines + 10) * len(choices), autosize=PAD if width else FIT_X)


def proof_chart(proof: dict, width: int | None = None) -> alt.Chart | None:
    """The numbers that prove the answer as a heatmap strip: the row of weights (or each head's score) with the
    answer's cell outlined, or one row per masking method, printed to the proof's ``decimals`` (the precision at
    which the answer shows). None when they are not numbers (shapes: a table)."""
    values, labels = proof.get("values") or [], proof.get("labels") or []
    if not values or not all(isinstance(v, int | float) for v in values) or len(values) != len(labels):
        return None
    rows = proof.get("rows") or {proof.get("title", ""): values}
    hi = int(proof.get("highlight", -1))
    frame = pd.DataFrame([{"row": name, "r": r, "label": label, "k": k, "value": float(v),
                           "mark": (k == hi and len(rows) == 1) or name == proof.get("answer_row")}
                          for r, (name, row) in enumerate(rows.items())
                          for k, (label, v) in enumerate(zip(labels, row))])
    lo, top = min(0.0, frame["value"].min()), max(1.0, frame["value"].max())
    x = alt.X("label:N", sort=alt.EncodingSortField("k", op="min"), title=None,
              axis=alt.Axis(labelAngle=-40, labelFontSize=13, orient="top"))
    y = alt.Y("row:N", sort=alt.EncodingSortField("r", op="min"), title=None,
              axis=alt.Axis(labelFontSize=12, labelLimit=260, **NAMED) if len(rows) > 1 else None)
    cells = alt.Chart().mark_rect().encode(
        x=x, y=y, color=alt.Color("value:Q", scale=alt.Scale(scheme="viridis", domain=[lo, top]), legend=None),
        stroke=alt.StrokeValue(None, condition={"test": "datum.mark", "value": "#d7191c"}),
        strokeWidth=alt.StrokeWidthValue(4), tooltip=["row:N", "label:N", alt.Tooltip("value:Q", format=".4f")])
    text = alt.Chart().mark_text(fontSize=13).encode(
        x=x, y=y, text=alt.Text("value:Q", format=f".{int(proof.get('decimals', 2))}f"),
        color=alt.ColorValue("black", condition={"test": f"datum.value < {lo + 0.5 * (top - lo)}", "value": "white"}))
    step = 56 if width is None else max(28, width // max(1, len(labels)))
    return alt.layer(cells, text, data=frame).properties(
        width=alt.Step(step), height=alt.Step(40), title=proof.get("title", ""),
        autosize=alt.AutoSizeParams(type="pad"))


def proof_bars(proof: dict, width: int | None = None) -> alt.Chart | alt.FacetChart | None:
    """The proving row, phone-sized: one horizontal bar per label (the question's row of weights, each head's
    score) in their order, each value printed to the proof's ``decimals``, the answer's bar green and its label
    marked ✓; a masking proof gives one block of bars per method, the answer's green and marked ✓. ``width``: the
    bars' width (None: :data:`PHONE_BARS_PX`), their height :data:`BAR_PX` a row. None when the proof holds no
    numbers (shapes: a table)."""
    values, labels = proof.get("values") or [], proof.get("labels") or []
    if not values or not all(isinstance(v, int | float) for v in values) or len(values) != len(labels):
        return None
    decimals = int(proof.get("decimals", 2))
    many = bool(proof.get("rows"))
    rows = proof["rows"] if many else {"": values}
    hi = int(proof.get("highlight", -1))
    frame = pd.DataFrame([{"row": ("✓ " if name == proof.get("answer_row") else "") + name, "r": r, "k": k,
                           "label": ("✓ " if not many and k == hi else "") + str(label), "value": float(v),
                           "colour": RIGHT if (name == proof.get("answer_row") if many else k == hi) else OTHER}
                          for r, (name, row) in enumerate(rows.items())
                          for k, (label, v) in enumerate(zip(labels, row))])
    lo, top = min(0.0, frame["value"].min()), max(frame["value"].max(), 1e-9) * 1.3  # room for the printed value
    y = alt.Y("label:N", sort=alt.EncodingSortField("k", op="min"), title=None,
              axis=alt.Axis(labelFontSize=13, labelLimit=130, **NAMED))
    x = alt.X("value:Q", title=None, scale=alt.Scale(domain=[lo, top]), axis=None)
    row_px = METHOD_BAR_PX if many else BAR_PX
    bars = alt.Chart().mark_bar(height=row_px - 6).encode(
        y=y, x=x, color=alt.Color("colour:N", scale=None),
        tooltip=[alt.Tooltip("label:N"), alt.Tooltip("value:Q", format=".4f")])
    text = alt.Chart().mark_text(align="left", dx=4, fontSize=13).encode(
        y=y, x=x, text=alt.Text("value:Q", format=f".{decimals}f"))
    height = row_px * len(labels)  # the plot's, from its rows ("pad": a title or an axis adds to it)
    if not many:  # a container's width made the height the whole chart's: 104 px held the title and 4 squeezed bars
        return alt.layer(bars, text, data=frame).properties(width=width or PHONE_BARS_PX, height=height,
                                                            title=proof.get("title", ""), autosize=PAD)
    header = alt.Header(labelAngle=0, labelOrient="top", labelAnchor="start", labelAlign="left", labelFontSize=13,
                        labelLimit=(width or PHONE_BARS_PX) + 130, title=None)
    return alt.layer(bars, text).properties(width=width or PHONE_BARS_PX, height=height).facet(
        data=frame, row=alt.Row("row:N", sort=alt.EncodingSortField("r", op="min"), header=header),
        title=proof.get("title", ""))
