"""End-to-end: the Learn page trains in the browser; the loss curve and heads redraw while it runs."""

from __future__ import annotations

import re
import time

import pytest

from browser import chromium_page, click_until, require_browser, streamlit_server, wait_drawn

pytestmark = pytest.mark.browser


PROGRESS = '[data-testid="stProgress"]'
HEAD_IMG = '[data-testid="stImage"] img'


def progress_step(page) -> int:
    text = page.locator(PROGRESS).first.inner_text()
    return int(re.search(r"step (\d+)", text).group(1))


def test_start_redraws_loss_and_heads_then_pause(tmp_path):
    require_browser()
    with streamlit_server() as url, chromium_page(1280, 720) as page:
        errors: list[str] = []  # a frontend exception blanks the whole page: say which, rather than time out
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"{url}/learn")
        start = page.get_by_role("button", name="Start")
        start.wait_for(timeout=60_000)
        pause = page.get_by_role("button", name="Pause")
        click_until(start, lambda: pause.is_visible())
        page.locator(HEAD_IMG).first.wait_for(timeout=60_000)
        first_src = page.locator(HEAD_IMG).first.get_attribute("src")
        # the worker trains; the page polls: wait for a later snapshot (every 50 steps) to be drawn
        page.wait_for_function(
            """([sel, src]) => { const img = document.querySelector(sel);
                                  return img && img.getAttribute('src') !== src && img.complete; }""",
            arg=[HEAD_IMG, first_src], timeout=180_000, polling=250)
        assert progress_step(page) >= 50
        assert page.locator(HEAD_IMG).count() == 8  # 2 layers x 4 heads
        loss = page.locator('[data-testid="stVegaLiteChart"]').first
        assert loss.locator("canvas, svg").count() >= 1
        # a control elsewhere on the page answers while training runs
        t0 = time.monotonic()
        zoom = page.locator(".st-key-learn_zoom input")
        click_until(page.get_by_text("Look at one head closely"), lambda: zoom.is_checked())
        assert not errors, errors
        page.wait_for_function(  # loss, scores over steps, and now the labelled close-up, each drawn
            """() => [...document.querySelectorAll('[data-testid="stVegaLiteChart"]')]
                     .filter(c => c.querySelector('canvas, svg')).length >= 3""",
            timeout=30_000, polling=100)
        answered = time.monotonic() - t0
        print(f"close-up drawn {answered:.2f} s after the click, while training")
        resume = page.get_by_role("button", name="Resume")
        click_until(pause, lambda: resume.is_visible())
        wait_drawn(page, 60_000)
        assert "paused" in page.locator(PROGRESS).first.inner_text()
        page.screenshot(path=str(tmp_path / "learn.png"))
        assert answered < 30, f"a control took {answered:.1f} s to answer while training"
        assert not errors, errors
