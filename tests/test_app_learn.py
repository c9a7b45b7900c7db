"""AppTest for the Learn page: a short training runs to completion off the script thread and is drawn."""

from __future__ import annotations

import json
import time

import pytest

from apptest_utils import chart_with, messages, new_app
from attn_core import tokenize

LEARN = "app_pages/learn.py"


pytestmark = pytest.mark.usefixtures("fresh_caches")  # tests/conftest.py


def open_learn():
    at = new_app()
    at.run()
    at.switch_page(LEARN).run()
    assert not messages(at)["exception"], messages(at)
    return at


def progress_text(at) -> str:
    bars = at.get("progress")
    return bars[0].proto.text if bars else ""


def train_to_end(at, timeout: float = 120) -> None:
    """Rerun until the worker reports done (it trains on its own thread between reruns)."""
    deadline = time.monotonic() + timeout
    while not progress_text(at).startswith("done"):
        assert time.monotonic() < deadline, f"training did not finish: {progress_text(at)!r}"
        time.sleep(0.2)
        at.run()
        assert not messages(at)["exception"], messages(at)


def test_learn_page_trains_to_the_end_and_draws_it():
    at = open_learn()
    assert "Press **Start**" in at.info[0].value
    at.selectbox(key="learn_task").set_value("previous")
    at.number_input(key="learn_steps").set_value(40)
    at.selectbox(key="learn_emb").set_value(32)
    at.run()
    at.button(key="learn_start").click().run()
    assert at.selectbox(key="learn_task").disabled  # the recipe is fixed while a model exists
    train_to_end(at)
    at.run()
    assert progress_text(at).startswith("done · step 40 / 40")
    specs = [json.loads(el.proto.spec) for el in at.get("vega_lite_chart")]
    titles = json.dumps(specs)
    assert '"Loss"' in titles and "previous-token" in titles  # loss curve and scores over steps
    table = at.dataframe[0].value
    assert len(table) == 2 * 4 and {"previous-token", "verdict"} <= set(table.columns)
    assert "induction" not in table.columns  # no repeats in this task: the column printed "None"
    assert table["verdict"].str.len().min() > 0
    # the scrubber holds every snapshot: step 0, every 20 steps
    assert list(at.select_slider(key="learn_at").options) == ["0", "20", "40"]
    at.select_slider(key="learn_at").set_value(0).run()
    assert any("step 0**" in m.value for m in at.markdown)
    at.button(key="learn_reset").click().run()
    assert "Press **Start**" in at.info[0].value


def test_learn_page_pauses_resumes_and_resets():
    at = open_learn()
    at.selectbox(key="learn_task").set_value("induction")
    at.run()
    at.button(key="learn_start").click().run()
    job = at.session_state["learn_job"]
    try:
        deadline = time.monotonic() + 60
        while job.trainer.step_count < 2:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        at.button(key="learn_pause").click().run()
        assert job.state == "paused"
        assert progress_text(at).startswith("paused")
        at.button(key="learn_start").click().run()  # the Start button says "Resume" now
        assert job.state in ("running", "done")
        at.button(key="learn_reset").click().run()
        assert job.state == "cancelled" and not job.alive
        assert "learn_job" not in at.session_state
    finally:
        job.cancel()


def test_learn_page_skips_to_the_shipped_model():
    at = open_learn()
    at.selectbox(key="learn_task").set_value("induction").run()
    at.button(key="learn_load").click().run()
    assert not messages(at)["exception"], messages(at)
    assert progress_text(at).startswith("done · step 1000 / 1000")
    assert at.success and "Goal reached" in at.success[0].value
    table = at.dataframe[0].value
    assert (table["verdict"].str.startswith("induction head")).any()
    assert (table["verdict"].str.startswith("previous-token head")).any()
    assert len(at.select_slider(key="learn_at").options) == 21  # the whole history: every 50 steps
    at.select_slider(key="learn_at").set_value("0").run()
    assert at.info and "Goal:" in at.info[0].value  # untrained at step 0: no goal met


