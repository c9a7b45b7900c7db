"""Ask the class through AppTest: a teacher session and student sessions sharing one SQLite file, as two
replicas behind the balancer would."""

from __future__ import annotations

import re

import pytest
from langs import CHINESE

from apptest_utils import chart_with, messages, new_app, open_page
from attn_core.labs.questions import Question
from dashboard.classroom import store as ps
from dashboard.classroom.ui import _stores
from dashboard.state.links import md_escape


@pytest.fixture(autouse=True)
def class_db(tmp_path, monkeypatch, fresh_caches):
    monkeypatch.setenv(ps.DB_ENV, str(tmp_path / "class.sqlite3"))
    yield tmp_path / "class.sqlite3"
    _stores.clear()


def student(code: str):
    at = new_app(code=code)
    at.run()
    at.switch_page("app_pages/answer.py").run()
    assert not messages(at)["exception"], messages(at)
    return at


def choice_buttons(at):
    return [b for b in at.button if b.key and b.key.startswith("choice_")]


def test_teacher_asks_students_answer_teacher_reveals():
    teacher = open_page()
    teacher.button(key="poll_ask_explore").click().run()
    assert not messages(teacher)["exception"], messages(teacher)
    code = teacher.session_state["poll_room"]["code"]
    q = Question.from_dict(teacher.session_state["poll_current"]["question"]).in_words(str)
    assert q.kind == "attends_most" and "starts" in q.prompt  # the book's sentence: "Which token does starts ..."
    assert any(f"Code {code}" in h.value for h in teacher.subheader)
    assert len(teacher.get("image")) + len(teacher.get("imgs")) >= 1  # the QR code

    alice, bob = student(code.lower()), student(code)
    assert [b.label for b in choice_buttons(alice)] == [md_escape(c) for c in q.choices]  # literal, never Markdown
    choice_buttons(alice)[q.answer].click().run()
    wrong = (q.answer + 1) % len(q.choices)
    choice_buttons(bob)[q.answer].click().run()
    choice_buttons(bob)[wrong].click().run()  # bob changes his mind: still one answer
    assert any("Your answer" in c.value for c in bob.caption)

    teacher.run()  # what the refreshing fragment does every second
    tally = {r["choice"]: r["count"] for r in chart_with(teacher, "answers")}
    assert sum(tally.values()) == 2 and tally[q.choices[q.answer]] == 1 and tally[q.choices[wrong]] == 1

    teacher.button(key="poll_reveal").click().run()
    assert any("Right answer" in s.value for s in teacher.success)
    tally = {r["choice"]: r["count"] for r in chart_with(teacher, "answers")}
    assert tally["✓ " + q.choices[q.answer]] == 1  # the right choice marked, the tally kept
    assert len(teacher.get("vega_lite_chart")) >= 2  # ... and the proof row

    alice.run()
    bob.run()
    assert any(s.value.startswith("Right:") for s in alice.success)
    assert any(md_escape(q.choices[q.answer]) in e.value for e in bob.error)
    assert all(b.disabled for b in choice_buttons(bob))

    # the next question reuses the code
    teacher.button(key="poll_ask_explore").click().run()
    assert teacher.session_state["poll_room"]["code"] == code
    assert teacher.session_state["poll_current"]["seq"] == 2
    alice.run()
    assert any("question 2" in c.value for c in alice.caption)


def test_bad_codes_and_a_store_that_is_down(class_db, monkeypatch):
    at = student("NOPE123")
    assert any("no open poll with the code NOPE123" in e for e in messages(at)["error"])
    at = new_app()
    at.run()
    at.switch_page("app_pages/answer.py").run()
    assert at.text_input(key="join_code")  # no code: a field to type it
    monkeypatch.setenv(ps.DB_ENV, "postgresql://nobody@127.0.0.1:1/none")
    at = student("ABCDEFG")
    assert any("not reachable" in e for e in messages(at)["error"])
    teacher = open_page()
    teacher.button(key="poll_ask_explore").click().run()
    assert not messages(teacher)["exception"]
    assert any("not reachable" in w for w in messages(teacher)["warning"])  # the page keeps working
    assert teacher.get("vega_lite_chart")


