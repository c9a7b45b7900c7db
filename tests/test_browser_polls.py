"""Ask the class in a real browser: a teacher at 1280x720 asks from Explore, a phone at 360x640 answers, the
teacher's tally shows it (refreshed, no reload) and the reveal reaches the phone."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import pytest

from browser import CATCH_UP_MS, chromium_page, require, require_browser, streamlit_server, wait_idle

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def poll_server(tmp_path_factory):
    require_browser()
    db = tmp_path_factory.mktemp("polls") / "class.sqlite3"
    with streamlit_server(env={"ATTENTION_LAB_CLASS_DB": str(db)}) as url:
        yield url


def shots(tmp_path: Path) -> Path:
    """Where screenshots go: $POLL_SCREENSHOTS (to look at them) or the test's temporary folder."""
    out = Path(os.environ.get("POLL_SCREENSHOTS", tmp_path))
    out.mkdir(parents=True, exist_ok=True)
    return out


def test_a_phone_answers_and_sees_the_reveal(poll_server, tmp_path):
    out = shots(tmp_path)
    with chromium_page(1280, 720) as teacher:
        teacher.goto(poll_server)
        wait_idle(teacher)
        teacher.get_by_role("button", name="Ask the class").click()
        teacher.get_by_role("button", name="Ask", exact=True).click()
        panel = teacher.locator(".st-key-poll_panel_explore")
        panel.get_by_text(re.compile(r"^Code [2-9A-Z]{7}$")).wait_for(timeout=30_000)
        code = panel.get_by_text(re.compile(r"^Code [2-9A-Z]{7}$")).inner_text().split()[-1]
        panel.get_by_text("0 answers").wait_for(timeout=30_000)
        panel.get_by_text(f"/answer?code={code}").wait_for(timeout=30_000)  # the link, to copy
        assert panel.locator('[data-testid="stImage"] img').count() == 1  # the QR code

        phone = teacher.context.browser.new_page(viewport={"width": 360, "height": 640}, is_mobile=True,
                                                 has_touch=True)
        phone.goto(f"{poll_server}/answer?code={code.lower()}")
        choices = phone.locator(".st-key-poll_choices button")
        choices.first.wait_for(timeout=60_000)
        wait_idle(phone, charts=False)
        n = choices.count()
        assert 3 <= n <= 5
        assert phone.evaluate("() => document.querySelector('[data-testid=\"stMain\"]').scrollWidth") <= 360
        for k in range(n):
            box = choices.nth(k).bounding_box()
            assert box["height"] >= 48 and box["width"] >= 280, box  # big buttons, across the phone
        phone.screenshot(path=out / "student_360x640_open.png")
        choices.nth(1).click()
        phone.get_by_text("Your answer:").wait_for(timeout=30_000)

        t0 = time.monotonic()
        panel.get_by_text("1 answer", exact=False).first.wait_for(timeout=CATCH_UP_MS)  # no reload: the fragment
        refresh_s = time.monotonic() - t0
        assert refresh_s < 4, refresh_s
        panel.get_by_role("button", name="Reveal").click()
        panel.get_by_text("Right answer:").wait_for(timeout=30_000)
        wait_idle(teacher)
        panel.get_by_text("Right answer:").scroll_into_view_if_needed()
        teacher.screenshot(path=out / "teacher_1280x720_revealed.png")
        assert panel.locator('[data-testid="stVegaLiteChart"]').count() == 2  # the tally, kept, and the proof row

        phone.get_by_text(re.compile(r"^(Right: |The answer is )")).wait_for(timeout=CATCH_UP_MS)
        wait_idle(phone)
        phone.screenshot(path=out / "student_360x640_revealed.png")
        assert phone.locator(".st-key-poll_choices button:disabled").count() == n
        phone.close()


def test_bad_code_gives_a_message(poll_server):
    with chromium_page(360, 640) as phone:
        phone.goto(f"{poll_server}/answer?code=NOSUCH1")
        phone.get_by_text("no open poll with the code NOSUCH1").wait_for(timeout=60_000)
        assert phone.locator('[data-testid="stException"]').count() == 0


def wait_runs(page, n: int) -> None:
    """Wait until the page has finished ``n`` more runs (the live tally's refreshes count: each is a fragment run)."""
    page.evaluate("""() => {
        window.__runs = 0;
        const app = document.querySelector('[data-testid="stApp"]');
        new MutationObserver(() => { if (app.dataset.testScriptState === 'notRunning') window.__runs += 1; })
            .observe(app, {attributes: true, attributeFilter: ['data-test-script-state']});
    }""")
    page.wait_for_function("(n) => window.__runs >= n", arg=n, timeout=CATCH_UP_MS)


