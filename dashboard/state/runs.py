"""Loading the run a page shows, with every problem turned into a message saying what to change."""

from __future__ import annotations

import streamlit as st

from attn_core import BOOK_SENTENCE, MAX_POSITIONS
from attn_core.text.embeddings import uses_book_inputs
from dashboard.state import models
from dashboard.state.compute import Run, cached_tokens, traced_run
from dashboard.state.controls import Settings
from dashboard.state.links import md_escape, plural, sentence


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
        st.warning(f"{len(warnings)} values in the link could not be used:\n\n"
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
        st.error(sentence(e))
        return None
    n = len(tokens)
    if n > MAX_POSITIONS:
        st.error(f"Your text is {n} tokens long; Attention Lab shows up to {MAX_POSITIONS} tokens "
                 f"(GPT-2's context length). Shorten the text by about {n - MAX_POSITIONS} tokens.")
        return None
    if s.pretrained:
        return _pretrained_run(s, cfg, n)
    mode = s.input_mode
    if mode == "book" and not uses_book_inputs([t.id for t in tokens]):
        if note and not quiet:  # one line, not a box: it shows on every page
            st.caption(f":material/info: The book's fixed inputs are its vectors for “{BOOK_SENTENCE}”: your "
                       f"{plural(n, 'token')} get their own learned token + position embeddings (d_in = 3).")
        mode = "learned"
    if cfg.spec.masks and n > cfg.context_length:
        st.error(f"Your text has {n} tokens but context_length is {cfg.context_length}: the causal mask "
                 f"(a {cfg.context_length} x {cfg.context_length} buffer) cannot cover it. The book's code "
                 "would fail with a shape error here.")
        st.button(f"Raise context_length to {n}", key="raise_context", on_click=_set_state,
                  args=("context_length", n), type="primary")
        return None
    if mode == "onehot" and cfg.d_in < len({t.id for t in tokens}):
        distinct = len({t.id for t in tokens})
        st.error(f"One-hot inputs need d_in ≥ the number of distinct tokens ({distinct}); d_in is {cfg.d_in}.")
        st.button(f"Set d_in to {distinct}", key="raise_d_in", on_click=_set_state, args=("d_in", distinct),
                  type="primary")
        return None
    try:
        return traced_run(s.text, mode, cfg)
    except ValueError as e:
        st.error(sentence(e))
        return None


def _pretrained_run(s: Settings, cfg, n: int) -> Run | None:
    """The chosen layer of the pretrained model on the sentence (a progress bar while the model reads it)."""
    name = md_escape(models.label(s.weights))
    try:
        cfg = models.attention_config(s.weights, cfg)
        if n > cfg.context_length:
            st.error(f"Your text is {n} tokens long; {name} has {cfg.context_length} positions. Shorten the text by "
                     f"about {n - cfg.context_length} tokens.")
            return None
        bar = st.empty()

        def progress(fraction: float, words: str) -> None:
            bar.progress(fraction, text=f"{name} reads your sentence: {words}")

        run = models.layer_run(s.text, s.weights, s.layer, cfg, progress)
        bar.empty()
        return run
    except ValueError as e:
        st.error(sentence(e))
        return None
