"""Colours and colour scales of the cell charts: what a value's colour means (weights 0-1, scores around 0, a 0/1
mask), the cells outside a scale, legend titles and categorical colours. Pure: data in, Altair out; no Streamlit."""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import numpy as np

from dashboard.i18n import N_, ngettext
from dashboard.state.settings_schema import SCHEMA

DEFAULT_COLOUR_MAP = str(SCHEMA["cmap"].default)  # the sidebar's Colour map: ids are Vega scheme names

MASK_GREY = "#d0d0d0"
# A 0/1 mask's two colours (0, 1): 1 in the ink of the page, 0 close to its paper, on either theme. On the dark
# page the light theme's near-white 0 cells were a white block and the dark 1 swatch vanished into the page.
MASK_RANGE = ("#f7f7f7", "#404040")
MASK_RANGE_DARK = ("#2f333d", "#e6e6e6")
# Colour-blind-safe schemes of signed values and masks (Vega's blue-orange and greys), whatever the colour map.
SCHEMES = {"scores": "blueorange", "values": "blueorange", "mask": "greys"}
# what the colour encodes, by scale (shown through _(): "size" said nothing of what is encoded)
LEGEND_TITLES = {"weights": N_("weight"), "scores": N_("value"), "mask": N_("mask"), "relative": N_("÷ row max"),
                 "magnitude": N_("|difference|")}
# Cells outside a sequential scale's 0..top (a mistaken mask's negative or > 1 "weights") in colours viridis never
# takes: clamped, they looked like 0 or 1. OUT_OF_RANGE_TOL keeps float rounding (a weight of 1.0000001) in range.
BELOW_RANGE, ABOVE_RANGE = "#d62728", "#e377c2"  # red, pink
OUT_OF_RANGE_TOL = 1e-6
# What a 0/1 mask's two values mean, as its legend's two entries (a gradient would claim values in between).
MASK_LABELS = (N_("0 = visible"), N_("1 = hidden"))  # the causal mask
DROPOUT_MASK_LABELS = (N_("0 = kept"), N_("1 = zeroed"))


# A weight of 0 in words, by scheme: what a masked key's weight (0 after the softmax) is drawn in, for captions.
ZERO_COLOUR_NAMES = {"viridis": N_("dark purple"), "cividis": N_("dark blue")}


def zero_colour_name(cmap: str = DEFAULT_COLOUR_MAP) -> str:
    """The colour a weight of 0 is drawn in on the colour map ``cmap``, in words (English, to show through ``_()``)."""
    return ZERO_COLOUR_NAMES.get(cmap, N_("the colour of 0"))


def scale_parts(scale: str) -> tuple[str, float]:
    """A scale name and its top: "weights" (0-1), "weights:2" (0-2, dropout's scaled survivors),
    "relative" (each row divided by its largest value, 0-1), "magnitude:N" (sizes ≥ 0, sequential
    0-N), "scores", "mask"."""
    kind, __, top = scale.partition(":")
    return kind, float(top) if top else 1


def weights_scale(top: float = 1.0) -> str:
    """The scale name for weights that reach ``top`` (e.g. 1/(1-p) after dropout)."""
    return "weights" if top <= 1.0 else f"weights:{top:g}"


def mask_range(dark: bool = False) -> list[str]:
    """The colours of a mask's 0 and 1 on the light or the dark page."""
    return list(MASK_RANGE_DARK if dark else MASK_RANGE)


def color_scale(scale: str, dark: bool = False, cmap: str = DEFAULT_COLOUR_MAP) -> alt.Scale:
    """Weights: fixed sequential 0-1 (0 to 1/(1-p) after dropout; per-row 0-1 when "relative") in the colour map
    ``cmap`` (viridis or cividis). Masks: 0/1 greys. Scores: diverging, centred on 0; :func:`symmetric_domain` makes
    it symmetric.

    No scale depends on the data's values, so one chart spec serves any data of its shape."""
    kind, top = scale_parts(scale)
    if kind in ("weights", "relative", "magnitude"):
        return alt.Scale(scheme=cmap, domain=[0, top])
    if scale == "mask":
        return alt.Scale(domain=[0, 1], range=mask_range(dark))
    return alt.Scale(scheme=SCHEMES["scores"], domainMid=0)


def diverging(scale: str) -> bool:
    """Whether ``scale`` is drawn on the diverging colours (every scale but weights, sizes and masks)."""
    return scale_parts(scale)[0] not in ("weights", "relative", "magnitude", "mask")


