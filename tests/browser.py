"""Shared helpers for driving the real app in headless Chromium (tests and bench/)."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from deploy import processes
from deploy.processes import free_port  # noqa: F401 - tests and bench/ import it from here

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")  # the browser a user runs: bench/ measures in it
# The tests' Chromium: Debian's headless shell (package chromium-headless-shell, the same Blink and V8 without the
# browser around them) where installed: a page load costs less CPU (docs/measurements.md). Else the full one.
HEADLESS_SHELL = "/usr/lib/chromium/chromium-headless-shell"
TEST_CHROMIUM = HEADLESS_SHELL if "CHROMIUM_PATH" not in os.environ and Path(HEADLESS_SHELL).exists() else CHROMIUM


def chromium_args(executable: str) -> list[str]:
    """The command line for ``executable``: the shell is headless by itself, the full browser is told to be."""
    return [*([] if executable == HEADLESS_SHELL else ["--headless=new"]), "--no-sandbox", "--disable-gpu",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--disable-dev-shm-usage", "--no-first-run"]


CHROMIUM_ARGS = chromium_args(CHROMIUM)
TEST_CHROMIUM_ARGS = chromium_args(TEST_CHROMIUM)


def bench_env() -> dict[str, str]:
    """The environment a test runs a bench/ script in: the tests' Chromium, since a test checks what the script
    reports and how it ends, not how fast a user's browser is."""
    return os.environ | {"CHROMIUM_PATH": TEST_CHROMIUM}

# A phone or the teacher's panel catches up by itself (no reload); how fast is bench.follow's and bench.poll's
# measure: a test's wait is only a bound a busy CI box cannot miss.
CATCH_UP_MS = 60_000


def browser_missing_reason() -> str | None:
    """Why browser tests cannot run here, or None when they can."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright (Python) is not installed: pip install -r requirements-dev.txt"
    if not (Path(TEST_CHROMIUM).exists() or shutil.which(TEST_CHROMIUM)):  # the one the tests launch
        return f"Chromium not found at {TEST_CHROMIUM}: apt-get install chromium chromium-headless-shell"
    return None


def require(reason: str | None, what: str) -> None:
    """Skip a test that cannot run here (``reason``: why, None when it can); under CI (CI=true) fail instead."""
    import pytest

    if reason:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{what} must run under CI: {reason}")
        pytest.skip(reason)


def require_browser() -> None:
    """Skip a browser test when Chromium or Playwright is missing; under CI (CI=true) fail instead."""
    require(browser_missing_reason(), "browser tests")


@contextmanager
def streamlit_server(port: int | None = None, timeout: float = 60, address: str | None = "127.0.0.1",
                     env: dict[str, str] | None = None, app: Path = ROOT / "dashboard" / "app.py",
                     cwd: Path = ROOT) -> Iterator[str]:
    """Run `streamlit run app` in ``cwd`` (whose .streamlit/config.toml applies) on ``address`` (None: the
    configured default); yield its base URL; stop it by PID."""
    port = port or free_port()
    with tempfile.TemporaryFile() as log:
        proc = processes.start(processes.streamlit_command(port, address, app), log, cwd=cwd, env=env)
        url = f"http://127.0.0.1:{port}"
        try:
            processes.wait_healthy(url, proc, log, timeout)
            yield url
        finally:
            processes.stop(proc)


LOOPBACK = {"0100007F", "00000000000000000000000001000000"}  # 127.0.0.1 and ::1 as /proc/net/tcp* write them


def listening_addresses(port: int) -> set[str]:
    """Local addresses with a socket listening on ``port`` (from /proc/net/tcp and tcp6)."""
    found = set()
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(name).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            local, state = line.split()[1], line.split()[3]
            addr, p = local.split(":")
            if state == "0A" and int(p, 16) == port:  # 0A = LISTEN
                found.add(addr)
    return found


_playwright = None  # this process's Playwright: its sync API runs one instance a thread
_browsers: dict[tuple[str, ...], object] = {}  # extra Chromium flags -> the browser launched with them


def shared_browser(extra_args: tuple[str, ...] = ()) -> object:
    """This process's Chromium with ``extra_args``, launched on first use and kept until :func:`close_shared` (the
    test modules' fixture) or exit: a launch costs about a second of CPU that a new context does not."""
    global _playwright
    if _playwright is None:
        from playwright.sync_api import sync_playwright

        _playwright = sync_playwright().start()
    browser = _browsers.get(extra_args)
    if browser is None or not browser.is_connected():
        browser = _browsers[extra_args] = _playwright.chromium.launch(
            executable_path=TEST_CHROMIUM, args=TEST_CHROMIUM_ARGS + list(extra_args), headless=True)
    return browser


