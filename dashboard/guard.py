"""Who may use the app: a check of the Host (and Origin) a browser sent, against DNS rebinding.

A web page on attacker.example can point its own name at 127.0.0.1 and then talk to a server on this
machine as if it were its own site. Such requests carry ``Host: attacker.example``; a real visitor's
carry ``localhost``, an IP address, or this machine's name. Names beyond those can be allowed with the
environment variable ``ATTENTION_LAB_ALLOWED_HOSTS`` (comma-separated), e.g. for a classroom DNS name.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from functools import lru_cache
from urllib.parse import urlsplit

ALLOWED_HOSTS_ENV = "ATTENTION_LAB_ALLOWED_HOSTS"


def host_name(value: str) -> str:
    """The host part of a ``Host`` header or an ``Origin`` URL, lower-case, without port or brackets."""
    value = value.strip()
    if "://" in value:
        return (urlsplit(value).hostname or "").lower()
    return (urlsplit("//" + value).hostname or "").lower()


@lru_cache(maxsize=1)
def _machine_names() -> frozenset[str]:
    names = {"localhost"}
    for name in (socket.gethostname(), socket.getfqdn()):
        if name:
            names.add(name.lower())
    return frozenset(names)


def allowed_names() -> frozenset[str]:
    extra = {n.strip().lower() for n in os.environ.get(ALLOWED_HOSTS_ENV, "").split(",") if n.strip()}
    public = host_name(os.environ.get("ATTENTION_LAB_PUBLIC_URL", ""))  # the name the students' QR code uses
    return _machine_names() | extra | ({public} if public else set())


def host_allowed(value: str) -> bool:
    """Whether a request addressed to ``value`` (Host header or Origin) is one of ours.

    IP addresses are always accepted (rebinding needs a name the attacker controls), as are
    ``localhost``, this machine's names and the names in ``ATTENTION_LAB_ALLOWED_HOSTS``."""
    name = host_name(value)
    if not name:
        return False
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        pass
    return name in allowed_names() or name.endswith(".localhost")


def foreign_host(headers: dict[str, str]) -> str | None:
    """The Host or Origin of a request that is not ours, or None when the request may be served.
    A request with no Host header (a test harness, a direct call) is served."""
    for header in ("Host", "Origin"):
        value = headers.get(header)
        if value and value != "null" and not host_allowed(value):
            return host_name(value) or value
    return None
