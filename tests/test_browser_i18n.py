"""The language a browser gets, in real Chromium: a plain link opens in the browser's language (``locale``), the
page declares it (``<html lang>``), the link then carries it, and the sidebar's switch changes it with the settings
kept. AppTest cannot set a browser locale, so this is the test of ``st.context.locale``.

Cost: one server for the module, a browser context per case; every wait is a condition on the page.
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
from langs import CHINESE, ENGLISH

from browser import chromium_page, wait_idle

pytestmark = pytest.mark.browser

LOAD_MS = 120_000


def query(page) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(page.url).query).items()}


def visit(server: str, link: str, locale: str, check) -> None:
    """Open ``link`` in a Chromium whose language is ``locale`` and run ``check(page)``."""
    with chromium_page(1280, 720, locale=locale) as page:
        page.goto(server + link)
        wait_idle(page, timeout=LOAD_MS)
        check(page)


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


# Each address the app's frontend pushes into the history (one per change of the link; each redraws the page).
PUSHES_JS = """() => {
  if (!window.__pushes) {
    const push = history.pushState.bind(history);
    history.pushState = (...args) => { window.__pushes.push(String(args[2])); return push(...args); };
  }
  window.__pushes = []; }"""


def test_a_switch_changes_the_link_once_and_keeps_every_choice(server):
    """A switch is one change of the link (``lang``), the settings' choices kept as chosen: after a switch the
    choice widgets' state held their old labels, which went into the link and out again (six more page redraws)."""
    link = "/?lang=zh&d_out=4&mask_method=renormalize&input_mode=learned"

    def check(page):
        sidebar_label(page, "句子")
        for label, lang in (("English", ENGLISH), ("中文", CHINESE), ("English", ENGLISH)):
            page.evaluate(PUSHES_JS)
            page.locator('[data-testid="stSidebar"] button', has_text=label).first.click()
            sidebar_label(page, "Sentence" if lang == ENGLISH else "句子")
            wait_idle(page, timeout=LOAD_MS)
            pushes = page.evaluate("() => window.__pushes")
            assert len(pushes) == 1 and f"lang={lang}" in pushes[0], (label, pushes)
            assert {k: query(page).get(k) for k in ("d_out", "mask_method", "input_mode")} == {
                "d_out": "4", "mask_method": "renormalize", "input_mode": "learned"}, (label, page.url)

    visit(server, link, "en-US", check)


def test_a_link_with_lang_wins_over_the_browser(server):
    def check(page):
        sidebar_label(page, "句子")
        page.wait_for_function("() => document.documentElement.lang === 'zh-CN'", timeout=LOAD_MS)

    visit(server, "/?lang=zh", "en-US", check)


STREAMLIT_ENGLISH = ("Help for ", "Choose an option", "Choose options", "Select all", "Shortcut ", "Collapse sidebar",
                     "App pages", "Main menu", "Vega visualization", "Increment", "Decrement")  # Streamlit's own


def streamlit_english(page) -> list[str]:
    """Streamlit's own English words left in attributes (help icons' and controls' aria-labels, selectboxes'
    placeholders) and in its skip link, which only a screen reader or the Tab key finds."""
    return page.evaluate("""(words) => [...document.querySelectorAll('[aria-label], [placeholder]')]
        .flatMap(e => [e.getAttribute('aria-label') || '', e.getAttribute('placeholder') || ''])
        .concat([...document.querySelectorAll('[data-testid="stSkipToContent"]')].map(e => e.textContent))
        .filter(v => words.some(w => v.startsWith(w)) || v === 'Skip to main content')""", list(STREAMLIT_ENGLISH))


def test_streamlits_own_english_words_are_chinese_on_a_chinese_page_and_come_back_in_english(server):
    def check(page):
        sidebar_label(page, "变体")
        page.locator('[aria-label="“变体”的说明"]').first.wait_for(state="attached", timeout=LOAD_MS)
        assert streamlit_english(page) == []
        assert page.locator('input[placeholder="请选择"]').count() >= 3  # the sidebar's selectboxes
        box = page.locator('[data-testid="stSidebar"] textarea').first  # typing: the hint under the box
        box.click()
        box.press("End")
        box.type(" again")
        hint = page.locator('[data-testid="stSidebar"] [data-testid="InputInstructions"]').first
        hint.wait_for(timeout=LOAD_MS)
        page.wait_for_function("(el) => el.innerText.includes('即可应用')", arg=hint.element_handle(), timeout=LOAD_MS)
        assert "Press" not in hint.inner_text(), hint.inner_text()
        box.press("Control+Enter")  # applied: the page runs again in Chinese
        sidebar_label(page, "变体")
        page.locator('[data-testid="stSidebar"] button', has_text="English").first.click()
        sidebar_label(page, "Variant")
        page.locator('[aria-label="Help for Variant"]').first.wait_for(state="attached", timeout=LOAD_MS)
        page.locator('[aria-label="Collapse sidebar"]').first.wait_for(state="attached", timeout=LOAD_MS)

    visit(server, "/?lang=zh", "zh-CN", check)
