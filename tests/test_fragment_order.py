"""A fragment's timer must not overtake the output of the run before it: the phone that missed a lesson step.

Streamlit drops the callbacks of a ScriptRunner that is no longer the session's current one; a fragment's rerun
request that finds the finished runner stopped started a new runner at once, before the finished run's output
(queued on the event loop) was handled, so that output never reached the phone (dashboard/classroom/fragment_order.py).
"""

from __future__ import annotations

import asyncio
import inspect

from streamlit.runtime.app_session import AppSession
from streamlit.runtime.scriptrunner_utils.script_requests import RerunData

from dashboard.classroom import fragment_order


class _Runner:
    def __init__(self, name: str, stopped: bool) -> None:
        self.name, self.stopped, self.took = name, stopped, []

    def request_rerun(self, rerun_data) -> bool:  # as Streamlit's: a stopped runner refuses
        if not self.stopped:
            self.took.append(rerun_data)
        return not self.stopped


class _Session:
    """What of an AppSession the race is about: its current runner, its event loop, and making a new runner."""

    _state = None

    def __init__(self, loop: asyncio.AbstractEventLoop, seen: list) -> None:
        self._event_loop = loop
        self._scriptrunner = _Runner("finished runner", stopped=True)
        self.seen = seen

    def _create_scriptrunner(self, initial_rerun_data) -> None:
        data = initial_rerun_data
        self.seen.append(("new runner for", data.fragment_id or (data.fragment_id_queue or ["full run"])[0]))
        self._scriptrunner = _Runner("new runner", stopped=False)

    def event(self, what: str) -> None:  # the finished runner's queued event: dropped once it is not the current one
        kept = self._scriptrunner is not None and self._scriptrunner.name == "finished runner"
        self.seen.append((what, "handled" if kept else "dropped"))
        if what == "SHUTDOWN" and kept:
            self._scriptrunner = None


def _race(create, rerun_data, late: int = 3) -> list:
    """The finished runner's output and SHUTDOWN reach the loop ``late`` turns after the phone's fragment timer."""
    seen: list = []

    async def scenario() -> None:
        session = _Session(asyncio.get_running_loop(), seen)
        create(session, rerun_data)  # request_rerun found the runner stopped
        for _unused in range(late):
            await asyncio.sleep(0)
        session.event("output")
        session.event("SHUTDOWN")
        await asyncio.sleep(0.1)

    asyncio.run(scenario())
    return seen


def test_a_fragment_timer_waits_for_the_finished_runs_output():
    timer = RerunData(fragment_id="watch", is_auto_rerun=True)
    assert _race(_Session._create_scriptrunner, timer) == [
        ("new runner for", "watch"), ("output", "dropped"), ("SHUTDOWN", "dropped")]  # the bug
    fixed = fragment_order._after_shutdown(_Session._create_scriptrunner)
    assert _race(fixed, timer) == [("output", "handled"), ("SHUTDOWN", "handled"), ("new runner for", "watch")]
    queued = RerunData(fragment_id_queue=["watch"])
    assert _race(fixed, queued, late=20)[-1] == ("new runner for", "watch")


def test_a_full_rerun_is_not_delayed():
    fixed = fragment_order._after_shutdown(_Session._create_scriptrunner)
    assert _race(fixed, RerunData())[0] == ("new runner for", "full run")


def test_the_follow_page_installs_it_once():
    from dashboard.classroom import follow  # noqa: F401 - importing the phones' page installs the fix

    assert fragment_order.installed()
    patched = AppSession._create_scriptrunner
    fragment_order.install()
    assert AppSession._create_scriptrunner is patched


def test_streamlit_still_drops_a_replaced_runners_output():
    """The reason for the patch, read from Streamlit itself: when this fails, Streamlit changed and the patch may go."""
    handle = inspect.getsource(AppSession._handle_scriptrunner_event_on_event_loop)
    assert "sender is not self._scriptrunner" in handle
    request = inspect.getsource(AppSession.request_rerun)
    assert "self._scriptrunner.request_rerun(rerun_data)" in request
    assert "self._create_scriptrunner(rerun_data)" in request
    shutdown = handle[handle.index("ScriptRunnerEvent.SHUTDOWN:"):]
    assert "self._scriptrunner = None" in shutdown[:1500]


class _Queue:
    def __init__(self, n: int) -> None:
        self.n = n

    def is_empty(self) -> bool:
        return self.n == 0


def test_the_teachers_step_number_leaves_before_the_full_rerun_clears_the_queue(monkeypatch):
    """``sent`` holds the fragment until the runtime's flush emptied the session's queue: "Step k of n" must reach
    the teacher before ``st.rerun()``'s full run starts and clears what is unsent."""
    import threading
    import types

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    queue = _Queue(2)  # "Step k of n" and the Back/Next buttons, not yet sent
    session = types.SimpleNamespace(_event_loop=loop, _browser_queue=queue)
    manager = types.SimpleNamespace(get_active_session_info=lambda sid: types.SimpleNamespace(session=session))
    monkeypatch.setattr(fragment_order.Runtime, "exists", staticmethod(lambda: True))
    monkeypatch.setattr(fragment_order.Runtime, "instance", staticmethod(lambda: types.SimpleNamespace(
        _session_mgr=manager)))
    monkeypatch.setattr(fragment_order, "get_script_run_ctx", lambda **kw: types.SimpleNamespace(session_id="s"))
    try:
        assert fragment_order.sent(timeout_s=0.2) is False  # never flushed: the bound, then the rerun anyway
        flush = threading.Timer(0.05, lambda: loop.call_soon_threadsafe(setattr, queue, "n", 0))
        flush.start()
        assert fragment_order.sent(timeout_s=30) is True and queue.n == 0
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()


def test_outside_a_server_nothing_is_waited_for():
    assert fragment_order.sent(timeout_s=30) is True  # no script run here (AppTest: no runtime)


def test_streamlit_still_clears_unsent_messages_when_a_full_run_starts():
    """The reason for ``sent``, read from Streamlit: when this fails, Streamlit changed and ``sent`` may go."""
    handle = inspect.getsource(AppSession._handle_scriptrunner_event_on_event_loop)
    started = handle[handle.index("ScriptRunnerEvent.SCRIPT_STARTED"):]
    assert "self._clear_queue(fragment_ids_this_run)" in started[:2500]
    assert hasattr(AppSession, "flush_browser_queue")
