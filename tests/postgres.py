"""A throwaway PostgreSQL cluster on loopback for tests and bench/ (Debian's ``postgresql`` package).

``initdb`` into a temporary folder, ``pg_ctl start`` on 127.0.0.1 and a free port (its socket in the same
folder), yield a ``postgresql://`` URL, stop it by ``pg_ctl stop`` and delete the folder. PostgreSQL refuses to
run as root: as root the cluster runs as the ``postgres`` user (or ``nobody``), with the folder chowned to it.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from deploy.processes import free_port


def bin_dir() -> Path | None:
    """The newest installed PostgreSQL's binaries (Debian: /usr/lib/postgresql/<v>/bin), or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[-3]))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def missing_reason() -> str | None:
    """Why a cluster cannot start here, or None when it can."""
    if bin_dir() is None:
        return "PostgreSQL is not installed: apt-get install postgresql"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed: pip install 'psycopg[binary]'"
    return None


def _run_as() -> str | None:
    """The user to run the server as: None when not root, else ``postgres`` if it exists, else ``nobody``."""
    if os.geteuid() != 0:
        return None
    for user in ("postgres", "nobody"):
        try:
            pwd.getpwnam(user)
            return user
        except KeyError:
            continue
    raise RuntimeError("running as root and neither a 'postgres' nor a 'nobody' user exists")


def _cmd(user: str | None, args: list[str]) -> list[str]:
    return args if user is None else ["runuser", "-u", user, "--", *args]


@contextmanager
def cluster(timeout: float = 60) -> Iterator[str]:
    """A fresh cluster; yields ``postgresql://USER@127.0.0.1:PORT/postgres``."""
    bins = bin_dir()
    if bins is None:
        raise RuntimeError(missing_reason())
    user = _run_as()
    tmp = Path(tempfile.mkdtemp(prefix="attention-lab-pg-"))
    data = tmp / "data"
    try:
        if user is not None:
            entry = pwd.getpwnam(user)
            os.chown(tmp, entry.pw_uid, entry.pw_gid)
        db_user = user or pwd.getpwuid(os.geteuid()).pw_name
        subprocess.run(_cmd(user, [str(bins / "initdb"), "-D", str(data), "-A", "trust", "-U", db_user,
                                   "--no-sync", "-E", "UTF8"]), check=True, capture_output=True, timeout=timeout)
        port = free_port()
        opts = f"-c listen_addresses=127.0.0.1 -p {port} -k {tmp} -c fsync=off -c full_page_writes=off"
        subprocess.run(_cmd(user, [str(bins / "pg_ctl"), "-D", str(data), "-o", opts, "-l", str(tmp / "log"),
                                   "-w", "-t", str(int(timeout)), "start"]), check=True, capture_output=True,
                       timeout=timeout + 5)
        try:
            yield f"postgresql://{db_user}@127.0.0.1:{port}/postgres"
        finally:
            subprocess.run(_cmd(user, [str(bins / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"]),
                           capture_output=True, timeout=timeout)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
