"""Follow mode: the teacher's lesson bar (Back / Next move every phone) and the students' phone view of the teacher's
current step (read-only: its chart, its one-line reading, the poll when the step is a poll).

The room's lesson and its current step live in the class store (dashboard/classroom/lessons.py), so a phone that
joins late, or reconnects to another replica after one died, lands on the current step. A phone reads only where
the room is in a small timed fragment (dashboard/classroom/watch.py); when it moves, the page reruns once and
shows the step's drawing, made once per (step, language) and shared (dashboard/classroom/step_views.py).
"""

from __future__ import annotations

import base64

import streamlit as st

from dashboard.classroom import fragment_order, step_views
from dashboard.classroom.lessons import PAGES, BadLesson, check_step, step_key
from dashboard.classroom.store import NoSuchPoll, PollError
from dashboard.classroom.student import poll_view
from dashboard.classroom.ui import join_link, qr_png, remember_room, store, teacher_panel
from dashboard.classroom.watch import FOLLOW_REFRESH_S, POSITION_TTL_S, Now, forget, lessons, room_now, watch
from dashboard.drawing.chart_cache import styled
from dashboard.i18n import LANGS, _, lang
from dashboard.state.links import error_text, md_escape

__all__ = ["FOLLOW_REFRESH_S", "POSITION_TTL_S", "add_view_button", "follower_view", "lesson_bar", "lessons"]
LOCAL_KEY = "follow_local"  # the step a student looks at on their own (None: the teacher's)
DRAFT_KEY = "lesson_draft"  # the lesson the teacher is building (this session)
STEP_KEY = "lesson_step"  # the step the teacher's bar shows (moved by Next / Back before the page redraws)
FOLLOW_CSS = """<style>
.st-key-follow_nav button {min-height: 3rem; font-size: 1.05rem;}
</style>"""

fragment_order.install()  # a phone's watch timer must not throw away the step its full rerun just drew


def teacher_room(create: bool = False) -> dict | None:
    """The teacher's room ``{"code", "secret"}`` of this session (made with ``create``): the one place that reads it,
    where a reclaimed room (the teacher's link) comes in."""
    room = st.session_state.get("poll_room")
    if room is None and create:
        remember_room(*store().create_room())  # in the teacher's link too: another replica can reclaim the lesson
        room = st.session_state["poll_room"]
    return room


# -- "Add this view" (the sidebar of any page) -------------------------------------------------------------------
def add_view_button(where, url_path: str) -> None:
    """A small button that puts the page's current view (its link's settings) into the lesson being built."""
    page = url_path or "explore"
    if page not in PAGES:
        return
    if where.button(_("Add this view to the lesson"), key="lesson_add_view", icon=":material/playlist_add:",
                    width="stretch"):
        try:
            step = check_step({"kind": "view", "page": page, "params": st.query_params.to_dict()})
        except BadLesson as e:
            where.warning(error_text(e))
            return
        draft = st.session_state.setdefault(DRAFT_KEY, {"title": _("My lesson"), "steps": []})
        draft["steps"] = [*draft["steps"], step]
        st.toast(_("Added as step {n} of the lesson (open the Lesson page to order it).", n=len(draft["steps"])))


# -- the teacher -------------------------------------------------------------------------------------------------
def _prepare(step: dict) -> None:
    """Draw a view step once in every language before the phones ask (they then only read it)."""
    for code in LANGS:
        step_views.rendered(step, code, lessons())


def go(lesson: dict, index: int) -> None:
    """Move the class to step ``index``: draw it, ask its question if it is a poll, then move the phones."""
    room = teacher_room()
    if room is None:
        return
    step = lesson["steps"][index]
    try:
        if step["kind"] == "poll":  # its own poll, as it was left, once asked (Back shows it again)
            poll = lessons().step_poll(room["code"], index, room["secret"])
            if poll is None:
                question = step_views.question(step)
                seq = lessons().ask_step(room["code"], room["secret"], index, question)
            else:
                question, seq = poll.question, poll.seq
            st.session_state["poll_current"] = {"page": "lesson", "seq": seq, "question": question}
        else:
            _prepare(step)
        st.session_state[STEP_KEY] = lessons().go(room["code"], room["secret"], index)
        forget(room["code"])  # this replica's phones read the new step at once
    except (PollError, ValueError) as e:
        st.session_state["lesson_msg"] = error_text(e)


def start(lesson: dict) -> None:
    room = teacher_room(create=True)
    try:
        lessons().start(room["code"], room["secret"], lesson)
    except NoSuchPoll:  # the room expired: a new one
        st.session_state.pop("poll_room", None)
        room = teacher_room(create=True)
        lessons().start(room["code"], room["secret"], lesson)
    go(lesson, 0)


def stop() -> None:
    room = teacher_room() or {}
    try:
        lessons().stop(room.get("code", ""), room.get("secret", ""))
        forget(room.get("code", ""))
    except PollError as e:
        st.session_state["lesson_msg"] = error_text(e)


def _claim_step_poll(code: str, index: int) -> None:
    """On a poll step, the step's own poll in the lesson's panel: a session that reclaimed the room (the teacher's
    replica died, or a reload) has it with no page yet, or on the page that drew it first."""
    current = st.session_state.get("poll_current")
    if current is not None and current.get("page") == "lesson":
        return
    poll = lessons().step_poll(code, index)
    if poll is not None and (current is None or current.get("page") is None or current.get("seq") == poll.seq):
        st.session_state["poll_current"] = {"page": "lesson", "seq": poll.seq, "question": poll.question}


