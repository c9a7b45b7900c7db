"""Follow mode as students see it: phones in real Chromium pages following the ready lesson through HAProxy.

``python -m bench.follow --browsers 6`` runs this instead of the websocket followers: ``deploy.course`` (N replicas
behind HAProxy, one SQLite class store), the teacher's Next done through the store as the Lesson page's button does
it (each step drawn once first, as the teacher's own page draws it), and ``--browsers`` phone pages (390x844, touch)
on ``/answer?code=...``, each in its own browser context. In every phone a MutationObserver notes the wall-clock
time (the same clock on one machine) when the caption "step k of n · following the teacher" first appears
(**shown**) and when, after that, the page's script has finished with every chart drawn (**drawn**). Printed: p50 /
p95 of click -> shown and click -> drawn over every phone and step, and the split of "shown" into the wait for the
phone's next watch tick and the rest.
"""

from __future__ import annotations

import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from browser import CHROMIUM, CHROMIUM_ARGS  # tests/browser.py
from deploy.course import Course, free_course_port

PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}
TIMEOUT_MS = 30_000
# Notes when each step's caption first shows, and when the page is next idle with its charts drawn.
OBSERVE = r"""() => {
  window.__shown = {}; window.__drawn = {};
  const rx = /step (\d+) of \d+ · following the teacher/;
  const look = () => {
    const now = Date.now();
    const texts = '[data-testid="stCaptionContainer"], [data-testid="stMarkdownContainer"]';
    for (const el of document.querySelectorAll(texts)) {
      const m = rx.exec(el.textContent);
      if (m && !(m[1] in window.__shown)) window.__shown[m[1]] = now;
    }
    const app = document.querySelector('[data-testid="stApp"]');
    const idle = app && app.getAttribute('data-test-script-state') === 'notRunning'
      && !document.querySelector('[data-stale="true"]');
    if (idle) for (const k in window.__shown) if (!(k in window.__drawn)) window.__drawn[k] = now;
  };
  new MutationObserver(look).observe(document.body, {subtree: true, childList: true, characterData: true,
                                                     attributes: true, attributeFilter: ['data-test-script-state']});
  look();
}"""


def _quantile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[int(q * (len(values) - 1))] if values else float("nan")


def run(args) -> int:
    from playwright.sync_api import sync_playwright

    from bench.follow import Teacher
    from dashboard.classroom.follow import FOLLOW_REFRESH_S

    with ExitStack() as stack:
        db = str(Path(stack.enter_context(tempfile.TemporaryDirectory())) / "class.sqlite3")
        course = stack.enter_context(Course(args.replicas, free_course_port(args.replicas), class_db=db, timeout=120))
        teacher = Teacher(db)
        code = teacher.code
        steps = min(args.steps, len(teacher.lesson["steps"]) - 1)

        def go(i: int) -> float:
            return teacher.go(i, lambda: time.time() * 1000)  # the phones' clock: Date.now()

        go(0)
        pw = stack.enter_context(sync_playwright())
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        phones = []
        for _k in range(args.browsers):
            page = browser.new_context(**PHONE).new_page()
            page.goto(f"{course.url}/answer?code={code}")
            page.get_by_text("step 1 of").first.wait_for(timeout=120_000)
            phones.append(page)
        for page in phones:
            page.evaluate(OBSERVE)
        shown, drawn, missed = [], [], 0
        for i in range(1, steps + 1):
            time.sleep(args.pause)
            t0 = go(i)
            for page in phones:
                try:
                    page.wait_for_function(f"() => '{i + 1}' in window.__drawn", timeout=TIMEOUT_MS, polling=50)
                except Exception:  # noqa: BLE001 - a phone that never showed the step counts as missed
                    missed += 1
            for page in phones:
                got = page.evaluate(f"() => [window.__shown['{i + 1}'], window.__drawn['{i + 1}']]")
                if got[0] is not None:
                    shown.append((got[0] - t0) / 1000)
                if got[1] is not None:
                    drawn.append((got[1] - t0) / 1000)
        browser.close()
    print(f"{args.browsers} phones in Chromium, {args.replicas} replicas, {steps} steps; the phones look every "
          f"{FOLLOW_REFRESH_S} s (on average half of that is waiting for the look)")
    print(f"click -> phone shows the step: p50 {_quantile(shown, 0.5):.2f} s, p95 {_quantile(shown, 0.95):.2f} s, "
          f"max {_quantile(shown, 1.0):.2f} s ({len(shown)} shown)")
    print(f"click -> the step drawn and idle: p50 {_quantile(drawn, 0.5):.2f} s, p95 {_quantile(drawn, 0.95):.2f} s, "
          f"max {_quantile(drawn, 1.0):.2f} s")
    print(f"phones {args.browsers}, steps {steps}, missed {missed}, p95 shown {_quantile(shown, 0.95):.2f} s")
    return 0 if missed == 0 else 1
