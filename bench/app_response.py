"""How fast the Explore page answers as the sentence grows (issue: T = 6 ... 1024 tokens).

For each T and each settings profile -- "default" (the app's defaults on your own text:
CausalAttention, 3-d learned inputs, d_out 2) and "gpt2" (MultiHeadAttention, d 768, 12 heads) --
it reports:
- server: the page's script run after a seed change (a new traced run, nothing cached), via
  Streamlit's AppTest, median of --reps;
- cached: the same rerun when nothing changed (a click on a cell, say);
- browser: in headless Chromium, from pressing Enter on a new seed to the page painted with every
  chart and image (tests/browser.py: wait_drawn), median of --reps; and the first load.

    python -m bench.app_response                 # T = 6 32 128 512 1024
    python -m bench.app_response --sizes 6 32 --reps 2 --no-browser
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

WORDS = "the quick brown fox jumps over the lazy dog while a small bird sings".split()
PROFILES = {
    "default": dict(input_mode="learned", variant="CausalAttention", d_in="3", d_out="2", num_heads="2"),
    "gpt2": dict(input_mode="learned", variant="MultiHeadAttention", d_in="768", d_out="768", num_heads="12"),
}


def sentence(num_tokens: int) -> str:
    """A text of exactly ``num_tokens`` GPT-2 tokens (each word here is one token)."""
    from attn_core import tokenize

    text = " ".join((WORDS * (num_tokens // len(WORDS) + 1))[:num_tokens])
    assert len(tokenize(text)) == num_tokens
    return text


def server_times(num_tokens: int, reps: int, settings: dict) -> tuple[float, float]:
    from apptest_utils import clear_caches, messages, new_app

    clear_caches()
    at = new_app(sentence=sentence(num_tokens), **settings)
    at.run()
    assert not messages(at)["exception"] and not messages(at)["error"], messages(at)
    fresh, cached = [], []
    for r in range(reps):
        at.number_input(key="seed").set_value(1000 + r)
        t = time.perf_counter()
        at.run()
        fresh.append(time.perf_counter() - t)
        t = time.perf_counter()
        at.run()
        cached.append(time.perf_counter() - t)
    return statistics.median(fresh), statistics.median(cached)


def browser_times(sizes: list[int], reps: int, settings: dict) -> dict[int, tuple[float, float]]:
    from urllib.parse import urlencode

    from browser import chromium_page, streamlit_server, wait_drawn
    from dashboard.controls import INPUT_NAMES, VARIANT_NAMES

    out = {}
    with streamlit_server() as url, chromium_page(1500, 1000) as page:
        for n in sizes:
            q = dict(settings, sentence=sentence(n), input_mode=INPUT_NAMES[settings["input_mode"]],
                     variant=VARIANT_NAMES[settings["variant"]])
            t = time.perf_counter()
            page.goto(f"{url}/?{urlencode(q)}")
            page.wait_for_selector('[data-testid="stVegaLiteChart"]', timeout=120_000)
            wait_drawn(page, 120_000)
            first = time.perf_counter() - t
            seed = page.get_by_role("spinbutton", name="seed")
            times = []
            for r in range(reps):
                seed.fill(str(2000 + r))
                t = time.perf_counter()
                seed.press("Enter")
                page.wait_for_selector('[data-test-script-state="running"], [data-stale="true"]',
                                       state="attached", timeout=10_000)
                wait_drawn(page, 120_000)
                times.append(time.perf_counter() - t)
            out[n] = (first, statistics.median(times))
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[6, 32, 128, 512, 1024])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--no-browser", action="store_true")
    ap.add_argument("--profiles", nargs="+", default=list(PROFILES), choices=list(PROFILES))
    args = ap.parse_args(argv)

    from browser import browser_missing_reason

    reason = None if args.no_browser else browser_missing_reason()
    if reason:
        print(f"(browser times skipped: {reason})")
    for profile in args.profiles:
        settings = PROFILES[profile]
        rows = {n: server_times(n, args.reps, settings) for n in args.sizes}
        browser = {} if args.no_browser or reason else browser_times(args.sizes, args.reps, settings)
        print(f"\nprofile {profile}: " + ", ".join(f"{k} {v}" for k, v in settings.items()))
        print(f"{'T':>5} | {'server rerun':>12} | {'cached rerun':>12} | {'browser change':>14} | {'first load':>10}")
        print("-" * 66)
        for n in args.sizes:
            fresh, cached = rows[n]
            b = browser.get(n)
            bt = f"{b[1]:>13.2f}s" if b else f"{'-':>14}"
            bf = f"{b[0]:>9.2f}s" if b else f"{'-':>10}"
            print(f"{n:>5} | {fresh:>11.3f}s | {cached:>11.3f}s | {bt} | {bf}")


if __name__ == "__main__":
    main()