def test_shape_flow_and_masking_lab_ask_their_questions():
    at = open_page("app_pages/shape_flow.py", variant="MultiHeadAttention")
    at.radio(key="poll_kind_shape_flow").set_value(at.radio(key="poll_kind_shape_flow").options[0]).run()
    at.button(key="poll_ask_shape_flow").click().run()
    q = Question.from_dict(at.session_state["poll_current"]["question"]).in_words(str)
    assert q.kind == "view_shape" and q.choices[q.answer].startswith("(1, 6, ")
    at = open_page("app_pages/masking_lab.py")
    at.button(key="poll_ask_masking_lab").click().run()
    assert not messages(at)["exception"], messages(at)
    assert Question.from_dict(at.session_state["poll_current"]["question"]).kind == "masking"


def test_a_student_who_reconnects_elsewhere_answers_once():
    """A replica died: the page reconnects to another process (a new session) with the same link."""
    teacher = open_page()
    teacher.button(key="poll_ask_explore").click().run()
    code = teacher.session_state["poll_room"]["code"]
    first = student(code)
    me = first.query_params["me"]
    me = me[0] if isinstance(me, list) else me
    choice_buttons(first)[0].click().run()
    again = new_app(code=code, me=me)
    again.run()
    again.switch_page("app_pages/answer.py").run()
    choice_buttons(again)[1].click().run()
    teacher.run()
    tally = {r["choice"]: r["count"] for r in chart_with(teacher, "answers")}
    assert sum(tally.values()) == 1


def qp(at, key: str) -> str:
    value = at.query_params[key]
    return value[0] if isinstance(value, list) else value


def test_the_teachers_link_reclaims_the_poll_on_another_replica(monkeypatch):
    """The teacher's replica was killed: the page reconnects elsewhere (a fresh session) with the teacher's link,
    which names the room, and the teacher's browser, which keeps its secret in a cookie (never in the link: the
    projector shows the address bar)."""
    import streamlit as st

    from dashboard.classroom.device import TEACHER_COOKIE

    teacher = open_page()
    teacher.button(key="poll_ask_explore").click().run()
    # Ask closed the popover (a new one, under a new key): the panel is visible
    assert "poll_popover_explore_1" in teacher.session_state and "poll_popover_explore_0" not in teacher.session_state
    assert teacher.session_state["poll_popover_explore_1"] is False
    code, secret = qp(teacher, "room"), teacher.session_state["poll_room"]["secret"]
    assert code == teacher.session_state["poll_room"]["code"] and "key" not in teacher.query_params
    assert any(f'{TEACHER_COOKIE}={code}.{secret};' in h.proto.body for h in teacher.get("html"))  # the page writes it
    link = next(c.value for c in teacher.code if "/answer?code=" in c.value)
    assert secret not in link and "key=" not in link  # the students' link carries the code only
    q = Question.from_dict(teacher.session_state["poll_current"]["question"]).in_words(str)
    alice = student(code)
    choice_buttons(alice)[q.answer].click().run()

    stranger = open_page(room=code)  # the code read off the projector, without the teacher's cookie
    assert any("cannot be taken over" in w for w in messages(stranger)["warning"])
    assert "poll_room" not in stranger.session_state

    monkeypatch.setattr(type(st.context), "cookies", property(lambda self: {TEACHER_COOKIE: f"{code}.{secret}"}),
                        raising=False)
    again = open_page(room=code)  # another replica: nothing in its session, the teacher's browser's cookie
    assert any(f"Code {code}" in h.value for h in again.subheader)
    assert any("question 1" in m.value and "open" in m.value for m in again.markdown)
    tally = {r["choice"]: r["count"] for r in chart_with(again, "answers")}
    assert tally[q.choices[q.answer]] == 1 and sum(tally.values()) == 1
    again.button(key="poll_reveal").click().run()
    assert any("Right answer" in s.value for s in again.success)
    alice.run()
    assert any(s.value.startswith("Right:") for s in alice.success)
    again.button(key="poll_ask_explore").click().run()  # the numbering goes on, on the same code
    assert again.session_state["poll_room"]["code"] == code and again.session_state["poll_current"]["seq"] == 2
    alice.run()
    assert any("question 2" in c.value for c in alice.caption)

    monkeypatch.setattr(type(st.context), "cookies", property(lambda self: {}), raising=False)
    wrong = open_page(room=code, key="not-the-teachers-key")
    assert any("cannot be taken over" in w for w in messages(wrong)["warning"])
    assert "poll_room" not in wrong.session_state and not wrong.get("image")  # nothing reclaimed, no panel
    assert "room" not in wrong.query_params and "key" not in wrong.query_params

    again.button(key="poll_end").click().run()
    assert "room" not in again.query_params and "key" not in again.query_params
    gone = open_page(room=code, key=secret)
    assert any("no open poll" in w for w in messages(gone)["warning"]) and "poll_room" not in gone.session_state


