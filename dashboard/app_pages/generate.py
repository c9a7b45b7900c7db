"""Generate: one token at a time with the KV cache, step by step (the book's chapter 4 and its bonus material).

Each press of Next token (or Page Down) appends one token: the text so far with the new token marked, the new
query's attention row over every earlier token (one row per head of the chosen layer, growing to the right), the
KV cache of every layer growing by one with its bytes, the mask slice used, the ten most likely next tokens, and
the same step without the cache (the whole T x T matrix again) with both times measured on this machine. Each step is
worked out in the background while the one before is on screen, so Next only has to draw it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import groupby

import numpy as np
import pandas as pd
import streamlit as st
import torch
import torch.nn as nn

from attn_core.attention.kv_cache import KVCache
from attn_core.models.decoding import (
    PAGE_NEW_TOKENS,
    DecodeStep,
    decode_step,
    fork,
    prefill,
    prefix,
    show_layer,
    text_start,
)
from attn_core.models.family import ModelConfig
from attn_core.text.tokens import open_character
from dashboard.app_pages.generate_controls import Controls, controls
from dashboard.drawing.matrices import Look, show_matrix
from dashboard.drawing.present import presenting
from dashboard.drawing.scales import zero_colour_name
from dashboard.drawing.sizes import cap, fit, room, sized_columns
from dashboard.drawing.text import markdown_table
from dashboard.export.slides import page_downloads, slide_settings
from dashboard.i18n import _, ngettext, sentences
from dashboard.state import models, readable
from dashboard.state.ahead import Ahead
from dashboard.state.controls import colour_map
from dashboard.state.links import error_text, md_escape
from dashboard.state.steppers import NEXT_KEY

STATE = "gen_state"
MAX_NEW = PAGE_NEW_TOKENS  # tokens one generation on this page may add
# A prompt's tokens on this page: every session keeps its cache and one T x T matrix, so a class of 30 on the 124M
# shape stays within the server's memory goal (docs/measurements.md)
PROMPT_TOKENS = 200
PLAY_EVERY_S = 0.6
FULL_CELLS_TOKENS = 24  # the no-cache matrix as labelled cells up to this many tokens, an image above


@dataclass(frozen=True)
class Next:
    """The next step, worked out while the current one is read: what Next token takes."""

    step: DecodeStep
    logits: torch.Tensor
    cache: KVCache
    generator: torch.Generator


@dataclass
class Generation:
    """One session's generation: the tokens so far, the KV cache and the last logits (small: a few MB at most)."""

    key: tuple  # (model, prompt, decoding settings) it was made for
    prompt_len: int
    ids: list[int]
    cache: KVCache
    logits: torch.Tensor
    generator: torch.Generator
    steps: list[tuple[float, float | None]] = field(default_factory=list)  # (cached, uncached) seconds per step
    last: DecodeStep | None = None
    ahead: Ahead[Next] | None = None  # the next step, being worked out


def start(ctl: Controls) -> Generation | None:
    """A new generation from the prompt (the prompt runs through the model once, filling the cache)."""
    model = models.model(ctl.name)
    limit = min(model.cfg["context_length"] - 1, PROMPT_TOKENS)
    try:
        ids = [t.id for t in model.tokenizer.tokens(ctl.prompt)]
    except ValueError as e:
        st.error(error_text(e))
        return None
    if len(ids) > limit:
        st.error(_("Your prompt is {n} tokens long; this page continues prompts of up to {limit} tokens (every "
                   "visitor's KV cache is kept on the server). Shorten it by {over} tokens.", n=len(ids), limit=limit,
                   over=len(ids) - limit))
        return None
    cache = KVCache(model.cfg["n_layers"])
    logits = prefill(model, ids, cache)
    return Generation(ctl.key, len(ids), ids, cache, logits, torch.Generator().manual_seed(ctl.seed))


