"""Book walkthrough: sections 3.3 to 3.6.2 with the book's own numbers, then with your sentence."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from attn_core import BOOK_TOKENS, embed
from attn_core.walkthrough import book_walkthrough, dropout_ok
from dashboard.compute import EMBEDDING_SEED, cached_tokens
from dashboard.controls import settings
from dashboard.links import md_escape
from dashboard.widgets import memo, sentence, stepper


def agrees(step) -> bool | None:
    return dropout_ok(step) if step.key == "dropout" else step.agrees


def show(value, labels: list[str]) -> None:
    """A tensor as a small table; token axes are labelled with the tokens."""
    v = value.detach().float().numpy()
    if v.ndim == 0:
        st.markdown(f"`{v:.4f}`")
        return
    v2 = v.reshape(1, -1) if v.ndim == 1 else v
    n = len(labels)
    df = pd.DataFrame(v2)
    if v2.shape[0] == n:
        df.index = labels
    if v2.shape[1] == n:
        df.columns = labels
    st.dataframe(df.style.format("{:.4f}", na_rep="nan"), width="content")


BOOK_LABELS = [f"{i + 1}: {w}" for i, w in enumerate(BOOK_TOKENS)]


def render() -> None:
    """Draw the page. Everything it computes stays local, so nothing outlives the run."""
    s = settings()
    st.title("Book walkthrough: chapter 3, step by step")
    st.caption("The book's fixed inputs for “Your journey starts with one step” (6 tokens × 3 numbers), the book's "
               "seeds, and the values it prints. A ✓ means our code reproduces the print to 4 decimals.")
    steps = memo(("walkthrough",), book_walkthrough)


    summary = pd.DataFrame({"section": [x.section for x in steps], "step": [x.title for x in steps],
                            "matches the book": ["✓ yes" if agrees(x) else "✗ no" for x in steps]})
    with st.expander(f"All {len(steps)} checks: {sum(bool(agrees(x)) for x in steps)} of {len(steps)} agree",
                     expanded=False):
        st.dataframe(summary, hide_index=True, width="stretch")

    i = stepper("walk_step", [f"§{x.section} {x.title}" for x in steps])
    step = steps[i]
    st.header(f"§{step.section} · {step.title}")
    st.markdown(step.explanation)
    st.code(step.code, language="python")


    ok = agrees(step)
    c1, c2 = st.columns(2)
    with c1:
        st.markdown("**Our code computes**")
        show(step.value, BOOK_LABELS)
    with c2:
        st.markdown("**The book prints**")
        if step.printed is not None:
            show(step.printed, BOOK_LABELS)
        else:
            st.markdown(f"_(no fixed print: {step.check})_")
    if ok:
        diff = step.max_abs_diff
        st.success(f"Agrees with the book ({step.check})" + (f": max |difference| {diff:.1e}." if diff is not None
                                                               else "."), icon=":material/check_circle:")
    else:
        st.error(f"Does not agree with the book ({step.check}).", icon=":material/cancel:")

    # Now with your sentence ---------------------------------------------------------------------------------
    st.subheader("Now with your sentence")
    text = s.text
    try:
        tokens = cached_tokens(text)
    except ValueError as e:
        st.warning(sentence(e))
        st.stop()
    if len(tokens) > 64:
        st.info(f"Your sentence has {len(tokens)} tokens; the walkthrough uses its first 64.")
        tokens = tokens[:64]
    ids = tuple(t.id for t in tokens)
    # The sidebar's book inputs exist only for a 6-token sentence; otherwise 3-d learned embeddings.
    mode = "book" if s.input_mode == "book" and len(ids) == 6 else "learned"
    x = memo(("walk_inputs", ids, mode), lambda: embed(list(ids), 3, mode, seed=EMBEDDING_SEED)[0])
    mine = memo(("walk_mine", ids, mode), lambda: book_walkthrough(x))[i]
    how = ("the book's fixed 3-d inputs (the sidebar's choice), so the numbers match the book's above"
           if mode == "book" else "3-d learned token + position embeddings (seed 123)")
    st.caption(f"Your tokens get {how}, then the same code runs: "
               + ", ".join(md_escape(t.label) for t in tokens[:12]) + (" …" if len(tokens) > 12 else ""))
    value = mine.value.detach().float().numpy()
    show(mine.value, [t.label for t in tokens])
    if np.isnan(value).any() and step.key != "overflow":
        st.warning("Some values are NaN: check the step's explanation.")


render()
