"""Lesson: the teacher builds an ordered list of steps (views from any page's "Add this view to the lesson", polls),
saves it in the class store, exports/imports it as JSON, and teaches it: the class's phones follow each step
(dashboard/classroom/follow.py)."""

from __future__ import annotations

import streamlit as st

from dashboard.classroom import follow, lessons, step_views
from dashboard.classroom.device import owner_id
from dashboard.classroom.follow import DRAFT_KEY
from dashboard.classroom.lessons import QUESTIONS, BadLesson
from dashboard.classroom.store import PollError
from dashboard.i18n import _
from dashboard.state.links import error_text, md_escape


def _draft() -> dict:
    return st.session_state.setdefault(DRAFT_KEY, lessons.new_lesson(_("My lesson")))


def _set(lesson: dict) -> None:
    st.session_state[DRAFT_KEY] = lesson
    st.session_state["lesson_title"] = step_views.lesson_title(lesson)


def _open_ready() -> None:
    _set(lessons.ready("chapter3"))


def _move(i: int, delta: int) -> None:
    st.session_state[DRAFT_KEY] = lessons.move(_draft(), i, delta)


def _remove(i: int) -> None:
    st.session_state[DRAFT_KEY] = lessons.remove(_draft(), i)


def _retitle() -> None:
    _draft()["title"] = st.session_state["lesson_title"]


def _add_link() -> None:
    try:
        step = lessons.step_from_link(st.session_state.get("lesson_link", ""))
    except BadLesson as e:
        st.session_state["lesson_problem"] = error_text(e)
        return
    _draft()["steps"] = [*_draft()["steps"], step]
    st.session_state["lesson_link"] = ""


def _add_poll() -> None:
    question = st.session_state["lesson_poll_kind"]
    _draft()["steps"] = [*_draft()["steps"], {"kind": "poll", "question": question, "params": {}}]


def _save(me: str) -> None:
    try:
        title = follow.lessons().save(_draft(), owner=me)
        st.session_state["lesson_done"] = _("Saved in the class store as “{title}”.", title=md_escape(title))
    except (BadLesson, PollError) as e:
        st.session_state["lesson_problem"] = md_escape(error_text(e))  # it may quote the title


def _load() -> None:
    try:
        _set(follow.lessons().load(st.session_state["lesson_saved"]))
    except (BadLesson, PollError) as e:
        st.session_state["lesson_problem"] = md_escape(error_text(e))


def _import() -> None:
    upload = st.session_state.get("lesson_file")
    if upload is None:
        return
    try:
        _set(lessons.import_json(upload.getvalue()))
        st.session_state["lesson_done"] = _("Imported “{title}”.", title=md_escape(_draft()["title"]))
    except BadLesson as e:
        st.session_state["lesson_problem"] = _("This file was not imported: {problem}", problem=md_escape(
            error_text(e)))


def _start() -> None:
    try:
        follow.start(lessons.check_lesson(_draft()))
    except (BadLesson, PollError) as e:
        st.session_state["lesson_problem"] = error_text(e)


def steps_list(lesson: dict) -> None:
    """The steps in order, each with up / down / remove."""
    n = len(lesson["steps"])
    if not n:
        st.info(_("No steps yet: open the ready lesson, or press “Add this view to the lesson” in the sidebar of "
                  "any page (Explore, Shape flow, Masking lab…) to add what it shows."))
        return
    for i, step in enumerate(lesson["steps"]):
        with st.container(border=True, key=f"lesson_step_{i}"):
            c_text, c_up, c_down, c_del = st.columns([8, 1, 1, 1], vertical_alignment="center")
            kind = _("poll") if step["kind"] == "poll" else _("view")
            c_text.markdown(_("**{i}.** {title} · _{kind}_", i=i + 1, title=md_escape(step_views.title(step)),
                              kind=kind))
            c_up.button("↑", key=f"lesson_up_{i}", disabled=i == 0, on_click=_move, args=(i, -1),
                        help=_("Move up"))
            c_down.button("↓", key=f"lesson_down_{i}", disabled=i == n - 1, on_click=_move, args=(i, 1),
                          help=_("Move down"))
            c_del.button("✕", key=f"lesson_del_{i}", on_click=_remove, args=(i,), help=_("Remove this step"))


