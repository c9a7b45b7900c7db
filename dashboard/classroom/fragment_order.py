"""A fragment's timer must not overtake the output of the run before it (why a phone could miss a lesson step).

Streamlit (1.67) runs a session's script in a ScriptRunner thread that stops as soon as a run ends with no rerun
waiting; the run's messages reach the session later, as callbacks queued on the server's event loop, and the session
drops every callback whose runner is no longer its current one. A fragment's timer (a phone's ``_watch``, every
0.5 s) that arrives in that gap finds the runner stopped, so the session starts a new runner at once, and the whole
finished run's output (the new step, drawn by the full rerun ``_watch`` asked for) is thrown away unseen; the server
believes the phone shows the new step, so nothing redraws it until the teacher moves again. A real browser's timers
hit this just as the bench's do.

:func:`install` makes a fragment's rerun request wait one turn of the event loop: every callback the finished
runner queued before it stopped runs first (the loop keeps their order), so its output reaches the phone; a full
rerun (a click) is not delayed: it replaces the page anyway.
"""

from __future__ import annotations

import asyncio
import functools

from streamlit.runtime.app_session import AppSession

_MARK = "_attn_lab_fragment_order"


def _after_pending(original):
    @functools.wraps(original)
    def request_rerun(self, client_state) -> None:
        loop = getattr(self, "_event_loop", None)
        if client_state is not None and client_state.fragment_id and getattr(self, "_scriptrunner", None) is not None:
            try:
                on_loop = asyncio.get_running_loop() is loop
            except RuntimeError:  # called from another thread: nothing to order against
                on_loop = False
            if on_loop:
                loop.call_soon(original, self, client_state)
                return
        original(self, client_state)

    setattr(request_rerun, _MARK, True)
    return request_rerun


def install() -> None:
    """Patch :class:`AppSession` once per process (idempotent)."""
    if not getattr(AppSession.request_rerun, _MARK, False):
        AppSession.request_rerun = _after_pending(AppSession.request_rerun)


def installed() -> bool:
    return bool(getattr(AppSession.request_rerun, _MARK, False))
