"""Learn: train a tiny GPT built from the chapter's MultiHeadAttention and watch its heads form."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from attn_core.labs import checkpoints
from attn_core.labs.jobs import TrainingJob, server_load
from attn_core.labs.learn import TASKS, Trainer, get_task, verdict_chars
from attn_core.labs.scores import SCORE_TITLES, induction_targets
from dashboard.app_pages.trained_view import LEARN_JOB
from dashboard.drawing import cells, heatmaps, learn_charts, rasters, screen
from dashboard.drawing.chart_cache import memo
from dashboard.drawing.present import presenting
from dashboard.drawing.sizes import sized_columns
from dashboard.drawing.text import show_table
from dashboard.export.slides import draw_chart, page_downloads, register_images, slide_settings
from dashboard.i18n import N_, _, lang, message, ngettext
from dashboard.state.controls import colour_map
from dashboard.state.links import md_escape

POLL_S = 1.0  # the live view redraws this often while training runs
QUEUE_POLL_S = 2.0  # a queued job's place is redrawn this often (a small box: cheap for a class of 30 waiting)
JOB = LEARN_JOB  # this session's training, read by Explore's Trained section too
# A job's state as the progress line names it (the keys are the job's own words, never shown untranslated).
STATES = {"ready": N_("ready"), "queued": N_("queued"), "running": N_("running"), "paused": N_("paused"),
          "done": N_("done"), "cancelled": N_("cancelled")}


def load_trained() -> None:
    """Button callback (runs before the script, so the recipe controls can show the model's recipe)."""
    try:
        tr = checkpoints.load(st.session_state["learn_task"])
    except ValueError as exc:
        st.session_state["learn_error"] = exc  # rendered by the run that follows, in its language
        return
    st.session_state.update(learn_layers=tr.config["n_layers"], learn_heads=tr.config["n_heads"],
                            learn_emb=tr.config["emb_dim"], learn_lr=tr.lr, learn_steps=tr.steps)
    st.session_state[JOB] = TrainingJob(tr)
    st.session_state.pop("learn_at", None)


def controls() -> TrainingJob | None:
    """Title, the recipe, Start / Pause / Reset / Trained model; returns the training job (None before Start)."""
    big = presenting()
    if not big:  # on the projector the top navigation names the page: the loss and every head fit one screen
        st.title(_("Learn: watch attention heads form"))
        st.caption(_("A tiny GPT (the book's chapter-4 model) built from the very `MultiHeadAttention` class of the "
                     "other pages trains here, on this machine: its heads start uniform and grow a pattern as the "
                     "loss falls."))

    job: TrainingJob | None = st.session_state.get(JOB)
    locked = job is not None  # the recipe is fixed once a model exists: Reset to change it
    recipe = (st.expander(_("Recipe: task, sizes, learning rate, steps"), expanded=False) if big
              else st.container())
    c1, c2, c3, c4, c5, c6 = recipe.columns([2.6, 0.8, 0.8, 0.9, 1.1, 1.1], vertical_alignment="bottom")
    titles = {k: _(t.title) for k, t in TASKS.items()}  # made in the run: its language (format_func runs later too)
    task_name = c1.selectbox(_("Task"), list(TASKS), format_func=titles.__getitem__, key="learn_task",
                             disabled=locked)
    task = get_task(task_name)
    n_layers = c2.selectbox(_("Layers"), [1, 2, 3], index=[1, 2, 3].index(task.model["n_layers"]), key="learn_layers",
                            disabled=locked)
    n_heads = c3.selectbox(_("Heads"), [1, 2, 4, 8], index=[1, 2, 4, 8].index(task.model["n_heads"]), key="learn_heads",
                           disabled=locked)
    emb_dim = c4.selectbox("emb_dim", [32, 64, 128], index=[32, 64, 128].index(task.model["emb_dim"]),
                           key="learn_emb", disabled=locked)
    lr = c5.select_slider(_("Learning rate"), [1e-3, 3e-3, 1e-2], value=task.lr, key="learn_lr", disabled=locked,
                          format_func=lambda v: f"{v:g}")
    steps = c6.number_input(_("Steps"), 10, 5000, task.steps, step=50, key="learn_steps", disabled=locked)

    state = job.state if job else "ready"
    st.session_state["learn_drawn"] = state  # the live view reruns the page when the state moves on
    # the first button's column holds "Leave queue" with its icon at 1280×720 (at 1 part of 6.8 it read "Leave q…")
    c7, c8, c9, c10 = st.columns([1.35, 1, 1.3, 3.15])
    if state == "queued":
        if c7.button(_("Leave queue"), icon=":material/close:", key="learn_leave", width="stretch"):
            job.pause()
            st.rerun()
    elif state == "running":
        if c7.button(_("Pause"), icon=":material/pause:", key="learn_pause", width="stretch"):
            job.pause()
            st.rerun()
    elif state in ("ready", "paused"):
        if c7.button(_("Start") if state == "ready" else _("Resume"), type="primary", icon=":material/play_arrow:",
                     key="learn_start", width="stretch"):
            if job is None:
                overrides = {"n_layers": n_layers, "n_heads": n_heads, "emb_dim": emb_dim}
                try:
                    job = TrainingJob(Trainer(task, lr=lr, steps=int(steps), model_overrides=overrides))
                except ValueError as exc:
                    st.error(_("Cannot build this model: {problem}", problem=message(exc)))
                    st.stop()
                st.session_state[JOB] = job
            job.start()  # runs now, or waits in the server's queue and starts by itself
            st.rerun()
    c9.button(_("Trained model"), icon=":material/fast_forward:", key="learn_load", width="stretch",
              on_click=load_trained, disabled=job is not None and state == "running",
              help=_("Skip to the end: load the model shipped with the app, trained with this task's recipe "
                     "(`python -m attn_core.labs.checkpoints`), with its whole history."))
    if err := st.session_state.pop("learn_error", None):
        st.error(message(err))
    if c8.button(_("Reset"), icon=":material/restart_alt:", key="learn_reset", width="stretch", disabled=job is None):
        job.cancel()
        del st.session_state[JOB]
        st.session_state.pop("learn_at", None)
        st.rerun()

    if job is not None:
        close_up_controls(c10, job.trainer)
    if big:
        st.caption(_("**{title}.** **What should grow:** {expect}", title=_(task.title), expect=_(task.expect)))
    else:
        st.caption(_("**{title}.** {description} **What should grow:** {expect}", title=_(task.title),
                     description=_(task.description), expect=_(task.expect)))
    if job is None:
        st.info(ngettext("Press **Start** to train. Heads are drawn on a fixed probe input every {every} steps; "
                         "{n} training runs on this server at a time, the others wait in a queue and start by "
                         "themselves.",
                         "Press **Start** to train. Heads are drawn on a fixed probe input every {every} steps; "
                         "{n} trainings run on this server at once, the others wait in a queue and start by "
                         "themselves.", server_load().slots, every=task.snapshot_every))
        st.fragment(run_every=5.0)(server_line)()  # the teacher's view of the class, kept current
        return None
    return job


def close_up_controls(where, tr: Trainer) -> None:
    """The close-up's switch and head, outside the live fragment: a click there reruns the page, because a widget
    inside a fragment that a timer reruns could blank the whole page on a busy server (a Streamlit 1.67 race)."""
    left, right = where.columns([2.4, 1], vertical_alignment="bottom")  # a head is "L1 H1": the switch gets the room
    if left.toggle(_("Look at one head closely"), key="learn_zoom",
                   help=_("Its weights drawn large, with every token id on the axes, under the scores.")):
        n_l, n_h = tr.config["n_layers"], tr.config["n_heads"]
        right.selectbox(_("Head"), [(layer, h) for layer in range(n_l) for h in range(n_h)], key="learn_head",
                        format_func=lambda lh: learn_charts.head_name(*lh))


def server_line() -> None:
    """One line for the teacher: how many trainings run and wait on this server."""
    load = server_load()
    st.caption(ngettext("This server: {running} of {n} training slot busy, **{waiting} waiting** in the queue.",
                        "This server: {running} of {n} training slots busy, **{waiting} waiting** in the queue.",
                        load.slots, running=load.running, waiting=load.waiting),
               help=_("Each training wants a core; the others wait their turn (first come, first served) and start "
                      "by themselves when one ends, pauses or is reset."))


def about(seconds: float) -> str:
    """A wait in words: "under 5 s", "about 40 s", "about 3 min"."""
    if seconds < 5:
        return _("under 5 s")
    if seconds < 90:
        return _("about {seconds} s", seconds=format(seconds, ".0f"))
    return _("about {minutes} min", minutes=format(seconds / 60, ".0f"))


def waiting(job: TrainingJob) -> None:
    """A queued job: its place, an estimated wait, what to do meanwhile (drawn instead of the live view)."""
    place, wait = job.position(), job.wait_estimate()
    if place is None:  # it started (or left) between the page's run and this one
        return
    st.progress(0.0, text=_("queued · place {place} · starts in {wait}", place=place, wait=about(wait or 0.0)))
    st.info(_("**You are number {place} in the queue** ({wait} to wait, from the speed of the trainings now "
              "running). Your training starts by itself when a slot frees: keep this tab open. Meanwhile, "
              "**Trained model** loads the finished model of this task at once.", place=place,
              wait=about(wait or 0.0)))
    server_line()


def live(job: TrainingJob) -> None:
    """Progress, loss, every head on the probe, scores: redrawn while the worker trains.

    Built to be cheap (the worker shares the cores): chart specs are reused (slides.draw_chart), head
    images and score frames are remembered per snapshot, the labelled close-up is drawn only on request."""
    job.touch()
    if job.state != st.session_state.get("learn_drawn"):
        st.rerun()  # started from the queue, paused or ended: redraw the buttons
    if job.state == "queued":
        waiting(job)
        return
    tr = job.trainer
    uid = job.uid
    if job.error:
        st.error(_("Training stopped with an error: {error}. Press Reset and try other settings.", error=job.error))
    if job.state == "cancelled":
        st.info(_("This training stopped because no page watched it for a while (tab closed or hidden). "
                  "Press Reset to start again, or Trained model to load the finished one."))
    snaps = list(tr.snapshots)  # the worker appends; read one consistent copy
    losses = list(tr.losses)
    state = job.state
    shown_state = _(STATES.get(state, state))
    left = job.time_left()  # from the wall time this job's steps took on this server so far
    if losses and left is not None:
        line = _("{state} · step {step} / {steps} · {seconds} s of training · loss {loss} · {left} left",
                 state=shown_state, step=tr.step_count, steps=tr.steps, seconds=format(tr.seconds, ".1f"),
                 loss=format(np.mean(losses[-20:]), ".3f"), left=about(left))
    elif losses:
        line = _("{state} · step {step} / {steps} · {seconds} s of training · loss {loss}", state=shown_state,
                 step=tr.step_count, steps=tr.steps, seconds=format(tr.seconds, ".1f"),
                 loss=format(np.mean(losses[-20:]), ".3f"))
    else:
        line = _("{state} · step {step} / {steps} · {seconds} s of training", state=shown_state,
                 step=tr.step_count, steps=tr.steps, seconds=format(tr.seconds, ".1f"))
    st.progress(tr.step_count / tr.steps, text=line)
    if not presenting() or server_load().waiting:  # the projector's screen is full: the line only when it matters
        server_line()

    snap_steps = [s.step for s in snaps]
    # follow the newest snapshot unless the user scrubbed back
    if state == "running" or st.session_state.get("learn_at") in (None, st.session_state.get("learn_newest")) \
            or st.session_state.get("learn_at") not in snap_steps:
        st.session_state["learn_at"] = snap_steps[-1]
    st.session_state["learn_newest"] = snap_steps[-1]
    at = st.session_state["learn_at"]
    snap = snaps[snap_steps.index(at)]
    table = memo(("learn_table", uid, at, lang()), lambda: learn_charts.score_table(snap.scores))
    n_l, n_h = snap.weights.shape[:2]
    slide_settings(tr.task.name, None, _("{layers} layers, {heads} heads, step {step}", layers=n_l, heads=n_h,
                                         step=at))

    left, right = sized_columns([0.42, 0.58])
    with left:
        height = 270 if presenting() else 300  # the whole chart with its axes: the goal box still fits below
        draw_chart(st, lambda: learn_charts.loss_chart(losses, max_steps=tr.steps, at_step=at, width=320,
                                                       height=height),
                   lambda: learn_charts.loss_frame(losses, at), ("learn_loss", tr.steps, lang()), None,
                   key="learn_loss", name="loss", title=_("Training loss"))
        met = tr.goals_met(snap.scores)
        goals = " · ".join(_("{goal}: best **{best}**", goal=_(g.describe(n_l)),
                             best=format(g.best(snap.scores), ".2f")) for g in tr.task.goals)
        if met:
            st.success(_("Goal reached at this step. {goals}", goals=goals))
        else:
            st.info(_("Goal: {goals}", goals=goals))
    with right:
        if presenting():
            st.markdown(_("**Attention on the probe input, step {step}**", step=at))
        else:
            st.markdown(_("**Attention on the probe input, step {step}** (rows: queries, columns: keys; "
                          "bright = high)", step=at))
        thumbs, cmap = [], colour_map()
        # on the projector every layer's row fits under the ~230 px above it: a thumbnail and its caption a row
        thumb_px = (min(max(48, (screen.BASE_HEIGHT - 400) // n_l - 50), right.px // max(n_h, 4) - 16)
                    if presenting() else "stretch")
        for layer in range(n_l):
            cols = st.columns(max(n_h, 4))
            for h in range(n_h):
                png = memo(("learn_png", uid, at, layer, h, cmap),
                           lambda m=snap.weights[layer, h]: rasters.raster_png(m, "weights", target_px=96,
                                                                               min_side=96, cmap=cmap))
                row = table.iloc[layer * n_h + h]
                caption = _("L{layer} H{head}: {pattern}", layer=layer + 1, head=h + 1, pattern=row["pattern"])
                cols[h].image(png, caption=caption, width=thumb_px)
                thumbs.append((caption, png))
        probe = tr.task.labels(tr.probe_tokens)
        register_images("heads", _("Attention on the probe input, step {step}", step=at), thumbs, scale="weights",
                        matrices=[snap.weights[layer, h] for layer in range(n_l) for h in range(n_h)],
                        row_labels=probe, col_labels=probe, columns=n_h, cmap=cmap)
    st.select_slider(_("Snapshot: scrub back through training"), snap_steps, key="learn_at",
                     disabled=len(snap_steps) < 2 or state == "running",
                     help=_("Pause (or wait for the end) to scrub; while training runs the newest snapshot is "
                            "shown."))
    if tr.task.name == "verdict":
        text = "".join(verdict_chars()[0][t] for t in tr.probe_tokens).replace("\n", " ")
        st.caption(_("Probe: held-out text the model never trained on: “{text}”. A previous-token head is the line "
                     "just below the main diagonal.", text=md_escape(text)))
    elif pairs := induction_targets(tr.probe_tokens):
        st.caption(_("Probe: {n} random tokens; positions {first}–{last} repeat the segment at {start}–{end}. An "
                     "induction head lights up the diagonal from query {query} to key {key}; a previous-token head "
                     "is the line just below the main diagonal.", n=len(tr.probe_tokens), first=pairs[0][0],
                     last=pairs[-1][0], start=pairs[0][1] - 1, end=pairs[-1][1] - 1, query=pairs[0][0],
                     key=pairs[0][1]))
    else:
        st.caption(_("Probe: {n} distinct random tokens. A previous-token head is the line just below the main "
                     "diagonal; a first-token head is a bright first column.", n=len(tr.probe_tokens)))

    # the verdict gets the room ("no clear pattern (entropy 2.60, distance 9.0)" was cut at "entropy 2.88, c…")
    heads = {"layer": _("layer"), "head": _("head"), "verdict": _("verdict")} | {t: _(t) for t in SCORE_TITLES.values()}
    show_table(st, table.drop(columns="pattern").rename(columns=heads), hide_index=True, width="stretch",
               height=38 + 35 * len(table), formats={_(t): "%.2f" for t in SCORE_TITLES.values() if t in table},
               column_config={heads["layer"]: st.column_config.NumberColumn(width="small"),
                              heads["head"]: st.column_config.NumberColumn(width="small"),
                              heads["verdict"]: st.column_config.TextColumn(width="large")})
    st.markdown(_("**Scores over training** (each line one head; the dashed line is the snapshot shown)"))
    scores = [s.scores for s in snaps]
    draw_chart(st, lambda: learn_charts.scores_chart(snap_steps, scores, max_steps=tr.steps, at_step=at),
               lambda: learn_charts.scores_frame(snap_steps, scores, at_step=at), ("learn_scores", tr.steps, lang()),
               (uid, "scores", snap_steps[-1], at, lang()), key="learn_scores", name="head_scores",
               title=_("Head scores over training"))
    if st.session_state.get("learn_zoom") and (pick := st.session_state.get("learn_head")) is not None:
        labels = tr.task.labels(tr.probe_tokens)
        head = snap.weights[pick[0], pick[1]]
        st.markdown(_("**{head} at step {step}**", head=learn_charts.head_name(*pick), step=at))
        # one spec for every snapshot and head (the title is the line above): each poll while training only
        # swaps the data, instead of building a new Vega view every second on cores the worker shares
        n = len(labels)
        draw_chart(st, lambda: heatmaps.heatmap(head, labels, labels, heatmaps.Look(scale="weights", max_px=480,
                                                                                   cmap=cmap)),
                   lambda: heatmaps.heatmap_frame(head, labels, labels, scale="weights"),
                   ("learn_head", cells.spec_signature(n, n, labels, 480, False), lang(), cmap), (uid, at, pick),
                   key="learn_head_chart", name=learn_charts.head_name(*pick).replace(" ", ""),
                   title=_("{head} at step {step}", head=learn_charts.head_name(*pick), step=at),
                   table=lambda: pd.DataFrame(head, index=labels, columns=labels).reset_index(names=""))
    page_downloads(page="learn")


def render() -> None:
    """Draw the page; the live view is a fragment that redraws every second while the model trains (every two
    while it waits in the queue)."""
    job = controls()
    if job is None:
        return
    poll = {"running": POLL_S, "queued": QUEUE_POLL_S}.get(job.state)
    st.fragment(run_every=poll)(live)(job)


render()
