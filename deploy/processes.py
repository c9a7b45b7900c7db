"""Starting, watching and stopping the app's server processes (the course launcher, the tests and bench/ share it).

Every process is started in its own session (so a terminal's Ctrl-C reaches only the launcher, which then
stops each child itself) and stopped by its PID: SIGTERM to its process group, SIGKILL if it has not gone
within ``timeout`` seconds.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "dashboard" / "app.py"


def free_port(address: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on at ``address`` now (the OS picks it)."""
    with socket.socket() as s:
        s.bind((address, 0))
        return s.getsockname()[1]


def port_in_use(port: int, address: str = "127.0.0.1") -> bool:
    """Whether ``address:port`` cannot be bound now (another server holds it)."""
    with socket.socket() as s:
        try:
            s.bind((address, port))
        except OSError:
            return True
    return False


def streamlit_command(port: int, address: str | None = "127.0.0.1", app: Path = APP) -> list[str]:
    """``streamlit run app`` on ``port`` (``address`` None: the configured default, .streamlit/config.toml)."""
    cmd = [sys.executable, "-m", "streamlit", "run", str(app),
           "--server.headless", "true", "--server.port", str(port),
           "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"]
    if address is not None:
        cmd += ["--server.address", address]
    return cmd


def start(cmd: Sequence[str], log: IO[bytes], cwd: Path = ROOT, env: dict[str, str] | None = None) -> subprocess.Popen:
    """Start ``cmd`` in its own session, its output to ``log`` (a file: an unread pipe fills up at 64 KB and
    blocks a chatty server)."""
    return subprocess.Popen(list(cmd), cwd=cwd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True, env={**os.environ, **(env or {})})


def log_tail(log: IO[bytes], chars: int = 3000) -> str:
    """The end of a process's log file."""
    log.flush()
    log.seek(0)
    return log.read().decode(errors="replace")[-chars:]


def wait_healthy(url: str, proc: subprocess.Popen, log: IO[bytes], timeout: float = 60) -> None:
    """Wait until ``url``/_stcore/health answers 200; RuntimeError with the log's tail if the process ends
    or ``timeout`` seconds pass first."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"streamlit did not start on {url}:\n{log_tail(log)}")
        time.sleep(0.2)


def stop(proc: subprocess.Popen, timeout: float = 10) -> None:
    """Stop ``proc`` and what it started (its process group, led by its PID): SIGTERM, then SIGKILL."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=timeout)
    except ProcessLookupError:
        proc.wait()
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
