"""Follow mode under load: phones following the teacher's lesson through HAProxy over Streamlit's own websocket,
one replica killed mid-lesson.

What it does, exactly:
- starts ``deploy.course`` (N replicas behind HAProxy) with one class store: a SQLite file, or (``--postgres``) a
  throwaway PostgreSQL cluster on loopback (tests/postgres.py);
- the teacher's side is the store, as the Lesson page's Next does it (dashboard/classroom/follow.py ``go``): the
  ready lesson "Chapter 3 in 40 minutes" started in a room; each Next draws the step once (shared through the
  store) or asks its poll, then moves the room's step;
- each follower is a websocket session through HAProxy, as a phone's browser opens it: it asks for the phones' page
  (``/answer?code=...&me=<its id>``), and then does what the browser does with the page's fragments: reruns each
  one every ``interval`` seconds the server asked for (``AutoRerun``), dropping the timers as the browser's frontend
  does (all of them when a full run starts, one on ``StopAutoRerun``). A follower "shows step k" when the server
  sends it the caption "step k of n · following the teacher" (sent by the run that draws the step);
- the teacher advances ``--steps`` times, waiting until every follower shows the step (or ``TIMEOUT``): p50/p95 of
  click → follower shows it; missed = (follower, step) pairs never shown;
- half way, one replica is SIGKILLed; its followers reconnect through HAProxy (a new session elsewhere) and must
  land on the current step: time from the kill to showing it (goal ≤ 5 s);
- a follower that misses a step prints the last messages it got (and its ``me``, to find it in a server trace);
- server RSS per follower: the replicas' RSS with every follower connected minus before any, divided by N.

    python -m bench.follow --quick                 # 3 replicas, 12 followers, SQLite (under a minute)
    python -m bench.follow --followers 90          # the issue's size
    python -m bench.follow --followers 90 --postgres
    python -m bench.follow --browsers 6            # phones in real Chromium: when the step *shows* on them
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import secrets
import signal
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from bench.classroom import rss_mb  # noqa: E402
from bench.poll import COOKIE, _cookie, _run  # noqa: E402
from deploy.course import Course, free_course_port  # noqa: E402

TIMEOUT = 15.0  # seconds a follower may take to show a step before it counts as missed
SHOWN = re.compile(r"step (\d+) of (\d+) · following the teacher")


@dataclass
class Follower:
    me: str
    query: str
    cookie: str | None = None
    ws: object = None
    step: int | None = None  # 0-based step last shown
    seen: dict[int, float] = field(default_factory=dict)  # step -> perf_counter when first shown after its click
    fragments: dict[str, float] = field(default_factory=dict)  # fragment id -> interval (s)
    due: dict[str, float] = field(default_factory=dict)  # fragment id -> when its timer fires next (monotonic)
    page_hash: str = ""  # the phones' page, as the server named it (its navigation message)
    alive: bool = True
    reconnects: int = 0
    last: deque = field(default_factory=lambda: deque(maxlen=12))  # (perf_counter, what) of the last messages


def _rerun_msg(query: str, fragment: str | None = None, page_hash: str = "") -> bytes:
    """A script run as the browser asks for it: the page by its hash once the server named it (a fragment's
    ``st.rerun(scope="app")`` reruns that page), the fragment's own id for its timer."""
    from streamlit.proto.BackMsg_pb2 import BackMsg

    msg = BackMsg()
    msg.rerun_script.query_string = query
    msg.rerun_script.page_name = "answer"
    msg.rerun_script.page_script_hash = page_hash
    if fragment is not None:
        msg.rerun_script.fragment_id = fragment
        msg.rerun_script.is_auto_rerun = True
    return msg.SerializeToString()


def _said(fm, kind: str | None) -> str:
    """One message in a few words, for the log of a follower that missed a step."""
    run = fm.metadata.run
    if kind in ("new_session", "script_finished"):
        what = "fragments " + ",".join(x[:6] for x in run.fragment_ids) if run.fragment_ids else "full run"
        status = f" status {fm.script_finished}" if kind == "script_finished" else ""
        return f"{kind} ({what}, run {run.script_run_id[:6]}){status}"
    if kind == "delta":
        return f"delta {fm.delta.WhichOneof('type')} {list(fm.metadata.delta_path)}"
    return str(kind)


