"""Ask the class: the teacher's control and panel beside a picture, and the students' page (``?code=``).

A page calls :func:`ask_the_class` with what it shows (a trace and its labels); the question is generated from
that trace (:mod:`attn_core.labs.questions`) when the teacher presses Ask. The room's code and secret stay in the
teacher's session (the secret nowhere else); answers go to the shared store (:mod:`.store`), so every app process
behind the balancer sees them. The tally refreshes every :data:`REFRESH_S` seconds in a fragment.
"""

from __future__ import annotations

import io
import secrets
import threading
from collections.abc import Callable
from urllib.parse import quote, urlsplit

import streamlit as st

from attn_core.labs import questions as qs
from attn_core.labs.questions import Question
from attn_core.tracing.trace import Trace
from dashboard.classroom.charts import proof_chart, tally_chart
from dashboard.classroom.store import NoSuchPoll, PollError, PollStore, default_url, normalize_code
from dashboard.drawing.present import A11Y_CSS
from dashboard.i18n import _, lang, message, ngettext
from dashboard.i18n import switch as language_switch
from dashboard.state.links import error_text, md_escape

REFRESH_S = 1.0  # the teacher's tally: answers show well within the goal (docs/measurements.md)
STUDENT_REFRESH_S = 1.5  # a student's page notices a close, a reveal or the next question
ANSWER_PATH = "answer"  # the students' page (dashboard/app_pages/answer.py)
STUDENT_CSS = """<style>
.st-key-poll_choices button {min-height: 3.4rem; font-size: 1.15rem;}
.st-key-poll_choices button p {font-size: 1.15rem;}
""" + A11Y_CSS + "</style>"  # the app's contrast fixes: this page draws no sidebar, where the others get them

_stores: dict[str, PollStore] = {}
_stores_lock = threading.Lock()


def store() -> PollStore:
    """This process's store for ``$ATTENTION_LAB_CLASS_DB`` (one connection, opened on first use)."""
    url = default_url()
    with _stores_lock:
        if url not in _stores:
            _stores[url] = PollStore(url)
        return _stores[url]


def join_link(code: str) -> str:
    """The students' link, on the host the teacher's browser used (behind the balancer: the balancer's), in the
    teacher's language (``&lang=``: a student can switch on the phone)."""
    url = getattr(st.context, "url", None) or "http://localhost:8501/"
    parts = urlsplit(url)
    return (f"{parts.scheme or 'http'}://{parts.netloc or 'localhost:8501'}/{ANSWER_PATH}?code={quote(code)}"
            f"&lang={lang()}")


def qr_png(text: str) -> bytes:
    """A QR code of ``text`` as PNG bytes (segno; error correction M, a quiet zone of 2 modules)."""
    import segno

    buf = io.BytesIO()
    segno.make(text, error="m").save(buf, kind="png", scale=6, border=2)
    return buf.getvalue()


def _piece(label: str) -> str:
    return label.split(": ", 1)[1] if ": " in label else label


def question_options(trace: Trace, labels: list[str], *, head: int = 0, query: int | None = None,
                     kinds: tuple[str, ...] = ("attends_most",), layer: int | None = None
                     ) -> dict[str, Callable[[], Question]]:
    """What the teacher can ask about this trace: a menu label -> the generator (run only when asked)."""
    H = qs.num_heads(trace)
    out: dict[str, Callable[[], Question]] = {}
    for kind in kinds:
        if kind == "attends_most":
            try:
                i = qs.default_query(trace, head) if query is None else query
            except ValueError:
                i = len(labels) - 1
            token = md_escape(_piece(labels[i]))
            asked = (_("Which token does '{token}' attend to most in head {head}?", token=token, head=head + 1)
                     if H > 1 else _("Which token does '{token}' attend to most?", token=token))
            out[asked] = lambda i=i: qs.attends_most(trace, labels, head, i)
        elif kind == "view_shape":
            for name in ("keys", "queries"):
                if any(s.name == f"{name}.view" for s in trace.steps):
                    out[_("The shape of `{name}` after .view", name=name)] = (
                        lambda name=name: qs.view_shape(trace, name))
        elif kind == "masking":
            out[_("Renormalize or −∞: which masking gives this row?")] = (
                lambda: qs.masking(trace, labels, head, seed=secrets.randbelow(1000)))
        elif kind == "previous_token_head" and H >= qs.MIN_CHOICES:
            asked = (_("Which head of layer {layer} is the previous-token head?", layer=layer + 1)
                     if layer is not None else _("Which head is the previous-token head?"))
            out[asked] = (
                lambda: qs.previous_token_head(qs.trace_heads(trace), layer))
    return out


