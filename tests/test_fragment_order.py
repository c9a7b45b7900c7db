"""A fragment's timer must not overtake the output of the run before it: the phone that missed a lesson step.

Streamlit drops the callbacks of a ScriptRunner that is no longer the session's current one; a fragment's rerun
request that finds the finished runner stopped starts a new runner at once, before the finished run's output
(queued on the event loop) is handled, so that output never reaches the phone (dashboard/classroom/fragment_order.py).
"""

from __future__ import annotations

import asyncio
import inspect

from streamlit.proto.ClientState_pb2 import ClientState
from streamlit.runtime.app_session import AppSession

from dashboard.classroom import fragment_order


class _Session:
    """The two things of an AppSession the race is about: its current runner and its event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, seen: list) -> None:
        self._event_loop = loop
        self._scriptrunner = "finished runner"
        self.seen = seen

    def request_rerun(self, client_state) -> None:  # as Streamlit's, when the runner has stopped: a new one
        self.seen.append(("rerun", self._scriptrunner))
        self._scriptrunner = "new runner"

    def output(self) -> None:  # the finished run's message: kept only while its runner is still the current one
        self.seen.append(("output", "shown" if self._scriptrunner == "finished runner" else "dropped"))


def _race(request_rerun, client_state) -> list:
    seen: list = []

    async def scenario() -> None:
        session = _Session(asyncio.get_running_loop(), seen)
        session._event_loop.call_soon(session.output)  # queued by the runner's thread before it stopped
        request_rerun(session, client_state)  # the phone's fragment timer, handled on the loop
        for _unused in range(3):
            await asyncio.sleep(0)

    asyncio.run(scenario())
    return seen


def test_a_fragment_timer_waits_for_the_finished_runs_output():
    timer = ClientState(fragment_id="watch", is_auto_rerun=True)
    assert _race(_Session.request_rerun, timer) == [("rerun", "finished runner"), ("output", "dropped")]  # the bug
    fixed = fragment_order._after_pending(_Session.request_rerun)
    assert _race(fixed, timer) == [("output", "shown"), ("rerun", "finished runner")]


def test_a_full_rerun_is_not_delayed():
    fixed = fragment_order._after_pending(_Session.request_rerun)
    assert _race(fixed, ClientState())[0] == ("rerun", "finished runner")
    assert _race(fixed, None)[0] == ("rerun", "finished runner")


def test_the_follow_page_installs_it_once():
    from dashboard.classroom import follow  # noqa: F401 - importing the phones' page installs the fix

    assert fragment_order.installed()
    patched = AppSession.request_rerun
    fragment_order.install()
    assert AppSession.request_rerun is patched


def test_streamlit_still_drops_a_replaced_runners_output():
    """The reason for the patch, read from Streamlit itself: when this fails, Streamlit changed and the patch may go."""
    handle = inspect.getsource(AppSession._handle_scriptrunner_event_on_event_loop)
    assert "sender is not self._scriptrunner" in handle
    request = inspect.getsource(inspect.unwrap(AppSession.request_rerun))
    assert "self._scriptrunner.request_rerun(rerun_data)" in request and "self._create_scriptrunner" in request
