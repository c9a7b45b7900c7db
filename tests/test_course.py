"""A course behind HAProxy (deploy/): the short version of bench.course, the launcher's clean stop, and the
container files kept to the README's commands and the one HAProxy template."""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

from browser import LOOPBACK, listening_addresses, require
from deploy import course
from deploy.processes import ROOT

README = (ROOT / "README.md").read_text()
COMPOSE = (ROOT / "deploy" / "compose.yaml").read_text()


def compose_list(key: str, indent: int) -> list[str]:
    """A list the compose file writes in JSON (``command: [...]``) at ``indent`` spaces: under x-replica (2), the
    app services' shared definition, or under balancer (4)."""
    return json.loads(re.search(rf"^{' ' * indent}{key}: (\[[^\]]*\])", COMPOSE, re.M).group(1))


def require_haproxy() -> None:
    """Skip when HAProxy is missing; under CI (CI=true, where .ci/run installs it) fail instead."""
    require(course.haproxy_missing_reason(), "the course test")


def readme_commands() -> list[str]:
    """Every command line in the README's bash blocks, without its comment."""
    blocks = re.findall(r"```bash\n(.*?)```", README, re.S)
    return [line.split("  #")[0].strip() for block in blocks for line in block.splitlines() if line.strip()]


def test_two_replicas_ten_sessions_and_a_failover():
    """bench.course's checks, short: 2 replicas + HAProxy, 10 sessions, one replica killed mid-run."""
    require_haproxy()
    from bench.course import measure
    from deploy.course import free_course_port

    with course.Course(2, free_course_port(2), timeout=180) as c:
        # HAProxy and the replicas listen on loopback only (the README's default)
        for port in [c.port] + [s.port for s in c.servers]:
            assert listening_addresses(port) <= LOOPBACK and listening_addresses(port), port
        r = asyncio.run(measure(c, 10))
    assert not r.problems, r.problems  # own text only, no error, every image loaded, pages back after the kill
    assert not r.media_failed and r.media_ok >= 20  # each session's image, before and after the kill
    assert r.spread_ok(), r.spread
    assert sum(r.elsewhere.values()) > 0 and 200 not in r.elsewhere, r.elsewhere  # the cookie is what works
    assert r.failover_ok(), (r.victim, r.survivors_closed, [(s.index, s.back_after) for s in r.victims])
    assert all(s.pages[-1].session_id != s.pages[0].session_id for s in r.victims)  # a new session elsewhere
    assert set(r.spread_after) == set(r.replicas) - {r.victim}


def test_the_launcher_stops_every_process_on_ctrl_c(tmp_path):
    require_haproxy()
    from deploy.course import free_course_port

    port = free_course_port(1)
    proc = subprocess.Popen([sys.executable, "-m", "deploy.course", "--replicas", "1", "--port", str(port),
                             "--logs", str(tmp_path)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    out = []
    try:
        for line in proc.stdout:  # until it says it is ready (or ends)
            out.append(line)
            if "Ctrl-C stops them all" in line:
                break
        text = "".join(out)
        pids = [int(p) for p in re.findall(r"pid (\d+)", text)]
        assert len(pids) == 2, text  # app1 and haproxy
        assert f"http://127.0.0.1:{port}" in text
    finally:
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, text + rest
    deadline = time.monotonic() + 30
    while any(Path(f"/proc/{pid}").exists() for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(Path(f"/proc/{pid}").exists() for pid in pids), pids


def test_one_haproxy_template_valid_for_the_launcher_and_compose():
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split()
    assert [f for f in files if "haproxy" in f.lower()] == ["deploy/haproxy.cfg.template"]
    cmd = compose_list("command", 4)  # the balancer's
    assert cmd[:3] == ["python", "-m", "deploy.course"]  # the launcher renders the one template
    assert "volumes" not in COMPOSE  # no other configuration mounted over it
    servers = course.parse_servers(cmd[cmd.index("--servers") + 1])
    replicas = re.findall(r"^  (\w+): \*replica$", COMPOSE, re.M)
    assert [s.name for s in servers] == replicas and {s.port for s in servers} == {8501}
    for cfg in (course.render_config(course.local_servers(3)),
                course.render_config([course.Server(s.name, "127.0.0.1", s.port) for s in servers], "0.0.0.0")):
        assert "cookie SERVERID insert" in cfg and "/_stcore/health" in cfg and "timeout tunnel" in cfg
        assert "balance source" not in cfg  # a campus NAT sends a class from one address
        haproxy = course.haproxy_path()
        if haproxy:
            check = subprocess.run([haproxy, "-c", "-f", "/dev/stdin"], input=cfg, capture_output=True, text=True)
            assert check.returncode == 0, check.stdout + check.stderr
    assert "bind 127.0.0.1:8501" in course.render_config(course.local_servers(3))  # loopback by default


def test_container_files_use_the_readmes_commands():
    commands = readme_commands()
    install = next(c for c in commands if c.startswith("pip install -r requirements.txt"))
    install = install.split("&&")[0].strip()  # "pip install -r requirements.txt"
    start = next(c for c in commands if "streamlit run" in c).split("&&")[-1].strip()  # streamlit run dashboard/app.py
    launch = next(c for c in commands if c.startswith("python -m deploy.course"))
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text().replace("\\\n", " ")
    runs = " ".join(re.findall(r"^RUN (.*)$", dockerfile, re.M))
    assert install in runs and "apt-get install" in runs and "haproxy" in runs
    cmd = json.loads(re.search(r"^CMD (.*)$", dockerfile, re.M).group(1))
    assert cmd[:len(shlex.split(launch))] == shlex.split(launch), (cmd, launch)
    # compose: every service (the replicas' shared definition, which the balancer merges) builds that Dockerfile
    assert re.search(r"^x-replica: &replica\n  build: \{context: \.\., dockerfile: deploy/Dockerfile\}$", COMPOSE, re.M)
    assert re.search(r"^  balancer:\n    <<: \*replica$", COMPOSE, re.M)
    replica = compose_list("command", 2)
    assert replica[:len(shlex.split(start))] == shlex.split(start), replica
    assert all(m.startswith("127.0.0.1:") for m in compose_list("ports", 4))  # this computer only by default


def test_the_replicas_know_the_address_the_class_uses(tmp_path):
    """The replicas listen on loopback behind HAProxy; the students' QR code needs HAProxy's --address."""
    from dashboard.classroom.address import BIND_ADDRESS_ENV
    from dashboard.classroom.store import DB_ENV

    env = course.Course(2, 9100, "192.168.1.30", run_dir=tmp_path, class_db=str(tmp_path / "c.sqlite3")).replica_env()
    assert env == {DB_ENV: str(tmp_path / "c.sqlite3"), BIND_ADDRESS_ENV: "192.168.1.30"}
    assert course.Course(1, 9100, run_dir=tmp_path).replica_env()[BIND_ADDRESS_ENV] == "127.0.0.1"


def test_a_free_course_port_has_free_ports_after_it_for_the_replicas(monkeypatch):
    """A free port whose neighbour is taken (another server on the machine) is passed over: the course would refuse
    to start on it (bench.follow once did, under the test run's other worker)."""
    import socket

    from deploy import processes

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = held.getsockname()[1]
        real = processes.free_port
        offered = iter([taken - 2])  # its second replica would need the port held here; then what the OS offers
        monkeypatch.setattr(processes, "free_port", lambda address="127.0.0.1": next(offered, None) or real(address))
        port = course.free_course_port(3)
        assert port != taken - 2 and taken not in range(port, port + 4)