def next_step(gen: Generation, model: nn.Module, ctl: Controls) -> Next:
    """The step after ``gen``'s text, made on a copy of its cache and of its random generator, so ``gen`` is
    unchanged (its cache becomes views of the copy's first positions: one cache in memory, not two)."""
    cache, generator = fork(gen.cache), torch.Generator().set_state(gen.generator.get_state())
    step, logits = decode_step(model, gen.ids, cache, gen.logits, layer=ctl.layer, temperature=ctl.temperature,
                               top_k=ctl.top_k, generator=generator)
    gen.cache = prefix(cache, len(gen.ids))
    return Next(step, logits, cache, generator)


def look_ahead(gen: Generation, ctl: Controls) -> None:
    """Start working out the next step in the background, unless it is already or the limit is reached."""
    if gen.ahead is None and len(gen.ids) - gen.prompt_len < MAX_NEW:
        model = models.model(ctl.name)
        gen.ahead = Ahead(lambda: next_step(gen, model, ctl))


def advance(ctl: Controls) -> None:
    """Button / Play callback: one more token (before the run, so the page draws the new step): the one worked
    out ahead (waiting for it if it is being worked out), else worked out now."""
    gen: Generation | None = st.session_state.get(STATE)
    if gen is None or len(gen.ids) - gen.prompt_len >= MAX_NEW:
        st.session_state["gen_playing"] = False
        return
    model = models.model(ctl.name)
    pending, gen.ahead = gen.ahead, None
    try:
        ahead = (pending and pending.take()) or next_step(gen, model, ctl)
    except ValueError as e:
        st.session_state["gen_error"] = error_text(e)
        st.session_state["gen_playing"] = False
        return
    gen.cache, gen.logits, gen.generator = ahead.cache, ahead.logits, ahead.generator
    gen.ids.append(ahead.step.token_id)
    gen.steps.append((ahead.step.seconds_cached, ahead.step.seconds_full))
    gen.last = shown_layer(gen, model, ahead.step, ctl.layer)
    if len(gen.ids) - gen.prompt_len >= MAX_NEW:
        st.session_state["gen_playing"] = False


def shown_layer(gen: Generation, model: nn.Module, step: DecodeStep, layer: int) -> DecodeStep:
    """``step`` as seen at ``layer``: traced again when the layer shown changed since it was worked out."""
    return step if step.layer == layer else show_layer(step, model, gen.ids, gen.cache, layer)


def text_so_far(gen: Generation, h: models.Handle) -> str:
    """The text so far as a person reads it (every piece escaped: it is Markdown): decoded as one run of bytes, so
    byte tokens join into their characters, without the BOS the tokenizer put first; the newest token's characters
    marked (one that starts a character still open: :func:`newest`)."""
    tokenizer = h.lm.tokenizer
    shown = gen.ids[text_start(tokenizer, gen.ids):]
    raws = [tokenizer.token_bytes(t) for t in shown]
    if len(gen.ids) == gen.prompt_len or not raws:
        return md_escape(b"".join(raws).decode("utf-8", errors="replace"))
    data = b"".join(raws)
    cut = len(data) - len(raws[-1])
    while cut > 0 and 0x80 <= data[cut] < 0xC0 and len(data) - len(raws[-1]) - cut < 3:  # back to its character's lead
        cut -= 1
    opened = open_character(raws[:-1], raws[-1])
    new = data[cut:].decode("utf-8", errors="replace") if opened is None else newest(gen, h)
    head = data[:cut].decode("utf-8", errors="replace")
    core = new.strip()
    lead = new[:len(new) - len(new.lstrip())]
    return md_escape(head + lead) + marked(md_escape(core) if core else ("⏎" if "\n" in new else "␣"))


def newest(gen: Generation, h: models.Handle) -> str:
    """The newest token as a person reads it: a byte piece that starts a character is named by the character its
    likeliest continuation makes ("猫(1/3)", worked out with its step), else says which of its bytes it holds."""
    closing = gen.last.closing.get(gen.ids[-1], ()) if gen.last is not None else ()
    return readable.next_piece(h, gen.ids[:-1], gen.ids[-1], closing)