def _read(f: Follower, raw: bytes) -> None:
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    fm = ForwardMsg()
    fm.ParseFromString(raw)
    kind = fm.WhichOneof("type")
    f.last.append((time.perf_counter(), _said(fm, kind)))
    if kind == "navigation":
        f.page_hash = fm.navigation.page_script_hash or f.page_hash
    elif kind == "new_session" and not fm.metadata.run.fragment_ids:
        f.fragments.clear()  # a full run: the browser drops every fragment timer; the run registers its own again
        f.due.clear()
    elif kind == "auto_rerun":
        if f.fragments.get(fm.auto_rerun.fragment_id) != fm.auto_rerun.interval:  # as the browser: same interval,
            f.due.pop(fm.auto_rerun.fragment_id, None)  # same timer
        f.fragments[fm.auto_rerun.fragment_id] = fm.auto_rerun.interval
    elif kind == "stop_auto_rerun":
        for frag in fm.stop_auto_rerun.fragment_ids:
            f.fragments.pop(frag, None)
            f.due.pop(frag, None)
    elif kind == "delta" and fm.delta.WhichOneof("type") == "new_element":
        el = fm.delta.new_element
        if el.WhichOneof("type") == "markdown":
            m = SHOWN.search(el.markdown.body)
            if m:
                step = int(m.group(1)) - 1
                f.step = step
                f.seen.setdefault(step, time.perf_counter())


async def follow(f: Follower, ws_url: str, origin: str) -> None:
    """One phone: open the page, then rerun its fragments as the browser would; reconnect when dropped."""
    import websockets

    while f.alive:
        try:
            headers = {"Cookie": f"{COOKIE}={f.cookie}"} if f.cookie else {}
            f.ws = await websockets.connect(ws_url, additional_headers=headers, origin=origin, max_size=2**26,
                                            open_timeout=TIMEOUT)
            f.cookie = _cookie(f.ws.response.headers) or f.cookie
            f.fragments.clear()
            f.due.clear()
            await f.ws.send(_rerun_msg(f.query))
            ticker = asyncio.create_task(_tick(f))
            try:
                async for raw in f.ws:
                    _read(f, raw)
            finally:
                ticker.cancel()
        except Exception:  # noqa: BLE001, S110 - a dropped connection or a dead replica: reconnect like the page
            pass
        if f.alive:
            f.ws, f.cookie = None, None
            f.reconnects += 1
            await asyncio.sleep(0.5)


async def _tick(f: Follower) -> None:
    """The browser's fragment timers: each fragment rerun every interval the server asked for."""
    while True:
        now = time.monotonic()
        for frag, interval in list(f.fragments.items()):
            if now >= f.due.setdefault(frag, now + interval):
                f.due[frag] = now + interval
                f.last.append((time.perf_counter(), f"sent: rerun fragment {frag[:6]}"))
                await f.ws.send(_rerun_msg(f.query, frag, f.page_hash))
        await asyncio.sleep(0.05)


def _rss(course: Course) -> float:
    total = 0.0
    for s in course.servers:
        try:
            total += rss_mb(course.pid(s.name))
        except (OSError, KeyError, ValueError):
            pass
    return total


async def _warm(course: Course, query: str) -> None:
    """One phone's page on each replica (its first run imports the app): the RSS baseline is a warm server's."""
    import websockets

    for server in course.servers:
        async with websockets.connect(f"ws://127.0.0.1:{server.port}/_stcore/stream", max_size=2**26,
                                      origin=f"http://127.0.0.1:{server.port}", open_timeout=TIMEOUT) as ws:
            await _run(ws, query)


async def _wait_all(followers: list[Follower], step: int, t0: float) -> None:
    while time.perf_counter() - t0 < TIMEOUT and not all(step in f.seen for f in followers):
        await asyncio.sleep(0.02)


class Teacher:
    """The teacher's side of the ready lesson, through the class store as the Lesson page's Next does it: a step's
    poll asked, or its drawing shared, before the class moves to it."""

    def __init__(self, db: str) -> None:
        from dashboard.classroom import lessons as L
        from dashboard.classroom.store import PollStore

        self.polls = PollStore(db)
        self.store = L.LessonStore(self.polls)
        self.lesson = L.ready()
        self.code, self.secret = self.polls.create_room()
        self.store.start(self.code, self.secret, self.lesson)

    def go(self, i: int, clock: Callable[[], float] = time.perf_counter) -> float:
        """Move the class to step ``i``; ``clock()`` read just before it moves (the click's time)."""
        from dashboard.classroom import step_views
        from dashboard.i18n import LANGS

        step = self.lesson["steps"][i]
        if step["kind"] == "poll":
            self.polls.ask(self.code, self.secret, step_views.question(step))
        else:
            for lang in LANGS:
                step_views.rendered(step, lang, self.store)
        t = clock()
        self.store.go(self.code, self.secret, i)
        return t