def close_shared() -> None:
    """Close the shared Chromium and stop Playwright, whose sync API holds an event loop that any later
    ``asyncio.run()`` in this thread would find running."""
    global _playwright
    for browser in _browsers.values():
        try:
            browser.close()
        except Exception:  # already gone with its driver
            pass
    _browsers.clear()
    if _playwright is not None:
        _playwright.stop()
        _playwright = None


atexit.register(close_shared)


@contextmanager
def chromium_page(width: int = 1600, height: int = 1000, extra_args: list[str] | None = None,
                  color_scheme: str = "light", **options) -> Iterator[object]:
    """A page of its own browser context (no cookies, storage or cache shared with any other) in this process's
    Chromium (``color_scheme``: the browser's light or dark preference, which the app follows; ``options``: more of
    Playwright's context options, e.g. ``locale``)."""
    browser = shared_browser(tuple(extra_args or ()))
    before = set(browser.contexts)
    context = browser.new_context(viewport={"width": width, "height": height}, color_scheme=color_scheme, **options)
    try:
        yield context.new_page()
    finally:  # with the contexts the test opened beside it (a phone's browser.new_page), as closing Chromium did
        for opened in browser.contexts:
            if opened not in before:
                opened.close()


# Every table in the main column (or under the element that the selector ``scope`` names): an HTML table's right edge
# and each cell's text within the main column; a data grid (st.dataframe, drawn on a canvas, whose hidden table has
# no size) within it and not scrolling sideways. Returns {tables: how many, problems: [what is cut]}.
TABLES_FIT_JS = r"""(scope) => {
    const main = document.querySelector('[data-testid="stMainBlockContainer"]');
    const s = getComputedStyle(main), m = main.getBoundingClientRect();
    const right = m.right - parseFloat(s.paddingRight);
    const root = scope ? document.querySelector(scope) : main;
    if (!root) return {tables: 0, problems: [`nothing on the page matches ${scope}`]};
    const out = [];
    const tables = [...root.querySelectorAll('table')].filter(t => !t.closest('[data-testid="stDataFrame"]'));
    for (const t of tables) {
        const r = t.getBoundingClientRect();
        if (r.right > right + 2) out.push(`a table reaches ${Math.round(r.right - right)} px past the main column`);
        for (const c of t.querySelectorAll('th, td'))
            if (c.scrollWidth > c.clientWidth + 1) out.push(`cell "${c.innerText.slice(0, 30)}" is cut`);
    }
    const grids = [...root.querySelectorAll('[data-testid="stDataFrame"]')];
    for (const g of grids) {
        const r = g.getBoundingClientRect(), scroller = g.querySelector('.dvn-scroller');
        if (r.right > right + 2) out.push(`a data grid reaches ${Math.round(r.right - right)} px past the main column`);
        if (!scroller) out.push('a data grid is not drawn');
        else if (scroller.scrollWidth > scroller.clientWidth + 1)
            out.push(`a data grid's columns scroll ${scroller.scrollWidth - scroller.clientWidth} px sideways`);
    }
    return {tables: tables.length + grids.length, problems: out};
}"""


def wait_idle(page, timeout: float = 60_000, charts: bool = True) -> None:
    """Wait until the script run finished and (optionally) a Vega chart is drawn."""
    page.wait_for_selector('[data-test-script-state="notRunning"]', state="attached", timeout=timeout)
    page.wait_for_function(
        "() => !document.querySelector('[data-test-script-state=\"running\"]')", timeout=timeout)
    if charts:
        page.wait_for_selector('[data-testid="stVegaLiteChart"] canvas, [data-testid="stVegaLiteChart"] svg',
                               timeout=timeout)


def wait_drawn(page, timeout: float = 60_000) -> None:
    """Wait until a rerun has finished and the page has painted its results: the script is not
    running, no element is stale, every chart has a canvas and every image has loaded, then two
    animation frames."""
    page.wait_for_function(
        """() => {
            if (!document.querySelector('[data-test-script-state="notRunning"]')) return false;
            if (document.querySelector('[data-stale="true"]')) return false;
            for (const c of document.querySelectorAll('[data-testid="stVegaLiteChart"]'))
                if (!c.querySelector('canvas, svg')) return false;
            for (const img of document.querySelectorAll('[data-testid="stImage"] img'))
                if (!img.complete) return false;
            return true;
        }""", timeout=timeout, polling="raf")
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")


def click_until(locator, done, timeout_s: float = 120, retry_s: float = 5) -> None:
    """Click ``locator`` until ``done()`` holds. A click can land while Streamlit redraws that element (a
    page polling every second while it trains redraws it constantly) and be lost; then click it again."""
    deadline = time.monotonic() + timeout_s
    while True:
        locator.click(timeout=timeout_s * 1000)
        retry = time.monotonic() + retry_s
        while time.monotonic() < retry:
            if done():
                return
            time.sleep(0.1)
        if time.monotonic() > deadline:
            raise AssertionError(f"clicking {locator} for {timeout_s:.0f} s did not take effect")