def marked(text: str) -> str:
    """The newest token's text, highlighted (no space before it: Chinese has none between words)."""
    return f":orange-background[**{text}**]"


def show_step(gen: Generation, h: models.Handle, layer: int) -> None:
    step = gen.last = shown_layer(gen, h.lm, gen.last, layer)
    pieces = readable.pieces(h, gen.ids)
    pieces[-1] = newest(gen, h)  # a byte piece that starts a character: named by its likeliest continuation
    labels = [f"{i + 1}: {p}" for i, p in enumerate(pieces)]
    H = step.row.shape[0]
    st.markdown(ngettext("**Step {step}: token {position} is “{token}”.** Its query attends over the {n} key in the "
                         "cache, itself included; the mask slice `{mask_slice}` hides {hidden}.",
                         "**Step {step}: token {position} is “{token}”.** Its query attends over all {n} keys in the "
                         "cache, itself included; the mask slice `{mask_slice}` hides {hidden}.", len(gen.ids),
                         step=len(gen.ids) - gen.prompt_len, position=step.position + 1,
                         token=md_escape(pieces[-1]),
                         mask_slice=step.mask_slice, hidden=int(step.mask_row.sum())))
    left, right = sized_columns([3, 2])
    heads = [_("head {head}", head=h + 1) for h in range(H)]
    left.markdown(_("**The new query's attention, layer {layer}**: one row per head", layer=layer + 1))
    # as wide as the column allows; on the projector no taller than the room under the cells' top (~500 px)
    cell_room = room(10_000, 500, 10) // H
    # growing: a third of what Next cost was a new Vega view of this row every step (docs/measurements.md); not on
    # the projector, where the cells' size follows the room's height over T, not the halvings of a growing chart
    show_matrix(left, step.row, heads, labels, Look(
                    scale="weights", x_title=_("key (cached token)"), y_title=_("head"),
                    max_px=min(left.fit(cap(560), heads), cell_room * max(H, len(labels))), growing=not presenting()),
                key="gen_row", name=f"new_row_layer{layer + 1}")
    with right:
        n = 5 if presenting() else len(step.top_ids)  # on the projector: what fits above the fold
        show_candidates(step, h, gen.ids[:step.position], n)
    st.markdown(timing(gen, step))
    c = h.cfg
    st.markdown(_("**The KV cache, every layer** (each layer keeps its own keys and values, each of this shape; it "
                  "grows by one token a step)"))
    bytes_col = _("bytes, each layer")
    markdown_table(st, pd.DataFrame(cache_rows(step.cache_shapes, "num_kv_groups" if c.grouped else "num_heads")),
                   formats={bytes_col: "%d"})
    st.caption(_("In all: {nbytes:,} bytes = {mib:.2f} MiB for {n} tokens (float32; the tensors' own nbytes).",
                 nbytes=step.cache_bytes, mib=step.cache_bytes / 2**20, n=len(gen.ids)) + gqa_note(c))
    if step.full_weights is not None:
        show_full(step, gen, pieces, labels, layer)


def show_candidates(step: DecodeStep, h: models.Handle, before: list[int], n: int) -> None:
    """The distribution the new token was drawn from (this step's, not the next one's): its ``n`` most likely
    tokens after the tokens ``before`` it, read as characters (a byte token names its character), the chosen one
    marked."""
    token_col, prob_col, chosen_col = _("token"), _("probability"), _("chosen")
    # plain text: markdown_table escapes every cell
    top = pd.DataFrame({token_col: [readable.next_piece(h, before, t, step.closing.get(t, ()))
                                   for t in step.top_ids[:n]],
                        prob_col: step.top_probs[:n],
                        chosen_col: ["◀" if t == step.token_id else "" for t in step.top_ids[:n]]})
    if step.token_id in step.top_ids[:n]:
        st.markdown(_("**The {n} most likely tokens at this step**: the distribution the new token was chosen "
                      "from; ◀ marks the chosen one.", n=n))
    else:
        st.markdown(_("**The {n} most likely tokens at this step**: the distribution the new token was chosen "
                      "from; the chosen one, {token}, was sampled from below them.", n=n,
                      token=md_escape(readable.next_piece(h, before, step.token_id))))
    markdown_table(st, top, formats={prob_col: "%.4f"})