def test_one_phone_answers_once_from_two_tabs_and_a_reload_shows_its_answer(poll_server):
    with chromium_page(1280, 720) as teacher:
        teacher.goto(poll_server)
        wait_idle(teacher)
        teacher.get_by_role("button", name="Ask the class").click()
        teacher.get_by_role("button", name="Ask", exact=True).click()
        panel = teacher.locator(".st-key-poll_panel_explore")
        code_text = panel.get_by_text(re.compile(r"^Code [2-9A-Z]{7}$"))
        code_text.wait_for(timeout=30_000)
        code = code_text.inner_text().split()[-1]
        # Ask closed its popover: nothing covers the panel (it stayed open until Escape)
        teacher.locator('[data-testid="stPopoverBody"]').wait_for(state="hidden", timeout=CATCH_UP_MS)
        panel.get_by_role("button", name="Reveal").click(timeout=CATCH_UP_MS)  # clickable: not under the popover
        panel.get_by_text("Right answer:").wait_for(timeout=30_000)
        teacher.get_by_role("button", name="Ask the class").click()
        teacher.get_by_role("button", name="Ask", exact=True).click()  # question 2, open
        panel.get_by_text("question 2").first.wait_for(timeout=30_000)
        teacher.locator('[data-testid="stPopoverBody"]').wait_for(state="hidden", timeout=CATCH_UP_MS)  # closed again
        assert "key=" not in panel.locator('[data-testid="stCode"]').inner_text()  # the students' link: no secret
        assert "key=" not in teacher.url and f"room={code}" in teacher.url  # the projector shows no secret
        kept = {c["name"]: c["value"] for c in teacher.context.cookies()}.get("attention_lab_teacher", "")
        assert kept.startswith(f"{code}.") and len(kept) > 20  # the teacher's browser keeps it: the room is reclaimed

        phone = teacher.context.browser.new_context(viewport={"width": 360, "height": 640}, is_mobile=True,
                                                    has_touch=True)
        tabs = []
        for k in (0, 1):  # the QR link opened twice: two tabs of one phone's browser
            tab = phone.new_page()
            tab.goto(f"{poll_server}/answer?code={code}")
            tab.locator(".st-key-poll_choices button").first.wait_for(timeout=60_000)
            wait_idle(tab, charts=False)
            tab.locator(".st-key-poll_choices button").nth(k).click()
            tab.get_by_text("Your answer:").wait_for(timeout=30_000)
            tabs.append(tab)
        me = [re.search(r"me=([\w-]+)", tab.url).group(1) for tab in tabs]
        assert me[0] == me[1]  # the second tab took the first one's id from the cookie
        panel.get_by_text("1 answer", exact=False).first.wait_for(timeout=CATCH_UP_MS)
        wait_runs(teacher, 2)  # two more refreshes of the teacher's tally: still one answer
        assert panel.get_by_text(re.compile(r"^1 answer")).count() == 1

        tabs[0].reload()  # the store knows this phone's answer (the second tab's, the latest)
        tabs[0].get_by_text("(yours)").wait_for(timeout=60_000)
        yours = tabs[0].locator(".st-key-poll_choices button").filter(has_text="(yours)")
        assert yours.count() == 1 and "(yours)" in tabs[0].locator(".st-key-poll_choices button").nth(1).inner_text()
        phone.close()


def test_the_teachers_page_gets_its_poll_back_after_its_replica_is_killed(tmp_path):
    """Two replicas behind HAProxy: the teacher's replica gets SIGKILL; Streamlit's page reconnects (HAProxy sends
    it to the other one) with the teacher's link, the panel comes back with the same code and Reveal works."""
    require_browser()
    from playwright.sync_api import Error as PlaywrightError

    from deploy.course import Course, free_course_port, haproxy_missing_reason

    require(haproxy_missing_reason(), "the teacher's failover")
    with Course(2, free_course_port(2), class_db=str(tmp_path / "class.sqlite3"), timeout=180) as course, \
            chromium_page(1280, 720) as teacher:
        teacher.goto(course.url)
        wait_idle(teacher)
        teacher.get_by_role("button", name="Ask the class").click()
        teacher.get_by_role("button", name="Ask", exact=True).click()
        panel = teacher.locator(".st-key-poll_panel_explore")
        panel.get_by_text(re.compile(r"^Code [2-9A-Z]{7}$")).wait_for(timeout=30_000)
        code = panel.get_by_text(re.compile(r"^Code [2-9A-Z]{7}$")).inner_text().split()[-1]
        replica = {c["name"]: c["value"] for c in teacher.context.cookies()}["SERVERID"]
        os.kill(course.pid(replica), signal.SIGKILL)
        t0 = time.monotonic()
        while not panel.get_by_text("Right answer:").count():  # a click on the old page before it reconnects is lost
            if time.monotonic() - t0 > 60:
                teacher.screenshot(path=shots(tmp_path) / "teacher_after_kill.png")
                raise AssertionError(f"the teacher's panel did not come back: {teacher.context.cookies()}, "
                                     f"{panel.all_inner_texts()}, {course.states()}, {teacher.url}")
            try:  # the button may be redrawn, disabled (revealed) or the link rewritten under the click
                panel.get_by_role("button", name="Reveal").click(timeout=2_000, no_wait_after=True)
            except PlaywrightError:
                pass
            teacher.wait_for_timeout(500)
        assert {c["name"]: c["value"] for c in teacher.context.cookies()}["SERVERID"] != replica
        assert panel.get_by_text(f"Code {code}", exact=True).count() == 1  # the same room, reclaimed
        panel.get_by_text("question 1").first.wait_for(timeout=CATCH_UP_MS)
