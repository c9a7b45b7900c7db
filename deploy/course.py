"""Attention Lab for a course: N app processes behind HAProxy, on one port.

    python -m deploy.course --replicas 3                      # http://127.0.0.1:8501; the processes on 8502-8504
    python -m deploy.course --replicas 3 --address 0.0.0.0    # open to the network (README, "A course")
    python -m deploy.course --servers app1:8501,app2:8501     # HAProxy alone, before servers started elsewhere
    python -m deploy.course --replicas 3 --write-config -     # print the HAProxy configuration and stop

Each replica is the unchanged app (`streamlit run dashboard/app.py`) on a loopback port; HAProxy (Debian's
``haproxy``) listens on ``--address:--port`` and pins each browser to one replica with a cookie, so a
session's page, websocket and media stay together. Its configuration is rendered from the one template,
``deploy/haproxy.cfg.template``. Ctrl-C (or SIGTERM, as ``docker stop`` sends) stops HAProxy, then every
replica, each by its PID.
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from string import Template
from subprocess import Popen
from typing import IO

from dashboard.classroom.address import BIND_ADDRESS_ENV, lan_address
from dashboard.classroom.store import DB_ENV, default_url
from deploy import processes

TEMPLATE = Path(__file__).with_name("haproxy.cfg.template")
DEFAULT_PORT = 8501
REPLICA_ADDRESS = "127.0.0.1"  # only HAProxy faces the network


def haproxy_path() -> str | None:
    """Where HAProxy is installed (Debian puts it in /usr/sbin, often not on a user's PATH), or None."""
    found = shutil.which("haproxy")
    if found:
        return found
    return next((p for p in ("/usr/sbin/haproxy", "/usr/local/sbin/haproxy") if os.access(p, os.X_OK)), None)


def haproxy_missing_reason() -> str | None:
    """Why the course cannot start here, or None when it can."""
    return None if haproxy_path() else "haproxy is not installed: apt-get install haproxy"


@dataclass(frozen=True)
class Server:
    """One app process behind HAProxy; ``name`` is also its cookie value."""

    name: str
    host: str
    port: int

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


def local_servers(replicas: int, port: int = DEFAULT_PORT) -> list[Server]:
    """``replicas`` processes on the loopback ports after HAProxy's: app1 on port+1, app2 on port+2, ..."""
    return [Server(f"app{i + 1}", REPLICA_ADDRESS, port + 1 + i) for i in range(replicas)]


def free_course_port(replicas: int) -> int:
    """A port for HAProxy whose next ``replicas`` ports (:func:`local_servers`) are free too: a free port alone may
    have a busy neighbour (another server on this machine), and the course would refuse to start."""
    for _ in range(50):
        port = processes.free_port()
        if not any(processes.port_in_use(s.port, s.host) for s in local_servers(replicas, port)):
            return port
    raise RuntimeError(f"no run of {replicas + 1} free ports found on {REPLICA_ADDRESS}")


def parse_servers(spec: str) -> list[Server]:
    """``host:port,host:port`` (servers started elsewhere, e.g. compose's app1:8501) as app1, app2, ..."""
    out = []
    for i, item in enumerate(s.strip() for s in spec.split(",") if s.strip()):
        host, _, port = item.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"not host:port: {item!r}")
        out.append(Server(f"app{i + 1}", host, int(port)))
    if not out:
        raise ValueError("no servers given")
    return out


def render_config(servers: list[Server], address: str = "127.0.0.1", port: int = DEFAULT_PORT,
                  stats_socket: str | Path = "/tmp/attention-lab-haproxy.sock") -> str:
    """The HAProxy configuration for ``servers``, HAProxy listening on ``address:port``."""
    lines = "\n".join(f"    server {s.name} {s.host}:{s.port} cookie {s.name}" for s in servers)
    return Template(TEMPLATE.read_text()).substitute(address=address, port=port, stats_socket=stats_socket,
                                                     servers=lines)


def stat_rows(stats_socket: str | Path, timeout: float = 5) -> list[dict[str, str]]:
    """HAProxy's ``show stat`` (one row per frontend, server and backend) from its stats socket."""
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(timeout)
        s.connect(str(stats_socket))
        s.sendall(b"show stat\n")
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    text = b"".join(chunks).decode().lstrip("# ")
    return list(csv.DictReader(text.splitlines()))