async def main_async(args) -> int:
    with ExitStack() as stack:
        if args.postgres:
            import postgres

            db = stack.enter_context(postgres.cluster())
        else:
            db = str(Path(stack.enter_context(tempfile.TemporaryDirectory())) / "class.sqlite3")
        port = free_course_port(args.replicas)
        course = stack.enter_context(Course(args.replicas, port, class_db=db, timeout=120))
        teacher = Teacher(db)
        code, go = teacher.code, teacher.go
        steps = min(args.steps, len(teacher.lesson["steps"]) - 1)
        t_first = go(0)
        await _warm(course, urlencode({"code": code}))
        await asyncio.sleep(1.0)
        rss_before = _rss(course)
        ws_url, origin = f"ws://127.0.0.1:{port}/_stcore/stream", f"http://127.0.0.1:{port}"
        followers = []
        for _unused in range(args.followers):
            me = secrets.token_urlsafe(16)
            followers.append(Follower(me, urlencode({"code": code, "me": me})))
        tasks = [asyncio.create_task(follow(f, ws_url, origin)) for f in followers]
        await _wait_all(followers, 0, t_first)
        joined = sum(0 in f.seen for f in followers)
        await asyncio.sleep(1.0)
        rss_after = _rss(course)
        latencies: list[float] = []
        missed = 0
        missing: dict[int, list[int]] = {}  # step (1-based) -> the followers that never showed it
        logs: list[str] = []  # what the first follower that missed each step got last
        kill_at = steps // 2
        killed, moved, landed = None, [], []
        for i in range(1, steps + 1):
            await asyncio.sleep(args.pause)
            t0 = go(i)
            await _wait_all(followers, i, t0)
            for k, f in enumerate(followers):
                if i in f.seen:
                    latencies.append(f.seen[i] - t0)
                else:
                    missed += 1
                    if i + 1 not in missing:
                        said = "; ".join(f"{t - t0:+.2f} {what}" for t, what in f.last)
                        logs.append(f"follower {k} ({f.me[:8]}), step {i + 1}, last messages (s after click): {said}")
                    missing.setdefault(i + 1, []).append(k)
            if i == kill_at:
                killed = course.servers[0].name
                moved = [f for f in followers if f.cookie == killed]
                for f in moved:
                    f.seen.pop(i, None)
                t_kill = time.perf_counter()
                os.kill(course.pid(killed), signal.SIGKILL)
                await _wait_all(moved, i, t_kill)
                landed = [f.seen[i] - t_kill for f in moved if i in f.seen]
                missed += len(moved) - len(landed)
        for f in followers:
            f.alive = False
            if f.ws is not None:
                await f.ws.close()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    latencies.sort()
    p = lambda q: latencies[int(q * (len(latencies) - 1))] if latencies else float("nan")  # noqa: E731
    store_name = "PostgreSQL" if args.postgres else "SQLite"
    print(f"store: {store_name}; {args.replicas} replicas; {joined} of {len(followers)} followers joined on step 1; "
          f"{killed} killed after step {kill_at + 1}")
    print(f"click -> follower shows the step: p50 {p(0.5):.2f} s, p95 {p(0.95):.2f} s, max {p(1.0):.2f} s "
          f"({len(latencies)} shown)")
    worst = max(landed) if landed else float("nan")
    print(f"killed replica's followers: {len(moved)}, landed on the current step {len(landed)} (slowest "
          f"{worst:.2f} s after the kill; goal <= 5 s)")
    print(f"server RSS: {rss_before:.0f} MB before followers, {rss_after:.0f} MB with {len(followers)}: "
          f"{(rss_after - rss_before) / max(1, len(followers)):.2f} MB per follower")
    if missing:
        print("missed, by step: " + "; ".join(f"step {i}: {len(ks)} (followers {ks[:8]})" for i, ks in missing.items()))
        print("\n".join(logs))
    print(f"followers {len(followers)}, steps {steps}, missed {missed}, p95 {p(0.95):.2f} s")
    return 0 if missed == 0 and joined == len(followers) and len(landed) == len(moved) else 1


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.follow", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--replicas", type=int, default=3)
    ap.add_argument("--followers", type=int, default=90)
    ap.add_argument("--steps", type=int, default=10, help="how many times the teacher presses Next")
    ap.add_argument("--pause", type=float, default=1.0, help="seconds between the teacher's Next presses")
    ap.add_argument("--postgres", action="store_true", help="PostgreSQL (a throwaway cluster) instead of SQLite")
    ap.add_argument("--quick", action="store_true", help="12 followers, 0.3 s between steps (under a minute)")
    ap.add_argument("--browsers", type=int, default=0, metavar="N",
                    help="N phones in real Chromium pages instead of websocket followers (bench/follow_browser.py)")
    args = ap.parse_args()
    if args.quick:
        args.followers, args.pause = 12, 0.3
    if args.browsers:
        from bench import follow_browser

        return follow_browser.run(args)
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
