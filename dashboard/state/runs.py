"""Loading the run a page shows, with every problem turned into a message saying what to change."""

from __future__ import annotations

import streamlit as st

from attn_core import BOOK_SENTENCE, MAX_POSITIONS
from attn_core.text.embeddings import uses_book_inputs
from dashboard.i18n import _, ngettext
from dashboard.state import models
from dashboard.state.compute import Run, cached_tokens, traced_run
from dashboard.state.controls import Settings
from dashboard.state.links import error_text, md_escape


def _set_state(key: str, value: object) -> None:
    st.session_state[key] = value


def show_messages(s: Settings) -> None:
    """The settings' messages; several warnings (a link with many bad values) as one box listing them, not a stack
    of boxes over the first screen (issue 33: eight)."""
    warnings = [text for level, text in s.messages if level == "warning"]
    for level, text in s.messages:
        if level != "warning" or len(warnings) == 1:
            getattr(st, level)(text)
    if len(warnings) > 1:
        st.warning(_("{n} values in the link could not be used:", n=len(warnings)) + "\n\n"
                   + "\n".join(f"- {text}" for text in warnings))


def load_run(s: Settings, cfg=None, *, quiet: bool = False, note: bool = True) -> Run | None:
    """The traced run for the sidebar settings, or None after explaining what to change.

    ``quiet``: a second run on the same page (another method, dropout on) repeats no notes. ``note``: say that the
    book's inputs were not used (a page whose summary says it passes False)."""
    cfg = cfg or s.cfg
    if not quiet:
        show_messages(s)
    try:
        tokens = cached_tokens(s.text)
    except ValueError as e:
        st.error(error_text(e))
        return None
    n = len(tokens)
    if n > MAX_POSITIONS:
        st.error(_("Your text is {n} tokens long; Attention Lab shows up to {limit} tokens (GPT-2's context "
                   "length). Shorten the text by about {extra} tokens.", n=n, limit=MAX_POSITIONS,
                   extra=n - MAX_POSITIONS))
        return None
    if s.pretrained:
        return _pretrained_run(s, cfg, n)
    mode = s.input_mode
    if mode == "book" and not uses_book_inputs([t.id for t in tokens]):
        if note and not quiet:  # one line, not a box: it shows on every page
            st.caption(":material/info: " + ngettext(
                "The book's fixed inputs are its vectors for “{book}”: your {n} token gets its own learned token "
                "+ position embedding (d_in = 3).",
                "The book's fixed inputs are its vectors for “{book}”: your {n} tokens get their own learned token "
                "+ position embeddings (d_in = 3).", n, book=BOOK_SENTENCE))
        mode = "learned"
    if cfg.spec.masks and n > cfg.context_length:
        st.error(_("Your text has {n} tokens but context_length is {length}: the causal mask (a {length} x {length} "
                   "buffer) cannot cover it. The book's code would fail with a shape error here.", n=n,
                   length=cfg.context_length))
        st.button(_("Raise context_length to {n}", n=n), key="raise_context", on_click=_set_state,
                  args=("context_length", n), type="primary")
        return None
    if mode == "onehot" and cfg.d_in < len({t.id for t in tokens}):
        distinct = len({t.id for t in tokens})
        st.error(_("One-hot inputs need d_in ≥ the number of distinct tokens ({distinct}); d_in is {d_in}.",
                   distinct=distinct, d_in=cfg.d_in))
        st.button(_("Set d_in to {n}", n=distinct), key="raise_d_in", on_click=_set_state, args=("d_in", distinct),
                  type="primary")
        return None
    try:
        return traced_run(s.text, mode, cfg)
    except ValueError as e:
        st.error(error_text(e))
        return None


def _pretrained_run(s: Settings, cfg, n: int) -> Run | None:
    """The chosen layer of the pretrained model on the sentence (a progress bar while the model reads it)."""
    name = md_escape(models.label(s.weights))
    try:
        cfg = models.attention_config(s.weights, cfg)
        if n > cfg.context_length:
            st.error(_("Your text is {n} tokens long; {model} has {length} positions. Shorten the text by about "
                       "{extra} tokens.", n=n, model=name, length=cfg.context_length, extra=n - cfg.context_length))
            return None
        bar = st.empty()

        def progress(fraction: float, words: str) -> None:
            bar.progress(fraction, text=_("{model} reads your sentence: {words}", model=name, words=words))

        run = models.layer_run(s.text, s.weights, s.layer, cfg, progress)
        bar.empty()
        return run
    except ValueError as e:
        st.error(error_text(e))
        return None
