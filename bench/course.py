"""A course behind a load balancer: N app processes and HAProxy on loopback (deploy.course), many sessions
over Streamlit's websocket (the classroom bench's client), one process killed mid-run.

The class arrives: each session loads the page through HAProxy as a browser does (``GET /``, one after another:
HAProxy gives each newcomer the replica holding the fewest connections and a cookie naming it). Then every
session at once opens the websocket with its cookie, asks for the Explore page's Weights section on its own
~200-token text (200² cells: the weights come as a pooled PNG, ``st.image``, kept only by the process that
made it) and loads every image with its cookie. Checked: every image loads (no HTTP 400 or 404: this
Streamlit answers 404 for an image another process made), each page shows its own text and no other's, the
sessions spread evenly over the replicas, and the same images asked of another replica are refused (the
cookie is what makes them load).

Then one replica is killed with SIGKILL (by PID) while every session's websocket is open. Its sessions do what
Streamlit's page does when its connection drops: ping ``/_stcore/health`` through HAProxy until it answers, open
a new websocket (HAProxy drops the dead replica's cookie and sets another's); then the student's next action
asks for the page again, as a changed text or setting does (a button's first click after the move is lost:
seen in a browser, README). Meanwhile every other session asks for its page again too and must see no error.

    python -m bench.course                                   # 3 replicas, 90 sessions, one killed
    python -m bench.course --replicas 2 --sessions 10        # the test suite's short version
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import signal
import statistics
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.classroom import rss_mb, text_of, ws_rerun  # noqa: E402
from deploy.course import Course, free_course_port  # noqa: E402

TOKENS = 200  # 200 x 200 weights > 16k cells: Explore draws them as a pooled PNG (st.image)
MARK = re.compile(rb"zq(\d{4})q")  # each session's text ends with its own mark, zq0007q
COOKIE = "SERVERID"
TIMEOUT = 180.0  # generous: a busy 2-core CI box


def query_of(i: int, rng: random.Random) -> dict[str, str]:
    return {"sentence": text_of(TOKENS - 1, rng) + f" zq{i:04d}q", "section": "Weights"}


def cookie_in(headers) -> str | None:
    """The replica a response's ``Set-Cookie: SERVERID=...`` names, if it sets one."""
    for value in headers.get_all("Set-Cookie") or []:
        name, _, rest = value.partition("=")
        if name.strip() == COOKIE:
            return rest.split(";")[0]
    return None


def http_get(url: str, cookie: str | None = None) -> tuple[int, str | None, str]:
    """GET ``url`` with the ``SERVERID`` cookie: the status, the cookie it sets (or None) and its type."""
    req = urllib.request.Request(url, headers={"Cookie": f"{COOKIE}={cookie}"} if cookie else {})
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT) as r:
            r.read()
            return r.status, cookie_in(r.headers), r.headers.get("Content-Type", "")
    except urllib.error.HTTPError as e:
        return e.code, cookie_in(e.headers), e.headers.get("Content-Type", "")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Page:
    """What one script run sent: its images, the session marks it showed, its errors, its session id."""

    seconds: float
    media: list[str]
    marks: set[int]
    errors: list[str]
    session_id: str


def read_page(seconds: float, messages: list[bytes]) -> Page:
    from streamlit.proto.Alert_pb2 import Alert
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    media, errors, session_id = [], [], ""
    for data in messages:
        fm = ForwardMsg()
        fm.ParseFromString(data)
        kind = fm.WhichOneof("type")
        if kind == "new_session":
            session_id = fm.new_session.initialize.session_id
        elif kind == "script_finished" and fm.script_finished != ForwardMsg.FINISHED_SUCCESSFULLY:
            errors.append(f"script finished with status {fm.script_finished}")
        elif kind == "delta" and fm.delta.WhichOneof("type") == "new_element":
            el = fm.delta.new_element
            if el.WhichOneof("type") == "exception":
                errors.append(f"exception: {el.exception.message[:200]}")
            elif el.WhichOneof("type") == "alert" and el.alert.format == Alert.ERROR:
                errors.append(f"error: {el.alert.body[:200]}")
            elif el.WhichOneof("type") == "imgs":
                media += [img.url for img in el.imgs.imgs]
    marks = {int(m) for m in MARK.findall(b"".join(messages))}
    return Page(seconds, media, marks, errors, session_id)