def test_a_reload_shows_the_students_own_answer():
    teacher = open_page()
    teacher.button(key="poll_ask_explore").click().run()
    code = teacher.session_state["poll_room"]["code"]
    first = student(code)
    me = qp(first, "me")
    choice_buttons(first)[1].click().run()
    reloaded = new_app(code=code, me=me)  # a reload: a new session, the same id
    reloaded.run()
    reloaded.switch_page("app_pages/answer.py").run()
    labels = [b.label for b in choice_buttons(reloaded)]
    assert "(yours)" in labels[1] and sum("(yours)" in label for label in labels) == 1
    assert any("Your answer" in c.value for c in reloaded.caption)
    teacher.button(key="poll_reveal").click().run()
    reloaded.run()
    assert "(yours)" in choice_buttons(reloaded)[1].label


def test_the_join_address_is_explained_in_the_teachers_language(monkeypatch):
    from dashboard.classroom import address

    monkeypatch.delenv(address.PUBLIC_URL_ENV, raising=False)
    monkeypatch.delenv(address.BIND_ADDRESS_ENV, raising=False)
    teacher = open_page(lang=CHINESE)  # Streamlit's server.address here: 127.0.0.1 (.streamlit/config.toml)
    teacher.button(key="poll_ask_explore").click().run()
    assert any("本机自己的地址" in c.value for c in teacher.caption)
    assert any(re.match(r"手机无法访问 `(localhost|127\.0\.0\.1)`", w) and "--address 0.0.0.0" in w
               for w in messages(teacher)["warning"])  # AppTest's page has no URL: localhost
    monkeypatch.setenv(address.PUBLIC_URL_ENV, "http://lab.school.example:8501")
    teacher.run()
    link = next(c.value for c in teacher.code if "/answer?code=" in c.value)
    assert link.startswith("http://lab.school.example:8501/answer?code=") and link.endswith("&lang=zh")
    assert any("ATTENTION_LAB_PUBLIC_URL" in c.value and "加入" in c.value for c in teacher.caption)
    assert not any("手机无法访问" in w for w in messages(teacher)["warning"])
    wrong = open_page(room=teacher.session_state["poll_room"]["code"], key="wrong", lang=CHINESE)
    assert any("无法用这个链接接管投票" in w for w in messages(wrong)["warning"])


def test_the_teachers_link_stays_on_every_page_and_reclaims_on_any():
    teacher = open_page()
    teacher.button(key="poll_ask_explore").click().run()
    code, secret = qp(teacher, "room"), teacher.session_state["poll_room"]["secret"]
    del teacher.query_params["room"]  # a page switch in the browser empties the link's other values
    teacher.switch_page("app_pages/text_to_vectors.py").run()
    assert qp(teacher, "room") == code and "key" not in teacher.query_params  # back in the link, on a page with no poll

    other = open_page("app_pages/text_to_vectors.py", room=code, key=secret)  # a key copied by hand still works
    assert "key" not in other.query_params  # and leaves the address bar
    assert other.session_state["poll_room"] == {"code": code, "secret": secret}
    other.switch_page("app_pages/explore.py").run()
    assert any(f"Code {code}" in h.value for h in other.subheader)  # the panel at the next Ask control
