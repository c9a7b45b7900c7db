"""Follow mode in a real browser: the teacher at 1280x720 starts the ready lesson, a phone at 360x640 follows two
Next presses (a chart step, a poll step, a chart step) without reloading, and a phone that joins late lands on the
teacher's current step."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from browser import CATCH_UP_MS, chromium_page, click_until, require_browser, streamlit_server, wait_idle

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def lesson_env(tmp_path_factory):
    """The server's address and its class store's file."""
    require_browser()
    db = tmp_path_factory.mktemp("lessons") / "class.sqlite3"
    with streamlit_server(env={"ATTENTION_LAB_CLASS_DB": str(db)}) as url:
        yield url, db


@pytest.fixture(scope="module")
def lesson_server(lesson_env):
    return lesson_env[0]


def shots(tmp_path: Path) -> Path:
    """Where screenshots go: $FOLLOW_SCREENSHOTS (to look at them) or the test's temporary folder."""
    out = Path(os.environ.get("FOLLOW_SCREENSHOTS", tmp_path))
    out.mkdir(parents=True, exist_ok=True)
    return out


def new_phone(teacher, url: str):
    phone = teacher.context.browser.new_page(viewport={"width": 360, "height": 640}, is_mobile=True, has_touch=True)
    errors: list[str] = []  # a frontend exception blanks the page: a timeout then says which
    phone.on("pageerror", lambda e: errors.append(str(e)))
    phone.page_errors = errors
    phone.goto(url)
    return phone


def shows(phone, text: str) -> None:
    """Wait until the phone shows ``text``; if it never does, say what it shows and any frontend exception."""
    try:
        phone.get_by_text(text).wait_for(timeout=CATCH_UP_MS)
    except Exception as e:  # noqa: BLE001 - re-raised with what the phone shows
        seen = phone.evaluate("() => document.body.innerText.slice(0, 600)")
        raise AssertionError(f"{text!r} not shown; page errors {phone.page_errors}; the phone shows {seen!r}") from e


def fits(phone) -> None:
    """Nothing wider than the phone: no sideways scrolling, the chart whole on the screen."""
    assert phone.evaluate("() => document.querySelector('[data-testid=\"stMain\"]').scrollWidth") <= 360
    for box in [c.bounding_box() for c in phone.locator('[data-testid="stVegaLiteChart"]').all()]:
        assert box["x"] >= 0 and box["x"] + box["width"] <= 360, box


def test_phones_follow_the_teacher_and_a_late_joiner_lands_on_the_current_step(lesson_server, tmp_path):
    out = shots(tmp_path)
    with chromium_page(1280, 720) as teacher:
        teacher.goto(f"{lesson_server}/lesson")
        wait_idle(teacher, charts=False)
        teacher.locator(".st-key-lesson_ready button").click()
        teacher.get_by_text("Tiled attention: the same weights, tile by tile").wait_for(timeout=30_000)
        teacher.locator(".st-key-lesson_start button").click()
        bar = teacher.locator(".st-key-lesson_bar")
        bar.get_by_text(re.compile(r"^Code [2-9A-Z]{7}$")).wait_for(timeout=60_000)
        code = bar.get_by_text(re.compile(r"^Code [2-9A-Z]{7}$")).inner_text().split()[-1]
        n = 11

        phone = new_phone(teacher, f"{lesson_server}/answer?code={code}")
        phone.get_by_text(f"Class {code} · step 1 of {n} · following the teacher").wait_for(timeout=60_000)
        wait_idle(phone)
        phone.get_by_text(re.compile("attends (most|about equally) to")).wait_for(timeout=CATCH_UP_MS)  # the reading
        assert phone.locator('[data-testid="stVegaLiteChart"]').count() == 1
        assert phone.locator('[data-testid="stTextArea"], [data-testid="stNumberInput"]').count() == 0
        phone.screenshot(path=out / "phone_360x640_step1.png")
        fits(phone)

        teacher.locator(".st-key-lesson_next button").click()  # step 2: a poll
        choices = phone.locator(".st-key-poll_choices button")
        choices.first.wait_for(timeout=CATCH_UP_MS)  # no reload: the phone's watch fragment noticed
        phone.get_by_text(f"step 2 of {n} · following the teacher").wait_for(timeout=CATCH_UP_MS)
        fits(phone)
        choices.nth(0).click()
        phone.get_by_text("Your answer:").wait_for(timeout=30_000)
        phone.screenshot(path=out / "phone_360x640_step2_poll.png")

        teacher.locator(".st-key-lesson_next button").click()  # step 3: −∞ before softmax
        phone.get_by_text(f"step 3 of {n} · following the teacher").wait_for(timeout=CATCH_UP_MS)
        shows(phone, "Causal mask: −∞ before softmax")
        wait_idle(phone)
        assert phone.locator(".st-key-poll_choices").count() == 0  # step 2's question is gone, not left above it
        fits(phone)
        phone.screenshot(path=out / "phone_360x640_step3.png")

        late = new_phone(teacher, f"{lesson_server}/answer?code={code.lower()}")  # joins now: lands on step 3
        late.get_by_text(f"step 3 of {n} · following the teacher").wait_for(timeout=60_000)
        shows(late, "Causal mask: −∞ before softmax")
        wait_idle(late)
        fits(late)

        # a student looks back on their own, then returns; the watch fragment redraws the page every few seconds,
        # and a click that lands during that redraw is lost (as in a browser), so it is clicked until it took
        looking = late.get_by_text(f"step 2 of {n} · looking around")
        click_until(late.locator(".st-key-follow_prev button"), looking.is_visible, CATCH_UP_MS / 1000)
        following = late.get_by_text(f"step 3 of {n} · following the teacher")
        click_until(late.locator(".st-key-follow_back button"), following.is_visible, CATCH_UP_MS / 1000)
        for page in (phone, late):
            page.close()


NAVIGATION = '[data-testid="stSidebarNav"], [data-testid="stSidebar"], [data-testid="stExpandSidebarButton"]'


def test_a_phone_in_a_lesson_has_no_way_to_the_other_pages(lesson_env):
    """The phone shows the lesson only (no sidebar, no page list, no button that opens one); the teacher's pages keep
    every page."""
    from dashboard.classroom import lessons as L
    from dashboard.classroom import store as ps

    url, db = lesson_env
    polls = ps.PollStore(str(db))
    code, secret = polls.create_room()
    L.LessonStore(polls).start(code, secret, L.ready())
    with chromium_page(1280, 720) as teacher:
        teacher.goto(f"{url}/lesson")
        wait_idle(teacher, charts=False)
        assert teacher.locator('[data-testid="stSidebarNav"]').count() == 1
        phone = new_phone(teacher, f"{url}/answer?code={code}")
        phone.get_by_text(f"Class {code} · step 1 of 11 · following the teacher").wait_for(timeout=60_000)
        wait_idle(phone)
        assert phone.locator(NAVIGATION).count() == 0
        # a tap on a chart shows no toolbar: left shown, it covered the next step's title
        charts = phone.locator('[data-testid="stVegaLiteChart"], [data-testid="stImage"]')
        assert charts.count() > 0
        charts.first.hover()
        charts.first.click()
        toolbars = phone.locator('[data-testid="stElementToolbar"]')
        assert all(not toolbars.nth(i).is_visible() for i in range(toolbars.count()))
        phone.close()
