"""Issue 41 item 7: the training slots are capped by the cores (the job after the cap waits its turn), and a running
job's time left follows the speed its own steps measured (a fake clock and a trainer stepped by hand)."""

from __future__ import annotations

import threading
import time

import pytest

import attn_core.labs.jobs as jobs
from attn_core.labs.jobs import TrainingJob, cores, default_slots, live_jobs, server_load


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class HandTrainer:
    """A Trainer's surface for the job: a step happens only when the test allows one, and costs fake seconds."""

    def __init__(self, steps: int, clock: Clock | None = None) -> None:
        self.steps, self.step_count, self.seconds = steps, 0, 0.0
        self.clock = clock
        self._allowed: list[float] = []
        self._lock = threading.Lock()

    @property
    def done(self) -> bool:
        return self.step_count >= self.steps

    def allow(self, n: int, cost: float = 0.0) -> None:
        with self._lock:
            self._allowed += [cost] * n

    def step(self) -> None:
        with self._lock:
            cost = self._allowed.pop(0) if self._allowed else None
        if cost is None:
            time.sleep(0.005)  # nothing allowed yet: the worker waits (and stays cancellable)
            return
        if self.clock is not None:
            self.clock.t += cost
        self.step_count += 1


def wait_until(condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


def test_slots_are_one_per_two_cores_and_at_least_one():
    assert [default_slots(n) for n in (1, 2, 3, 4, 16)] == [1, 1, 1, 2, 8]
    assert jobs.MAX_JOBS == default_slots(cores())  # on the 2-core server: one run at a time
    assert server_load().slots == jobs.MAX_JOBS


def test_the_job_after_the_cap_waits_and_starts_when_a_slot_frees():
    assert live_jobs() == 0, "a job of another test is still running"
    running = [TrainingJob(HandTrainer(100)) for _ in range(jobs.MAX_JOBS)]
    extra = TrainingJob(HandTrainer(100))
    try:
        for job in running:
            job.start()
        assert all(job.state == "running" for job in running)
        extra.start()
        assert extra.state == "queued" and extra.position() == 1
        assert server_load().running == jobs.MAX_JOBS and server_load().waiting == 1
        running[0].pause()  # a slot frees: the one waiting starts by itself
        wait_until(lambda: extra.state == "running")
        assert extra.position() is None and server_load().waiting == 0
    finally:
        for job in [*running, extra]:
            job.cancel()


def test_time_left_follows_the_measured_rate():
    clock = Clock()
    tr = HandTrainer(100, clock)
    job = TrainingJob(tr, clock=clock)
    assert job.time_left() is None  # not started
    try:
        job.start()
        assert job.state == "running" and job.time_left() is None  # nothing measured yet
        tr.allow(2, cost=2.0)
        wait_until(lambda: tr.step_count == 2)
        assert job.time_left() is None  # two steps are too few to tell a speed
        tr.allow(2, cost=2.0)
        wait_until(lambda: tr.step_count == 4)
        assert job.step_seconds() == pytest.approx(2.0)
        assert job.time_left() == pytest.approx(96 * 2.0)
        tr.allow(4, cost=0.5)  # the server got quieter: the rate is the mean over every step so far
        wait_until(lambda: tr.step_count == 8)
        assert job.time_left() == pytest.approx(92 * 10.0 / 8)
        clock.t += 10.0  # a step that takes long (another page's work): the estimate grows while it waits
        assert job.time_left() == pytest.approx(92 * 20.0 / 8)
        job.pause()
        wait_until(lambda: not job.alive)
        assert job.time_left() is None and job.step_seconds() == pytest.approx(20.0 / 8)  # kept for the queue
    finally:
        job.cancel()
