"""Ask the class in a real browser: a teacher at 1280x720 asks from Explore, a phone at 360x640 answers, the
teacher's tally shows it (refreshed, no reload) and the reveal reaches the phone."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from browser import chromium_page, require_browser, streamlit_server, wait_idle

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
        panel.get_by_text("1 answer", exact=False).first.wait_for(timeout=10_000)  # no reload: the fragment
        refresh_s = time.monotonic() - t0
        assert refresh_s < 4, refresh_s
        panel.get_by_role("button", name="Reveal").click()
        panel.get_by_text("Right answer:").wait_for(timeout=30_000)
        wait_idle(teacher)
        panel.get_by_text("Right answer:").scroll_into_view_if_needed()
        teacher.screenshot(path=out / "teacher_1280x720_revealed.png")
        assert panel.locator('[data-testid="stVegaLiteChart"]').count() == 2  # the tally, kept, and the proof row

        phone.get_by_text(re.compile(r"^(Right: |The answer is )")).wait_for(timeout=15_000)
        wait_idle(phone)
        phone.screenshot(path=out / "student_360x640_revealed.png")
        assert phone.locator(".st-key-poll_choices button:disabled").count() == n
        phone.close()


def test_bad_code_gives_a_message(poll_server):
    with chromium_page(360, 640) as phone:
        phone.goto(f"{poll_server}/answer?code=NOSUCH1")
        phone.get_by_text("no open poll with the code NOSUCH1").wait_for(timeout=60_000)
        assert phone.locator('[data-testid="stException"]').count() == 0
