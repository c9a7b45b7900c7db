"""Head scores on hand-made attention, the training tasks, and the step-wise trainer."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from attn_core.labs.jobs import TrainingJob, live_jobs, queue_waits, server_load
from attn_core.labs.learn import IGNORE, TASKS, Trainer, get_task
from attn_core.labs.scores import (
    entropy,
    first_token_score,
    head_scores,
    induction_score,
    induction_targets,
    mean_distance,
    previous_token_score,
    verdicts,
)

T = 8
pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def previous_token_matrix(n: int) -> np.ndarray:
    m = np.zeros((n, n))
    m[0, 0] = 1.0
    m[np.arange(1, n), np.arange(n - 1)] = 1.0
    return m


def test_perfect_previous_token_head_scores_one_and_uniform_scores_one_over_t():
    prev = previous_token_matrix(T)
    uniform = np.full((T, T), 1.0 / T)
    assert previous_token_score(prev) == pytest.approx(1.0)
    assert previous_token_score(uniform) == pytest.approx(1.0 / T)
    assert first_token_score(uniform) == pytest.approx(1.0 / T)
    assert first_token_score(prev) == pytest.approx(1.0 / (T - 1))  # only row 1's previous token is token 0
    assert entropy(uniform) == pytest.approx(np.log(T))
    assert entropy(prev) == pytest.approx(0.0)
    assert mean_distance(prev) == pytest.approx((T - 1) / T)  # row 0 attends to itself
    assert mean_distance(np.eye(T)) == pytest.approx(0.0)


def test_mean_distance_of_stacked_heads_is_the_weighted_mean_of_i_minus_j():
    rng = np.random.default_rng(1)
    w = rng.random((2, 3, 12, 12), dtype=np.float32)  # (layers, heads, T, T), rows not normalised: any weights
    i, j = np.indices((12, 12))
    direct = (w * (i - j)).sum(axis=-1).mean(axis=-1)  # the definition, cell by cell
    assert mean_distance(w) == pytest.approx(direct, abs=1e-4)  # tokens; float32 sums


def test_induction_score_finds_the_token_after_the_earlier_copy():
    tokens = [5, 1, 2, 3, 9, 1, 2, 3]  # "1 2 3" repeats at 5: query 5 (token 1) should look at 2 (after 1)
    assert induction_targets(tokens) == [(5, 2), (6, 3), (7, 4)]
    ideal = np.eye(T)
    for q, k in induction_targets(tokens):
        ideal[q] = 0.0
        ideal[q, k] = 1.0
    assert induction_score(ideal, tokens) == pytest.approx(1.0)
    assert induction_score(previous_token_matrix(T), tokens) == pytest.approx(0.0)
    assert np.isnan(induction_score(np.eye(4), [1, 2, 3, 4]))  # no repeats: undefined, not 0
    with pytest.raises(ValueError):
        induction_score(np.eye(4), [1, 2, 3])


def test_head_scores_per_layer_and_head_and_verdicts():
    tokens = [5, 1, 2, 3, 9, 1, 2, 3]
    uniform = np.tril(np.ones((T, T)))
    uniform /= uniform.sum(-1, keepdims=True)
    weights = np.stack([np.stack([previous_token_matrix(T), uniform]),
                        np.stack([uniform, np.eye(T)])])  # (2 layers, 2 heads, T, T)
    scores = head_scores(weights, tokens)
    assert scores["previous_token"].shape == (2, 2)
    assert scores["previous_token"][0, 0] == pytest.approx(1.0)
    lines = verdicts(scores)
    assert lines[0] == "layer 1 head 1: previous-token head, 1.00"
    assert lines[1].startswith("layer 1 head 2: no clear pattern")
    with pytest.raises(ValueError):
        head_scores(np.zeros((2, 3)))


def task_path():
    from attn_core.labs.learn import VERDICT_PATH
    return VERDICT_PATH


@pytest.mark.parametrize("name", list(TASKS))
def test_task_batches_hold_their_pattern(name):
    task = get_task(name)
    x, y = task.batch(torch.Generator().manual_seed(0), 16)
    V, T_ = task.model["vocab_size"], task.model["context_length"]
    assert x.shape == y.shape == (16, T_)
    assert int(x.min()) >= 0 and int(x.max()) < V
    has_loss = y != IGNORE
    if name == "previous":
        assert torch.equal(y[:, 1:], x[:, :-1]) and not has_loss[:, 0].any()
    elif name == "first":
        assert torch.equal(y, x[:, :1].expand_as(y))
    elif name == "verdict":
        from attn_core.labs.learn import train_split, verdict_chars
        chars, ids = verdict_chars()
        assert torch.equal(y[:, :-1], x[:, 1:]) and has_loss.all()
        text = "".join(chars[i] for i in x[0].tolist())
        story = open(task_path(), encoding="utf-8").read()
        assert story.index(text) + T_ < train_split(ids) + 1  # windows come from the training 90%
        assert story.index("".join(chars[i] for i in task.probe()[0].tolist())) >= train_split(ids)  # held out
        assert task.labels([chars.index(" ")]) == ["0:␣"]
    else:
        offsets = set()
        for r in range(16):
            pos = has_loss[r].nonzero().flatten()
            assert len(pos) == task.segment - 1
            # every target is the next input, and also follows an earlier copy of the same token
            for t in pos.tolist():
                assert y[r, t] == x[r, t + 1]
            start = int(pos[0])
            seg = x[r, start:start + task.segment].tolist()
            earlier = [p for p in range(0, start - task.segment + 1) if x[r, p:p + task.segment].tolist() == seg]
            assert earlier, "the second copy repeats an earlier segment"
            offsets.add(start - earlier[-1])
        assert (len(offsets) > 1) == task.random_offset
    probe = task.probe()
    assert probe.shape == (1, T_)
    if name.startswith("induction"):
        assert len(induction_targets(probe[0].tolist())) == task.segment


def test_trainer_is_deterministic_for_a_seed_and_snapshots_every_n_steps():
    task = get_task("previous")
    runs = []
    for _ in range(2):
        tr = Trainer(task, seed=7, steps=6, snapshot_every=3, model_overrides={"emb_dim": 16, "n_layers": 1})
        tr.run()
        runs.append(tr)
    a, b = runs
    assert a.losses == b.losses
    assert [s.step for s in a.snapshots] == [0, 3, 6]
    assert np.array_equal(a.snapshots[-1].weights, b.snapshots[-1].weights)
    assert a.snapshots[-1].weights.shape == (1, 4, 48, 48)
    other = Trainer(task, seed=8, steps=6, snapshot_every=3, model_overrides={"emb_dim": 16, "n_layers": 1})
    other.run()
    assert other.losses != a.losses
    with pytest.raises(ValueError):
        Trainer(task, steps=0)


def test_induction_task_grows_its_circuit():
    """The real recipe, shortened: the loss falls and the goal scores beat chance (~1/T) clearly."""
    tr = Trainer(get_task("induction"), steps=700)
    tr.run()
    s = tr.snapshots[-1].scores
    assert tr.snapshots[-1].loss < tr.snapshots[0].loss or tr.snapshots[-1].loss < 3.0
    assert s["induction"][1].max() > 0.5
    assert s["previous_token"][0].max() > 0.3


def test_training_job_pauses_resumes_and_cancels():
    tr = Trainer(get_task("previous"), steps=10_000, snapshot_every=5, model_overrides={"emb_dim": 16})
    job = TrainingJob(tr)
    assert job.state == "ready"
    job.start()
    deadline = time.monotonic() + 60
    while tr.step_count < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert job.state == "running" and live_jobs() >= 1
    job.pause()
    time.sleep(0.3)
    paused_at = tr.step_count
    time.sleep(0.3)
    assert tr.step_count == paused_at and job.state == "paused" and not job.alive
    job.resume()
    deadline = time.monotonic() + 60
    while tr.step_count < paused_at + 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert tr.step_count >= paused_at + 3
    job.cancel()
    assert job.state == "cancelled" and not job.alive


def test_training_job_stops_when_nobody_watches():
    tr = Trainer(get_task("previous"), steps=10_000, model_overrides={"emb_dim": 16})
    job = TrainingJob(tr, idle_timeout=0.5)
    job.start()
    deadline = time.monotonic() + 30
    while job.alive and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not job.alive and job.state == "cancelled"


def test_queue_waits_take_the_first_slot_to_free():
    # two slots, the running jobs' remaining times: the first queued starts when the shorter ends, the next when it or
    # the longer one ends
    assert queue_waits([30.0, 10.0], [20.0, 5.0, 5.0], slots=2) == [10.0, 30.0, 30.0]
    assert queue_waits([], [7.0, 7.0, 7.0], slots=2) == [0.0, 0.0, 7.0]  # free slots: no wait
    assert queue_waits([5.0, 8.0, 9.0], [1.0], slots=2) == [8.0]  # over the cap: two must end before one starts
    assert queue_waits([4.0], [], slots=1) == []
    with pytest.raises(ValueError, match="slots"):
        queue_waits([1.0], [1.0], slots=0)


def test_a_full_server_queues_jobs_and_starts_them_when_a_slot_frees(monkeypatch):
    import attn_core.labs.jobs as jobs

    monkeypatch.setattr(jobs, "MAX_JOBS", live_jobs() + 1)
    small = {"emb_dim": 16, "n_layers": 1}
    first = TrainingJob(Trainer(get_task("previous"), steps=10_000, model_overrides=small))
    second = TrainingJob(Trainer(get_task("previous"), steps=10_000, model_overrides=small))
    third = TrainingJob(Trainer(get_task("previous"), steps=10_000, model_overrides=small))
    try:
        first.start()
        second.start()
        third.start()
        assert first.state == "running"
        assert (second.state, second.position(), third.position()) == ("queued", 1, 2)
        assert server_load().waiting == 2 and server_load().running == jobs.MAX_JOBS
        wait_until(lambda: first.trainer.step_count >= 3)  # its speed is measured: the waits follow from it
        w2, w3 = second.wait_estimate(), third.wait_estimate()
        assert 0 < w2 < w3  # the second waits for the first; the third for both
        assert first.wait_estimate() is None
        third.pause()  # leaves the queue
        assert third.state == "ready" and third.position() is None and server_load().waiting == 1
        first.pause()  # a paused job frees its slot: the next in the queue starts by itself
        wait_until(lambda: second.state == "running")
        assert second.position() is None and server_load().waiting == 0
        first.start()  # back into the queue, behind nobody
        assert first.state == "queued" and first.position() == 1
        second.cancel()
        wait_until(lambda: first.state == "running")
    finally:
        for job in (first, second, third):
            job.cancel()


def test_a_queued_job_nobody_watches_loses_its_place(monkeypatch):
    import attn_core.labs.jobs as jobs

    monkeypatch.setattr(jobs, "MAX_JOBS", live_jobs() + 1)
    small = {"emb_dim": 16, "n_layers": 1}
    first = TrainingJob(Trainer(get_task("previous"), steps=10_000, model_overrides=small))
    gone = TrainingJob(Trainer(get_task("previous"), steps=10_000, model_overrides=small), idle_timeout=0.2)
    try:
        first.start()
        gone.start()
        assert gone.state == "queued"
        wait_until(lambda: server_load().waiting == 0)  # its tab closed: the place is given up
        assert gone.state == "cancelled"
    finally:
        first.cancel()
        gone.cancel()


def wait_until(condition, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)