def timing(gen: Generation, step: DecodeStep) -> str:
    """One line, not three st.metric boxes: a step's redraw is what a class waits for. This page always compares
    (``decode_step(compare=True)``): every step has both times."""
    cached, full = step.seconds_cached, step.seconds_full
    total_c = sum(c for c, _unused in gen.steps)
    total_f = sum(f for _unused, f in gen.steps if f is not None)
    n = len(gen.steps)
    line = ngettext("**Timed here:** this step took **{ms_cached:.1f} ms** with the KV cache, **{ms_full:.1f} ms** "
                    "without it ({slower:.1f}× slower: every position again) · all {n} step: **{rate:.0f} tokens/s** "
                    "with the cache, {rate_full:.0f} without",
                    "**Timed here:** this step took **{ms_cached:.1f} ms** with the KV cache, **{ms_full:.1f} ms** "
                    "without it ({slower:.1f}× slower: every position again) · all {n} steps: **{rate:.0f} tokens/s** "
                    "with the cache, {rate_full:.0f} without", n, ms_cached=cached * 1e3, ms_full=full * 1e3,
                    slower=full / cached, rate=n / total_c, rate_full=n / total_f)
    return sentences(line, _("(each step is worked out while the one before is on screen, so Next only draws it)"))


def show_full(step: DecodeStep, gen: Generation, pieces: list[str], labels: list[str], layer: int) -> None:
    """The same step without the cache: every row again, the T x T weights of head 1."""
    T = len(gen.ids)
    st.markdown(_("**Without the cache** the model recomputes every row: layer {layer}, head 1, all {T} × {T} "
                  "weights. Its last row is the new query's row above.", layer=layer + 1, T=T))
    # cells with token labels while they are few; above, an image (a new T x T chart every step cost the browser
    # more than the whole rest of the step)
    cells_drawn = T <= FULL_CELLS_TOKENS
    show_matrix(st, step.full_weights, labels, labels, Look(
                    scale="weights", raster=not cells_drawn, max_px=fit(cap(420), labels),
                    x_title=_("keys, tokens 1–{T} left to right", T=T),
                    y_title=_("queries, tokens 1–{T} top to bottom", T=T)),
                key="gen_full", name=f"full_matrix_layer{layer + 1}_head1",
                title=_("Without the cache: attention weights, layer {layer}, head 1", layer=layer + 1))
    # a masked (future) key's weight is exactly 0 after the softmax: drawn in the scale's colour of 0, not grey
    st.caption(_("Top left: token 1 “{first}”; bottom row: the new token {T} “{last}”, the row the cache computed "
                 "alone. Bright = high weight. Above the diagonal the mask hides the future keys: weight 0, shown in "
                 "{zero}.", first=md_escape(pieces[0]), T=T, last=md_escape(pieces[-1]),
                 zero=_(zero_colour_name(colour_map()))))


def cache_rows(shapes: list[tuple[int, ...]], heads: str) -> list[dict]:
    """The cache table: one row per run of layers whose keys have the same shape (every layer of these models:
    one row, not 30 to scroll past on a projector)."""
    rows = []
    for shape, run in groupby(enumerate(shapes, 1), key=lambda pair: pair[1]):
        layers = [i for i, _unused in run]
        rows.append({_("layers"): f"{layers[0]}–{layers[-1]}" if len(layers) > 1 else str(layers[0]),
                     _("keys / values shape (b, {heads}, T, head_dim)", heads=heads): str(shape),
                     _("bytes, each layer"): 2 * int(np.prod(shape)) * 4})  # keys and values, float32
    return rows


