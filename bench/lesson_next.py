"""The teacher's Next, seen by the teacher and by the phones: in Debian's Chromium through ``deploy.course`` (3
replicas behind HAProxy), the teacher at 1280x720 starts the ready lesson, three phones at 390x844 follow it, and the
teacher presses Next ``--steps`` times. For each step it prints how long after the click the teacher's own bar says
"Step k of n" and each phone says "step k of n" (times read in the one browser, polled every 10 ms in each page).

    python -m bench.lesson_next                  # SQLite, steps 2-6
    python -m bench.lesson_next --postgres       # a throwaway PostgreSQL cluster on loopback (tests/postgres.py)
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from browser import chromium_page, wait_idle  # noqa: E402
from dashboard.classroom.lessons import ready  # noqa: E402
from deploy.course import Course, free_course_port  # noqa: E402

# when the page first shows ``text`` inside ``selector``: window.__seen (Date.now(), one clock for every page)
WATCH_JS = """([selector, text]) => {
    window.__seen = null;
    const id = setInterval(() => {
        const el = document.querySelector(selector);
        if (el && el.innerText.includes(text)) { window.__seen = Date.now(); clearInterval(id); }
    }, 10);
}"""


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.lesson_next", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=5, help="how many Next presses (from step 1)")
    ap.add_argument("--phones", type=int, default=3)
    ap.add_argument("--postgres", action="store_true")
    args = ap.parse_args()
    with ExitStack() as stack:
        if args.postgres:
            import postgres

            db = stack.enter_context(postgres.cluster())
        else:
            db = str(Path(stack.enter_context(tempfile.TemporaryDirectory())) / "class.sqlite3")
        course = stack.enter_context(Course(3, free_course_port(3), class_db=db, timeout=120))
        teacher = stack.enter_context(chromium_page(1280, 720))
        teacher.goto(f"{course.url}/lesson")
        wait_idle(teacher, charts=False)
        teacher.locator(".st-key-lesson_ready button").click()
        teacher.get_by_text("Tiled attention: the same weights, tile by tile").wait_for(timeout=60_000)
        teacher.locator(".st-key-lesson_start button").click()
        heading = teacher.locator(".st-key-lesson_bar").get_by_text(re.compile(r"^Code [2-9A-Z]{7}$"))
        heading.wait_for(timeout=60_000)
        code = heading.inner_text().split()[-1]
        n = len(ready()["steps"])
        phones = []
        for _k in range(args.phones):
            phone = teacher.context.browser.new_page(viewport={"width": 390, "height": 844}, is_mobile=True,
                                                     has_touch=True)
            phone.goto(f"{course.url}/answer?code={code}")
            phone.get_by_text(f"step 1 of {n} · following the teacher").wait_for(timeout=60_000)
            phones.append(phone)
        wait_idle(teacher, charts=False)
        rows = []
        for step in range(2, 2 + args.steps):
            teacher.evaluate(WATCH_JS, [".st-key-lesson_bar", f"Step {step} of {n}"])
            for phone in phones:
                phone.evaluate(WATCH_JS, ["[data-testid='stMain']", f"step {step} of {n} · following"])
            t0 = teacher.evaluate("() => Date.now()")
            teacher.locator(".st-key-lesson_next button").click()
            seen = []
            for page in [teacher, *phones]:
                page.wait_for_function("() => window.__seen !== null", timeout=60_000)
                seen.append((page.evaluate("() => window.__seen") - t0) / 1000)
            wait_idle(teacher, charts=False)
            for phone in phones:
                wait_idle(phone, charts=False)
            rows.append(seen)
            print(f"step {step}: teacher's bar {seen[0]:.2f} s; phones " + ", ".join(f"{s:.2f}" for s in seen[1:])
                  + " s", flush=True)
    teacher_s = [r[0] for r in rows]
    phone_s = [s for r in rows for s in r[1:]]
    store = "PostgreSQL" if args.postgres else "SQLite"
    print(f"teacher's bar: median {statistics.median(teacher_s):.2f} s, max {max(teacher_s):.2f} s; phones: median "
          f"{statistics.median(phone_s):.2f} s, max {max(phone_s):.2f} s ({store})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
