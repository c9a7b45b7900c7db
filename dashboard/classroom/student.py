"""The students' page of "Ask the class" (``/answer?code=``): one question with big buttons, the reveal and its
proving row when the teacher reveals; a room running a lesson draws the teacher's step instead (:mod:`.follow`).
The page is redrawn whole when the room changes (:func:`.watch.watch`, the phone's one timer)."""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from attn_core.labs.questions import Question
from dashboard.classroom.charts import proof_bars, tally_chart
from dashboard.classroom.device import student_id
from dashboard.classroom.store import PollError, normalize_code
from dashboard.classroom.ui import store
from dashboard.classroom.watch import room_now, watch
from dashboard.drawing.present import A11Y_CSS
from dashboard.i18n import _, message
from dashboard.i18n import switch as language_switch
from dashboard.state.links import error_text, md_escape

STUDENT_CSS = """<style>
.st-key-poll_choices button {min-height: 3.4rem; font-size: 1.15rem;}
.st-key-poll_choices button p {font-size: 1.15rem;}
.stApp [data-testid="stElementToolbar"] {display: none !important;}
""" + A11Y_CSS + "</style>"  # the app's contrast fixes: this page draws no sidebar, where the others get them
# A tap on a phone leaves a chart's toolbar (fullscreen, download) shown over the next step's title; a phone
# needs neither, so this page draws none.


def show_proving_row(q: Question) -> None:
    """The proof on a phone: the proving row as bars (the right answer green and ✓, each value to the decimals
    that tell it apart), or the table of shapes with the right step marked; never the whole heatmap."""
    chart = proof_bars(q.proof)
    if chart is not None:
        st.altair_chart(chart, width="content")  # sized from its rows (charts.proof_bars)
    elif q.proof.get("labels"):
        hi = q.proof.get("highlight", -1)
        st.table({_("step"): [("✓ " if k == hi else "") + str(s) for k, s in enumerate(q.proof["labels"])],
                  _("shape"): q.proof["values"]})


def student_page(follow: Callable[[str, str], bool] | None = None) -> None:
    """One question, big buttons, the reveal when the teacher reveals. No login, nothing personal stored.
    ``follow(code, session)``: draws the room's running lesson instead when it has one (classroom/follow.py)."""
    st.html(STUDENT_CSS)
    language_switch(st)  # the teacher's language comes with the link; a student may read the other
    code = normalize_code(st.query_params.get("code", ""))
    if not code:
        st.header(_("Answer the class's question"))
        typed = st.text_input(_("Join code (on the teacher's screen)"), max_chars=12, key="join_code")
        if st.button(_("Join"), type="primary", width="stretch") and normalize_code(typed):
            st.query_params["code"] = normalize_code(typed)
            st.rerun()
        return
    me = student_id()
    if follow is not None and follow(code, me):  # a room running a lesson: the phone follows the teacher
        return
    try:
        drawn = room_now(code, fresh=True)  # read before drawing: a change after it redraws the page
    except PollError as e:
        st.error(error_text(e))
        return
    watch(code, drawn)
    poll_view(code, me)


def _send(code: str, seq: int, session: str, choice: int) -> None:
    try:
        store().answer(code, seq, session, choice)
        st.session_state[f"poll_mine_{code}_{seq}"] = choice
    except PollError as e:
        st.session_state["poll_msg"] = error_text(e)


def poll_view(code: str, session: str, headed: bool = True) -> None:
    """The class's current question on a phone; ``headed``: under its own "Class X · question N" line (a lesson's
    phone has its "Class X · step N of M" line above instead)."""
    try:
        poll = store().current(code)
    except PollError as e:
        st.error(error_text(e))
        return
    if poll is None:
        st.info(_("Class {code}: waiting for the teacher's first question…", code=code))
        return
    q = Question.from_dict(poll.question).in_words(message)
    try:  # from the store: a reload or another tab of this phone shows the answer it sent
        mine = store().my_answer(code, poll.seq, session)
    except PollError:
        mine = st.session_state.get(f"poll_mine_{code}_{poll.seq}")
    revealed = poll.state == "revealed"
    if headed:
        st.caption(_("Class {code} · question {seq}", code=code, seq=poll.seq))
    st.markdown(f"### {md_escape(q.prompt)}")
    with st.container(key="poll_choices"):
        for k, choice in enumerate(q.choices):
            mark = ("✓ " if revealed and k == q.answer else "") + ("● " if mine == k else "")
            label = mark + (_("{choice} (yours)", choice=md_escape(choice)) if mine == k else md_escape(choice))
            st.button(label, key=f"choice_{poll.seq}_{k}", width="stretch",
                      type="primary" if mine == k else "secondary", disabled=poll.state != "open",
                      on_click=_send, args=(code, poll.seq, session, k))
    msg = st.session_state.pop("poll_msg", None)
    if msg:
        st.warning(msg)
    if poll.state == "open":
        st.caption(_("Tap your answer. You can change it until the teacher closes the question.") if mine is None
                   else _("Your answer: {answer}. You can change it until the teacher closes the question.",
                          answer=md_escape(q.choices[mine])))
    elif poll.state == "closed":
        st.info(_("The teacher closed this question: the answer comes next."))
    else:
        right = md_escape(q.choices[q.answer])
        if mine == q.answer:
            st.success(_("Right: **{answer}**", answer=right))
        elif mine is None:
            st.error(_("The answer is **{answer}**", answer=right))
        else:
            st.error(_("The answer is **{answer}**; you chose {mine}", answer=right,
                       mine=md_escape(q.choices[mine])))
        st.caption(md_escape(q.explain))
        show_proving_row(q)
        try:
            counts = store().tally(code, poll.seq)
            st.altair_chart(tally_chart(list(q.choices), counts, q.answer, x_title=_("answers")), width="stretch")
        except PollError as e:
            st.warning(error_text(e))
