"""What the user sees after a change: Explore against the floor page, measured the same way, in one run.

Time is measured as the shared probe does (``../shared/tools/e2e_probe.py``): from the change until the
page's DOM (or a canvas's pixels) last changed, with the script idle and 400 ms of quiet (counted once the page
changed outside the widget acted on: a slow server's rerun may start more than 400 ms after the keystroke) -- not
"every chart painted", since a page keeps changing afterwards (late Vega re-layouts, images, widgets). The floor page
(``bench/floor_app/app.py``, a copy of the probe's: one T x T heatmap, torch imported) runs beside the
project, the two measured alternately, so load on the machine hits both alike.

For each T: a sentence change on the floor, and on Explore with each settings profile; the ratio
project / floor. Then "Next" on the two stepper pages (Shape flow, Book walkthrough) against the floor's
T=6 change, and the first page after server start (process start -> first page drawn and quiet).

    python -m bench.app_response                            # T = 6 32 128 1024, profiles default heads4 gpt2
    python -m bench.app_response --sizes 6 32 --reps 3 --profiles default
    python -m bench.app_response --load 1                   # with one CPU-heavy process beside it
    python -m bench.app_response --sizes 6 --reps 5 --profiles default --no-steppers --no-first-page \
        --against ../old-main --cpu                         # the language switch, this checkout beside another
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

FLOOR = ROOT / "bench" / "floor_app" / "app.py"
WORDS = "the quick brown fox jumps over the lazy dog while a small bird sings".split()
PROFILES = {
    "default": {},
    "heads4": dict(input_mode="learned", variant="MultiHeadAttention", d_in="16", d_out="16", num_heads="4"),
    "gpt2": dict(input_mode="learned", variant="MultiHeadAttention", d_in="768", d_out="768", num_heads="12"),
    "zh": dict(lang="zh"),  # the default Explore in Chinese
}

# The page's last DOM change, and the last change outside the widget acted on (``window.__probe.ignore``, a selector)
# or of the script state (running / notRunning). Quiet counts only after such a change: a busy server was slower to
# start a 1,024-token rerun than the quiet the probe waits for, which ended the measurement before the run began
# (docs/measurements.md). (A fast run may flip the script state and back within one render, so the state alone is
# no signal.)
#
# A chart drawn on a <canvas> changes pixels, not the DOM: every drawing call on a 2-d canvas counts as a change
# too (stricter than the shared probe, which sees only DOM changes; large heatmaps are canvases, cells.many_cells).
QUIET_JS = """() => {
  if (!window.__probe) {
    window.__probe = {last: performance.now(), moved: 0, ignore: null};
    new MutationObserver((records) => {
      const now = performance.now();
      window.__probe.last = now;
      const ignore = window.__probe.ignore;
      const inside = (r) => ignore && (r.target.nodeType === 1 ? r.target : r.target.parentElement)?.closest(ignore);
      if (records.some(r => r.attributeName === 'data-test-script-state' || !inside(r))) window.__probe.moved = now;
    }).observe(document.body, {subtree: true, childList: true, attributes: true, characterData: true});
    const ctx = CanvasRenderingContext2D.prototype;
    for (const name of ['fillRect', 'strokeRect', 'clearRect', 'fillText', 'strokeText', 'fill', 'stroke',
                        'drawImage', 'putImageData']) {
      const draw = ctx[name];
      ctx[name] = function (...args) {
        const now = performance.now();
        window.__probe.last = now;
        window.__probe.moved = now;
        return draw.apply(this, args);
      };
    }
  }
}"""
SCRIPT_IDLE_JS = """() => document.querySelector('[data-testid="stApp"]')?.getAttribute('data-test-script-state')
  === 'notRunning'"""
IDLE_JS = """() => {
  const app = document.querySelector('[data-testid="stApp"]');
  if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
  return document.querySelectorAll('[data-testid="stVegaLiteChart"], [data-testid="stImage"]').length > 0;
}"""


def sentence(num_tokens: int, salt: int = 0) -> str:
    """A text of exactly ``num_tokens`` GPT-2 tokens; ``salt`` varies it. Each word here is one token after a
    space; at the very start "jumps", "lazy" and "sings" are two, so every text starts with "The" (a text
    starting "jumps" had 1,025 tokens at T = 1,024: Explore's too-long message, timed as a fast redraw)."""
    words = WORDS[salt % len(WORDS):] + WORDS[:salt % len(WORDS)]
    return " ".join((["The"] + words * (num_tokens // len(words) + 1))[:num_tokens])


def timed_change(page, action, quiet_ms: int = 400, timeout: float = 120_000, widget: str | None = None) -> float:
    """Seconds from ``action()`` until the DOM last changed (the page changed outside ``widget``, the selector of
    the widget acted on, its script is idle, then ``quiet_ms`` of quiet)."""
    page.evaluate(QUIET_JS)
    t0 = page.evaluate("(w) => { window.__probe.ignore = w; return performance.now(); }", widget)
    action()
    page.wait_for_function(
        f"""() => {{
          const app = document.querySelector('[data-testid="stApp"]');
          const idle = app && app.getAttribute('data-test-script-state') === 'notRunning';
          return idle && window.__probe.moved > {t0} && window.__probe.last > {t0}
                 && performance.now() - window.__probe.last > {quiet_ms};
        }}""", timeout=timeout, polling=50)
    return (page.evaluate("() => window.__probe.last") - t0) / 1000


SENTENCE_WIDGET = ".st-key-sentence"


def set_sentence(page, text: str) -> None:
    box = page.locator(".st-key-sentence textarea").first
    box.fill(text)
    box.press("Control+Enter")
    box.blur()


def first_page(app: Path, cwd: Path, browser) -> float:
    """Seconds from starting the server process to its first page drawn and quiet."""
    from browser import free_port, streamlit_server

    port = free_port()
    t0 = time.perf_counter()
    with streamlit_server(port=port, app=app, cwd=cwd) as url:
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        page.goto(url, wait_until="domcontentloaded")
        page.wait_for_function(IDLE_JS, timeout=120_000, polling=50)
        page.evaluate(QUIET_JS)
        page.wait_for_function("() => performance.now() - window.__probe.last > 400", timeout=120_000, polling=50)
        seconds = time.perf_counter() - t0 - 0.4
        page.close()
    return seconds


def first_pages(browser, reps: int) -> dict[str, list[float]]:
    """:func:`first_page` of the floor and of the project, alternately, ``reps`` times each (load on the machine
    hits both alike, and each pair is a ratio of its own: how stable it is)."""
    times: dict[str, list[float]] = {"floor": [], "Explore": []}
    for _ in range(reps):
        times["floor"].append(first_page(FLOOR, FLOOR.parent, browser))
        times["Explore"].append(first_page(ROOT / "dashboard" / "app.py", ROOT, browser))
    return times


# Each stepper page: its path, its Next button's label, and the widget the click changes (not counted as the page's
# own change).
STEPPERS = {"Shape flow": ("shape-flow", "Next ▶", '[class*="st-key-"][class*="_step_next"]'),
            "Book walkthrough": ("walkthrough", "Next ▶", '[class*="st-key-"][class*="_step_next"]'),
            "Generate": ("generate", "Next token ▶", ".st-key-gen_next")}


def stepper_times(browser, app_url: str, floor_tab, reps: int) -> dict[str, float]:
    """Median seconds from clicking "Next" on Shape flow, the walkthrough and Generate (Next token) until the DOM
    is quiet, and the floor's T=6 sentence change measured alternately with them."""
    tabs = {}
    for name, (path, label, _) in STEPPERS.items():
        tab = browser.new_page(viewport={"width": 1600, "height": 1000})
        tab.goto(f"{app_url}/{path}")
        tab.get_by_role("button", name=label).wait_for(timeout=120_000)  # Generate draws no chart before a step
        tab.wait_for_function(SCRIPT_IDLE_JS, timeout=120_000, polling=50)
        tabs[name] = tab
    samples: dict[str, list[float]] = {"floor": [], **{name: [] for name in tabs}}
    for r in range(reps + 1):  # the first click warms caches: not counted
        dt = timed_change(floor_tab, lambda r=r: set_sentence(floor_tab, sentence(6, 20 + r)), widget=SENTENCE_WIDGET)
        if r:
            samples["floor"].append(dt)
        for name, tab in tabs.items():
            _, label, widget = STEPPERS[name]
            dt = timed_change(tab, tab.get_by_role("button", name=label).click, widget=widget)
            if r:
                samples[name].append(dt)
    for tab in tabs.values():
        tab.close()
    return {name: statistics.median(v) for name, v in samples.items()}


TRACE_CATEGORIES = ["devtools.timeline", "disabled-by-default-devtools.timeline"]


def main_thread_ms(trace: bytes) -> float:
    """CPU ms of a page's main thread in a Chrome trace: the thread time of its top-level tasks (on the renderer
    thread that ran the most script)."""
    import json

    events = json.loads(trace)
    events = events["traceEvents"] if isinstance(events, dict) else events
    calls = Counter((e["pid"], e["tid"]) for e in events if e.get("name") == "FunctionCall")
    if not calls:
        return 0.0
    main = calls.most_common(1)[0][0]
    tasks = sorted((e for e in events if (e["pid"], e["tid"]) == main and e.get("ph") == "X" and "tdur" in e),
                   key=lambda e: (e["ts"], -e["dur"]))
    total, end = 0.0, -1
    for e in tasks:
        if e["ts"] >= end:  # a top-level task (nested events are counted in it)
            total += e["tdur"] / 1000
            end = e["ts"] + e["dur"]
    return total


# Counts the Vega views a change builds: each new view adds its marks' root (svg.marks or canvas.marks).
EMBEDS_JS = """() => {
  if (!window.__embeds) {
    window.__embeds = {n: 0};
    new MutationObserver((records) => {
      for (const r of records) for (const node of r.addedNodes) {
        if (node.nodeType !== 1) continue;
        window.__embeds.n += (node.matches('svg.marks, canvas.marks') ? 1 : 0)
          + node.querySelectorAll('svg.marks, canvas.marks').length;
      }
    }).observe(document.body, {subtree: true, childList: true});
  }
  window.__embeds.n = 0;
}"""


def costed_change(browser, page, action, widget: str, cpu: bool) -> tuple[float, float, int]:
    """:func:`timed_change`; with ``cpu`` also the page's main-thread CPU ms over it (a Chrome trace: thread time,
    which a busy machine stretches much less than wall time) and the number of Vega views it built."""
    if not cpu:
        return timed_change(page, action, widget=widget), 0.0, 0
    page.evaluate(EMBEDS_JS)
    browser.start_tracing(page=page, categories=TRACE_CATEGORIES)
    seconds = timed_change(page, action, widget=widget)
    ms = main_thread_ms(browser.stop_tracing())
    return seconds, ms, page.evaluate("() => window.__embeds.n")


def language_times(browser, apps: dict[str, str], floor_tab, reps: int, cpu: bool = False,
                   tokens: int = 6) -> dict[str, tuple]:
    """Median (seconds, main-thread CPU ms, Vega views built) from a click on the sidebar's language switch (中文,
    then English, alternately) until Explore's DOM is quiet, for each app in ``apps`` (name -> URL: this checkout,
    maybe another one's beside it), and the floor's T=6 sentence change, all measured alternately. With ``cpu``, also
    each app's own T=6 sentence change ("<name>, sentence"): what a rerun that swaps data costs on the same page.
    Explore shows a sentence of ``tokens`` tokens (its sentence changes keep that length)."""
    tabs = {}
    for name, url in apps.items():
        tab = browser.new_page(viewport={"width": 1600, "height": 1000})
        tab.goto(f"{url}/?{urlencode(dict(lang='en', sentence=sentence(tokens)))}")
        tab.wait_for_function(IDLE_JS, timeout=120_000, polling=50)
        tabs[name] = tab
    samples: dict[str, list[tuple]] = {"floor": []}
    for r in range(2 * reps + 2):  # the first round (to Chinese and back) warms caches: not counted
        text = sentence(6, 40 + r)
        own = sentence(tokens, 40 + r)
        dt = costed_change(browser, floor_tab, lambda text=text: set_sentence(floor_tab, text),
                           SENTENCE_WIDGET, cpu)
        if r >= 2:
            samples["floor"].append(dt)
        label = "中文" if r % 2 == 0 else "English"
        for name, tab in tabs.items():
            switch = tab.locator(".st-key-lang_switch button", has_text=label)
            ds = costed_change(browser, tab, switch.click, ".st-key-lang_switch", cpu)
            if r >= 2:
                samples.setdefault(name, []).append(ds)
            if cpu:
                dc = costed_change(browser, tab, lambda tab=tab, own=own: set_sentence(tab, own),
                                   SENTENCE_WIDGET, cpu)
                if r >= 2:
                    samples.setdefault(f"{name}, sentence", []).append(dc)
    for tab in tabs.values():
        tab.close()
    return {name: tuple(statistics.median(x[i] for x in v) for i in range(3)) for name, v in samples.items()}


def switches(browser, app_url: str, floor_tab, args: argparse.Namespace) -> dict[str, float]:
    """:func:`language_times` of this checkout, and of ``args.against`` (another checkout's server) beside it."""
    from browser import streamlit_server

    if args.against is None:
        return language_times(browser, {"this checkout": app_url}, floor_tab, args.reps, args.cpu, args.switch_tokens)
    other = args.against.resolve()
    with streamlit_server(app=other / "dashboard" / "app.py", cwd=other) as other_url:
        return language_times(browser, {"this checkout": app_url, other.name: other_url}, floor_tab, args.reps,
                              args.cpu, args.switch_tokens)


@contextmanager
def cpu_load(n: int):
    """``n`` processes that keep a core busy (a pure-Python loop) while the block runs."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[6, 32, 128, 1024])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--profiles", nargs="+", default=list(PROFILES), choices=list(PROFILES))
    ap.add_argument("--no-first-page", action="store_true")
    ap.add_argument("--no-steppers", action="store_true", help="skip Shape flow / walkthrough Next")
    ap.add_argument("--no-language", action="store_true", help="skip the language switch (older versions lack it)")
    ap.add_argument("--against", type=Path, help="another checkout (e.g. the old main): its language switch is "
                    "measured beside this one's, alternately")
    ap.add_argument("--cpu", action="store_true", help="the page's main-thread CPU time (a Chrome trace) and "
                    "the Vega views built, for each sentence change and each language switch (and then each app's own "
                    "T=6 sentence change)")
    ap.add_argument("--switch-tokens", type=int, default=6, help="the language switch on Explore showing a sentence "
                    "of this many tokens")
    ap.add_argument("--alternate", action="store_true", help="sentence changes alternate T and T + 1 tokens, as the "
                    "shared probe does (../shared/tools/e2e_probe.py --rerun): every change is a new length")
    ap.add_argument("--load", type=int, default=0, help="CPU-heavy processes running beside the measurement")
    args = ap.parse_args(argv)
    print(f"load average at start {os.getloadavg()[0]:.2f}; {args.load} CPU-heavy process(es) beside the run",
          flush=True)
    with cpu_load(args.load):
        measure(args)
    print(f"load average at end {os.getloadavg()[0]:.2f}")


def tabs_of(args: argparse.Namespace) -> list[str]:
    return ["floor", *args.profiles]


def measure(args: argparse.Namespace) -> None:
    from playwright.sync_api import sync_playwright

    from browser import CHROMIUM, CHROMIUM_ARGS, streamlit_server

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        rows: dict[int, dict[str, float]] = {n: {} for n in args.sizes}
        with streamlit_server(app=FLOOR, cwd=FLOOR.parent) as floor_url, streamlit_server() as app_url:
            pages = {"floor": (floor_url, {})} | {name: (app_url, PROFILES[name]) for name in args.profiles}
            tabs = {}
            for name, (url, query) in pages.items():
                tab = browser.new_page(viewport={"width": 1600, "height": 1000})
                tab.goto(f"{url}/?{urlencode(query)}" if query else url)
                tab.wait_for_function(IDLE_JS, timeout=120_000, polling=50)
                tabs[name] = tab
            for n in args.sizes:
                samples: dict[str, list[tuple]] = {name: [] for name in tabs}
                for r in range(args.reps + 1):  # the first change at each size warms caches: not counted
                    text = sentence(n + (r % 2 if args.alternate else 0), r)
                    for name, tab in tabs.items():  # alternate: load on the machine hits each alike
                        dt = costed_change(browser, tab, lambda tab=tab, text=text: set_sentence(tab, text),
                                           SENTENCE_WIDGET, args.cpu)
                        if r:
                            samples[name].append(dt)
                rows[n] = {name: tuple(statistics.median(x[i] for x in v) for i in range(3))
                           for name, v in samples.items()}
            steps = {} if args.no_steppers else stepper_times(browser, app_url, tabs["floor"], args.reps)
            switch = {} if args.no_language else switches(browser, app_url, tabs["floor"], args)
            for tab in tabs.values():
                tab.close()
        first = {} if args.no_first_page else first_pages(browser, args.reps)
        browser.close()

    print(f"sentence change -> DOM quiet (median of {args.reps}; ratio = Explore / floor, same run"
          + ("; T and T + 1 tokens alternately" if args.alternate else "")
          + ("; then the page's main-thread CPU and the Vega views it built" if args.cpu else "") + ")")
    head = f"{'T':>5} | {'floor':>7} | " + " | ".join(f"{name:>16}" for name in args.profiles)
    print(head + "\n" + "-" * len(head))
    for n in args.sizes:
        f = rows[n]["floor"][0]
        cells = " | ".join(f"{rows[n][name][0]:6.2f}s ({rows[n][name][0] / f:4.2f}x)" for name in args.profiles)
        print(f"{n:>5} | {f:6.2f}s | {cells}")
        if args.cpu:
            cells = " | ".join(f"{rows[n][name][1]:5.0f} ms, {rows[n][name][2]:.0f} view(s)" for name in tabs_of(args))
            print(f"{'':>5} | {cells}")
    if steps:
        print(f"Next > on a stepper page -> DOM quiet (median of {args.reps}), against the floor's T=6 sentence "
              f"change in the same run ({steps['floor']:.2f} s):")
        for name in STEPPERS:
            print(f"  {name:<17} {steps[name]:5.2f} s ({steps[name] / steps['floor']:.2f}x)")
    if switch:
        floor_s, floor_ms = switch["floor"][:2]
        print(f"language switch (中文 <-> English) on Explore at T = {args.switch_tokens} -> DOM quiet (median of "
              f"{2 * args.reps}), against the "
              f"floor's T=6 sentence change in the same run ({floor_s:.2f} s"
              + (f"; main-thread CPU {floor_ms:.0f} ms):" if args.cpu else "):"))
        for name, (seconds, ms, views) in switch.items():
            if name != "floor":
                cpu = (f"; main-thread CPU {ms:4.0f} ms ({ms / floor_ms:.2f}x), {views:.0f} new Vega view(s)"
                       if args.cpu else "")
                print(f"  {name:<28} {seconds:5.2f} s ({seconds / floor_s:.2f}x){cpu}")
    if first:
        floor, app = statistics.median(first["floor"]), statistics.median(first["Explore"])
        pairs = " ".join(f"{e / f:.2f}x" for f, e in zip(first["floor"], first["Explore"]))
        print(f"first page after server start (median of {args.reps}, alternated): floor {floor:.2f} s, Explore "
              f"{app:.2f} s ({app / floor:.2f}x); each pair: {pairs}")


if __name__ == "__main__":
    main()
