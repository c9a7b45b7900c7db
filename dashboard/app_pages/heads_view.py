"""Model view's "Does this head matter?": attention weights say where a head looks, not whether what it moves
matters. Four answers, one at a time (each computes only when shown): knock heads out and watch the loss and the
next token; the top heads of a kind vs random heads on words in random order, repeated; α beside α·‖f(x)‖ for one
head; and where a token's information came from across all layers (rollout)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st
import torch.nn as nn

from attn_core.labs.head_question import harmful_head
from attn_core.labs.heads import rollout_of
from attn_core.labs.knockout import KINDS, knockout, repeated_words
from attn_core.messages import both, listed
from dashboard.classroom.ui import ask_question
from dashboard.drawing import heads_charts
from dashboard.drawing.matrices import Look, show_matrix
from dashboard.drawing.sizes import cap, content_px, sized_columns
from dashboard.export.slides import draw_chart
from dashboard.i18n import N_, _, lang, message, ngettext
from dashboard.state import models, readable
from dashboard.state.links import md_escape

PARTS = {"knock": N_("Knock out heads"), "compare": N_("Top heads vs random"), "value": N_("Weigh by value"),
         "rollout": N_("Rollout")}
KIND_NAMES = {"induction": N_("induction"), "previous_token": N_("previous-token"),
              "first_token": N_("first-token (sink)")}
HOW_NAMES = {"zero": N_("zero"), "mean": N_("mean over positions")}
REPEAT_HALF = 50  # the built-in text: this many words of The Verdict in random order, then the same again
MOST_K = 12


@st.cache_data(max_entries=32, show_spinner=False)
def ablation(source: tuple, _handle: models.Handle, ids: tuple[int, ...], heads: tuple[tuple[int, int], ...],
             how: str) -> tuple[np.ndarray, list]:
    """Per-token losses and the top-5 next tokens with ``heads`` knocked out (numbers only: the words are added
    where shown, in the session's language): none read off the sentence's one pass, else one pass of their own.
    Keyed on the model's ``source`` (its files as they are now; ``_handle`` is not hashed: it holds the model)."""
    return models.knocked(_handle, ids, heads, how)


@st.cache_data(max_entries=16, show_spinner=False)
def comparison(source: tuple, _lm: nn.Module, k: int, kind: str) -> dict:
    """The knockout panel's numbers on the built-in text (:func:`repeated_words`, in the model's own tokens)."""
    result = knockout(_lm, repeated_words(_lm.tokenizer, REPEAT_HALF), k, kind)
    return dict(plain=result.plain, top=result.top, top_loss=result.top_loss, random_sets=result.random_sets,
                random_losses=result.random_losses, losses=result.losses)


@st.cache_data(max_entries=16, show_spinner=False)
def weighed(source: tuple, _handle: models.Handle, ids: tuple[int, ...], layer: int,
            head: int) -> tuple[np.ndarray, np.ndarray]:
    """One head's α (T, T) and ‖f_h(x)‖ (T,) from the layer's kept input: one head kept, not the layer's."""
    attn_weights, moved = models.weights_and_moved(_handle, ids, layer)
    return attn_weights[head].numpy().copy(), moved[head].numpy().copy()


@st.cache_data(max_entries=8, show_spinner=False)
def rolled(source: tuple, _handle: models.Handle, ids: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The first and last layers' head-averaged attention and the rollout through every layer (T, T) each."""
    means = models.mean_attention(_handle, ids)
    return means[0].numpy(), means[-1].numpy(), rollout_of(means)[-1].numpy()


def head_label(pair: tuple[int, int]) -> str:
    """A head as the grid numbers it: layer.head, both from 1."""
    return f"{pair[0] + 1}.{pair[1] + 1}"


def runs(numbers: list[int]) -> str:
    """Sorted whole numbers with their runs as ranges: [1, 2, 3, 4, 7] -> "1–4, 7" (Chinese "1–4、7")."""
    parts, start = [], 0
    for i in range(1, len(numbers) + 1):
        if i == len(numbers) or numbers[i] != numbers[i - 1] + 1:
            first, last = numbers[start], numbers[i - 1]
            parts.append(f"{first}–{last}" if last > first else str(first))
            start = i
    return _(listed(parts))


def heads_named(heads: list[tuple[int, int]], n_layers: int, n_heads: int) -> str:
    """The knocked-out heads in a sentence: "all 72 heads", or by layer with runs as ranges ("heads 1–4 of layer 3
    and head 2 of layer 5"): 72 "layer.head" labels in one sentence were unreadable."""
    if len(set(heads)) == n_layers * n_heads:
        return ngettext("all {n} head", "all {n} heads", n_layers * n_heads)
    by_layer: dict[int, list[int]] = {}
    for layer, head in sorted(set(heads)):
        by_layer.setdefault(layer, []).append(head + 1)
    layers = [ngettext("head {heads} of layer {layer}", "heads {heads} of layer {layer}", len(hs), heads=runs(hs),
                       layer=layer + 1) for layer, hs in by_layer.items()]  # outside _(): pybabel extracts it
    return _(both(layers))


def show_heads(h: models.Handle, ids: tuple[int, ...], opened: tuple[int, int] | None) -> None:
    """The section under the grid, for the model of ``h`` on token ids ``ids``; ``opened``: the head the page
    shows."""
    st.markdown("#### " + _("Does this head matter?"))
    st.caption(_("The grid shows where each head looks. A head can look hard at a token and still move almost "
                 "nothing: remove it, or weigh its attention by what it moves, to see whether it matters."))
    part = st.radio(_("Show"), list(PARTS), format_func=lambda p: _(PARTS[p]), horizontal=True, key="heads_part")
    if part != "compare" and len(ids) < 2:
        st.info(_("Type at least two tokens: a loss needs a token and the one after it."))
        return
    pieces = readable.pieces(h, ids)
    try:
        if part == "knock":
            knock_part(h, ids, pieces)
        elif part == "compare":
            compare_part(h)
        elif part == "value":
            value_part(h, ids, pieces, opened)
        else:
            rollout_part(h, ids, pieces)
    except ValueError as e:
        st.error(message(e))


def knock_part(h: models.Handle, ids: tuple[int, ...], pieces: list[str]) -> None:
    cfg = h.cfg
    options = [(layer, head) for layer in range(cfg.n_layers) for head in range(cfg.n_heads)]
    left, right = st.columns([3, 1])
    # Streamlit's own "Select all" is English: a button of ours picks every head
    heads = left.multiselect(_("Heads to knock out (layer.head)"), options, format_func=head_label, key="heads_out",
                             placeholder=_("Pick heads, e.g. the grid's induction heads"), select_all=False)
    left.button(ngettext("Pick all {n} head", "Pick all {n} heads", len(options)), key="heads_out_all",
                on_click=st.session_state.__setitem__, args=("heads_out", options))
    how = right.radio(_("Replace their context vectors by"), list(HOW_NAMES), format_func=lambda h: _(HOW_NAMES[h]),
                      key="heads_how")
    source = h.source
    with st.spinner(_("Running the model without those heads…")):
        plain, top_before = ablation(source, h, ids, (), "zero")
        after, top_after = ablation(source, h, ids, tuple(sorted(heads)), how) if heads else (plain, top_before)
    without = ngettext("without {n} head", "without {n} heads", len(heads))
    losses = {_("every head"): plain} if not heads else {_("every head"): plain, without: after}
    frame = heads_charts.loss_frame(losses, pieces)
    width, titles = min(cap(760), content_px() - 60), (_("token position"), _("loss of this token (nats)"))
    # the spec is built once for its settings and sizes; each sentence swaps in its data (a class: thirty sentences)
    draw_chart(st, lambda: heads_charts.loss_chart(frame, width, *titles), lambda: frame,
               ("heads_loss", tuple(losses), width, titles), (source, ids, tuple(sorted(heads)), how, tuple(losses)),
               key="heads_loss", name="heads_loss", title=_("Per-token loss with and without the heads"))
    if heads:
        st.caption(_("Mean loss over the text: {before:.2f} nats with every head, {after:.2f} without {heads}.",
                     before=float(plain.mean()), after=float(after.mean()),
                     heads=heads_named(heads, cfg.n_layers, cfg.n_heads)))
    else:
        st.caption(_("Mean loss over the text: {before:.2f} nats. Pick heads above to see what changes without them.",
                     before=float(plain.mean())))

    def cells(top: list, closing: dict) -> list[str]:
        return [f"{md_escape(readable.next_piece(h, ids, i, closing.get(i, ())))} ({p:.1%})" for i, p in top]

    st.markdown("**" + _("Next token, top 5") + "**")
    table = {_("every head"): cells(top_before, readable.closing(h, ids, [i for i, _p in top_before]))}
    if heads:  # the full model's continuation would not be the knocked-out one's: a byte piece says its bytes
        table[without] = cells(top_after, {})
    st.table(pd.DataFrame(table, index=pd.RangeIndex(1, 6)))


def compare_part(h: models.Handle) -> None:
    names = [f.name for f in models.found(pretrained=False)]
    names = [h.name] + [n for n in names if n != h.name]
    a, b, c = st.columns([2, 2, 1])
    chosen = a.selectbox(_("Model"), names, format_func=models.label, key="heads_model",
                         help=_("The model of the view; random weights are the control: they have no heads that "
                                "learned anything."))
    kind = b.selectbox(_("Heads to knock out"), list(KINDS), format_func=lambda k: _(KIND_NAMES[k]), key="heads_kind")
    k = c.number_input(_("How many"), 1, MOST_K, 6, key="heads_k")
    with st.spinner(_("Knocking out the top heads, then three random sets…")):
        other = h if chosen == h.name else models.handle(chosen)  # the view's model is resolved already
        result = comparison(other.source, other.lm, int(k), kind)
    st.caption(_("The text: {n} words of The Verdict (the book's story) in random order, then the same {n} again. "
                 "On the repeat, a model that copies can predict every token; its loss there says how much the heads "
                 "that copy carry.", n=REPEAT_HALF))
    names_ = [_("every head"), _("without the top {k}", k=k)] + [_("without random set {i}", i=i + 1)
                                                                   for i in range(len(result["random_losses"]))]
    losses = [result["plain"], result["top_loss"], *result["random_losses"]]
    frame = heads_charts.ratio_frame(names_, losses)
    width = min(cap(760), content_px() - 60)
    draw_chart(st, lambda: heads_charts.ratio_chart(frame, width, _("loss on the repeat (nats)")),
               key="heads_ratio", name="heads_knockout", title=_("Top heads vs random heads"))
    st.markdown(_("Without the top {k} {kind} heads ({heads}), the loss on the repeat goes from {plain:.2f} to "
                  "{top:.2f} nats ({ratio:.1f}×); without {k} random heads, {low:.2f} to {high:.2f}.",
                  k=k, kind=_(KIND_NAMES[kind]), heads=", ".join(head_label(pair) for pair in result["top"]),
                  plain=result["plain"], top=result["top_loss"], ratio=result["top_loss"] / result["plain"],
                  low=min(result["random_losses"]), high=max(result["random_losses"])))
    lm = other.lm
    ask_question(st, "heads", _("Which head, knocked out alone, hurts the repeat most?"),
                 lambda: harmful_head(lm, repeated_words(lm.tokenizer, REPEAT_HALF)),
                 _("The choices: the strongest induction, previous-token and first-token heads and one other head. "
                   "The answer is measured by knocking each out when you ask."))


def _pick(key: str, default: int) -> None:
    """A widget's first value, set once (a default given to the widget each run would reset it)."""
    if key not in st.session_state:
        st.session_state[key] = default


def token_choice(label: str, key: str, pieces: list[str], container=st) -> int:
    _pick(key, len(pieces) - 1)
    if st.session_state[key] >= len(pieces):
        st.session_state[key] = len(pieces) - 1
    return container.selectbox(label, range(len(pieces)), key=key,
                               format_func=lambda i: f"{i + 1}: {pieces[i]}")


def value_part(h: models.Handle, ids: tuple[int, ...], pieces: list[str], opened: tuple[int, int] | None) -> None:
    cfg = h.cfg
    layer0, head0 = opened if opened and 0 <= opened[0] < cfg.n_layers and 0 <= opened[1] < cfg.n_heads else (0, 0)
    _pick("heads_vlayer", layer0)
    _pick("heads_vhead", head0)
    a, b, c = st.columns(3)
    layer = a.selectbox(_("Layer"), range(cfg.n_layers), format_func=lambda i: str(i + 1), key="heads_vlayer")
    head = b.selectbox(_("Head"), range(cfg.n_heads), format_func=lambda i: str(i + 1), key="heads_vhead")
    query = token_choice(_("Query token"), "heads_vquery", pieces, c)
    with st.spinner(_("Running the model up to that layer…")):
        alpha, moved = weighed(h.source, h, ids, int(layer), int(head))
    weighted = alpha * moved[None, :]
    shares = weighted / np.maximum(weighted.sum(axis=-1, keepdims=True), 1e-30)  # each row: the share of what moves
    labels = [f"{i + 1}: {p}" for i, p in enumerate(pieces)]
    left, right = sized_columns(2)
    look = Look(scale="weights", max_px=min(cap(380), left.px))
    key = (h.source, ids, int(layer), int(head), lang())
    show_matrix(left, alpha, labels, labels, look, key="heads_alpha", name="heads_alpha",
                title=_("α: attention weights"), cache_key=(*key, "alpha"))
    show_matrix(right, shares, labels, labels, look, key="heads_moved", name="heads_moved",
                title=_("α·‖f(x)‖: share of what moves"), cache_key=(*key, "moved"))
    j = int(np.argmax(alpha[query]))
    st.markdown(_("Token {j} ({piece}) takes {alpha:.0%} of the attention of token {i}, {moved:.0%} of what moves.",
                  j=j + 1, piece=md_escape(pieces[j]), i=query + 1, alpha=float(alpha[query, j]),
                  moved=float(shares[query, j])))
    st.caption(_("‖f(x)‖ is the size of what the head adds to the residual stream from each token: its value vector "
                 "times the head's slice of the output projection (Kobayashi et al. 2020)."))


def rollout_part(h: models.Handle, ids: tuple[int, ...], pieces: list[str]) -> None:
    n_layers = h.cfg.n_layers
    query = token_choice(_("Where did this token's information come from?"), "heads_rquery", pieces)
    with st.spinner(_("Running every layer…")):
        first, last, rollout = rolled(h.source, h, ids)
    rows = {_("layer 1, heads averaged"): first[query, :query + 1],
            _("layer {n}, heads averaged", n=n_layers): last[query, :query + 1],
            _("rollout through all {n} layers", n=n_layers): rollout[query, :query + 1]}
    frame = heads_charts.sources_frame(rows, pieces)
    width = min(cap(760), content_px() - 60)
    draw_chart(st, lambda: heads_charts.sources_chart(frame, width, _("token position"), _("share")),
               key="heads_rollout", name="heads_rollout", title=_("Where a token's information came from"))
    j = int(np.argmax(rollout[query, :query + 1]))
    st.markdown(_("After all {n} layers, token {i} draws {share:.0%} from token {j} ({piece}) by rollout; the last "
                  "layer's own attention gives that token {raw:.0%}.", n=n_layers, i=query + 1,
                  share=float(rollout[query, j]), j=j + 1, piece=md_escape(pieces[j]), raw=float(last[query, j])))
    st.caption(_("Rollout (Abnar & Zuidema 2020): each layer's attention averaged over its heads, half of it kept "
                 "for the residual stream (0.5·A + 0.5·I), multiplied layer by layer."))
