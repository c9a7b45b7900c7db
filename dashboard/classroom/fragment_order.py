"""A fragment's timer must not throw away the output of the run before it (why a phone could miss a lesson step).

Streamlit (1.67) runs a session's script in a ScriptRunner thread that stops as soon as a run ends with no rerun
waiting; the run's messages reach the session later, as callbacks queued on the server's event loop, and the session
drops every callback whose runner is no longer its current one. A fragment's timer (a phone's ``_watch``, every
0.5 s) that arrives in that gap finds the runner stopped, so the session starts a new runner at once, and the whole
finished run's output (the new step, drawn by the full rerun ``_watch`` asked for, and the fragment timers it
registers) is thrown away unseen: the server believes the phone shows the new step, the phone shows the old one and
may stop asking. A real browser's timers hit this as the bench's do.

:func:`install` makes a fragment's rerun that needs a new runner wait until the finished runner's last event (its
SHUTDOWN, queued after all its output) has been handled; a full rerun (a click) is not delayed: it replaces the page.
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time

from streamlit.runtime import Runtime
from streamlit.runtime.app_session import AppSession, AppSessionState
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

WAIT_S = 0.005  # how often a waiting fragment rerun looks again whether the finished runner has shut down
# Then it starts its runner anyway, as Streamlit would have at once. A bound in time, not in tries: a busy server's
# runner can take longer to shut down than a count of tries allows, and the step it drew is then lost.
MAX_WAIT_S = 30.0
_MARK = "_attn_lab_fragment_order"


def _on_loop(session) -> bool:
    try:
        return asyncio.get_running_loop() is getattr(session, "_event_loop", None)
    except RuntimeError:  # another thread: nothing to order against
        return False


def _after_shutdown(create):
    """Wrap ``AppSession._create_scriptrunner`` (called when there is no runner, or the current one has stopped)."""

    @functools.wraps(create)
    def _create_scriptrunner(self, initial_rerun_data, _since: float | None = None) -> None:
        fragment = bool(initial_rerun_data.fragment_id or initial_rerun_data.fragment_id_queue)
        since = time.monotonic() if _since is None else _since
        if (fragment and self._scriptrunner is not None and time.monotonic() - since < MAX_WAIT_S
                and _on_loop(self)):
            self._event_loop.call_later(WAIT_S, _retry, self, initial_rerun_data, since)
            return
        create(self, initial_rerun_data)

    def _retry(self, rerun_data, since: float) -> None:
        if self._state == AppSessionState.SHUTDOWN_REQUESTED:
            return
        runner = self._scriptrunner
        if runner is not None and runner.request_rerun(rerun_data):  # a live runner takes it
            return
        _create_scriptrunner(self, rerun_data, since)

    setattr(_create_scriptrunner, _MARK, True)
    return _create_scriptrunner


def install() -> None:
    """Patch :class:`AppSession` once per process (idempotent)."""
    if not installed():
        AppSession._create_scriptrunner = _after_shutdown(AppSession._create_scriptrunner)


def installed() -> bool:
    return bool(getattr(AppSession._create_scriptrunner, _MARK, False))


def sent(timeout_s: float = 1.0) -> bool:
    """Wait (on the script's thread, at most ``timeout_s``) until what this run has drawn so far has left the session's
    queue for the browser; True when it has. A full rerun asked for next (``st.rerun()``) clears the unsent
    messages when it starts (``AppSession._clear_queue``): on a busy server that dropped the teacher's early
    "Step k of n". Outside a server (AppTest) nothing to wait for: True."""
    ctx = get_script_run_ctx(suppress_warning=True)
    info = Runtime.instance()._session_mgr.get_active_session_info(ctx.session_id) if (
        ctx is not None and Runtime.exists()) else None
    if info is None:
        return True
    session, done = info.session, threading.Event()
    loop = session._event_loop

    def check() -> None:  # queued after this run's messages (one FIFO of callbacks): they are in the queue by now
        if session._browser_queue.is_empty():
            done.set()
        elif not done.is_set():
            loop.call_later(WAIT_S, check)

    try:
        loop.call_soon_threadsafe(check)
    except RuntimeError:  # the loop is closed: the server is stopping
        return True
    flushed = done.wait(timeout_s)
    done.set()  # a check still waiting stops
    return flushed
