"""Explore's "Model view" with pretrained weights: every layer x head as a thumbnail with its head type (a click
opens that head in every section), and the model's next-token probabilities after the sentence."""

from __future__ import annotations

import base64
from collections import Counter

import numpy as np
import pandas as pd
import streamlit as st

from attn_core.labs.scores import HEAD_TYPES, head_type, verdict_msg
from dashboard.app_pages.heads_view import show_heads
from dashboard.drawing import grid_charts, screen
from dashboard.drawing.chart_cache import memo
from dashboard.drawing.present import presenting
from dashboard.drawing.sizes import cap, column_px, content_px, grow
from dashboard.export.slides import draw_chart
from dashboard.i18n import _, lang, message, ngettext
from dashboard.state import models, readable
from dashboard.state.controls import colour_map
from dashboard.state.links import error_text, md_escape

GRID_KEY = "model_grid"
GRID_WIDTHS = [2, 1]  # the grid | the toggle and the next-token table
GRID_ROOM_PX = 520  # the grid's cells at most this tall at 1280x720: with its axis and legend, one screen
READABLE_PX = 32  # a head's cell at least this, where the width allows (smaller thumbnails could not be read)


def repeated(ids: tuple[int, ...], limit: int) -> tuple[int, ...]:
    """The tokens twice (their first ``limit // 2`` when twice would not fit the model's positions)."""
    half = ids[:limit // 2]
    return half + half


def _open_head(section_key: str, section: str, name: str) -> None:
    """The model view was clicked: that model's layer and head, open in every section (the link follows)."""
    picked = (st.session_state[GRID_KEY].selection or {}).get("head_pick") or []
    if picked:
        st.session_state["model"] = name
        st.session_state["layer"] = int(picked[0]["layer"])
        st.session_state["head"] = int(picked[0]["head"]) - 1
        st.session_state[section_key] = section


def transposed(n_layers: int, n_heads: int) -> bool:
    """Lay the layers along x, the heads along y: for a deep model with few heads (SmolLM2: 30 x 9), whose layers
    as rows would leave cells of 8 px."""
    return n_layers > 2 * n_heads


def grid_layout(n_layers: int, n_heads: int) -> tuple[int, bool]:
    """A head's cell in the grid, and whether the grid sits beside the next-token table (else it takes the whole
    width, the table below it). The cells are as tall as the room below the page's top allows, and at least
    :data:`READABLE_PX` where the width allows: a deep model (SmolLM2's 30 layers along x) beside the table got
    cells too small to read, in half the width."""
    if transposed(n_layers, n_heads):
        n_layers, n_heads = n_heads, n_layers  # rows are heads, columns layers
    beside = (column_px(GRID_WIDTHS, 0) - cap(60)) // n_heads
    full = (content_px() - cap(60)) // n_heads
    # every layer above the fold: the cells start ~310 px down on the projector, ~420 px with the page's title and
    # head picker, and the legend takes ~75 px under them
    top = 310 if presenting() else 420
    tall = min(cap(GRID_ROOM_PX), round((screen.BASE_HEIGHT - top - 75) * grow())) // n_layers
    want = max(tall, cap(READABLE_PX))
    if beside >= min(want, full):
        return max(8, min(beside, want)), True
    return max(8, min(full, want)), False


def show_model_view(h: models.Handle, ids: tuple[int, ...], opened: tuple[int, int] | None, section_key: str,
                    open_section: str) -> None:
    """The grid of every head of the model of ``h`` (made once where the page starts: every part below reads it) on
    token ids ``ids`` (with the sentence repeated when the toggle says) and the next-token table; ``opened``: the
    (layer, head) the other sections show, framed."""
    context = min(h.cfg.context_length, models.MAX_POSITIONS)
    px, beside = grid_layout(h.cfg.n_layers, h.cfg.n_heads)
    if beside:
        left, right = st.columns(GRID_WIDTHS)
        toggle_box = right
    else:  # the toggle above the grid, the table under it
        toggle_box, left, right = st.container(), st.container(), st.container()
    again = toggle_box.toggle(_("Repeat the sentence"), key="repeat_sentence", bind="query-params",
                         help=_("The tokens twice, so induction heads show: on the second copy, an induction head "
                                "looks at the token that followed the same token in the first copy."))
    shown = repeated(ids, context) if again else ids
    bar = left.empty()
    label = md_escape(h.label)  # a folder's name, in Markdown

    def progress(fraction: float, words: str) -> None:
        bar.progress(fraction, text=_("{model}: every head, {step}", model=label, step=message(words)))

    try:
        view = models.model_view(h, shown, progress)
    except ValueError as e:
        bar.empty()
        left.error(error_text(e))
        return
    bar.empty()
    n_layers, n_heads = view.thumbs.shape[:2]
    view_key = (h.source, shown)
    types, lines = memo((view_key, "verdicts", lang()), lambda: verdicts(view))
    flip = transposed(n_layers, n_heads)
    opened = opened or (-1, -1)  # plain values in the lambdas below: the export keeps them
    cmap = colour_map()
    url = memo((view_key, "grid_png", cmap), lambda: "data:image/png;base64," + base64.b64encode(
        grid_charts.model_grid_png(view.thumbs, transpose=flip, cmap=cmap)).decode())
    with left:
        draw_chart(st, lambda: grid_charts.model_grid(n_layers, n_heads, px, big=presenting(), transpose=flip),
                   lambda: grid_charts.model_grid_frame(url, types, lines, opened, transpose=flip),
                   ("model_grid", n_layers, n_heads, px, presenting(), grow(), flip),
                   (view_key, "grid", lang(), cmap, *opened), key=GRID_KEY, selectable=True, selection="head_pick",
                   on_select=lambda: _open_head(section_key, open_section, h.name), name="model_view",
                   title=_("{model}: every head on the sentence", model=h.label))
    with right:
        next_token_table(h, ids)
    counts = Counter(types.ravel().tolist())
    frames = " · ".join(_("{n} {head_type}", n=n, head_type=_(kind)) for kind, n in counts.most_common())
    values = dict(model=label, T=view.T, pool=view.pooled, frames=frames)
    if again and view.pooled > 1:
        text = _("Every layer × head of {model} on the sentence twice ({T} tokens); each thumbnail is max-pooled over "
                 "{pool}×{pool} blocks, weights on the fixed 0–1 scale. Frames: {frames}. Hover for a head's "
                 "verdict; click one to open it in every section.", **values)
    elif again:
        text = _("Every layer × head of {model} on the sentence twice ({T} tokens), weights on the fixed 0–1 scale. "
                 "Frames: {frames}. Hover for a head's verdict; click one to open it in every section.", **values)
    elif view.pooled > 1:
        text = ngettext("Every layer × head of {model} on {n} token; each thumbnail is max-pooled over {pool}×{pool} "
                        "blocks, weights on the fixed 0–1 scale. Frames: {frames}. Hover for a head's verdict; click "
                        "one to open it in every section.",
                        "Every layer × head of {model} on {n} tokens; each thumbnail is max-pooled over {pool}×{pool} "
                        "blocks, weights on the fixed 0–1 scale. Frames: {frames}. Hover for a head's verdict; click "
                        "one to open it in every section.", view.T, **values)
    else:
        text = ngettext("Every layer × head of {model} on {n} token, weights on the fixed 0–1 scale. Frames: "
                        "{frames}. Hover for a head's verdict; click one to open it in every section.",
                        "Every layer × head of {model} on {n} tokens, weights on the fixed 0–1 scale. Frames: "
                        "{frames}. Hover for a head's verdict; click one to open it in every section.",
                        view.T, **values)
    st.caption(text)
    show_heads(h, shown, opened)


def verdicts(view: models.ModelView) -> tuple[np.ndarray, list[str]]:
    """Each head's type (layers, heads) and its verdict in words, layer by layer."""
    n_layers, n_heads = view.thumbs.shape[:2]
    types = np.array([[HEAD_TYPES[head_type(view.scores, layer, h, view.T)] for h in range(n_heads)]
                      for layer in range(n_layers)])
    return types, [_(verdict_msg(view.scores, layer, h)[1]) for layer in range(n_layers) for h in range(n_heads)]


def next_token_table(h: models.Handle, ids: tuple[int, ...]) -> None:
    """The top next-token probabilities of ``h``'s model after the sentence (softmax of the last position's
    logits)."""
    top = models.next_tokens(h, ids)
    if presenting():  # on the projector: the rows that fit beside the grid, above the fold
        top = top[:7]

    closing = readable.closing(h, ids, [i for i, _p in top])  # a byte piece: named by the character it starts
    st.markdown(_("**Next token** (top {n})", n=len(top)))
    df = pd.DataFrame({_("token"): [md_escape(readable.next_piece(h, ids, i, closing.get(i, ()))) for i, _p in top],
                       _("probability"): [f"{p:.1%}" if p >= 0.001 else f"{p:.2e}" for _i, p in top]},
                      index=pd.RangeIndex(1, len(top) + 1))
    st.table(df)
    st.caption(_("softmax of the last logits: what the model expects after your sentence."))