def render() -> None:
    st.header(_("Lesson"), anchor=False)
    st.caption(_("Build a lesson from prepared views and polls, then teach it: the class joins with the code or "
                 "QR code and every phone follows your Next and Back."))
    me = owner_id()  # the saved lessons this browser may replace are its own
    running = follow.lesson_bar()
    if running is not None and DRAFT_KEY not in st.session_state:  # a reclaimed room: the editor shows its lesson
        _set(running)
    for key, show in (("lesson_problem", st.warning), ("lesson_done", st.success)):
        text = st.session_state.pop(key, None)
        if text:
            show(text)
    lesson = _draft()
    st.session_state.setdefault("lesson_title", step_views.lesson_title(lesson))
    top = st.columns([2, 3], vertical_alignment="bottom")  # the ready lesson's name whole at 1280x720
    top[0].text_input(_("Title"), key="lesson_title", max_chars=lessons.MAX_TITLE, on_change=_retitle)
    top[1].button(_("Open the ready lesson “{title}”", title=_("Chapter 3 in 40 minutes")), key="lesson_ready",
                  on_click=_open_ready, icon=":material/auto_stories:", width="stretch")
    steps_list(lesson)
    with st.expander(_("Add a step"), expanded=not lesson["steps"]):
        a, b = st.columns([3, 1], vertical_alignment="bottom")
        a.text_input(_("A page's link (its address or share link)"), key="lesson_link",
                     placeholder="http://localhost:8501/explore?mask_method=renormalize")
        b.button(_("Add the view"), key="lesson_add_link", on_click=_add_link, width="stretch")
        c, d = st.columns([3, 1], vertical_alignment="bottom")
        c.selectbox(_("A poll"), list(QUESTIONS), format_func=lambda q: _(QUESTIONS[q]), key="lesson_poll_kind")
        d.button(_("Add the poll"), key="lesson_add_poll", on_click=_add_poll, width="stretch")
    s1, s2, s3 = st.columns(3)
    s1.button(_("Save in the class store"), key="lesson_save", on_click=_save, args=(me,), icon=":material/save:",
              width="stretch", disabled=not lesson["steps"])
    try:
        exported = lessons.export_json(lesson)
    except BadLesson:
        exported = None
    s2.download_button(_("Export as JSON"), exported or "", file_name="lesson.json", mime="application/json",
                       key="lesson_export", icon=":material/download:", width="stretch", disabled=exported is None)
    if running is None:
        s3.button(_("Start the lesson with the class"), key="lesson_start", type="primary", on_click=_start,
                  icon=":material/cast_for_education:", width="stretch", disabled=not lesson["steps"])
    else:  # a second red "Start" under the running lesson's bar reads as if nothing had started
        s3.button(_("Restart from step 1"), key="lesson_start", on_click=_start, icon=":material/replay:",
                  width="stretch", disabled=not lesson["steps"],
                  help=_("The class goes back to step 1 of the lesson as it stands in this editor."))
    with st.expander(_("Saved lessons and files")):
        try:
            titles = follow.lessons().titles()
        except PollError as e:
            st.warning(error_text(e))
            titles = []
        if titles:
            e1, e2 = st.columns([3, 1], vertical_alignment="bottom")
            e1.selectbox(_("Saved in the class store"), titles, key="lesson_saved")
            e2.button(_("Open"), key="lesson_load", on_click=_load, width="stretch")
        st.file_uploader(_("Import a lesson file (JSON)"), type=["json"], key="lesson_file", on_change=_import)


render()