def gqa_note(c: ModelConfig) -> str:
    """For grouped-query attention: how much smaller its cache is than multi-head attention's would be."""
    if not c.grouped:
        return ""
    note = " " + _("Grouped-query attention: {n_heads} query heads share {n_kv_heads} K/V heads, so the cache keeps "
                   "{n_kv_heads} heads a layer, {times}× less than multi-head attention would.", n_heads=c.n_heads,
                   n_kv_heads=c.n_kv_heads, times=c.n_heads // c.n_kv_heads)
    return note + (" " + _("The keys are kept after RoPE.") if c.rope else "")


def render() -> None:
    if not presenting():
        st.title(_("Generate: one token at a time, with the KV cache"))
        st.caption(_("A model continues your prompt one token at a time: a real pretrained model when one is "
                     "installed, or the book's GPTModel. With the KV cache each layer keeps the keys and values of "
                     "earlier tokens, so a new token computes only its own."))
    # on the projector the settings fold away: the text, the new row and the candidates fit above the fold
    where = st.expander(_("Prompt and settings"), expanded=False) if presenting() else st.container()
    ctl = controls(where)
    gen: Generation | None = st.session_state.get(STATE)
    if gen is None or gen.key != ctl.key:  # new settings: a new generation from the prompt
        gen = start(ctl)
        st.session_state[STATE] = gen
        st.session_state["gen_playing"] = False
        if gen is None:
            return
    done = len(gen.ids) - gen.prompt_len >= MAX_NEW
    row = st.container(horizontal=True, gap="small")
    row.button(_("Next token ▶"), key="gen_next", on_click=advance, args=(ctl,), type="primary", disabled=done,
               shortcut=NEXT_KEY, help=_("Append one token (Page Down)"))
    playing = st.session_state.get("gen_playing", False)
    row.button(_("Pause") if playing else _("Play"), key="gen_play", disabled=done and not playing,
               on_click=lambda: st.session_state.update(gen_playing=not playing),
               help=_("Append a token every {every:g} s, up to {most} new tokens", every=PLAY_EVERY_S, most=MAX_NEW))
    row.button(_("Reset"), key="gen_reset", on_click=lambda: st.session_state.pop(STATE, None))
    if err := st.session_state.pop("gen_error", None):
        st.error(err)
    if done:
        st.info(_("{most} new tokens: the limit of this page. Press Reset to start again.", most=MAX_NEW))
    slide_settings("generate", len(gen.ids), ctl.name)
    live(gen, ctl)
    page_downloads(page="generate")


def live(gen: Generation, ctl: Controls) -> None:
    """The text and the step; while playing, a fragment that adds a token and redraws itself."""
    playing = st.session_state.get("gen_playing", False)

    def body() -> None:
        if st.session_state.get("gen_playing", False):
            advance(ctl)
            if not st.session_state["gen_playing"]:  # the limit: redraw the buttons, and stop the timer
                st.rerun(scope="app")
        h = models.handle(ctl.name)  # once a redraw: the text, the step and its candidates read it
        st.markdown(text_so_far(gen, h))
        if gen.last is None:
            st.info(ngettext("The prompt is {n} token, all in the cache now. Press **Next token** (or Page Down) to "
                             "generate the next one, or **Play**.",
                             "The prompt is {n} tokens, all in the cache now. Press **Next token** (or Page Down) to "
                             "generate the next one, or **Play**.", gen.prompt_len))
        else:
            show_step(gen, h, ctl.layer)
        look_ahead(gen, ctl)

    st.fragment(run_every=PLAY_EVERY_S if playing else None)(body)()


render()
