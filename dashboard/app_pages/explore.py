"""Explore: every step of the chosen attention variant on your own sentence.

The steps are sections picked in a row of buttons bound to the link (``?section=Scores``), and only the
chosen one is drawn: a knob turned redraws one section, not seven (issue 11), and each section fits a
1280×720 projector (issue 9). Previous / Next (and a clicker's Page Up / Page Down) walk through them in order.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import streamlit as st

from attn_core.attention.masks import MaskKind
from attn_core.text.tokens import Token
from attn_core.tracing.views import all_heads, kv_head, num_heads
from dashboard.app_pages.explore_view import View, summary
from dashboard.app_pages.explore_weights import uniform_note, weights_section
from dashboard.app_pages.model_view import show_model_view
from dashboard.app_pages.trained_view import show_trained_weights
from dashboard.drawing import scales
from dashboard.drawing.chart_cache import memo
from dashboard.drawing.matrices import Look, show_matrix, show_panels
from dashboard.drawing.present import presenting
from dashboard.drawing.sizes import cap, cell_area, fit, heads_per_row, room, sized_columns
from dashboard.export.slides import page_downloads, slide_settings
from dashboard.i18n import N_, _, lang, ngettext
from dashboard.state import models
from dashboard.state.controls import settings
from dashboard.state.links import error_text, md_escape
from dashboard.state.runs import load_run
from dashboard.state.steppers import section_steps
from dashboard.state.url_state import linked_choice

BYTE_PIECES = N_("The tokenizer has no token for some characters (emoji, many Chinese or Japanese ones): it splits "
                 "them into UTF-8 bytes, several tokens for one character. Each of them names its character and "
                 "which piece it holds: 猫(1/3), 猫(2/3), 猫(3/3); the piece column shows its bytes.")
INPUT_KINDS = {"book": N_("book"), "learned": N_("learned"), "sinusoidal": N_("sinusoidal"), "onehot": N_("one-hot")}
WEIGHTS = N_("Weights")  # the section a new visitor sees: the heart of the chapter
MODEL_VIEW = N_("Model view")  # with pretrained weights: every layer x head, and the next token
# Section ids stay English in the link (?section=Scores); the buttons show them translated.
TOKENS, QKV, SCORES, ALL_HEADS = N_("Tokens"), N_("Q, K, V"), N_("Scores"), N_("All heads")
DROPOUT, OUTPUT, TRAINED = N_("Dropout"), N_("Output"), N_("Trained")


def piece_text(token: Token) -> str:
    """A token's piece as Python writes it (its spaces visible), or its bytes in hex when it holds only part of a
    character (GPT-2 on most Chinese characters): a decoded part would show as �."""
    return repr(token.text) if "\ufffd" not in token.text else "b'" + "".join(f"\\x{b:02x}" for b in token.raw) + "'"


def tokens_section(v: View) -> None:
    left, right = sized_columns([2, 3])
    token_df = pd.DataFrame({_("label"): v.labels, _("id"): [t.id for t in v.run.tokens],
                             _("piece"): [piece_text(t) for t in v.run.tokens]})
    left.dataframe(token_df, hide_index=True, height=min(400, 38 + 35 * v.T), width="stretch")
    if any("\ufffd" in t.text for t in v.run.tokens):  # a token holds part of a character
        left.caption(_(BYTE_PIECES))
    x = v.mat("input", 0)
    dims = [_("dim {i}", i=i + 1) for i in range(x.shape[1])]
    title = (_("Input x: layer {layer}'s input, the {inputs}", layer=v.run.layer + 1, inputs=_(v.run.input_mode))
             if v.run.pretrained else
             _("Input x ({inputs} inputs)", inputs=_(INPUT_KINDS.get(v.run.input_mode, v.run.input_mode))))
    show_matrix(right, x, v.labels, dims, Look(scale="scores", x_title=_("dimension"), y_title=_("token"),
                                               max_px=right.fit(cap(360), v.labels)), key="input", title=title,
                cache_key=(v.run.key, "input", lang()))  # its column labels are words


def qkv_section(v: View) -> None:
    rotated = v.mat("queries_rotated") is not None  # RoPE (the Llama family): the scores read the rotated ones
    if v.kv_heads < v.H:
        kv = kv_head(v.run.trace, v.head) + 1
        panels = [("queries", _("queries")), ("keys", _("keys (K/V head {kv})", kv=kv)),
                  ("values", _("values (K/V head {kv})", kv=kv))]
        if rotated:
            panels += [("queries_rotated", _("queries after RoPE")),
                       ("keys_rotated", _("keys after RoPE (K/V head {kv})", kv=kv))]
    else:
        panels = [("queries", _("queries")), ("keys", _("keys")), ("values", _("values"))]
        if rotated:
            panels += [("queries_rotated", _("queries after RoPE")), ("keys_rotated", _("keys after RoPE"))]
    qkv = [v.mat(k) for k, _title in panels]
    width = qkv[0].shape[1]
    if rotated:
        st.caption(_("Each token's input vector times W_query, W_key and W_value: one row per token, one column per "
                     "output dimension (d_out / num_heads per head). RoPE then turns each pair of dimensions "
                     "(i, i + head_dim/2) of a query or key by its position × θᵢ: the scores use the rotated queries "
                     "and keys; values are not rotated.") if v.H > 1 else
                   _("Each token's input vector times W_query, W_key and W_value: one row per token, one column per "
                     "output dimension (d_out). RoPE then turns each pair of dimensions (i, i + head_dim/2) of a "
                     "query or key by its position × θᵢ: the scores use the rotated queries and keys; values are not "
                     "rotated."))
    else:
        st.caption(_("Each token's input vector times W_query, W_key and W_value: one row per token, one column per "
                     "output dimension (d_out / num_heads per head).") if v.H > 1 else
                   _("Each token's input vector times W_query, W_key and W_value: one row per token, one column per "
                     "output dimension (d_out)."))
    wide = width > 2 * len(v.labels)  # few tokens, many dimensions (a real model's head_dim 64): one panel a row
    if wide:  # each strip its own chart: its own colour scale (on one shared ±5 scale the values were near blank),
        # its token and dimension labels (a grid of panels drops them above 24 columns)
        dims = [f"{i + 1}" for i in range(width)]
        for (kind, title), m in zip(panels, qkv):
            show_matrix(st, m, v.labels, dims, Look(scale="scores", x_title=_("dim"), y_title=_("token"),
                                                    max_px=fit(cap(720), v.labels)),
                        key=f"qkv_{kind}", title=title, name=v.name(f"qkv_{kind}"),
                        cache_key=(v.run.key, "qkv", kind, v.head))
        return
    show_panels(st, qkv, [t for _kind, t in panels], v.labels, [f"{i + 1}" for i in range(width)],
                look=Look(scale="scores", columns=3, x_title=_("dim"), y_title=_("token"),
                          max_px=fit(room(240, 300, 80), v.labels, panels=3)),
                key="qkv", name=v.name("qkv"), cache_key=(v.run.key, "qkv", v.head, rotated))


def scores_section(v: View) -> None:
    mk = v.run.cfg.mask_kind  # what the mask is (causal, window W, ...): attn_core/attention/masks.py words it
    mask_name, mask_where = _(mk.name_msg), _(mk.where_msg)
    score_kinds = [("scores", _("attention scores  q·k")),
                   ("masked_scores", _("masked scores (−∞: {mask})", mask=mask_name)),
                   ("scaled_scores", _("scaled scores  ÷ √d_k"))]
    score_mats = [(title, m) for kind, title in score_kinds if (m := v.mat(kind)) is not None]
    show_panels(st, [m for _, m in score_mats], [t for t, _ in score_mats], v.labels,
                look=Look(scale="scores", columns=3, max_px=fit(room(260, 280, 110), v.labels, panels=len(score_mats))),
                key="scores", name=v.name("scores"),
                cache_key=(v.run.key, "scores", v.head))
    mask = v.mat("mask")
    causal = mk == MaskKind()
    weight_kinds = [("unmasked_weights", _("softmax over all keys")),
                    ("zeroed_weights", _("future zeroed") if causal else _("hidden zeroed")),
                    ("weights", _("÷ row sum = the weights"))]
    renormalized = v.mat("unmasked_weights") is not None
    if renormalized:
        st.caption(_("Diverging colours centred on 0: blue is negative, orange positive. The renormalize method "
                     "masks nothing before softmax: it sees every score, and the hidden keys ({where}) are zeroed "
                     "after it (below).", where=mask_where))
    elif mask is not None:
        st.caption(_("Diverging colours centred on 0: blue is negative, orange positive. Grey cells marked −∞ are "
                     "masked ({mask} mask: {where}).", mask=mask_name, where=mask_where))
    else:
        st.caption(_("Diverging colours centred on 0: blue is negative, orange positive."))
    weight_mats = [(t, m) for kind, t in weight_kinds if (m := v.mat(kind)) is not None] if renormalized else []
    if mask is None:
        return
    c_mask, c_rest = sized_columns([1, 2])
    show_matrix(c_mask, mask, v.labels, v.labels,
                Look(scale="mask", max_px=c_mask.fit(cap(220), v.labels, legend=False)),  # its legend is below
                key="mask", title=_("mask: {mask} (1 = hidden)", mask=mask_name),
                cache_key=(v.run.key, "mask"))
    if weight_mats:
        show_panels(c_rest, [m for _, m in weight_mats], [t for t, _ in weight_mats], v.labels,
                    look=Look(scale="weights", columns=3, max_px=c_rest.fit(cap(220), v.labels, panels=3)),
                    key="renorm_steps", name=v.name("renorm_steps"),
                    cache_key=(v.run.key, "renorm", v.head))
        c_rest.caption(_("Renormalize method: softmax first, zero the future keys, then divide each row by its sum.")
                       if causal else
                       _("Renormalize method: softmax first, zero the hidden keys, then divide each row by its sum."))


def heads_section(v: View) -> None:
    uniform_note(v)
    columns = heads_per_row(v.H, v.kv_heads)
    show_panels(st, memo((v.run.key, "all_heads"), lambda: list(all_heads(v.run.trace, "weights"))),
                [v.head_label(h) for h in range(v.H)], v.labels,
                look=Look(scale=v.wscale, columns=columns, max_px=fit(cap(200), v.labels, panels=columns)),
                key="heads_grid", cache_key=(v.run.key, "heads_grid"))
    if v.kv_heads < v.H:
        st.caption(ngettext("{H} query heads share {n} K/V head ({each} each, side by side): heads with the same "
                            "K/V head read the same keys, yet attend differently, since each has its own queries. "
                            "Pick one above to follow it through every section.",
                            "{H} query heads share {n} K/V heads ({each} each, side by side): heads with the same "
                            "K/V head read the same keys, yet attend differently, since each has its own queries. "
                            "Pick one above to follow it through every section.",
                            v.kv_heads, H=v.H, each=v.H // v.kv_heads))
    else:
        st.caption(_("Each head has its own W_query and W_key, so each attends differently. Pick one above to follow "
                     "it through every section."))


def dropout_section(v: View) -> None:
    cfg = v.run.cfg
    dmask = v.mat("dropout_mask")
    if dmask is None:
        st.info(_("Dropout is off: train_mode is off (eval mode). Turn on **training** and set **dropout** > 0 in "
                  "the sidebar to see it.") if not cfg.train_mode else
                _("Dropout is off: p = 0. Turn on **training** and set **dropout** > 0 in the sidebar to see it."))
        return
    weights, dropped = v.mat("weights"), v.mat("dropped_weights")
    p = cfg.dropout
    top = 1 / (1 - p)
    st.markdown(_("**p = {p}: every surviving weight is multiplied by 1/(1−p) = {top}**, so the colour scale of "
                  "these two panels runs from 0 to {top} (brightest = scaled survivors).", p=format(p, "g"),
                  top=format(top, ".3g")))
    c_dm, c_dw = sized_columns([1, 2])
    show_matrix(c_dm, dmask, v.labels, v.labels, Look(scale="mask", mask_labels=scales.DROPOUT_MASK_LABELS,
                                                      max_px=c_dm.fit(cap(200), v.labels, legend=False)),
                key="dropout_mask", name=v.name("dropout_mask"), title=_("dropped cells (1 = zeroed)"),
                cache_key=(v.run.key, "dropout_mask", v.head))
    show_panels(c_dw, [weights, dropped],
                [_("attention weights"), _("after dropout (survivors × {top})", top=format(top, ".3g"))],
                v.labels, look=Look(scale=scales.weights_scale(top), columns=2,
                                    max_px=c_dw.fit(cap(210), v.labels, panels=2)),
                key="dropout", name=v.name("dropout"),
                cache_key=(v.run.key, "dropout", v.head))
    st.caption(ngettext("{dropped} of {n} non-zero weight zeroed. Row sums now range {low} … {high} (1 on average).",
                        "{dropped} of {n} non-zero weights zeroed. Row sums now range {low} … {high} (1 on average).",
                        int((weights != 0).sum()), dropped=format(dmask.sum(), ".0f"),
                        low=format(dropped.sum(1).min(), ".3f"), high=format(dropped.sum(1).max(), ".3f")))


def output_section(v: View) -> None:
    cfg = v.run.cfg
    ctx = v.mat("context")
    out = v.run.output[0].numpy().astype(np.float64)
    out_shape = tuple(v.run.output.shape)
    c1, c2 = sized_columns(2)
    half = cell_area(c1.px, v.labels)
    vectors = Look(scale="scores", x_title=_("dimension"), y_title=_("token"), max_px=min(cap(380), half),
                   text_format=".3f")  # fixed decimals: no "−4e-3" in a vector
    show_matrix(c1, ctx, v.labels, [f"{i + 1}" for i in range(ctx.shape[1])], vectors, key="context",
                name=v.name("context"),
                title=(_("context vectors (head {head})", head=v.head + 1) if v.H > 1 else _("context vectors")),
                cache_key=(v.run.key, "context", v.head))
    show_matrix(c2, out, v.labels, [f"{i + 1}" for i in range(out.shape[1])], vectors, key="output",
                title=_("output {shape}", shape=out_shape), cache_key=(v.run.key, "output"))
    if v.H > 1:
        st.caption(_("Output width {width}: the heads concatenated, d_out × num_heads = {d_out} × {H}.",
                     width=cfg.output_width, d_out=cfg.d_out, H=v.H) if cfg.output_width != cfg.d_out else
                   _("Output width {width}: the heads merged back to d_out, mixed by out_proj.",
                     width=cfg.output_width))


def trained_section(v: View) -> None:
    show_trained_weights(v.run.tokens, v.labels)


def model_section(v: View) -> None:
    """The pretrained model's heads; with random weights, SmolLM2's (when installed) on the same sentence. The model
    is resolved here once (:func:`models.handle`) and handed to every part of the view."""
    if v.run.pretrained:
        show_model_view(models.handle(v.run.weights), tuple(t.id for t in v.run.tokens), (v.run.layer, v.head),
                        "section", WEIGHTS)
        return
    name = models.default_model(v.run.text)
    try:
        h = models.handle(name)
        ids = tuple(t.id for t in h.tokens(v.run.text))
    except ValueError as e:
        st.error(error_text(e))
        return
    st.caption(_("The sidebar's weights are random: this view shows {model} on your sentence (its own tokens). "
                 "Click a head to switch the Weights to it and open that head in every section.",
                 model=md_escape(h.label)))
    if why := models.why_default(name, v.run.text):
        st.caption(md_escape(why))
    if licence := models.notice(name):
        st.caption(licence)
    show_model_view(h, ids, None, "section", WEIGHTS)


def sections(v: View) -> dict[str, Callable[[View], None]]:
    """The page's sections in the chapter's order, only those this variant has."""
    cfg = v.run.cfg
    real = v.run.pretrained or models.default_model() is not None  # random weights: SmolLM2's view, when installed
    out: dict[str, Callable[[View], None]] = {MODEL_VIEW: model_section} if real else {}
    out[TOKENS] = tokens_section
    if v.mat("queries") is not None:
        out[QKV] = qkv_section
    out[SCORES] = scores_section
    if v.H > 1:
        out[ALL_HEADS] = heads_section
    out[WEIGHTS] = weights_section
    if cfg.spec.uses("dropout"):
        out[DROPOUT] = dropout_section
    out[OUTPUT] = output_section
    out[TRAINED] = trained_section
    return out


def render() -> None:
    """Draw the page. Everything it computes stays local, so nothing outlives the run."""
    s = settings()
    if not presenting():  # the top navigation names the page
        st.title(_("Explore attention"))
    run = load_run(s, note=not presenting())  # presenting: the summary says it, one line less above the charts
    if run is None:
        st.stop()
    slide_settings(run.cfg.variant, len(run.tokens))
    H = num_heads(run.trace)
    head = 0
    if H > 1:
        # presentation mode: the buttons alone ("head 1" … say what they are), one line less above the chart
        head = linked_choice(st.segmented_control, _("Look at one head (every section follows it)"), list(range(H)),
                             "head", 0, lambda h: _("head {head}", head=h + 1), required=True,
                             label_visibility="collapsed" if presenting() else "visible")
    # the toggle is drawn in the sections it colours; a link's value counts before it is first drawn
    relative = st.session_state.get("row_scale", st.query_params.get("row_scale") == "true")
    v = View(s, run, head, H, "relative" if relative else "weights")
    st.markdown(summary(v))
    if not presenting() and "sentence" not in st.query_params:  # a first visit: the sentence was never changed
        st.caption(_("New here? Type your own sentence in the sidebar's **Sentence** box, then go through the "
                     "sections below from left to right, in the chapter's order; **Weights**, the heart of the "
                     "chapter, is open first."))
    parts = sections(v)
    names = list(parts)
    # A row of buttons, one per section, not st.tabs: a tab bar redrawn with every run slowed a sentence change
    # (docs/measurements.md); the page draws only the chosen section either way.
    name = linked_choice(st.segmented_control, _("Section"), names, "section", WEIGHTS, required=True,
                         label_visibility="collapsed", width="stretch")
    name = name if name in parts else WEIGHTS
    if presenting():  # the section's charts first, right under the section buttons; its controls below them
        content = st.container()
        v.top, downloads = section_steps("section", names)
        with content:
            parts[name](v)
    else:
        v.top, downloads = section_steps("section", names)
        parts[name](v)
    page_downloads(downloads, page=f"explore-{name.lower().replace(', ', '')}")


render()
