"""Learn: train a tiny GPT built from the chapter's MultiHeadAttention and watch its heads form."""

from __future__ import annotations

import numpy as np
import streamlit as st

from attn_core.learn import MAX_JOBS, TASKS, TooManyJobs, Trainer, TrainingJob, get_task
from attn_core.scores import induction_targets
from dashboard import charts, learn_charts
from dashboard.widgets import memo

POLL_S = 0.7  # the live view redraws this often while training runs
JOB = "learn_job"

st.title("Learn: watch attention heads form")
st.caption("A tiny GPT (the book's chapter-4 model) built from the very `MultiHeadAttention` class of the "
           "other pages trains here, on this machine. Its heads start uniform and grow a pattern; the loss "
           "falls when they do.")

job: TrainingJob | None = st.session_state.get(JOB)
locked = job is not None  # the recipe is fixed once a model exists: Reset to change it

c1, c2, c3, c4, c5, c6 = st.columns([3, 1, 1, 1, 1.2, 1.2])
task_name = c1.selectbox("Task", list(TASKS), format_func=lambda k: TASKS[k].title, key="learn_task",
                         disabled=locked)
task = get_task(task_name)
n_layers = c2.selectbox("Layers", [1, 2, 3], index=[1, 2, 3].index(task.model["n_layers"]), key="learn_layers",
                        disabled=locked)
n_heads = c3.selectbox("Heads", [1, 2, 4, 8], index=[1, 2, 4, 8].index(task.model["n_heads"]), key="learn_heads",
                       disabled=locked)
emb_dim = c4.selectbox("emb_dim", [32, 64, 128], index=[32, 64, 128].index(task.model["emb_dim"]),
                       key="learn_emb", disabled=locked)
lr = c5.select_slider("Learning rate", [1e-3, 3e-3, 1e-2], value=task.lr, key="learn_lr", disabled=locked,
                      format_func=lambda v: f"{v:g}")
steps = c6.number_input("Steps", 10, 5000, task.steps, step=50, key="learn_steps", disabled=locked)

st.markdown(f"**What it trains:** {task.description}  \n**What should grow:** {task.expect}")

b1, b2, b3, _ = st.columns([1, 1, 1, 5])
state = job.state if job else "ready"
if state == "running":
    if b1.button("Pause", icon=":material/pause:", key="learn_pause", width="stretch"):
        job.pause()
        st.rerun()
elif state in ("ready", "paused"):
    if b1.button("Start" if state == "ready" else "Resume", type="primary", icon=":material/play_arrow:",
                 key="learn_start", width="stretch"):
        if job is None:
            overrides = {"n_layers": n_layers, "n_heads": n_heads, "emb_dim": emb_dim}
            try:
                job = TrainingJob(Trainer(task, lr=lr, steps=int(steps), model_overrides=overrides))
            except ValueError as exc:
                st.error(f"Cannot build this model: {exc}")
                st.stop()
            st.session_state[JOB] = job
        try:
            job.start()
        except TooManyJobs as exc:
            st.warning(str(exc))
        st.rerun()
if b2.button("Reset", icon=":material/restart_alt:", key="learn_reset", width="stretch", disabled=job is None):
    job.cancel()
    del st.session_state[JOB]
    st.session_state.pop("learn_at", None)
    st.rerun()

if job is None:
    st.info(f"Press **Start** to train. Heads are drawn on a fixed probe input every "
            f"{task.snapshot_every} steps; at most {MAX_JOBS} trainings run on this server at once.")
    st.stop()


def probe_labels(tokens: list[int]) -> list[str]:
    return [f"{i}:{t}" for i, t in enumerate(tokens)]


@st.fragment(run_every=POLL_S if job.state == "running" else None)
def live() -> None:
    """Progress, loss, every head on the probe, scores: redrawn while the worker trains."""
    job.touch()
    tr = job.trainer
    if job.error:
        st.error(f"Training stopped with an error: {job.error}. Press Reset and try other settings.")
    snaps = list(tr.snapshots)  # the worker appends; read one consistent copy
    losses = list(tr.losses)
    state = job.state
    st.progress(tr.step_count / tr.steps,
                text=f"{state} · step {tr.step_count} / {tr.steps} · {tr.seconds:.1f} s of training"
                     + (f" · loss {np.mean(losses[-20:]):.3f}" if losses else ""))
    if state != "running" and st.session_state.get("learn_was_running"):
        st.session_state["learn_was_running"] = False
        st.rerun()  # training ended: redraw the buttons
    st.session_state["learn_was_running"] = state == "running"

    snap_steps = [s.step for s in snaps]
    follow = state == "running" or st.session_state.get("learn_at") not in snap_steps
    if follow:
        st.session_state["learn_at"] = snap_steps[-1]
    at = st.select_slider("Snapshot (scrub back through training)", snap_steps, key="learn_at",
                          disabled=len(snap_steps) < 2 or state == "running",
                          help="Pause to scrub; while training runs the latest snapshot is shown.")
    snap = snaps[snap_steps.index(at)]

    left, right = st.columns([1, 1])
    with left:
        st.altair_chart(learn_charts.loss_chart(losses, max_steps=tr.steps, at_step=at), width="content")
    with right:
        met = tr.goals_met(snap.scores)
        goals = " · ".join(f"{g.describe(len(tr.model.trf_blocks))}: best {g.best(snap.scores):.2f}"
                           for g in tr.task.goals)
        (st.success if met else st.info)(("Goal reached. " if met else "Goal: ") + goals)
        table = learn_charts.score_table(snap.scores)
        st.dataframe(table, hide_index=True, width="stretch", height=min(320, 38 + 35 * len(table)),
                     column_config={c: st.column_config.NumberColumn(format="%.2f")
                                    for c in table.columns if c not in ("layer", "head", "verdict")})

    st.subheader(f"Attention on the probe input at step {at}")
    pairs = induction_targets(tr.probe_tokens)
    if pairs:
        q0, k0 = pairs[0]
        st.caption(f"Probe: {len(tr.probe_tokens)} random tokens (position:id); positions {q0}–{pairs[-1][0]} repeat "
                   f"an earlier segment, so an induction head lights up the diagonal that starts at query {q0}, "
                   f"key {k0}. A previous-token head is the line just below the diagonal.")
    else:
        st.caption(f"Probe: {len(tr.probe_tokens)} distinct random tokens (position:id). Rows are queries, "
                   "columns keys; bright = high weight (0–1).")
    n_l, n_h = snap.weights.shape[:2]
    for layer in range(n_l):
        cols = st.columns(max(n_h, 4))
        for h in range(n_h):
            png = memo(("learn_png", job.uid, at, layer, h),
                       lambda m=snap.weights[layer, h]: charts.raster_png(m, "weights", target_px=192))
            line = learn_charts.score_table(snap.scores).iloc[layer * n_h + h]["verdict"]
            cols[h].image(png, caption=f"layer {layer + 1} head {h + 1}: {line}", width=192)

    st.subheader("Scores over training")
    st.altair_chart(learn_charts.scores_chart(snap_steps, [s.scores for s in snaps], max_steps=tr.steps,
                                              at_step=at), width="content")
    with st.expander("Look at one head closely (with token labels)"):
        pick = st.selectbox("Head", [(layer, h) for layer in range(n_l) for h in range(n_h)], key="learn_head",
                            format_func=lambda lh: learn_charts.head_name(*lh))
        st.altair_chart(charts.heatmap(snap.weights[pick[0], pick[1]], probe_labels(tr.probe_tokens),
                                       probe_labels(tr.probe_tokens), scale="weights", max_px=480),
                        width="content")


live()