def out_of_range_note(matrix: np.ndarray, scale: str) -> str:
    """A line naming the colours of the cells outside a sequential scale (empty when none is): for a caption right
    under the chart, as the legend's gradient cannot show them."""
    kind, top = scale_parts(scale)
    if diverging(scale) or kind in ("mask", "relative"):
        return ""
    m = np.asarray(matrix, dtype=np.float64)
    below, above = int((m < -OUT_OF_RANGE_TOL).sum()), int((m > top + OUT_OF_RANGE_TOL * top).sum())
    top_text = f"{top:g}"
    if below and above:
        return ngettext("Outside the colour scale (0 to {top}): red = below 0 ({n} cell); pink = above {top} "
                        "({above}).", "Outside the colour scale (0 to {top}): red = below 0 ({n} cells); pink = above "
                        "{top} ({above}).", below, top=top_text,
                        above=ngettext("{n} cell", "{n} cells", above))
    if below:
        return ngettext("Outside the colour scale (0 to {top}): red = below 0 ({n} cell).",
                        "Outside the colour scale (0 to {top}): red = below 0 ({n} cells).", below, top=top_text)
    if above:
        return ngettext("Outside the colour scale (0 to {top}): pink = above {top} ({n} cell).",
                        "Outside the colour scale (0 to {top}): pink = above {top} ({n} cells).", above, top=top_text)
    return ""


def colour_conditions(scale: str) -> list[dict]:
    """The colour channel's conditions: a masked cell grey, and on a sequential scale a cell below 0 or above its
    top in :data:`BELOW_RANGE` / :data:`ABOVE_RANGE` (no data in the spec: one spec still serves any data)."""
    conditions = [{"test": "datum.masked", "value": MASK_GREY}]
    kind, top = scale_parts(scale)
    if not diverging(scale) and kind not in ("mask", "relative"):
        conditions += [{"test": f"datum.color < {-OUT_OF_RANGE_TOL}", "value": BELOW_RANGE},
                       {"test": f"datum.color > {top + OUT_OF_RANGE_TOL * top}", "value": ABOVE_RANGE}]
    return conditions


def symmetric_domain(scale: str, title: str, groupby: Sequence[str] = ()) -> alt.Chart:
    """An invisible layer (two points without position, one per panel and end) whose colours are -m and +m,
    m = max |value| of the unmasked cells: the layered chart's shared colour scale then spans [-m, m].

    A diverging scale fitted to the data with ``domainMid=0`` stretches each side of 0 separately: +0.16 came
    out as dark as -0.80. A fixed domain in the spec would make the spec depend on the data (a new Vega view
    per sentence, docs/measurements.md); computed by Vega from the data, the spec stays the same. It has no data
    of its own: it reads the layered chart's (see :func:`layered`)."""
    return (alt.Chart().transform_filter("!datum.masked")
            .transform_aggregate(lo="min(color)", hi="max(color)", groupby=list(groupby))
            .transform_calculate(top="max(abs(datum.lo), abs(datum.hi))", bottom="-max(abs(datum.lo), abs(datum.hi))")
            .transform_fold(["bottom", "top"], as_=["end", "color"])
            .mark_point(filled=True, opacity=0, size=0, tooltip=False)  # unfilled points: a legend of symbols
            .encode(color=alt.Color("color:Q", scale=color_scale(scale), title=title)))


def legend_format(scale: str) -> dict:
    """A diverging legend's labels to two decimals: its ends are ±max |value| (0.87 was labelled "1")."""
    return {"format": ".2~f"} if diverging(scale) else {}


# Is a cell's colour light, so that black text reads on it? One rule for every scale: Vega looks up the colour
# the cell is drawn in (a layered or faceted chart's shared colour scale is named "color") and compares its
# relative luminance with 0.179, where black and white text have the same contrast (WCAG: (L+0.05)/0.05 =
# 1.05/(L+0.05)). Viridis and cividis turn light about halfway up; blue-orange is dark at both ends.
LIGHT_CELL = "luminance(scale('color', datum.color)) > 0.179"

# Colour-blind-friendly categorical colours (Tableau 10, then its lighter partners): distinct up to 20.
_CATEGORICAL = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
                "#9c755f", "#bab0ac", "#a0cbe8", "#ffbe7d", "#ff9d9a", "#86bcb6", "#8cd17d", "#f1ce63",
                "#d4a6c8", "#fabfd2", "#d7b5a6", "#79706e"]


def distinct_colors(n: int) -> list[str]:
    """``n`` different colours (up to 20; beyond that they repeat, so callers show at most 20 groups)."""
    return [_CATEGORICAL[i % len(_CATEGORICAL)] for i in range(n)]