def ask_the_class(where, page: str, trace: Trace, labels: list[str], **options) -> None:
    """The "Ask the class" control in ``where`` (a column or the page) and, once asked, the teacher's panel
    under it. ``options``: :func:`question_options`'s (head, query, kinds, layer)."""
    with where.popover(_("Ask the class"), icon=":material/how_to_vote:"):
        menu = question_options(trace, labels, **options)
        pick = st.radio(_("Question"), list(menu), key=f"poll_kind_{page}", label_visibility="collapsed")
        st.caption(_("The class answers on their phones; the true answer is read from this trace."))
        if st.button(_("Ask"), key=f"poll_ask_{page}", type="primary", icon=":material/send:"):
            try:
                _ask(page, menu[pick]())
            except ValueError as e:
                st.warning(error_text(e))
    current = st.session_state.get("poll_current")
    if current and current.get("page") == page:
        with where.container(border=True, key=f"poll_panel_{page}"):
            teacher_panel()


def ask_question(where, page: str, label: str, build: Callable[[], Question], caption: str) -> None:
    """The "Ask the class" control for one question that is not read from a trace (``build()`` runs only when the
    teacher asks: it may run a model), and once asked the teacher's panel under it."""
    with where.popover(_("Ask the class"), icon=":material/how_to_vote:"):
        st.markdown(label)
        st.caption(caption)
        if st.button(_("Ask"), key=f"poll_ask_{page}", type="primary", icon=":material/send:"):
            try:
                _ask(page, build())
            except ValueError as e:
                st.warning(str(e))
    current = st.session_state.get("poll_current")
    if current and current.get("page") == page:
        with where.container(border=True, key=f"poll_panel_{page}"):
            teacher_panel()


def _ask(page: str, question: Question) -> None:
    """Put ``question`` to the teacher's room (made on first use; the same code for every next question)."""
    room = st.session_state.get("poll_room")
    try:
        try:
            if room is None:
                raise NoSuchPoll("no room yet")
            seq = store().ask(room["code"], room["secret"], question.to_dict())
        except NoSuchPoll:  # the first question, or the room expired: a new code
            code, secret = store().create_room()
            room = st.session_state["poll_room"] = {"code": code, "secret": secret}
            seq = store().ask(code, secret, question.to_dict())
    except PollError as e:
        st.warning(error_text(e))
        return
    st.session_state["poll_current"] = {"page": page, "seq": seq, "question": question.to_dict()}


def _set_state(state: str) -> None:
    room = st.session_state.get("poll_room") or {}
    try:
        store().set_state(room.get("code", ""), room.get("secret", ""), state)
    except PollError as e:
        st.session_state["poll_msg"] = error_text(e)


def _end() -> None:
    room = st.session_state.pop("poll_room", None) or {}
    st.session_state.pop("poll_current", None)
    try:
        store().delete_room(room.get("code", ""), room.get("secret", ""))
    except PollError as e:
        st.session_state["poll_msg"] = error_text(e)


def _tally(code: str, seq: int, choices: list[str], answer: int | None) -> None:
    try:
        counts = store().tally(code, seq)
    except PollError as e:
        st.warning(error_text(e))
        return
    st.altair_chart(tally_chart(choices, counts, answer, x_title=_("answers")), width="stretch",
                    key=f"tally_{code}_{seq}_{lang()}")
    n = sum(counts)
    if answer is None:
        st.caption(ngettext("{n} answer · refreshed every second", "{n} answers · refreshed every second", n))
    else:
        st.caption(ngettext("{n} answer", "{n} answers", n))


_live_tally = st.fragment(run_every=REFRESH_S)(_tally)