@dataclass
class Session:
    """One student's tab: its text, the replica its cookie names, its websocket, what went wrong."""

    index: int
    query: dict[str, str]
    cookie: str | None = None
    ws: object = None
    pages: list[Page] = field(default_factory=list)
    media_ok: int = 0
    media_failed: list[int] = field(default_factory=list)  # the HTTP status of each image that did not load
    problems: list[str] = field(default_factory=list)
    closed_after: float | None = None  # failover: seconds from the kill until its websocket closed
    back_after: float | None = None  # ... until it had a page again
    replica_before: str | None = None


class Bench:
    """The measurement against one running :class:`Course`."""

    def __init__(self, course: Course) -> None:
        self.course = course
        self.base = course.url
        self.ws_url = self.base.replace("http://", "ws://") + "/_stcore/stream"

    async def get(self, path: str, cookie: str | None) -> tuple[int, str | None, str]:
        return await asyncio.to_thread(http_get, self.base + path, cookie)

    async def connect(self, s: Session) -> None:
        """Open the session's websocket with its cookie (as its browser does); take the cookie HAProxy sets."""
        import websockets

        headers = {"Cookie": f"{COOKIE}={s.cookie}"} if s.cookie else {}
        s.ws = await websockets.connect(self.ws_url, additional_headers=headers, origin=self.base,
                                        max_size=2**28, open_timeout=TIMEOUT)
        s.cookie = cookie_in(s.ws.response.headers) or s.cookie

    async def page(self, s: Session) -> Page:
        """Ask for the session's page; check it shows its own text only, no error, and that its images load
        through HAProxy with its cookie."""
        seconds, messages = await asyncio.wait_for(ws_rerun(s.ws, s.query), TIMEOUT)
        page = read_page(seconds, messages)
        s.pages.append(page)
        s.problems += page.errors
        if page.marks != {s.index}:
            s.problems.append(f"page showed the marks of sessions {sorted(page.marks)}")
        if not page.media:
            s.problems.append("the page had no image")
        for url in page.media:
            status, _, kind = await self.get(url, s.cookie)
            if status == 200 and kind.startswith("image/"):
                s.media_ok += 1
            else:
                s.media_failed.append(status)
                s.problems.append(f"{url} answered {status} {kind}")
        return page

    async def session(self, s: Session) -> Session:
        """A new tab: load the page (HAProxy sets the cookie) unless already pinned, websocket, the page."""
        if s.cookie is None:
            status, s.cookie, _ = await self.get("/", None)
            if status != 200 or s.cookie is None:
                s.problems.append(f"GET / answered {status} with cookie {s.cookie}")
        await self.connect(s)
        await self.page(s)
        return s

    async def elsewhere(self, sessions: list[Session]) -> Counter[int]:
        """Each session's own images asked of another replica (its cookie changed): the statuses answered."""
        names = [sv.name for sv in self.course.servers]
        counts = Counter(url for s in sessions for url in s.pages[0].media)
        statuses: Counter[int] = Counter()
        for s in sessions:
            other = names[(names.index(s.cookie) + 1) % len(names)]
            for url in s.pages[0].media:
                if counts[url] == 1:  # shared images (the same bytes) exist on every replica that drew them
                    statuses[(await self.get(url, other))[0]] += 1
        return statuses

    async def come_back(self, s: Session, t0: float) -> None:
        """A killed replica's session, as Streamlit's page handles a dropped connection."""
        await asyncio.wait_for(s.ws.wait_closed(), TIMEOUT)
        s.closed_after = time.perf_counter() - t0
        deadline = time.monotonic() + TIMEOUT
        while True:  # the page pings the server's health until it answers (through HAProxy, with its cookie)
            status, cookie, _ = await self.get("/_stcore/health", s.cookie)
            s.cookie = cookie or s.cookie
            if status == 200:
                break
            if time.monotonic() > deadline:
                s.problems.append(f"/_stcore/health still answered {status}")
                return
            await asyncio.sleep(0.2)
        await self.connect(s)
        await self.page(s)
        s.back_after = time.perf_counter() - t0

    async def carry_on(self, s: Session) -> None:
        """Another replica's session asks for its page again while the failover happens."""
        await self.page(s)


