"""Work done ahead: a step a page will most likely be asked for next (Generate's next token, the walkthrough's next
chart), worked out in the background once the page is drawn, so the click that asks for it only draws it.

The work waits ``pause`` seconds first: on one machine (a teacher's laptop running the server and the projector's
browser) the browser is still drawing the page on the same cores. The click that wants it cuts the pause short, and
work still queued is cancelled, for the page to do itself. Its threads run at nice 10: in a classroom server they
yield to the reruns somebody is waiting for.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Generic, TypeVar

T = TypeVar("T")
PAUSE_S = 0.3  # after a run: the browser draws the page it was sent first (2 cores)
THREAD_NAME = "work-ahead"
_LOG = logging.getLogger(__name__)


def _lower_priority() -> None:
    """This thread, and the threads torch starts from it, at nice 10 (Linux: a thread's own nice value)."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
    except (AttributeError, OSError):  # not Linux, or not allowed: the work runs at normal priority
        pass


# every session's work ahead, server-wide: up to two computing at once (one per core) beside two pausing
_POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix=THREAD_NAME, initializer=_lower_priority)
_PENDING: weakref.WeakSet[Ahead] = weakref.WeakSet()  # work handed to the pool and not yet done


class Ahead(Generic[T]):
    """``work()`` started in the background after ``pause`` seconds (default ``PAUSE_S``); :meth:`take` gets its
    result."""

    def __init__(self, work: Callable[[], T], pause: float | None = None):
        self._now = threading.Event()
        self.started = threading.Event()  # set once a thread has picked the work up (its pause begins)
        self._future = _POOL.submit(self._run, work, PAUSE_S if pause is None else pause)
        _PENDING.add(self)

    def _run(self, work: Callable[[], T], pause: float) -> T:
        self.started.set()
        self._now.wait(pause)
        return work()

    def take(self) -> T | None:
        """The result, waiting for it if the work has started (cutting its pause short); None if it had not: it is
        cancelled, and quicker done by the caller than queued. The work's exceptions are raised here."""
        self._now.set()
        if self._future.cancel():
            return None
        return self._future.result()

    def done(self) -> bool:
        return self._future.done()


def settle(timeout: float = 120.0) -> None:
    """Wait until no work ahead is left, its pauses cut short (tests: an earlier test's pending step must not run
    inside the next test, where it would count as that test's work)."""
    for ahead in list(_PENDING):
        ahead._now.set()
        try:
            ahead._future.result(timeout)
        except Exception:  # noqa: BLE001 - its owner sees the failure on take(); here it is only waited for
            pass


def prefetch(work: Callable[[], None]) -> Ahead[None]:
    """``work`` done ahead for its side effect (e.g. ``prepare_matrix``: the next step's chart into the chart cache);
    a failure only costs the prefetch (the page builds on a miss)."""
    def quiet() -> None:
        try:
            work()
        except Exception:  # noqa: BLE001 - a prefetch must never fail a page
            _LOG.debug("prefetch failed", exc_info=True)

    return Ahead(quiet)