def teacher_panel() -> None:
    """Code, link and QR code; the live tally; close / reveal / end; after the reveal the answer and its proof."""
    room, current = st.session_state["poll_room"], st.session_state["poll_current"]
    code, seq, q = room["code"], current["seq"], Question.from_dict(current["question"]).in_words(message)
    msg = st.session_state.pop("poll_msg", None)
    if msg:
        st.warning(msg)
    try:
        poll = store().current(code)
    except PollError as e:
        st.warning(_("{problem} The page keeps working; the poll shows again once the store answers.",
                     problem=error_text(e)))
        return
    state = poll.state if poll is not None and poll.seq == seq else "closed"
    st.markdown({"open": _("**Ask the class** · question {seq} · :green[open]", seq=seq),
                 "closed": _("**Ask the class** · question {seq} · :orange[closed]", seq=seq),
                 "revealed": _("**Ask the class** · question {seq} · :blue[revealed]", seq=seq)}[state])
    st.markdown(f"#### {md_escape(q.prompt)}")
    left, right = st.columns([1, 2])
    link = join_link(code)
    left.image(qr_png(link), width=150, alt=_("QR code of the join link"))
    with right:
        st.subheader(_("Code {code}", code=code), anchor=False)
        st.code(link, language=None, wrap_lines=True)
    b1, b2, b3 = st.columns(3)
    if state == "open":
        b1.button(_("Close"), key="poll_close", icon=":material/lock:", on_click=_set_state, args=("closed",),
                  width="stretch")
    else:
        b1.button(_("Reopen"), key="poll_reopen", icon=":material/lock_open:", on_click=_set_state, args=("open",),
                  width="stretch")
    b2.button(_("Reveal"), key="poll_reveal", type="primary", icon=":material/visibility:", width="stretch",
              disabled=state == "revealed", on_click=_set_state, args=("revealed",))
    b3.button(_("End"), key="poll_end", icon=":material/close:", on_click=_end, width="stretch",
              help=_("End the poll: its code stops working"))
    if state == "revealed":
        _tally(code, seq, list(q.choices), q.answer)
    else:
        _live_tally(code, seq, list(q.choices), None)
    if state == "revealed":
        st.success(_("Right answer: **{answer}**", answer=md_escape(q.choices[q.answer])))
        st.caption(md_escape(q.explain))
        show_proof(q)


def show_proof(q: Question, width: int | None = None) -> None:
    """The numbers that prove the answer: a chart of the row / the heads' scores, or the table of shapes."""
    chart = proof_chart(q.proof, width=width)
    if chart is not None:
        st.altair_chart(chart, width="content", key=f"proof_{q.kind}")
    elif q.proof.get("labels"):
        st.table({_("step"): q.proof["labels"], _("shape"): q.proof["values"]})


# -- the students' page ----------------------------------------------------------------------------------------
def student_page() -> None:
    """One question, big buttons, the reveal when the teacher reveals. No login, nothing personal stored."""
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
    _student_live(code, student_id())


def student_id() -> str:
    """This browser's random answer id, kept in its link (``?me=``): when its app process dies and the page
    reconnects to another one, the same id comes back, so a repeated answer replaces the first instead of adding
    to the tally. Nothing personal: 16 random bytes."""
    me = st.query_params.get("me", "")
    if not (16 <= len(me) <= 32 and all(c.isalnum() or c in "-_" for c in me)):
        me = st.session_state.setdefault("poll_session", secrets.token_urlsafe(16))
        st.query_params["me"] = me
    return me


def _send(code: str, seq: int, session: str, choice: int) -> None:
    try:
        store().answer(code, seq, session, choice)
        st.session_state[f"poll_mine_{code}_{seq}"] = choice
    except PollError as e:
        st.session_state["poll_msg"] = error_text(e)


@st.fragment(run_every=STUDENT_REFRESH_S)
def _student_live(code: str, session: str) -> None:
    try:
        poll = store().current(code)
    except PollError as e:
        st.error(error_text(e))
        return
    if poll is None:
        st.info(_("Class {code}: waiting for the teacher's first question…", code=code))
        return
    q = Question.from_dict(poll.question).in_words(message)
    mine = st.session_state.get(f"poll_mine_{code}_{poll.seq}")
    revealed = poll.state == "revealed"
    st.caption(_("Class {code} · question {seq}", code=code, seq=poll.seq))
    st.markdown(f"### {md_escape(q.prompt)}")
    with st.container(key="poll_choices"):
        for k, choice in enumerate(q.choices):
            mark = ("✓ " if revealed and k == q.answer else "") + ("● " if mine == k else "")
            label = mark + (_("{choice} (yours)", choice=md_escape(choice)) if revealed and mine == k
                            else md_escape(choice))
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
        try:
            counts = store().tally(code, poll.seq)
            st.altair_chart(tally_chart(list(q.choices), counts, q.answer, x_title=_("answers")), width="stretch")
        except PollError as e:
            st.warning(error_text(e))
