"""Explore's "Trained" section: the user's sentence through a shipped trained model (Learn page tasks).

Kept apart from the random-weights pipeline on purpose: one call from explore.py draws a section.
"""

from __future__ import annotations

import numpy as np
import streamlit as st

from attn_core.labs import checkpoints
from attn_core.labs.jobs import TrainingJob
from attn_core.labs.learn import TASKS
from attn_core.labs.scores import head_scores, verdicts_msg
from attn_core.models.traced import layer_trace
from attn_core.text.tokens import Token
from attn_core.tracing.views import all_heads
from dashboard.drawing.chart_cache import memo
from dashboard.drawing.matrices import Look, show_panels
from dashboard.drawing.sizes import cap, fit
from dashboard.i18n import N_, _, message
from dashboard.state.links import md_escape

LEARN_JOB = "learn_job"  # where the Learn page keeps this session's training (app_pages/learn.py: JOB)
LABEL = N_("Trained model")  # not "Weights": that is the name of Explore's main section


@st.cache_resource(max_entries=16, show_spinner=False)
def trained_attention(task: str, token_ids: tuple[int, ...]) -> tuple[np.ndarray, list[int]]:
    """(layers, heads, T, T) attention of the shipped ``task`` model on ``token_ids``, and its symbols."""
    trace, symbols = checkpoints.run_trained(task, list(token_ids))
    layers = trace.scopes_of_kind("layer")
    return np.stack([all_heads(layer_trace(trace, sc.index[0]), "weights") for sc in layers]), symbols


def shipped_tasks() -> list[str]:
    """The Learn tasks whose trained model ships with the app, in the Learn page's order. The story model reads
    characters, not the symbols a sentence maps to: it stays on the Learn page."""
    return [t for t in TASKS if t != "verdict" and checkpoints.checkpoint_path(t).exists()]


SESSION = "session"  # the choice of the model trained on the Learn page in this browser session


def session_model() -> TrainingJob | None:
    """The Learn page's training job of this session, once it has taken a step (its model can be read)."""
    job = st.session_state.get(LEARN_JOB)
    return job if job is not None and job.trainer.step_count > 0 and job.trainer.task.name != "verdict" else None


def session_attention(job: TrainingJob, token_ids: tuple[int, ...]) -> tuple[np.ndarray, list[int]]:
    """(layers, heads, T, T) attention of this session's model on ``token_ids`` (remembered per training step)."""
    def run() -> tuple[np.ndarray, list[int]]:
        trace, symbols = checkpoints.run_task_model(job.trainer.model, list(token_ids))
        layers = trace.scopes_of_kind("layer")
        return np.stack([all_heads(layer_trace(trace, sc.index[0]), "weights") for sc in layers]), symbols

    return memo(("session_model", job.uid, job.trainer.step_count, token_ids), run)


def show_trained_weights(tokens: list[Token], labels: list[str]) -> None:
    """A trained model to pick (the first shipped one from the start: the section shows trained heads at once; the
    model trained on the Learn page in this session, when there is one) and every layer's heads on the sentence,
    with a verdict each."""
    shipped = shipped_tasks()
    job = session_model()
    options = ([SESSION] if job is not None else []) + shipped
    if not options:
        st.info(_("No trained model ships with this copy of the app: train one on the **Learn** page."))
        return
    names = {task: _(TASKS[task].title) for task in shipped}
    if job is not None:
        names[SESSION] = _("Yours: {task}, step {step}", task=_(TASKS[job.trainer.task.name].title),
                           step=job.trainer.step_count)
    choice = st.segmented_control(
        _(LABEL), options, default=options[0], key="explore_weights", format_func=names.get,
        help=_("Every other section uses random weights, as the chapter does. These models were trained on the "
               "Learn page's tasks (yours: the one you trained there in this browser session)."))
    if choice is None:  # the picked model was clicked again
        st.info(_("Pick a **trained model** above to see its heads on your sentence (every other section uses "
                  "random weights, as the chapter does)."))
        return
    ids = tuple(t.id for t in tokens)
    if choice == SESSION and job.state == "running":
        st.info(_("Your model is still training on the Learn page: pause it (or let it finish) to look at it here."))
        return
    try:
        weights, symbols = (session_attention(job, ids) if choice == SESSION else trained_attention(choice, ids))
    except ValueError as exc:
        st.warning(_("This trained model cannot read the sentence: {problem}", problem=message(exc)))
        return
    task = job.trainer.task.name if choice == SESSION else choice
    mapping = dict.fromkeys(zip(symbols, (md_escape(t.text) for t in tokens)))
    shown = ", ".join(f"“{piece}” → {sym}" for sym, piece in list(mapping)[:8]) + (" …" if len(mapping) > 8 else "")
    st.caption(_("This model learned the Learn task *{task}* on {vocab} abstract symbols, never on words. Each "
                 "distinct token of your sentence became one symbol in order of first appearance ({shown}), so the "
                 "model sees only which tokens repeat: type a phrase twice to watch its induction heads.",
                 task=_(TASKS[task].title), vocab=TASKS[task].model["vocab_size"], shown=shown))
    n_layers, n_heads = weights.shape[:2]
    scores = head_scores(weights, symbols)
    lines = [_(m) for m in verdicts_msg(scores)]
    for layer in range(n_layers):
        titles = [_("layer {layer} head {head}", layer=layer + 1, head=h + 1) for h in range(n_heads)]
        show_panels(st, list(weights[layer]), titles, labels,
                    look=Look(scale="weights", columns=n_heads, max_px=fit(cap(180), labels, panels=n_heads)),
                    key=f"trained_{layer}",
                    cache_key=("trained", choice, names[choice], ids, layer))
        st.caption(" · ".join(message(line) for line in lines[layer * n_heads:(layer + 1) * n_heads]))
