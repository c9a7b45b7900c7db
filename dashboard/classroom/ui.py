"""Ask the class: the teacher's control and panel beside a picture, and the students' page (``?code=``).

A page calls :func:`ask_the_class` with what it shows (a trace and its labels); the question is generated from
that trace (:mod:`attn_core.labs.questions`) when the teacher presses Ask. The room's code and secret stay in the
teacher's session and the teacher's own link (``?room=&key=``: when the teacher's app process dies, the page
reconnects to another one and reclaims the room from the store; never in the students' link); answers go to the
shared store (:mod:`.store`), so every app process behind the balancer sees them. The tally refreshes every
:data:`REFRESH_S` seconds in a fragment. A phone answers under one random id (:mod:`.device`).
"""

from __future__ import annotations

import io
import secrets
import threading
from collections.abc import Callable
from urllib.parse import quote

import streamlit as st

from attn_core.labs import questions as qs
from attn_core.labs.questions import Question
from attn_core.tracing.trace import Trace
from dashboard.classroom import address
from dashboard.classroom.charts import proof_chart, tally_chart
from dashboard.classroom.device import TEACHER_COOKIE, cookie, write_cookie
from dashboard.classroom.store import EXPIRY_S, NoSuchPoll, PollError, PollStore, StoreDown, default_url, normalize_code
from dashboard.i18n import _, lang, message, ngettext
from dashboard.state.links import error_text, md_escape

REFRESH_S = 1.0  # the teacher's tally: answers show well within the goal (docs/measurements.md)
ANSWER_PATH = "answer"  # the students' page (dashboard/app_pages/answer.py)
ROOM_PARAM, KEY_PARAM = "room", "key"  # the teacher's own link: ?room=CODE (a ?key=SECRET is read, never written)

_stores: dict[str, PollStore] = {}
_stores_lock = threading.Lock()


def store() -> PollStore:
    """This process's store for ``$ATTENTION_LAB_CLASS_DB`` (one connection, opened on first use)."""
    url = default_url()
    with _stores_lock:
        if url not in _stores:
            _stores[url] = PollStore(url)
        return _stores[url]


def join_base() -> address.JoinBase:
    """Where phones join (:func:`dashboard.classroom.address.choose`), from the address the teacher's browser used
    (behind the balancer: the balancer's) and this server's settings."""
    seen = getattr(st.context, "url", None) or "http://localhost:8501/"
    return address.from_environment(seen, st.get_option("server.address"))


def join_link(code: str, base: address.JoinBase | None = None) -> str:
    """The students' link, in the teacher's language (``&lang=``: a student can switch on the phone)."""
    return f"{(base or join_base()).url}/{ANSWER_PATH}?code={quote(code)}&lang={lang()}"


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
                i = qs.provable_query(trace, head, query)  # a clicked near tie the screen cannot settle: another row
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
    def menu() -> Callable[[], Question]:
        builders = question_options(trace, labels, **options)
        pick = st.radio(_("Question"), list(builders), key=f"poll_kind_{page}", label_visibility="collapsed")
        st.caption(_("The class answers on their phones; the true answer is read from this trace."))
        return builders[pick]

    _control(where, page, menu)


def ask_question(where, page: str, label: str, build: Callable[[], Question], caption: str) -> None:
    """The "Ask the class" control for one question that is not read from a trace (``build()`` runs only when the
    teacher asks: it may run a model), and once asked the teacher's panel under it."""
    def one() -> Callable[[], Question]:
        st.markdown(label)
        st.caption(caption)
        return build

    _control(where, page, one)


def _control(where, page: str, inside: Callable[[], Callable[[], Question]]) -> None:
    """The popover (``inside()`` draws its choices and returns the question's builder) with Ask, then the panel.
    The builder is called in this run, never handed to the button: a callback's arguments live as long as the
    session's widgets, and the builder holds the page's trace."""
    teacher_link()
    with where.popover(_("Ask the class"), icon=":material/how_to_vote:", key=popover_key(page),
                       on_change="rerun"):  # a widget with a key: a new key is a new, closed popover
        build = inside()
        st.button(_("Ask"), key=f"poll_ask_{page}", type="primary", icon=":material/send:", on_click=_ask_clicked,
                  args=(page,))
    if st.session_state.pop(f"poll_ask_go_{page}", False):
        try:
            _ask(page, build())
        except ValueError as e:
            st.session_state[f"poll_ask_msg_{page}"] = error_text(e)
    problem = st.session_state.pop(f"poll_ask_msg_{page}", None)
    if problem:  # under the closed popover, where the teacher looks
        where.warning(problem)
    current = st.session_state.get("poll_current")
    if current and current.get("page") is None:  # reclaimed on a page without this control: the panel goes here
        current["page"] = page
    if current and current.get("page") == page:
        with where.container(border=True, key=f"poll_panel_{page}"):
            teacher_panel()


def popover_key(page: str) -> str:
    """The Ask popover's key: a new one after each Ask (see :func:`_ask_clicked`)."""
    return f"poll_popover_{page}_{st.session_state.get(f'poll_asks_{page}', 0)}"


