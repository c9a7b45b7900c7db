"""Training jobs on worker threads, with a server-wide queue: every student who presses Start gets a slot or a place.

At most :data:`MAX_JOBS` trainings run at once in one process (each wants a core). A job started while every slot is
busy waits in a first-come queue and starts by itself when a slot frees (a job ends, pauses or is cancelled). Its place
and an estimated wait come from :func:`queue_waits`, a pure function of how long the running jobs still need.
Nothing here imports Streamlit.
"""

from __future__ import annotations

import heapq
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from attn_core.messages import Problem

if TYPE_CHECKING:
    from attn_core.labs.learn import Trainer

MAX_JOBS = 2  # training jobs running at once on one server (each wants a core)
DEFAULT_STEP_S = 0.04  # seconds a step takes before a job has measured its own (the default recipes, 2 busy cores)
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
    def __init__(self, trainer: Trainer, idle_timeout: float = 120.0):
        self.trainer = trainer
        self.uid = uuid.uuid4().hex  # a cache key for what the job drew
        self.idle_timeout = idle_timeout
        self.error: str | None = None
        self._pause = threading.Event()
        self._cancel = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_seen = time.monotonic()

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
        self._last_seen = time.monotonic()

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
        return time.monotonic() - self._last_seen > self.idle_timeout

    def _launch(self) -> None:
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
            with _lock:
                _running.discard(self)
                _fill_slots()  # the next in the queue starts now


def _step_s(job: TrainingJob, typical: float) -> float:
    tr = job.trainer
    return tr.seconds / tr.step_count if tr.step_count >= 3 else typical


def _typical_step_s() -> float:
    rates = [j.trainer.seconds / j.trainer.step_count for j in _running if j.trainer.step_count >= 3]
    return sum(rates) / len(rates) if rates else DEFAULT_STEP_S


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