@pytest.mark.parametrize("task", ["induction", "induction_fixed", "previous", "first"])
def test_explore_draws_each_trained_model_on_the_sentence(task):
    sentence = "the cat sat on the mat and the cat sat on the mat"
    at = new_app(sentence=sentence, section="Trained")
    at.run()
    assert not messages(at)["exception"], messages(at)
    at.segmented_control(key="explore_weights").set_value(task).run()
    assert not messages(at)["exception"], messages(at)
    rows = chart_with(at, "layer 2 head 4")  # every layer's heads are drawn
    assert {r["panel"] for r in rows} == {f"layer 2 head {h}" for h in range(1, 5)}
    assert max(r["q"] for r in rows) + 1 == len(tokenize(sentence))
    captions = " ".join(c.value for c in at.caption)
    assert "abstract symbols" in captions and "layer 2 head 1:" in captions
    if task == "induction":
        assert "induction head" in captions  # the repeated phrase lights up the trained induction heads


def test_explore_explains_a_sentence_too_long_for_a_trained_model():
    at = new_app(sentence=" ".join(f"w{i}" for i in range(60)), section="Trained")
    at.run()
    at.segmented_control(key="explore_weights").set_value("induction").run()
    assert not messages(at)["exception"]
    assert any("context_length" in w.value for w in at.warning)


def test_three_students_each_see_progress_or_their_place_in_the_queue(monkeypatch):
    """Issue 33 item 3: the third Start on a two-slot server said nothing; now it shows its place and starts itself."""
    import attn_core.labs.jobs as jobs

    monkeypatch.setattr(jobs, "MAX_JOBS", jobs.live_jobs() + 2)  # two free slots, whatever else runs
    apps = [open_learn() for _ in range(3)]
    try:
        for at in apps:
            at.selectbox(key="learn_task").set_value("previous")
            at.number_input(key="learn_steps").set_value(5000)  # runs past the test: its slot stays busy
            at.selectbox(key="learn_emb").set_value(32)
            at.run()
            at.button(key="learn_start").click().run()
            assert not messages(at)["exception"], messages(at)
        first, second, third = apps
        assert progress_text(first).startswith("running") and progress_text(second).startswith("running")
        assert progress_text(third).startswith("queued · place 1 · starts in ")
        assert "number 1 in the queue" in third.info[0].value
        assert third.button(key="learn_leave").label == "Leave queue"
        line = [c.value for c in third.caption if "training slots busy" in c.value]
        assert line and "2 of 2 training slots busy" in line[0] and "1 waiting" in line[0]  # the teacher's line
        # a student in the queue sees the same line on a page without a job of their own
        fourth = open_learn()
        assert any("1 waiting" in c.value for c in fourth.caption)
        # the first student resets: the third starts by itself and, at its next poll, sees its progress
        first.button(key="learn_reset").click().run()
        job = third.session_state["learn_job"]
        deadline = time.monotonic() + 30
        while job.state != "running":
            assert time.monotonic() < deadline, job.state
            time.sleep(0.05)
        third.run()
        assert progress_text(third).startswith("running"), progress_text(third)
        assert third.button(key="learn_pause")
    finally:
        for at in apps:
            if "learn_job" in at.session_state:
                at.session_state["learn_job"].cancel()


def test_a_run_shows_its_time_left_and_the_start_after_the_cap_waits():
    """Issue 41 item 7: three Starts on a busy 2-core server took 5-13 minutes with no estimate; now the slots are
    capped by the cores (the next Start waits with its place) and a run says how long it has left at its own speed."""
    import re

    import attn_core.labs.jobs as jobs

    assert jobs.live_jobs() == 0, "a job of another test is still running"
    apps = [open_learn() for _ in range(jobs.MAX_JOBS + 1)]
    try:
        for at in apps:
            at.selectbox(key="learn_task").set_value("previous")
            at.number_input(key="learn_steps").set_value(5000)  # runs past the test: its slot stays busy
            at.selectbox(key="learn_emb").set_value(32)
            at.run()
            at.button(key="learn_start").click().run()
            assert not messages(at)["exception"], messages(at)
        first, last = apps[0], apps[-1]
        assert progress_text(last).startswith("queued · place 1 · starts in "), progress_text(last)
        job = first.session_state["learn_job"]
        deadline = time.monotonic() + 60
        while job.time_left() is None:
            assert time.monotonic() < deadline, "no speed measured"
            time.sleep(0.05)
        first.run()
        text = progress_text(first)
        assert text.startswith("running · step ") and re.search(r" · (about \d+ (s|min)|under 5 s) left$", text), text
    finally:
        for at in apps:
            if "learn_job" in at.session_state:
                at.session_state["learn_job"].cancel()
