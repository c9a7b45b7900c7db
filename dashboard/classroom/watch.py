"""A phone's one timer: where the room is (the lesson's step, the question on show and its state), read every
:data:`FOLLOW_REFRESH_S` seconds in a small fragment that reruns the whole page when it differs from what the page
drew. Everything a phone shows (the step, the question and its buttons) is drawn by that full run, outside any
fragment: a timed fragment of a step the class has left could still write its old output into the place where the
next step now stands (the question stayed on a phone under the next step's header while its title was gone).

Thirty phones of a class on one replica make one read of the room per :data:`POSITION_TTL_S`, not thirty.
"""

from __future__ import annotations

import threading
import time
from typing import NamedTuple

import streamlit as st

from dashboard.classroom.lessons import LessonStore
from dashboard.classroom.store import NoSuchPoll, PollError
from dashboard.classroom.ui import store
from dashboard.i18n import _, message

FOLLOW_REFRESH_S = 0.5  # how often a phone asks where the teacher is (docs/measurements.md)
POSITION_TTL_S = 0.2  # a replica's phones of one class share one read of the room for this long


class Now(NamedTuple):
    """What a phone's page depends on: the lesson's step (None: no lesson) and the question on show as (seq, state)
    (None: none asked yet, or the room is gone)."""
    step: int | None
    poll: tuple[int, str] | None


_lessons: dict[int, LessonStore] = {}
_positions: dict[str, tuple[float, Now]] = {}
_positions_lock = threading.Lock()


def lessons() -> LessonStore:
    """This process's lesson store: the poll store's database (one connection)."""
    polls = store()
    if id(polls) not in _lessons:
        _lessons[id(polls)] = LessonStore(polls)
    return _lessons[id(polls)]


def room_now(code: str, fresh: bool = False) -> Now:
    """The room as :class:`Now`, read at most once per :data:`POSITION_TTL_S` by this process (``fresh``: read now,
    as a full run does before it draws). A room that does not exist (or expired) is ``Now(None, None)``; other
    :class:`PollError` s are raised."""
    now = time.monotonic()
    with _positions_lock:
        hit = _positions.get(code)
        if not fresh and hit is not None and now - hit[0] < POSITION_TTL_S:
            return hit[1]
    try:
        where = lessons().position(code)
        poll = store().current(code)
    except NoSuchPoll:
        where = poll = None
    seen = Now(None if where is None else where[0], None if poll is None else (poll.seq, poll.state))
    with _positions_lock:
        _positions[code] = (now, seen)
        if len(_positions) > 1000:  # rooms long gone
            for old in [c for c, (t, _n) in _positions.items() if now - t > 60]:
                del _positions[old]
    return seen


def forget(code: str) -> None:
    """This process's read of the room is stale (the teacher moved it here): the next look reads it again."""
    with _positions_lock:
        _positions.pop(code, None)


@st.fragment(run_every=FOLLOW_REFRESH_S)
def watch(code: str, drawn: Now, following: bool = True) -> None:
    """The page redraws once when the room moved away from what it ``drawn``; nothing else reruns. A student looking
    around on their own (not ``following``) is only redrawn for the end of the lesson or for a change of the
    question on the step they look at, and reads where the teacher is here."""
    try:
        now = room_now(code)
    except PollError as e:
        st.caption(message(e))
        return
    ended = drawn.step is not None and now.step is None
    if ended or (now != drawn if following else now.step == drawn.step and now.poll != drawn.poll):
        st.rerun(scope="app")
    if not following:
        st.caption(_("The teacher is at step {step}.", step=now.step + 1))