@dataclass
class Report:
    """What ``run`` measured."""

    replicas: list[str]
    sessions: list[Session]
    alone: float
    loaded: list[float]
    wall: float
    spread: dict[str, int]
    elsewhere: Counter[int]  # statuses of the sessions' own images asked of another replica
    rss_warm: dict[str, float]
    rss_peak: dict[str, float]
    cpu: dict[str, float]
    haproxy_rss: float
    victim: str | None = None
    down_after: float | None = None
    survivors_closed: list[int] = field(default_factory=list)
    spread_after: dict[str, int] = field(default_factory=dict)

    @property
    def media_failed(self) -> Counter[int]:
        return Counter(status for s in self.sessions for status in s.media_failed)

    @property
    def media_ok(self) -> int:
        return sum(s.media_ok for s in self.sessions)

    @property
    def problems(self) -> dict[int, list[str]]:
        return {s.index: s.problems for s in self.sessions if s.problems}

    def spread_ok(self, tolerance: float = 0.2) -> bool:
        fair = len(self.sessions) / len(self.replicas)
        return all(abs(self.spread.get(r, 0) - fair) <= tolerance * fair for r in self.replicas)

    @property
    def victims(self) -> list[Session]:
        return [s for s in self.sessions if s.replica_before == self.victim]

    def failover_ok(self) -> bool:
        return (self.victim is not None and bool(self.victims) and not self.survivors_closed
                and all(s.back_after is not None for s in self.victims)
                and all(s.cookie != self.victim for s in self.sessions))


class PeakRSS(threading.Thread):
    """Samples each process's RSS every 0.2 s; ``peak`` holds the largest seen (MB)."""

    def __init__(self, pids: dict[str, int]) -> None:
        super().__init__(daemon=True)
        self.pids, self.peak = pids, dict.fromkeys(pids, 0.0)
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.2):
            for name, pid in self.pids.items():
                try:
                    self.peak[name] = max(self.peak[name], rss_mb(pid))
                except OSError:
                    pass  # a killed replica


async def measure(course: Course, n: int, kill: bool = True, seed: int = 0) -> Report:
    """Warm each replica, time one session alone, then ``n`` sessions at once; kill one replica (``kill``)."""
    rng = random.Random(seed)
    bench = Bench(course)
    names = [s.name for s in course.servers]
    pids = {name: course.pid(name) for name in names}
    # Warm every replica, pinned by its cookie: its first page waits for the imports begun at its start.
    for name in names:
        await (await bench.session(Session(-1, query_of(9999, rng), cookie=name))).ws.close()
    alone_runs = []
    for _ in range(3):  # one session alone, through HAProxy, on a warm replica
        s = await bench.session(Session(9999, query_of(9999, rng)))
        alone_runs.append(s.pages[0].seconds)
        await s.ws.close()
    rss_warm = {name: rss_mb(pid) for name, pid in pids.items()}
    deadline = time.monotonic() + TIMEOUT  # until HAProxy has let the closed sessions go: they would skew the spread
    while any(course.connections().values()) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    sampler = PeakRSS(pids)
    sampler.start()
    sessions = [Session(i, query_of(i, rng)) for i in range(n)]
    # The class arrives: each tab loads the page (HAProxy picks the replica holding the fewest connections
    # and sets the cookie); then every session asks for its page at once.
    for s in sessions:
        status, s.cookie, _ = await bench.get("/", None)
        if status != 200 or s.cookie is None:
            s.problems.append(f"GET / answered {status} with cookie {s.cookie}")
        s.replica_before = s.cookie
    cpu0 = {name: cpu_seconds(pid) for name, pid in pids.items()}
    t0 = time.perf_counter()
    await asyncio.gather(*(bench.session(s) for s in sessions))
    wall = time.perf_counter() - t0
    cpu = {name: cpu_seconds(pid) - cpu0[name] for name, pid in pids.items()}
    elsewhere = await bench.elsewhere(sessions)
    report = Report(names, sessions, statistics.median(alone_runs), [s.pages[0].seconds for s in sessions], wall,
                    dict(Counter(s.cookie for s in sessions)), elsewhere, rss_warm, {}, cpu,
                    rss_mb(course.pid("haproxy")))
    if kill:
        report.victim = victim = max(names, key=lambda r: (report.spread.get(r, 0), r))
        t0 = time.perf_counter()
        os.kill(pids[victim], signal.SIGKILL)

        async def seen_down() -> float:
            await asyncio.to_thread(course.wait_states, {victim: "DOWN"}, TIMEOUT)
            return time.perf_counter() - t0

        jobs = [bench.come_back(s, t0) if s.cookie == victim else bench.carry_on(s) for s in sessions]
        *_, report.down_after = await asyncio.gather(*jobs, seen_down())
        from websockets.protocol import State

        report.survivors_closed = [s.index for s in sessions if s.replica_before != victim and s.ws.state != State.OPEN]
        report.spread_after = dict(Counter(s.cookie for s in sessions))
    sampler.done.set()
    sampler.join()
    report.rss_peak = sampler.peak
    for s in sessions:
        await s.ws.close()
    return report


