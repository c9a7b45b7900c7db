"""Pretrained GPT-2 in the app (issue 21): load time, the server's memory, the model view's time as T grows, and a
layer or head switch against the floor page, in one run.

Without ``--source`` a random GPT-2-small-shaped checkpoint (``transformers``' ``GPT2Config()``, ~500 MB) is written
to a temporary folder and deleted afterwards (``bench.pretrained`` makes it the same way). The app runs with
``ATTENTION_LAB_GPT2_DIR`` naming it; times are measured as ``bench.app_response`` measures them (from the change
until the DOM is quiet), the floor page's sentence change alternating with each.

    python -m bench.gpt2_app                          # T = 16, 64, 256, 1024
    python -m bench.gpt2_app --sizes 16 64 --reps 2 --source ~/gpt2-weights
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from bench.app_response import (  # noqa: E402
    FLOOR,
    IDLE_JS,
    SENTENCE_WIDGET,
    sentence,
    set_sentence,
    timed_change,
)
from bench.pretrained import MAKE_CHECKPOINT  # noqa: E402

MODEL_VIEW = {"model": "gpt2", "section": "Model view"}
WEIGHTS = {"model": "gpt2"}  # Explore's default section: the chosen head's weights


def rss_mb(pid: int) -> float:
    """A process's resident set (VmRSS), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


@contextmanager
def server(app: Path, cwd: Path, env: dict[str, str] | None = None):
    """``streamlit run app`` on a free port: (its URL, its PID)."""
    from deploy import processes

    port = processes.free_port()
    with tempfile.TemporaryFile() as log:
        proc = processes.start(processes.streamlit_command(port, "127.0.0.1", app), log, cwd=cwd, env=env)
        url = f"http://127.0.0.1:{port}"
        try:
            processes.wait_healthy(url, proc, log, 60)
            yield url, proc.pid
        finally:
            processes.stop(proc)


def open_tab(browser, url: str, query: dict[str, str]):
    tab = browser.new_page(viewport={"width": 1280, "height": 720})
    tab.goto(f"{url}/?{urlencode(query)}")
    tab.wait_for_function(IDLE_JS, timeout=180_000, polling=50)
    return tab


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", help="a folder holding gpt2/ (default: a random GPT-2 small, made and deleted)")
    ap.add_argument("--sizes", type=int, nargs="+", default=[16, 64, 256, 1024])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--switch-tokens", type=int, default=64, help="T of the layer / head switches (default 64)")
    ap.add_argument("--no-switch", action="store_true", help="skip the layer / head switches")
    args = ap.parse_args(argv)
    tmp = None
    folder = args.source
    if folder is None:
        tmp = Path(tempfile.mkdtemp(prefix="gpt2-app-bench-"))
        subprocess.run([sys.executable, "-c", MAKE_CHECKPOINT, str(tmp / "gpt2")], check=True, capture_output=True)
        folder = str(tmp)
    try:
        measure(args, folder)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def measure(args: argparse.Namespace, folder: str) -> None:
    from playwright.sync_api import sync_playwright

    from browser import CHROMIUM, CHROMIUM_ARGS

    print(f"load average at start {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs", flush=True)
    env = dict(os.environ, ATTENTION_LAB_GPT2_DIR=folder)
    with sync_playwright() as p, server(FLOOR, FLOOR.parent) as (floor_url, _), \
            server(ROOT / "dashboard" / "app.py", ROOT, env) as (app_url, pid):
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        floor = open_tab(browser, floor_url, {})
        warm = open_tab(browser, app_url, {})  # the random-weights page: torch imported, no GPT-2 yet
        before = rss_mb(pid)
        t0 = time.perf_counter()
        view = open_tab(browser, app_url, MODEL_VIEW)  # loads the model: once per server process
        first = time.perf_counter() - t0
        after = rss_mb(pid)
        warm.close()
        print(f"first GPT-2 page (the model loaded, 6 tokens, model view drawn): {first:.2f} s; server RSS "
              f"{before:.0f} MB before -> {after:.0f} MB with GPT-2 small loaded", flush=True)

        rows = {}
        for n in args.sizes:
            samples: dict[str, list[float]] = {"floor": [], "model view": []}
            reps = args.reps if n < 1024 else max(1, args.reps - 1)
            for r in range(reps + 1):  # the first change at each size warms caches: not counted
                text = sentence(n, r)
                for name, tab in (("floor", floor), ("model view", view)):
                    dt = timed_change(tab, lambda tab=tab, text=text: set_sentence(tab, text), widget=SENTENCE_WIDGET,
                                      timeout=180_000)
                    if r:
                        samples[name].append(dt)
            rows[n] = {name: statistics.median(v) for name, v in samples.items()}
            print(f"T={n:>5}: model view {rows[n]['model view']:6.2f} s, floor {rows[n]['floor']:5.2f} s; server RSS "
                  f"{rss_mb(pid):.0f} MB", flush=True)

        if not args.no_switch:
            switches(browser, app_url, floor, args)
        print(f"server RSS at the end: {rss_mb(pid):.0f} MB")
        browser.close()
    print(f"load average at end {os.getloadavg()[0]:.2f}")


def switches(browser, app_url: str, floor, args: argparse.Namespace) -> None:
    """A head button and the sidebar's layer on the Weights section, each against the floor's sentence change."""
    n = args.switch_tokens
    weights = open_tab(browser, app_url, {**WEIGHTS, "sentence": sentence(n, 9)})
    set_sentence(floor, sentence(n, 9))
    floor.wait_for_function(IDLE_JS, timeout=60_000, polling=50)
    layer_box = weights.locator(".st-key-layer input").first
    switch: dict[str, list[float]] = {"floor": [], "head": [], "layer": []}
    for r in range(args.reps + 1):
        dt_floor = timed_change(floor, lambda r=r: set_sentence(floor, sentence(n, 10 + r)), widget=SENTENCE_WIDGET)
        head = weights.locator(".st-key-head").get_by_text(f"head {(r % 11) + 2}", exact=True)
        dt_head = timed_change(weights, head.click, widget=".st-key-head")

        def next_layer(r=r) -> None:
            layer_box.fill(str((r % 11) + 2))
            layer_box.press("Enter")

        dt_layer = timed_change(weights, next_layer, widget=".st-key-layer")
        if r:
            switch["floor"].append(dt_floor)
            switch["head"].append(dt_head)
            switch["layer"].append(dt_layer)
    med = {k: statistics.median(v) for k, v in switch.items()}
    print(f"\nswitch on the Weights section at T={n} (median of {args.reps}; floor = its T={n} sentence change, "
          f"same run): head {med['head']:.2f} s ({med['head'] / med['floor']:.2f}x), layer {med['layer']:.2f} s "
          f"({med['layer'] / med['floor']:.2f}x), floor {med['floor']:.2f} s")


if __name__ == "__main__":
    main()