class Course:
    """HAProxy in front of ``replicas`` app processes on consecutive loopback ports (or in front of
    ``servers`` started elsewhere). A context manager: ``with Course(2, port) as c: c.url``."""

    def __init__(self, replicas: int = 3, port: int = DEFAULT_PORT, address: str = "127.0.0.1",
                 servers: list[Server] | None = None, run_dir: Path | None = None, timeout: float = 120,
                 class_db: str | None = None) -> None:
        self.port, self.address, self.timeout = port, address, timeout
        # One poll store for every replica (a SQLite file, or PostgreSQL): a class's answers reach each process
        self.class_db = class_db or default_url()
        self.external = servers is not None
        self.servers = servers if servers is not None else local_servers(replicas, port)
        self._tmp = None if run_dir else tempfile.TemporaryDirectory(prefix="attention-lab-course-")
        self.run_dir = Path(run_dir or self._tmp.name)
        self.config = self.run_dir / "haproxy.cfg"
        self.stats_socket = self.run_dir / "haproxy.sock"
        self.procs: dict[str, Popen] = {}  # app1, app2, ..., haproxy
        self._logs: dict[str, IO[bytes]] = {}

    @property
    def url(self) -> str:
        """Where this machine reaches the course."""
        host = "127.0.0.1" if self.address in ("0.0.0.0", "::", "") else self.address
        return f"http://{host}:{self.port}"

    def replica_env(self) -> dict[str, str]:
        """What each replica is told: the one poll store, and the address HAProxy listens on (the students' link
        and QR code use it: the replicas themselves listen on loopback)."""
        return {DB_ENV: self.class_db, BIND_ADDRESS_ENV: self.address}

    def _start(self, name: str, cmd: list[str], env: dict[str, str] | None = None) -> Popen:
        self._logs[name] = log = open(self.run_dir / f"{name}.log", "w+b")  # noqa: SIM115 - closed in stop()
        self.procs[name] = proc = processes.start(cmd, log, env=env)
        return proc

    def start(self) -> None:
        """Start the replicas (all at once), wait until each answers its health check, then HAProxy; return
        once HAProxy answers and sees every replica up. On any failure, stop what was started."""
        haproxy = haproxy_path()
        if haproxy is None:
            raise RuntimeError(haproxy_missing_reason())
        busy = [p for p in [self.port] if processes.port_in_use(p, self.address)]
        if not self.external:
            busy += [s.port for s in self.servers if processes.port_in_use(s.port, s.host)]
        if busy:
            raise RuntimeError(f"port(s) {busy} already in use: pick another --port (the replicas take the "
                               f"{len(self.servers)} ports after it)")
        try:
            if not self.external:
                for s in self.servers:
                    self._start(s.name, processes.streamlit_command(s.port, s.host), env=self.replica_env())
                for s in self.servers:
                    processes.wait_healthy(s.url, self.procs[s.name], self._logs[s.name], self.timeout)
            self.config.write_text(render_config(self.servers, self.address, self.port, self.stats_socket))
            proc = self._start("haproxy", [haproxy, "-db", "-f", str(self.config)])
            processes.wait_healthy(self.url, proc, self._logs["haproxy"], self.timeout)
            self.wait_states({s.name: "UP" for s in self.servers}, self.timeout)
        except BaseException:
            self.stop()
            raise

    def _replica_rows(self) -> list[dict[str, str]]:
        return [r for r in stat_rows(self.stats_socket)
                if r["pxname"] == "replicas" and r["svname"] not in ("BACKEND", "FRONTEND")]

    def states(self) -> dict[str, str]:
        """Each replica's state as HAProxy's health checks see it: UP, DOWN, ``UP 1/2`` (going down), ..."""
        return {r["svname"]: r["status"] for r in self._replica_rows()}

    def connections(self) -> dict[str, int]:
        """Each replica's open connections as HAProxy counts them (an open page's websocket is one)."""
        return {r["svname"]: int(r["scur"] or 0) for r in self._replica_rows()}

    def wait_states(self, want: dict[str, str], timeout: float) -> float:
        """Wait until HAProxy reports the states in ``want``; seconds waited (TimeoutError past ``timeout``)."""
        t0 = time.monotonic()
        while True:
            now = self.states()
            if all(now.get(k) == v for k, v in want.items()):
                return time.monotonic() - t0
            if time.monotonic() - t0 > timeout:
                raise TimeoutError(f"HAProxy reports {now}, not {want}")
            time.sleep(0.1)

    def pid(self, name: str) -> int:
        return self.procs[name].pid

    def log(self, name: str) -> str:
        """The end of a process's log (``app1``, ..., ``haproxy``)."""
        return processes.log_tail(self._logs[name])

    def watch(self, out: IO[str] = sys.stdout) -> int:
        """Block while HAProxy runs, saying when a replica ends (HAProxy sends its visitors to the others);
        HAProxy's exit status once it ends."""
        gone: set[str] = set()
        while self.procs["haproxy"].poll() is None:
            for name, proc in self.procs.items():
                if name not in gone and proc.poll() is not None:
                    gone.add(name)
                    print(f"{name} (pid {proc.pid}) exited with status {proc.returncode}; HAProxy sends its "
                          f"sessions to the other replicas. Its log: {self.run_dir / name}.log", file=out, flush=True)
            time.sleep(1)
        print(f"HAProxy exited with status {self.procs['haproxy'].returncode}:\n{self.log('haproxy')}", file=out)
        return self.procs["haproxy"].returncode or 1

    def stop(self) -> None:
        """Stop HAProxy first (no new requests), then each replica, by PID. Safe to call twice."""
        for name in ["haproxy", *(n for n in self.procs if n != "haproxy")]:
            if name in self.procs:
                processes.stop(self.procs.pop(name))
        for log in self._logs.values():
            log.close()
        self._logs.clear()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> Course:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m deploy.course", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--replicas", type=int, default=3, help="app processes (default 3)")
    ap.add_argument("--port", type=int, default=DEFAULT_PORT, help="HAProxy's port; the replicas take the next N")
    ap.add_argument("--address", default="127.0.0.1",
                    help="where HAProxy listens (default 127.0.0.1: this computer only; 0.0.0.0: the network)")
    ap.add_argument("--servers", help="host:port,... of servers started elsewhere: start only HAProxy before them")
    ap.add_argument("--write-config", metavar="PATH", help="write the HAProxy configuration to PATH (- : print) "
                                                           "and stop")
    ap.add_argument("--class-db", help="the poll store every replica shares: a SQLite file (default "
                                       f"${DB_ENV} or ~/.cache/attention-lab/classroom.sqlite3) or a postgresql:// URL")
    ap.add_argument("--logs", type=Path, help="folder for the logs (default: a new temporary folder)")
    args = ap.parse_args(argv)
    servers = parse_servers(args.servers) if args.servers else None
    if args.replicas < 1:
        ap.error("--replicas must be at least 1")
    if args.write_config:
        text = render_config(servers or local_servers(args.replicas, args.port), args.address, args.port)
        if args.write_config == "-":
            sys.stdout.write(text)
        else:
            Path(args.write_config).write_text(text)
        return 0
    if reason := haproxy_missing_reason():
        print(reason, file=sys.stderr)
        return 2
    logs = args.logs or Path(tempfile.mkdtemp(prefix="attention-lab-course-"))
    logs.mkdir(parents=True, exist_ok=True)
    course = Course(args.replicas, args.port, args.address, servers=servers, run_dir=logs, class_db=args.class_db)
    for signum in (signal.SIGINT, signal.SIGTERM):  # Ctrl-C; docker stop: the same clean stop
        signal.signal(signum, _raise_interrupt)
    try:
        what = "HAProxy" if servers else f"{len(course.servers)} app processes and HAProxy"
        print(f"Starting {what} (logs in {logs}) ...", flush=True)
        course.start()
        where = course.url
        if args.address in ("0.0.0.0", "::"):  # the address phones use (the students' QR code shows the same)
            where = f"http://{lan_address() or '<this computer’s IP address>'}:{args.port} (and {course.url})"
        print(f"Attention Lab for a course: {where}", flush=True)
        for s in course.servers:
            pid = f"pid {course.pid(s.name)}" if s.name in course.procs else "started elsewhere"
            print(f"  {s.name}: {s.url} ({pid})", flush=True)
        if not servers:
            print(f"  polls: {course.class_db if not course.class_db.startswith('postgres') else 'PostgreSQL'}",
                  flush=True)
        print(f"  haproxy: pid {course.pid('haproxy')}, cookie SERVERID pins each browser to one of them. "
              f"Ctrl-C stops them all.", flush=True)
        return course.watch()
    except KeyboardInterrupt:
        print("Stopping HAProxy and the app processes ...", flush=True)
        return 0
    except (RuntimeError, TimeoutError) as exc:
        print(f"Could not start the course: {exc}", file=sys.stderr)
        return 1
    finally:
        course.stop()


if __name__ == "__main__":
    sys.exit(main())