def lesson_bar() -> dict | None:
    """The teacher's bar for the running lesson: code and QR, step i of n, Back / Next, the step as the phones see
    it (and the poll's panel on a poll step). The running lesson, or None."""
    room = teacher_room()
    msg = st.session_state.pop("lesson_msg", None)
    if msg:
        st.warning(msg)
    try:
        running = lessons().running(room["code"]) if room else None
        if running is not None and running[0]["steps"][running[1]]["kind"] == "poll":
            _claim_step_poll(room["code"], running[1])
    except PollError as e:
        st.warning(error_text(e))
        return None
    if running is None:
        return None
    lesson, index = running
    step = lesson["steps"][index]
    polling = step["kind"] == "poll" and st.session_state.get("poll_current", {}).get("page") == "lesson"
    with st.container(border=True, key="lesson_bar"):
        if not polling:  # the poll's panel below shows the same code and QR code
            left, right = st.columns([1, 3])
            link = join_link(room["code"])
            left.image(qr_png(link), width=140, alt=_("QR code of the join link"))
            right.subheader(_("Code {code}", code=room["code"]), anchor=False)
            right.code(link, language=None, wrap_lines=True)
        st.session_state[STEP_KEY] = index
        _step_nav(lesson, index)
        st.button(_("End the lesson"), key="lesson_stop", icon=":material/stop:", on_click=stop)
    if polling:
        with st.container(border=True, key="poll_panel_lesson"):
            teacher_panel()
    elif step["kind"] == "view":
        show_step(step)
    return lesson


@st.fragment
def _step_nav(lesson: dict, shown: int) -> None:
    """Back, "Step i of n", Next. A fragment: a click redraws the step's number as soon as :func:`go` moved the class
    (the teacher sees at once that it worked), then the whole page follows with the step itself."""
    index, n = st.session_state.get(STEP_KEY, shown), len(lesson["steps"])
    b1, b2, b3 = st.columns([1, 2, 1])
    b1.button(_("Back"), key="lesson_back", icon=":material/arrow_back:", disabled=index == 0, width="stretch",
              on_click=go, args=(lesson, index - 1))
    b2.markdown(_("**Step {step} of {n}**: {title}", step=index + 1, n=n,
                  title=md_escape(step_views.title(lesson["steps"][index]))))
    b3.button(_("Next"), key="lesson_next", icon=":material/arrow_forward:", type="primary", width="stretch",
              disabled=index == n - 1, on_click=go, args=(lesson, index + 1))
    if index != shown or "lesson_msg" in st.session_state:  # the step itself, or what went wrong, on the page
        fragment_order.sent()  # "Step k of n" on the teacher's screen first: the full run would drop it unsent
        st.rerun()


# -- what a phone (and the teacher's preview) shows --------------------------------------------------------------
def show_step(step: dict) -> None:
    """A view step's title, chart (its full-screen button enlarges it) and one-line reading."""
    body = step_views.rendered(step, lang(), lessons())
    st.markdown(f"#### {md_escape(body['title'])}")
    if "problem" in body:
        st.warning(md_escape(body["problem"]))
        return
    for k, part in enumerate(body.get("specs", ())):  # a picture in parts (the split into heads)
        st.markdown(part["caption"])
        st.vega_lite_chart(part["spec"], width="content", key=f"step_chart_{step_key(step, lang())}_{k}")
    if "spec" in body:
        st.vega_lite_chart(styled(body["spec"]), width="content", key=f"step_chart_{step_key(step, lang())}")
    elif "png" in body:
        st.image(base64.b64decode(body["png"]), width="stretch")
    st.markdown(md_escape(body["reading"]))


def follower_view(code: str, session: str) -> bool:
    """The phone's view when the room runs a lesson (True), else nothing drawn (False: the plain poll page)."""
    try:
        now = room_now(code, fresh=True)  # read before drawing: a change after it redraws the page
        running = lessons().running(code)
    except NoSuchPoll:
        return False
    except PollError as e:
        st.error(error_text(e))
        return True
    if running is None:
        return False
    st.html(FOLLOW_CSS)
    lesson, teacher = running
    n = len(lesson["steps"])
    local = st.session_state.get(LOCAL_KEY)
    shown = teacher if local is None else max(0, min(n - 1, local))
    watch(code, Now(shown, now.poll), following=local is None)  # the phone's one timer, first on every phone page
    if local is None:
        st.caption(_("Class {code} · step {step} of {n} · following the teacher", code=code, step=shown + 1, n=n))
    else:
        st.caption(_("Class {code} · step {step} of {n} · looking around", code=code, step=shown + 1, n=n))
    step = lesson["steps"][shown]
    if step["kind"] == "poll":
        if shown == teacher:
            poll_view(code, session, headed=False)  # the step line above is its heading
        else:
            st.markdown(f"#### {md_escape(step_views.title(step))}")
            st.info(_("A question for the class: it opens when the teacher reaches this step."))
    else:
        show_step(step)
    with st.container(key="follow_nav"):
        c1, c2 = st.columns(2)
        c1.button(_("Previous"), key="follow_prev", icon=":material/arrow_back:", disabled=shown == 0,
                  width="stretch", on_click=_look, args=(shown - 1,))
        c2.button(_("Next"), key="follow_next", icon=":material/arrow_forward:", disabled=shown == n - 1,
                  width="stretch", on_click=_look, args=(shown + 1,))
        if local is not None:
            st.button(_("Back to the teacher (step {step})", step=teacher + 1), key="follow_back", type="primary",
                      icon=":material/sync:", width="stretch", on_click=_look, args=(None,))
    return True


def _look(index: int | None) -> None:
    st.session_state[LOCAL_KEY] = index
