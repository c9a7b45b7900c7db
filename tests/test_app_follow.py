"""Follow mode through AppTest: a teacher session on the Lesson page and student sessions on the phones' page,
sharing one SQLite file as replicas behind the balancer would."""

from __future__ import annotations

import time

import pytest
from i18n_check import english_left
from langs import CHINESE, ENGLISH

from apptest_utils import messages, new_app
from dashboard.classroom import follow, step_views, watch
from dashboard.classroom import lessons as L
from dashboard.classroom import store as ps

pytestmark = pytest.mark.usefixtures("class_app_db")


def teacher():
    at = new_app()
    at.run()
    at.switch_page("app_pages/lesson.py").run()
    assert not messages(at)["exception"], messages(at)
    return at


def phone(code: str, lang: str = ENGLISH):
    at = new_app(code=code, lang=lang)
    at.run()
    at.switch_page("app_pages/answer.py").run()
    assert not messages(at)["exception"], messages(at)
    return at


def shown_step(at) -> str:
    return next(c.value for c in at.caption if " · step " in c.value or "步 · " in c.value)


def test_teacher_builds_a_lesson_from_views_reorders_and_saves():
    at = new_app(mask_method="renormalize")
    at.run()
    at.button(key="lesson_add_view").click().run()  # Explore's sidebar: "Add this view to the lesson"
    assert not messages(at)["exception"], messages(at)
    draft = at.session_state["lesson_draft"]
    assert draft["steps"] == [{"kind": "view", "page": "explore", "params": {"mask_method": "renormalize"}}]
    at.switch_page("app_pages/lesson.py").run()
    at.text_input(key="lesson_link").input("http://localhost:8501/tiled?num_heads=3&d_out=6&variant="
                                           "MultiHeadAttentionTiled")
    at.button(key="lesson_add_link").click().run()
    at.button(key="lesson_add_poll").click().run()
    assert [s.get("page", s["kind"]) for s in at.session_state["lesson_draft"]["steps"]] == [
        "explore", "tiled", "poll"]
    at.button(key="lesson_up_1").click().run()
    assert [s.get("page", s["kind"]) for s in at.session_state["lesson_draft"]["steps"]] == [
        "tiled", "explore", "poll"]
    at.text_input(key="lesson_link").input("http://localhost:8501/tiled?num_heads=0").run()
    at.button(key="lesson_add_link").click().run()
    assert any("num_heads" in w and "not valid" in w for w in messages(at)["warning"]), messages(at)
    assert len(at.session_state["lesson_draft"]["steps"]) == 3  # nothing added
    at.text_input(key="lesson_title").input("Masks").run()
    at.button(key="lesson_save").click().run()
    assert any("Masks" in s.value for s in at.success), messages(at)
    saved = L.LessonStore(ps.PollStore()).load("Masks")
    assert [s.get("page", s["kind"]) for s in saved["steps"]] == ["tiled", "explore", "poll"]
    exported = next(b for b in at.get("download_button") if "lesson_export" in b.proto.id)
    assert not exported.proto.disabled  # the file is offered (its content: test_lessons's round trip)


def test_phones_follow_next_and_back_and_a_late_joiner_lands_on_the_current_step():
    t = teacher()
    t.button(key="lesson_ready").click().run()
    t.button(key="lesson_start").click().run()
    assert not messages(t)["exception"], messages(t)
    code = t.session_state["poll_room"]["code"]
    n = len(L.ready()["steps"])
    assert any(f"Step 1 of {n}" in m.value for m in t.markdown)
    qr = [img for el in t.get("image") for img in el.proto.imgs]  # the lesson bar's QR code (the poll panel's has one)
    assert qr and all(img.alt == "QR code of the join link" for img in qr)
    early = phone(code)
    assert shown_step(early) == f"Class {code} · step 1 of {n} · following the teacher"
    # the step's one-line reading: a winner, or a tie where the chart prints them the same (step_views._most)
    assert any("attends most to" in m.value or "attends about equally to" in m.value for m in early.markdown)
    assert len(early.get("vega_lite_chart")) == 1  # its main chart
    assert not early.sidebar.get("text_area") and not early.get("number_input")  # no settings on a phone
    t.button(key="lesson_next").click().run()  # step 2 is a poll: the class gets its question
    assert not messages(t)["exception"], messages(t)
    assert t.session_state["poll_current"]["page"] == "lesson"
    early.run()  # what the phone's half-second watch does when the step moved
    assert shown_step(early).startswith(f"Class {code} · step 2 of {n}")
    # one heading: "Class X · question 1" stood right under "Class X · step 2 of 11"
    assert [c.value for c in early.caption if c.value.startswith("Class ")] == [shown_step(early)]
    buttons = [b for b in early.button if b.key and b.key.startswith("choice_")]
    assert len(buttons) == 4  # the poll, with big buttons
    buttons[0].click().run()
    t.run()
    assert sum(ps.PollStore().tally(code, 1)) == 1
    t.button(key="lesson_next").click().run()
    t.button(key="lesson_next").click().run()
    late = phone(code, CHINESE)  # joins at step 4, in Chinese
    assert shown_step(late) == f"课堂 {code} · 第 4/{n} 步 · 跟随老师"  # 课堂, as its poll page says (one word)
    assert any("重新归一化" in m.value for m in late.markdown)  # the step's title, in the chapter's terms
    assert not english_left(late), english_left(late)
    assert L.LessonStore(ps.PollStore()).position(code)[0] == 3
    t.button(key="lesson_back").click().run()
    early.run()
    assert shown_step(early).startswith(f"Class {code} · step 3 of {n}")
    again = t.button(key="lesson_start")  # under a running lesson: not a second red "Start" but a restart
    assert (again.label, again.proto.type) == ("Restart from step 1", "secondary"), again.label
    again.click().run()
    early.run()
    assert shown_step(early).startswith(f"Class {code} · step 1 of {n}")


