"""Training jobs on worker threads, with a server-wide queue: every student who presses Start gets a slot or a place.

At most :data:`MAX_JOBS` trainings run at once in one process (:func:`default_slots` of its cores). A job started while
every slot is busy waits in a first-come queue and starts by itself when a slot frees (a job ends, pauses or is
cancelled). Its place and an estimated wait come from :func:`queue_waits`, a pure function of how long the running jobs
still need; a running job's time left (:meth:`TrainingJob.time_left`) from the wall time its own steps took here.
Nothing here imports Streamlit.
"""

from __future__ import annotations

import heapq
import os
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from attn_core.messages import Problem

if TYPE_CHECKING:
    from attn_core.labs.learn import Trainer


def cores() -> int:
    """CPU cores this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def default_slots(n_cores: int) -> int:
    """Trainings run at once on ``n_cores``: one per two cores (the pages' script threads want the rest), at least
    one. On 2 cores two at once made each run over twice as slow as one alone (docs/measurements.md): one runs at
    full speed while the others wait their turn, so a run started alone forms its heads within a minute."""
    return max(1, n_cores // 2)


MAX_JOBS = default_slots(cores())  # training jobs running at once in one server process
DEFAULT_STEP_S = 0.04  # seconds a step takes before any job here has measured its own (the default recipes)
MIN_MEASURED = 3  # steps a worker takes before its speed counts
_last_step_s: float | None = None  # the speed the last job measured in this process
_lock = threading.RLock()
_running: set[TrainingJob] = set()
_queue: list[TrainingJob] = []  # first come, first served


@dataclass(frozen=True)
class Load:
    """What the server's training slots are doing now."""

    running: int
    waiting: int
    slots: int


def queue_waits(running_left: Sequence[float], queued_need: Sequence[float], slots: int) -> list[float]:
    """Seconds until each queued job starts.

    ``running_left``: how long each running job still needs; ``queued_need``: how long each queued job will run, in
    queue order; ``slots``: jobs that may run at once. Each queued job takes the first slot to free up."""
    if slots < 1:
        raise Problem("slots must be at least 1")
    left = sorted(max(0.0, t) for t in running_left)
    # more running than slots (the cap was lowered): the first extra finishes only bring the count down to the cap
    free = left[max(0, len(left) - slots):] + [0.0] * max(0, slots - len(left))
    heapq.heapify(free)
    waits = []
    for need in queued_need:
        start = heapq.heappop(free)
        waits.append(start)
        heapq.heappush(free, start + max(0.0, need))
    return waits


def server_load() -> Load:
    """How many trainings run and how many wait on this server (a line a teacher can read)."""
    with _lock:
        _prune()
        return Load(len(_running), len(_queue), MAX_JOBS)


def live_jobs() -> int:
    """How many training jobs this process runs now."""
    with _lock:
        return len(_running)


class TrainingJob:
    """A :class:`Trainer` on a worker thread: ``start``, ``pause``, ``resume``, ``cancel``.

    ``start`` runs it at once when a slot is free, else queues it ("queued") until one frees. A paused job holds no
    thread (resuming starts a new one), so an abandoned paused job costs only its memory. A running or queued job whose
    owner stops calling :meth:`touch` for ``idle_timeout`` seconds (its browser tab closed) cancels itself."""

    # Browsers throttle a hidden tab's timers (Chrome: to once a minute after 5 minutes), so the
    # page's polling can pause for a minute while the teacher shows another tab: allow two.
    def __init__(self, trainer: Trainer, idle_timeout: float = 120.0, clock: Callable[[], float] = time.monotonic):
        self.trainer = trainer
        self.uid = uuid.uuid4().hex  # a cache key for what the job drew
        self.idle_timeout = idle_timeout
        self.error: str | None = None
        self._clock = clock
        self._pause = threading.Event()
        self._cancel = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_seen = clock()
        self._since: tuple[float, int] | None = None  # (clock, step) when the running worker started
        self._measured: float | None = None  # seconds a step took in its last worker

    @property
    def state(self) -> str:
        """"ready", "queued", "running", "paused", "done", "cancelled" or "failed"."""
        if self.error:
            return "failed"
        if self.trainer.done:
            return "done"
        if self._cancel.is_set():
            return "cancelled"
        with _lock:
            if self in _queue:
                return "queued"
            if self._thread is None:
                return "ready"
            return "running" if self.alive and not self._pause.is_set() else "paused"

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def touch(self) -> None:
        """The owner is still watching."""
        self._last_seen = self._clock()

    def step_seconds(self) -> float | None:
        """Wall seconds a step takes on this server now (since the worker last started: the other jobs and pages
        share its cores), else what its last worker measured; None before :data:`MIN_MEASURED` steps."""
        if self._since is None:
            return self._measured
        t0, step0 = self._since
        done = self.trainer.step_count - step0
        return (self._clock() - t0) / done if done >= MIN_MEASURED else self._measured

    def time_left(self) -> float | None:
        """Seconds until the last step at the speed measured so far (None until measured or when not running)."""
        rate = self.step_seconds()
        if rate is None or self.state != "running":
            return None
        return (self.trainer.steps - self.trainer.step_count) * rate

    def start(self) -> None:
        """Start (or resume) training on a worker thread now, or queue it until a slot frees."""
        self.touch()
        if self.trainer.done or self._cancel.is_set() or self.error:
            return
        if self.alive:
            if not self._pause.is_set():
                return  # already running
            self._thread.join(timeout=10)  # a pausing worker finishes its step first
        with _lock:
            if self in _queue:
                return
            self._pause.clear()
            _queue.append(self)
            _fill_slots()

    def pause(self) -> None:
        """Stop after the current step (the worker thread ends), or leave the queue."""
        self._pause.set()
        with _lock:
            if self in _queue:
                _queue.remove(self)

    def resume(self) -> None:
        self.start()

    def cancel(self, wait: float = 10.0) -> None:
        self._cancel.set()
        with _lock:
            if self in _queue:
                _queue.remove(self)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=wait)

    def position(self) -> int | None:
        """1-based place in the queue (None when not queued)."""
        with _lock:
            _prune()
            return _queue.index(self) + 1 if self in _queue else None

    def wait_estimate(self) -> float | None:
        """Seconds until this queued job should start, from the running jobs' measured speed (None when not queued)."""
        with _lock:
            _prune()
            if self not in _queue:
                return None
            ahead = _queue[:_queue.index(self) + 1]
            rate = _typical_step_s()
            left = [(j.trainer.steps - j.trainer.step_count) * _step_s(j, rate) for j in _running]
            need = [(j.trainer.steps - j.trainer.step_count) * _step_s(j, rate) for j in ahead]
            return queue_waits(left, need, MAX_JOBS)[-1]

    def _stale(self) -> bool:
        return self._clock() - self._last_seen > self.idle_timeout

    def _launch(self) -> None:
        self._since = (self._clock(), self.trainer.step_count)
        self._thread = threading.Thread(target=self._work, name="attention-lab-training", daemon=True)
        self._thread.start()

    def _work(self) -> None:
        # One intra-op thread, for this worker only (OpenMP's thread count is per calling thread):
        # tiny models gain nothing from more, and two OpenMP threads fighting the page's script
        # thread made steps many times slower (docs/measurements.md).
        torch.set_num_threads(1)
        try:
            while not (self.trainer.done or self._cancel.is_set() or self._pause.is_set()):
                if self._stale():
                    self._cancel.set()
                    break
                self.trainer.step()
        except Exception as exc:  # noqa: BLE001 - reported to the page, never lost on a thread
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            global _last_step_s
            with _lock:
                self._measured = self.step_seconds()
                self._since = None
                _last_step_s = self._measured or _last_step_s
                _running.discard(self)
                _fill_slots()  # the next in the queue starts now


def _step_s(job: TrainingJob, typical: float) -> float:
    return job.step_seconds() or typical


def _typical_step_s() -> float:
    """Seconds a step takes here: the running jobs' measured mean, else the last job's, else a first guess."""
    rates = [r for r in (j.step_seconds() for j in _running) if r is not None]
    return sum(rates) / len(rates) if rates else _last_step_s or DEFAULT_STEP_S


def _prune() -> None:
    """Drop queued jobs nobody watches any more (tab closed): they would hold a place forever."""
    for job in [j for j in _queue if j._stale()]:
        job._cancel.set()
        _queue.remove(job)


def _fill_slots() -> None:
    """Start queued jobs while slots are free (call with the lock held)."""
    _prune()
    while len(_running) < MAX_JOBS and _queue:
        job = _queue.pop(0)
        _running.add(job)
        job._launch()
