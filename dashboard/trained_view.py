"""Explore's "Trained" section: the user's sentence through a shipped trained model (Learn page tasks).

Kept apart from the random-weights pipeline on purpose: one call from explore.py draws a section.
"""

from __future__ import annotations

import numpy as np
import streamlit as st

from attn_core import checkpoints
from attn_core.gpt import layer_trace
from attn_core.learn import TASKS
from attn_core.scores import head_scores, verdicts
from attn_core.tokens import Token
from attn_core.views import all_heads

from .links import md_escape
from .matrices import show_panels
from .sizes import cap, fit

LABEL = "Trained model"  # not "Weights": that is the name of Explore's main section


@st.cache_resource(max_entries=16, show_spinner=False)
def trained_attention(task: str, token_ids: tuple[int, ...]) -> tuple[np.ndarray, list[int]]:
    """(layers, heads, T, T) attention of the shipped ``task`` model on ``token_ids``, and its symbols."""
    trace, symbols = checkpoints.run_trained(task, list(token_ids))
    n_layers = len(trace.scopes())
    return np.stack([all_heads(layer_trace(trace, i), "weights") for i in range(n_layers)]), symbols


def shipped_tasks() -> list[str]:
    """The Learn tasks whose trained model ships with the app, in the Learn page's order. The story model reads
    characters, not the symbols a sentence maps to: it stays on the Learn page."""
    return [t for t in TASKS if t != "verdict" and checkpoints.checkpoint_path(t).exists()]


def show_trained_weights(tokens: list[Token], labels: list[str]) -> None:
    """A trained model to pick (the first shipped one from the start: the section shows trained heads at once)
    and every layer's heads on the sentence, with a verdict each."""
    shipped = shipped_tasks()
    if not shipped:
        st.info("No trained model ships with this copy of the app: train one on the **Learn** page.")
        return
    choice = st.segmented_control(
        LABEL, shipped, default=shipped[0], key="explore_weights", format_func=lambda k: TASKS[k].title,
        help="Every other section uses random weights, as the chapter does. These models were trained on the "
             "Learn page's tasks.")
    if choice is None:  # the picked model was clicked again
        st.info(f"Pick a **{LABEL.lower()}** above to see its heads on your sentence (every other section uses "
                "random weights, as the chapter does).")
        return
    try:
        weights, symbols = trained_attention(choice, tuple(t.id for t in tokens))
    except ValueError as exc:
        st.warning(f"This trained model cannot read the sentence: {exc}")
        return
    mapping = dict.fromkeys(zip(symbols, (md_escape(t.text) for t in tokens)))
    shown = ", ".join(f"“{piece}” → {sym}" for sym, piece in list(mapping)[:8])
    st.caption(
        f"This model learned the Learn task *{TASKS[choice].title}* on {TASKS[choice].model['vocab_size']} abstract "
        f"symbols, never on words. Each distinct token of your sentence became one symbol in order of first "
        f"appearance ({shown}{' …' if len(mapping) > 8 else ''}), so the model sees only which tokens repeat: "
        "type a phrase twice to watch its induction heads.")
    n_layers, n_heads = weights.shape[:2]
    scores = head_scores(weights, symbols)
    lines = verdicts(scores)
    for layer in range(n_layers):
        show_panels(st, list(weights[layer]), [f"layer {layer + 1} head {h + 1}" for h in range(n_heads)], labels,
                    key=f"trained_{layer}", scale="weights", columns=n_heads,
                    max_px=fit(cap(180), labels, panels=n_heads),
                    cache_key=("trained", choice, tuple(t.id for t in tokens), layer))
        st.caption(" · ".join(lines[layer * n_heads:(layer + 1) * n_heads]))
