"""The language a browser gets, in real Chromium: a plain link opens in the browser's language (``locale``), the
page declares it (``<html lang>``), the link then carries it, and the sidebar's switch changes it with the settings
kept. AppTest cannot set a browser locale, so this is the test of ``st.context.locale``.

Cost: one server for the module, one Chromium per case; every wait is a condition on the page.
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from browser import CHROMIUM, CHROMIUM_ARGS, wait_idle

pytestmark = pytest.mark.browser

LOAD_MS = 120_000


def query(page) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(page.url).query).items()}


def visit(server: str, link: str, locale: str, check) -> None:
    """Open ``link`` in a Chromium whose language is ``locale`` and run ``check(page)``."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 720}, locale=locale)
            page.goto(server + link)
            wait_idle(page, timeout=LOAD_MS)
            check(page)
        finally:
            browser.close()


def sidebar_label(page, text: str) -> None:
    page.locator('[data-testid="stSidebar"] [data-testid="stWidgetLabel"]', has_text=text).first.wait_for(
        timeout=LOAD_MS)


def test_an_english_browser_gets_english_and_the_link_says_so(server):
    def check(page):
        sidebar_label(page, "Sentence")
        page.wait_for_function("() => document.documentElement.lang === 'en'", timeout=LOAD_MS)
        page.wait_for_function("() => location.search.includes('lang=en')", timeout=LOAD_MS)

    visit(server, "/", "en-US", check)


def test_a_chinese_browser_gets_chinese_and_can_switch_back_keeping_the_settings(server):
    def check(page):
        sidebar_label(page, "句子")
        page.wait_for_function("() => document.documentElement.lang === 'zh-CN'", timeout=LOAD_MS)
        page.wait_for_function("() => location.search.includes('lang=zh')", timeout=LOAD_MS)
        assert query(page)["d_out"] == "4"
        page.locator('[data-testid="stSidebar"] button', has_text="English").first.click()
        sidebar_label(page, "Sentence")
        page.wait_for_function("() => document.documentElement.lang === 'en'", timeout=LOAD_MS)
        page.wait_for_function("() => location.search.includes('lang=en')", timeout=LOAD_MS)
        assert query(page)["d_out"] == "4"
        assert page.locator('[data-testid="stSidebar"] input[aria-label="d_out"]').first.input_value() == "4"

    visit(server, "/?d_out=4", "zh-CN", check)


def test_a_link_with_lang_wins_over_the_browser(server):
    def check(page):
        sidebar_label(page, "句子")
        page.wait_for_function("() => document.documentElement.lang === 'zh-CN'", timeout=LOAD_MS)

    visit(server, "/?lang=zh", "en-US", check)
