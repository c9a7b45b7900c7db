"""Explore's Weights section: the chosen head's attention weights beside a clicked cell's story, why random weights
look alike (and the per-row colours), and both masking methods side by side."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import streamlit as st

from attn_core.tracing.views import head_matrix, num_heads
from dashboard.app_pages.explore_view import View, cell_story_text
from dashboard.classroom.ui import ask_the_class
from dashboard.drawing import cells
from dashboard.drawing.chart_cache import memo
from dashboard.drawing.head_view import MAX_LINE_TOKENS, line_view
from dashboard.drawing.matrices import Look, show_matrix, show_panels
from dashboard.drawing.present import dark, ink, presenting
from dashboard.drawing.sizes import cap, column_px, fit, grow, narrow, room, sized_columns
from dashboard.export.slides import draw_chart
from dashboard.i18n import _
from dashboard.state.controls import MASK_NAMES, Settings, colour_map
from dashboard.state.runs import load_run
from dashboard.state.url_state import url_cell

NEAR_UNIFORM = 0.2  # a typical row's largest weight below this: the weights look alike on a 0-1 scale


def relative_toggle(where) -> None:
    # a short label: the long one was cut to "Per-row relative colours (each row divided by its l…" at 1280×720
    where.toggle(_("Relative colours per row"), key="row_scale", bind="query-params",
                 help=_("Each row divided by its largest weight: for long inputs with near-uniform weights. Tooltips "
                        "keep the true values; colours then compare keys within a row, not across rows or charts."))


def uniform_note(v: View) -> None:
    """Why random weights look alike on the 0-1 scale, while the per-row colours are off; and the toggle."""
    # (H, T), head by head: stacking every head's weights first copied them all (docs/measurements.md)
    row_max = memo((v.run.key, "row_max"), lambda: np.stack([np.nanmax(head_matrix(v.run.trace, "weights", h), axis=-1)
                                                             for h in range(v.H)]))
    typical = float(np.median(row_max))
    if typical < NEAR_UNIFORM and v.wscale != "relative" and not v.run.pretrained:
        st.info(_("**Why the weights look alike:** random (untrained) weights spread each query's attention almost "
                  "evenly, about 1/{T} = {share} per key in the last row (a typical row's largest weight is "
                  "{typical}). Turn on **per-row relative colours** to see which keys each row still prefers.",
                  T=v.T, share=format(1 / v.T, ".4f"), typical=format(typical, ".3f")))
    relative_toggle(v.top or st)


STORY_COLUMNS = (3, 2)  # the weights chart beside the cell story


def weights_px(labels: list[str], n_heads: int) -> tuple[int, bool]:
    """The weights chart's ``max_px``, and whether the cell story fits beside it.

    Beside the story (3 : 2 columns) while its cells there hold their values. Otherwise the chart takes the
    column's width and the story goes below it, so the class can read it: in presentation mode the cells keep their
    16 px values up to :data:`cells.TEXT_MAX_TOKENS` tokens even if the matrix then runs past the screen's bottom
    (the sidebar opened, or a 10-token sentence on a narrow projector, drew them 25 px wide and blank, issue 33);
    outside it the values stay up to ~23 tokens, and every token keeps its 13 px label up to ~44 (beside the story a
    44-token chart was 276 px wide: every 4th label and no values, issue 33)."""
    limit = room(480, 285 + (45 if n_heads > 1 else 0))
    if narrow():  # a phone: the story below, the chart as wide as the screen
        return fit(max(limit, cap(640)), labels), False
    side = fit(limit, labels, width_px=column_px(STORY_COLUMNS, 0))
    T = len(labels)
    if not presenting():
        if side >= T * cells.value_cell_px(False, signed=False):
            return side, True
        return max(side, fit(cap(640), labels)), False
    if T > cells.TEXT_MAX_TOKENS:
        return side, True
    need = math.ceil(T * cells.value_cell_px(True, grow(), signed=False))
    if side >= need:
        return side, True
    return fit(max(limit, need), labels), False


@st.fragment
def weights_and_story(s: Settings, head: int, wscale: str) -> None:
    """The weights heatmap and the story of one cell. A fragment: clicking a cell reruns only this (with the
    settings of the page's last full run, which Streamlit keeps with the fragment's arguments)."""
    run = load_run(s, quiet=True)
    if run is None:
        return
    v = View(s, run, head, num_heads(run.trace), wscale)
    labels, T = v.labels, v.T
    weights = v.mat("weights")
    side, beside = weights_px(labels, v.H)
    c_w, c_story = sized_columns(STORY_COLUMNS) if beside else (st.container(), st.container())
    look = Look(scale=wscale, selectable=True, max_px=side, slide_title=v.slide_title(_("attention weights")))
    clicked = show_matrix(c_w, weights, labels, labels, look, key="weights", name=v.name("weights"), zoom=True,
                          cache_key=(run.key, "weights", head))
    if wscale == "relative":
        c_w.caption(_("Per-row relative colours: each row divided by its largest weight (1 = the key this query "
                      "attends to most). Hover for the true weights. Click a cell to see its story."))
    else:
        c_w.caption(_("Fixed 0–1 colour scale ({cmap}), comparable across charts. Click a cell to see its story.",
                      cmap=colour_map()))
    if clicked is not None:  # the clicked cell goes into the link (1-based, validated when read back)
        st.session_state["cell_pick"] = clicked
        st.query_params["cell"] = f"{clicked[0] + 1},{clicked[1] + 1}"
    elif "cell_pick" not in st.session_state:  # a new session: the link may name a cell
        st.session_state["cell_pick"] = url_cell("cell", T, T)
    pick = st.session_state.get("cell_pick")
    if pick is not None and max(pick) >= T:  # from another sentence
        pick = None
    row_sums = weights.sum(axis=1)
    c_w.caption(_("Row sums: min {low}, max {high}.", low=format(row_sums.min(), ".6f"),
                  high=format(row_sums.max(), ".6f")))
    ask_the_class(c_w, "explore", run.trace, labels, head=head, query=pick[0] if pick else None,
                  kinds=("attends_most", "masking", "previous_token_head"), layer=run.layer if run.pretrained else None)
    with c_story:
        if st.toggle(_("Line view of this head"), key="line_view", bind="query-params",
                     help=_("Queries on the left, keys on the right; a line's opacity is the weight. "
                            "Point at a token to keep only its lines.")):
            n_lines = min(T, MAX_LINE_TOKENS)
            line_px = c_story.px if beside else column_px([1], 0)
            draw_chart(st, lambda: line_view(weights[:n_lines, :n_lines], labels, width=line_px - 40,
                                             ink=ink(), line="#8cc4ff" if dark() else "#1f5fa8",
                                             font_px=round((18 if presenting() else 15) * grow())),
                       key="line_view_chart")
            if n_lines < T:
                st.caption(_("Tokens 1–{n} of {T}: more lines than that are a grey fog.", n=n_lines, T=T))
        cell_story_text(v, pick)


def compare_methods(v: View) -> None:
    """Both causal masking methods on the user's sentence and settings, side by side."""
    if not st.toggle(_("Compare both masking methods"), key="compare_methods", bind="query-params",
                     help=_("Run the same module with −∞ before softmax and with renormalize after softmax.")):
        return
    runs = {m: v.run if m == v.run.cfg.mask_method else load_run(v.s, dataclasses.replace(v.run.cfg, mask_method=m),
                                                                  quiet=True)
            for m in MASK_NAMES}
    if any(r is None for r in runs.values()):
        return
    mats = [dataclasses.replace(v, run=r).mat("weights") for r in runs.values()]
    diff = float(np.max(np.abs(mats[0] - mats[1])))
    c_diff, c_note = st.columns([1, 3], vertical_alignment="center")
    c_diff.metric(_("max |difference|"), f"{diff:.1e}", help=_("Float rounding only (float32 epsilon ≈ 1.2e-7)."))
    c_note.caption(_("Same module, same weights, same sentence: the two methods give the same attention weights "
                     "(up to float rounding). Switching the sidebar's method therefore changes nothing you can see."))
    show_panels(st, mats, [_(MASK_NAMES[m]) for m in runs], v.labels, key="compare_methods_pair",
                name=v.name("compare_methods"), look=Look(scale=v.wscale, columns=2,
                                                          max_px=fit(cap(280), v.labels, panels=2)),
                cache_key=(v.run.key, "compare_methods", v.head))


def weights_section(v: View) -> None:
    uniform_note(v)
    weights_and_story(v.s, v.head, v.wscale)
    if v.run.cfg.spec.uses("mask_method") and v.run.cfg.mask_kind.hides_anything:
        compare_methods(v)