def test_a_student_looks_around_and_comes_back_to_the_teacher():
    t = teacher()
    t.button(key="lesson_ready").click().run()
    t.button(key="lesson_start").click().run()
    code = t.session_state["poll_room"]["code"]
    n = len(L.ready()["steps"])
    p = phone(code)
    p.button(key="follow_next").click().run()
    p.button(key="follow_next").click().run()
    assert shown_step(p) == f"Class {code} · step 3 of {n} · looking around"
    t.button(key="lesson_next").click().run()
    p.run()
    assert shown_step(p) == f"Class {code} · step 3 of {n} · looking around"  # the teacher's Next does not pull
    assert any("The teacher is at step 2." == c.value for c in p.caption)
    p.button(key="follow_back").click().run()
    assert shown_step(p) == f"Class {code} · step 2 of {n} · following the teacher"


def test_students_cannot_move_the_class_and_an_ended_lesson_leaves_the_poll_page():
    t = teacher()
    t.button(key="lesson_ready").click().run()
    t.button(key="lesson_start").click().run()
    code = t.session_state["poll_room"]["code"]
    p = phone(code)
    assert not [b for b in p.button if b.key in ("lesson_next", "lesson_back")]
    t.button(key="lesson_stop").click().run()
    p.run()
    assert not any(" · step " in c.value for c in p.caption)
    assert any("waiting for the teacher" in i.value for i in p.info)


def test_one_drawing_for_every_phone():
    t = teacher()
    t.button(key="lesson_ready").click().run()
    t.button(key="lesson_start").click().run()
    code = t.session_state["poll_room"]["code"]
    drawn = sum(step_views.DRAWN.values())
    assert drawn == 2  # the first step, once in each language, by the teacher's Next
    for _unused in range(3):
        phone(code)
    phone(code, CHINESE)
    assert sum(step_views.DRAWN.values()) == drawn  # the phones only read it


def test_a_replicas_phones_share_one_read_of_the_step(monkeypatch):
    polls = ps.PollStore()
    code, secret = polls.create_room()
    store = follow.lessons()
    store.start(code, secret, L.ready())
    calls = []
    real = L.LessonStore.position
    monkeypatch.setattr(L.LessonStore, "position", lambda self, c: calls.append(c) or real(self, c))
    watch._positions.clear()
    for _unused in range(30):  # thirty phones' watch fragments on this replica
        assert watch.room_now(code).step == 0
    assert len(calls) == 1
    store.go(code, secret, 2)  # the teacher's Next, on another replica
    time.sleep(watch.POSITION_TTL_S + 0.05)
    assert watch.room_now(code).step == 2 and len(calls) == 2


def _tally_caption(at) -> str:
    return next(c.value for c in at.caption if "answer" in c.value)


def test_back_to_a_poll_step_shows_its_poll_as_it_was():
    t = teacher()
    t.button(key="lesson_ready").click().run()
    t.button(key="lesson_start").click().run()
    code = t.session_state["poll_room"]["code"]
    t.button(key="lesson_next").click().run()  # step 2: a poll
    asked = dict(t.session_state["poll_current"])
    p = phone(code)
    [b for b in p.button if b.key == f"choice_{asked['seq']}_1"][0].click().run()
    for _unused in range(3):  # on to step 5, the next poll, and back
        t.button(key="lesson_next").click().run()
    assert t.session_state["poll_current"]["seq"] != asked["seq"]
    for _unused in range(3):
        t.button(key="lesson_back").click().run()
    assert not messages(t)["exception"], messages(t)
    assert t.session_state["poll_current"] == asked  # the same question, not a new one
    assert _tally_caption(t).startswith("1 answer ·")
    assert any(f"question {asked['seq']} · :orange[closed]" in m.value for m in t.markdown)  # as step 5 left it
    p.run()
    assert shown_step(p).startswith(f"Class {code} · step 2 of")
    assert [b.label for b in p.button if b.key == f"choice_{asked['seq']}_1"][0].endswith("(yours)")


def test_a_teacher_whose_replica_died_gets_the_lesson_poll_panel_and_the_lesson_back():
    t = teacher()
    t.button(key="lesson_ready").click().run()
    t.button(key="lesson_start").click().run()
    t.button(key="lesson_next").click().run()  # a poll step
    room, seq = t.session_state["poll_room"], t.session_state["poll_current"]["seq"]
    # the page reconnects to another replica: a new session with the teacher's link (?room=, the secret as the
    # browser's cookie would bring it)
    again = new_app(room=room["code"], key=room["secret"])
    again.switch_page("app_pages/lesson.py").run()
    assert not messages(again)["exception"], messages(again)
    assert again.session_state["poll_current"]["seq"] == seq
    assert [b for b in again.button if b.key == "poll_reveal"]  # the poll's panel: Close, Reveal, the tally
    assert _tally_caption(again).startswith("0 answers")
    assert again.text_input(key="lesson_title").value == "Chapter 3 in 40 minutes"  # the editor shows the lesson
    assert len([b for b in again.button if b.key and b.key.startswith("lesson_del_")]) == len(L.ready()["steps"])
    again.button(key="poll_close").click().run()
    assert ps.PollStore().current(room["code"]).state == "closed"
