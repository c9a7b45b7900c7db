"""End-to-end, as a classroom meets the server: local by default, foreign host names refused, and a link made from
any accepted text loads. (Nothing leaves the machine: tests/test_browser_a11y.py checks it on every page it opens.)"""

from __future__ import annotations

import os
from urllib.parse import urlsplit

import pytest

from browser import LOOPBACK, chromium_page, listening_addresses, streamlit_server, wait_idle

pytestmark = pytest.mark.browser




def test_foreign_host_name_is_refused(server):
    """DNS rebinding: the browser believes attacker.example is 127.0.0.1 and sends that Host."""
    port = urlsplit(server).port
    rules = ["--host-resolver-rules=MAP attacker.example 127.0.0.1"]
    with chromium_page(1280, 720, extra_args=rules) as page:
        page.goto(f"http://attacker.example:{port}/")
        page.get_by_text("does not answer to the host name").wait_for(timeout=60_000)
        wait_idle(page, charts=False)
        assert page.locator('[data-testid="stVegaLiteChart"]').count() == 0
        assert page.locator('[data-testid="stSidebarNavLink"]').count() == 0


def test_readme_command_listens_on_loopback_only():
    if not os.path.exists("/proc/net/tcp"):
        pytest.skip("no /proc/net/tcp on this system")
    from browser import free_port

    port = free_port()
    with streamlit_server(port=port, address=None):  # as the README starts it: no --server.address
        addrs = listening_addresses(port)
    assert addrs and addrs <= LOOPBACK, addrs


def test_a_link_made_from_any_accepted_text_loads(server, tmp_path):
    with chromium_page(1280, 720) as page:
        page.goto(server)
        wait_idle(page)
        area = page.get_by_role("textbox", name="Sentence")
        # A text that fits in a link comes back with it.
        short = "the cat sat on the mat" * 20  # 120 tokens
        area.fill(short)
        area.press("Control+Enter")
        wait_idle(page)
        page.get_by_text("120 tokens").first.wait_for(timeout=60_000)
        page.goto(page.url)
        wait_idle(page)
        page.get_by_text("120 tokens").first.wait_for(timeout=60_000)
        # A long one (over URL_TEXT_LIMIT once URL-encoded) stays out of the link, which says so and still loads.
        area = page.get_by_role("textbox", name="Sentence")
        area.fill("猫が好きです。" * 300)
        area.press("Control+Enter")
        wait_idle(page, charts=False)
        page.get_by_text("too long to put in a link").wait_for(timeout=60_000)
        assert len(page.url) < 10_000, len(page.url)
        page.goto(page.url)
        wait_idle(page)
        assert page.get_by_text("Invalid HTTP request").count() == 0
        page.get_by_text("6 tokens").first.wait_for(timeout=60_000)  # the book's sentence, every setting kept
        page.screenshot(path=tmp_path / "long_text_link.png")
