"""The Lesson page through AppTest: a saved lesson is replaced only from the browser that saved it (its device id
cookie); a phone in the room opens it, and saves it only under a free title, with one message saying so in the
session's language."""

from __future__ import annotations

import pytest
import streamlit as st
from langs import CHINESE, ENGLISH

from apptest_utils import messages, new_app
from dashboard.classroom import lessons as L
from dashboard.classroom import store as ps
from dashboard.classroom.device import DEVICE_COOKIE
from dashboard.i18n import language

TEACHER, STUDENT = "teachers-browser-0001", "students-phone-00002"  # device id cookies
TITLE = "Chapter 3 in 40 minutes"

pytestmark = pytest.mark.usefixtures("class_app_db")


def browser(monkeypatch, device: str | None) -> None:
    """The cookies the next run's connection brings: this browser's device id (None: a browser without one)."""
    cookies = {DEVICE_COOKIE: device} if device else {}
    monkeypatch.setattr(type(st.context), "cookies", property(lambda self: cookies), raising=False)


def lesson_page(**query: str):
    at = new_app(**query)
    at.run()
    at.switch_page("app_pages/lesson.py").run()
    assert not messages(at)["exception"], messages(at)
    return at


def saved() -> dict:
    return L.LessonStore(ps.PollStore()).load(TITLE)


def every_text(at) -> str:
    return "\n".join(str(el.proto) for kind in ("markdown", "html", "warning", "success", "text_input", "selectbox",
                                                "download_button", "caption") for el in at.get(kind))


@pytest.mark.parametrize("lang, says", [
    (ENGLISH, "was saved from another browser, and only that browser can replace it"),
    (CHINESE, "是在另一个浏览器上保存的，只有那个浏览器才能替换它"),
])
def test_a_phone_opens_the_teachers_lesson_but_saves_it_only_under_another_title(monkeypatch, lang, says):
    browser(monkeypatch, TEACHER)
    teacher = lesson_page()
    teacher.button(key="lesson_ready").click().run()
    teacher.button(key="lesson_save").click().run()
    assert any(TITLE in s.value for s in teacher.success), messages(teacher)
    n = len(saved()["steps"])

    browser(monkeypatch, STUDENT)  # a phone in the room opens the Lesson page an hour before class
    with language(lang):  # AppTest formats the poll selectbox's options in the test's thread: in the page's language
        phone_saves_over(lang, says, n)

    browser(monkeypatch, TEACHER)  # the teacher's browser, a new session on any replica: replaces its own
    again = lesson_page()
    again.selectbox(key="lesson_saved").set_value(TITLE)
    again.button(key="lesson_load").click().run()
    again.button(key="lesson_del_0").click().run()
    again.button(key="lesson_save").click().run()
    assert any(TITLE in s.value for s in again.success) and not messages(again)["warning"], messages(again)
    assert len(saved()["steps"]) == n - 1


def phone_saves_over(lang: str, says: str, n: int) -> None:
    phone = lesson_page(lang=lang)
    phone.selectbox(key="lesson_saved").set_value(TITLE)
    phone.button(key="lesson_load").click().run()
    assert phone.session_state["lesson_draft"]["title"] == TITLE  # opening is open to everyone
    assert TEACHER not in every_text(phone)  # the owner's id never reaches the page (nor its export)
    phone.button(key="lesson_del_0").click().run()
    phone.button(key="lesson_save").click().run()
    warnings = messages(phone)["warning"]
    assert len(warnings) == 1 and says in warnings[0] and TITLE.replace(" ", "") in warnings[0].replace(" ", "")
    assert lang == ENGLISH or "browser" not in warnings[0]  # all of it in the session's language but the title
    assert not messages(phone)["exception"] and not phone.success
    assert len(saved()["steps"]) == n  # the teacher's lesson is as it was

    phone.text_input(key="lesson_title").input("My chapter 3").run()  # what the message says to do
    phone.button(key="lesson_save").click().run()
    assert any("My chapter 3" in s.value for s in phone.success) and not messages(phone)["warning"]
    assert len(L.LessonStore(ps.PollStore()).load("My chapter 3")["steps"]) == n - 1


def test_a_browser_without_an_id_gets_one_in_its_cookie_never_in_the_projected_link(monkeypatch):
    browser(monkeypatch, None)
    first = lesson_page()
    me = first.session_state["poll_session"]
    assert any(f"{DEVICE_COOKIE}={me};" in h.proto.body for h in first.get("html"))  # the page writes it
    assert "me" not in first.query_params and me not in str(dict(first.query_params))  # the projector shows the link
    first.button(key="lesson_ready").click().run()
    first.button(key="lesson_save").click().run()
    assert any(TITLE in s.value for s in first.success), messages(first)

    browser(monkeypatch, me)  # the same browser, later: its connection brings the cookie
    later = lesson_page()
    later.button(key="lesson_ready").click().run()
    later.button(key="lesson_save").click().run()
    assert any(TITLE in s.value for s in later.success) and not messages(later)["warning"], messages(later)

    browser(monkeypatch, None)  # another browser without a cookie: a new id of its own
    other = lesson_page()
    assert other.session_state["poll_session"] != me
    other.button(key="lesson_ready").click().run()
    other.button(key="lesson_save").click().run()
    assert any("another browser" in w for w in messages(other)["warning"]), messages(other)