def run(replicas: int = 3, sessions: int = 90, kill: bool = True, seed: int = 0) -> Report:
    """Start ``replicas`` + HAProxy on loopback, drive ``sessions`` sessions, kill one replica (``kill``)."""
    with Course(replicas, free_course_port(replicas), timeout=TIMEOUT) as course:
        try:
            return asyncio.run(measure(course, sessions, kill, seed))
        except BaseException:
            print(course.log("haproxy"), file=sys.stderr)
            raise


def print_report(r: Report) -> bool:
    """Print the figures; whether every goal was met."""
    n, fair = len(r.sessions), len(r.sessions) / len(r.replicas)
    ok = True

    def line(goal_met: bool, text: str) -> None:
        nonlocal ok
        ok &= goal_met
        print(f"{'ok    ' if goal_met else 'MISSED'} {text}", flush=True)

    print(f"{len(r.replicas)} replicas + HAProxy on 127.0.0.1, {n} sessions over the websocket (~{TOKENS}-token "
          f"texts, Explore's Weights section: a pooled PNG each)")
    print(f"{'replica':<8} {'sessions':>8} {'RSS warm':>9} {'RSS peak':>9} {'CPU (arrival)':>14}")
    for name in r.replicas:
        print(f"{name:<8} {r.spread.get(name, 0):>8} {r.rss_warm[name]:>6.0f} MB {r.rss_peak[name]:>6.0f} MB "
              f"{r.cpu[name]:>12.2f} s")
    print(f"HAProxy RSS {r.haproxy_rss:.0f} MB")
    line(r.spread_ok(), f"spread {dict(sorted(r.spread.items()))}: each within ±20 % of {fair:.0f}")
    failed = r.media_failed
    line(not failed and r.media_ok >= n, f"media: {r.media_ok} images loaded through HAProxy, "
                                         f"{sum(failed.values())} did not {dict(failed) if failed else ''}")
    refused = sum(v for k, v in r.elsewhere.items() if k != 200)
    line(refused == sum(r.elsewhere.values()) > 0,
         f"the same images asked of another replica: {refused}/{sum(r.elsewhere.values())} refused, statuses "
         f"{dict(r.elsewhere)} (the cookie is what makes them load)")
    line(all(p.marks == {s.index} for s in r.sessions for p in s.pages),
         "cross-talk: every page showed its own text and no other session's")
    slowest = max(r.loaded)
    print(f"       one session alone {r.alone:.2f} s; {n} at once: slowest {slowest:.2f} s "
          f"({slowest / r.alone:.0f}x), median {statistics.median(r.loaded):.2f} s, all answered in {r.wall:.2f} s "
          f"(bench.classroom's goal for one process: 2 x {r.alone:.2f} x {n} / {os.cpu_count()} cores = "
          f"{2 * r.alone * n / (os.cpu_count() or 1):.1f} s)")
    print(f"       CPU per session {sum(r.cpu.values()) / n * 1000:.0f} ms: "
          f"{sum(r.cpu.values()) / n * 30:.1f} CPU s per class of 30 opening the page")
    if r.victim is not None:
        v = r.victims
        back = [s.back_after for s in v if s.back_after is not None]
        closed = [s.closed_after for s in v if s.closed_after is not None]
        new_ids = sum(s.pages[-1].session_id != s.pages[0].session_id for s in v)
        moved = Counter(s.cookie for s in v)
        print(f"       failover: killed {r.victim} (SIGKILL) holding {len(v)} sessions; HAProxy saw it DOWN after "
              f"{r.down_after:.2f} s")
        line(r.failover_ok() and len(back) == len(v),
             f"its {len(v)} sessions: websocket closed within {max(closed, default=float('nan')):.2f} s, page back "
             f"through HAProxy within {max(back, default=float('nan')):.2f} s (median "
             f"{statistics.median(back) if back else float('nan'):.2f} s), now on {dict(sorted(moved.items()))}; "
             f"{new_ids}/{len(v)} in a new server session")
        line(not r.survivors_closed, f"the other {n - len(v)} sessions: {len(r.survivors_closed)} websockets closed, "
                                     f"their pages again in at most "
                                     f"{max(s.pages[-1].seconds for s in r.sessions if s not in v):.2f} s")
        print(f"       spread after the failover: {dict(sorted(r.spread_after.items()))}")
    line(not r.problems, f"problems: {r.problems or 'none'}")
    return ok


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--replicas", type=int, default=3)
    ap.add_argument("--sessions", type=int, default=90)
    ap.add_argument("--no-kill", action="store_true", help="leave every replica running")
    args = ap.parse_args()
    sys.exit(0 if print_report(run(args.replicas, args.sessions, not args.no_kill)) else 1)


if __name__ == "__main__":
    main()