def _ask_clicked(page: str) -> None:
    """Ask's callback: the run that follows asks, and draws the popover under a new key, so closed: it would cover
    the panel. (Setting its state to closed left it open now and then: the browser's own open/close reruns race
    with it; see docs/measurements.md.)"""
    st.session_state[f"poll_ask_go_{page}"] = True
    st.session_state[f"poll_asks_{page}"] = st.session_state.get(f"poll_asks_{page}", 0) + 1


def remember_room(code: str, secret: str) -> None:
    """The room in the session, its code in the teacher's link and its secret in a cookie of the teacher's browser
    (never in the link, which the projector shows): when the teacher's app process dies, the page reconnects to
    another one, which reclaims the room from the store."""
    st.session_state["poll_room"] = {"code": code, "secret": secret}
    st.query_params[ROOM_PARAM] = code
    st.query_params.pop(KEY_PARAM, None)
    write_cookie(TEACHER_COOKIE, f"{code}.{secret}", EXPIRY_S)


def _forget_room() -> None:
    st.session_state.pop("poll_room", None)
    st.session_state.pop("poll_current", None)
    st.query_params.pop(ROOM_PARAM, None)
    st.query_params.pop(KEY_PARAM, None)
    write_cookie(TEACHER_COOKIE, "", 0)


def _kept_secret(code: str) -> str:
    """The secret of room ``code`` this browser keeps (its cookie), else one a link brings (``?key=``: a teacher
    moving to another device copies it by hand; never written into a link)."""
    code_kept, __, secret = (cookie(TEACHER_COOKIE) or "").partition(".")
    if code_kept == code and secret:
        return secret
    return st.query_params.get(KEY_PARAM, "")


def teacher_link() -> None:
    """Every run of a teacher's page (dashboard/main.py). A session with a room keeps its code in the link (a page
    switch empties the link's other values). A session without one whose link names a room (``?room=``: the
    teacher's app process died and the page reconnected to another one, or the teacher reloaded) gets the room
    back from the store with the secret this browser keeps, its current poll shown by the next Ask control. A
    wrong or missing secret or an ended room: a message, and the link forgets the room."""
    room = st.session_state.get("poll_room")
    if room is not None:
        if st.query_params.get(ROOM_PARAM) != room["code"] or KEY_PARAM in st.query_params:
            remember_room(room["code"], room["secret"])
        return
    code = normalize_code(st.query_params.get(ROOM_PARAM, ""))
    if not code:
        return
    secret = _kept_secret(code)
    try:
        poll = store().reclaim(code, secret)
    except StoreDown as e:  # keep the link: the next run tries again
        st.warning(_("{problem} The page keeps working; the poll shows again once the store answers.",
                     problem=error_text(e)))
        return
    except PollError as e:
        _forget_room()
        st.warning(_("This link's poll cannot be taken over: {problem}", problem=error_text(e)))
        return
    remember_room(code, secret)
    if poll is not None:
        st.session_state["poll_current"] = {"page": None, "seq": poll.seq, "question": poll.question}


def _ask(page: str, question: Question) -> bool:
    """Put ``question`` to the teacher's room (made on first use; the same code for every next question);
    whether it was asked (else a message for the popover)."""
    room = st.session_state.get("poll_room")
    try:
        try:
            if room is None:
                raise NoSuchPoll("no room yet")
            seq = store().ask(room["code"], room["secret"], question.to_dict())
            remember_room(room["code"], room["secret"])
        except NoSuchPoll:  # the first question, or the room expired: a new code
            code, secret = store().create_room()
            remember_room(code, secret)
            seq = store().ask(code, secret, question.to_dict())
    except PollError as e:
        st.session_state[f"poll_ask_msg_{page}"] = error_text(e)
        return False
    st.session_state["poll_current"] = {"page": page, "seq": seq, "question": question.to_dict()}
    return True


def _set_state(state: str) -> None:
    room = st.session_state.get("poll_room") or {}
    try:
        store().set_state(room.get("code", ""), room.get("secret", ""), state)
    except PollError as e:
        st.session_state["poll_msg"] = error_text(e)


def _end() -> None:
    room = st.session_state.get("poll_room") or {}
    _forget_room()
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
    if poll is not None and poll.seq != seq:  # asked (or gone back to) elsewhere: show the store's
        current = st.session_state["poll_current"] = {**current, "seq": poll.seq, "question": poll.question}
        seq, q = poll.seq, Question.from_dict(poll.question).in_words(message)
    state = poll.state if poll is not None and poll.seq == seq else "closed"
    st.markdown({"open": _("**Ask the class** · question {seq} · :green[open]", seq=seq),
                 "closed": _("**Ask the class** · question {seq} · :orange[closed]", seq=seq),
                 "revealed": _("**Ask the class** · question {seq} · :blue[revealed]", seq=seq)}[state])
    st.markdown(f"#### {md_escape(q.prompt)}")
    left, right = st.columns([1, 2])
    base = join_base()
    link = join_link(code, base)
    left.image(qr_png(link), width=150, alt=_("QR code of the join link"))
    with right:
        st.subheader(_("Code {code}", code=code), anchor=False)
        st.code(link, language=None, wrap_lines=True)
    st.caption(_(base.why))
    if base.warning is not None:
        st.warning(_(base.warning))
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
