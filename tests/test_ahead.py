"""Work done ahead (dashboard/state/ahead.py): what Generate's next token is worked out with."""

from __future__ import annotations

import os
import threading
import time

import pytest

from dashboard.state import ahead
from dashboard.state.ahead import Ahead


def test_take_cuts_the_pause_short_and_returns_the_result():
    started = time.monotonic()
    work = Ahead(lambda: threading.get_native_id(), pause=600)
    assert work.started.wait(60)
    thread = work.take()
    assert time.monotonic() - started < 60  # not the long pause it was given
    assert thread != threading.get_native_id() and work.done()  # done on a thread of its own
    assert work.take() == thread  # taken again: the same result


def test_work_runs_after_its_pause_without_being_asked():
    work = Ahead(lambda: 42, pause=0.01)
    ran = threading.Event()
    work._future.add_done_callback(lambda _: ran.set())
    assert ran.wait(60) and work.take() == 42


def test_queued_work_is_cancelled_for_the_caller_to_do():
    release = threading.Event()
    busy = [Ahead(lambda: release.wait(60), pause=0) for _ in range(ahead._POOL._max_workers)]
    try:
        assert all(b.started.wait(60) for b in busy)  # every thread taken
        queued = Ahead(lambda: pytest.fail("cancelled work ran"), pause=0)
        assert queued.take() is None
    finally:
        release.set()
    assert all(b.take() for b in busy)


def test_the_works_errors_are_raised_by_take():
    def broken():
        raise ValueError("the text has reached this model's context_length")

    work = Ahead(broken, pause=0)
    assert work.started.wait(60)
    with pytest.raises(ValueError, match="context_length"):
        work.take()


def test_the_work_runs_at_lower_priority():
    work = Ahead(lambda: os.getpriority(os.PRIO_PROCESS, threading.get_native_id()), pause=0)
    assert work.started.wait(60) and work.take() >= 10


def test_settle_waits_for_every_pending_work_its_pause_cut_short():
    ran: list[int] = []
    started = time.monotonic()
    works = [Ahead(lambda k=k: ran.append(k), pause=600) for k in range(3)]
    ahead.settle()
    assert sorted(ran) == [0, 1, 2] and all(w.done() for w in works)
    assert time.monotonic() - started < 60  # not the long pauses they were given
