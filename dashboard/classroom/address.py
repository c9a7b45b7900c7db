"""Which address the students' link (and its QR code) uses, so that phones on the class's network reach it.

The teacher's browser often opened the app on 127.0.0.1, which a phone cannot reach. In order: the address the
teacher configured (``$ATTENTION_LAB_PUBLIC_URL``); the address the server was started on for the class
(``python -m deploy.course --address``, which sets ``$ATTENTION_LAB_BIND_ADDRESS`` for its replicas, or
``streamlit run --server.address``) when it is a real one; the address the teacher's browser used when it is not
loopback; else this computer's LAN address (found without sending anything), with the port the teacher used.
No Streamlit here: :func:`choose` is a pure function; :func:`lan_address` asks only the operating system.
"""

from __future__ import annotations

import functools
import ipaddress
import os
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from attn_core.messages import Msg

PUBLIC_URL_ENV = "ATTENTION_LAB_PUBLIC_URL"
BIND_ADDRESS_ENV = "ATTENTION_LAB_BIND_ADDRESS"  # deploy.course --address, for the replicas behind HAProxy
WILDCARDS = ("", "0.0.0.0", "::", "[::]")  # listening on every interface: not an address a phone can use


@dataclass(frozen=True)
class JoinBase:
    """Where phones join: ``url`` (scheme://host:port, no path), why this one (``why``, a message with the
    address) and, when phones cannot reach it, a warning (``warning``)."""

    url: str
    why: Msg
    warning: Msg | None = None


def is_loopback(host: str | None) -> bool:
    """127.x, ::1 or localhost (a phone reaching it reaches itself)."""
    host = (host or "").strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


@functools.lru_cache(maxsize=1)
def lan_address() -> str | None:
    """This computer's address on its local network, or None. A UDP socket "connected" to a private address picks
    the interface the system would use (connect() on UDP sends nothing); else the host name's addresses."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.254.254.254", 1))
            found = s.getsockname()[0]
        if not is_loopback(found) and found not in WILDCARDS:
            return found
    except OSError:
        pass
    try:
        infos = socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)
    except OSError:
        return None
    return next((i[4][0] for i in infos if not is_loopback(i[4][0])), None)


def choose(seen_url: str, public_url: str | None = None, bound: str | None = None,
           lan: str | None = None) -> JoinBase:
    """Where the students' link points. ``seen_url``: the address the teacher's browser used; ``public_url``:
    ``$ATTENTION_LAB_PUBLIC_URL``; ``bound``: the address the server listens on for the class; ``lan``: this
    computer's LAN address (:func:`lan_address`)."""
    if public_url and public_url.strip():
        url = public_url.strip().rstrip("/")
        if "://" not in url:
            url = "http://" + url
        return JoinBase(url, Msg("Phones join at `{address}` (set by ATTENTION_LAB_PUBLIC_URL).", address=url))
    parts = urlsplit(seen_url or "http://localhost:8501/")
    scheme, seen_host = parts.scheme or "http", parts.hostname or "localhost"
    port = f":{parts.port}" if parts.port else ""
    bound = (bound or "").strip()
    if bound not in WILDCARDS and not is_loopback(bound):
        url = f"{scheme}://{_host(bound)}{port}"
        return JoinBase(url, Msg("Phones join at `{address}`: the address the server was started on for the "
                                 "class.", address=url))
    if not is_loopback(seen_host):
        url = f"{scheme}://{_host(seen_host)}{port}"
        return JoinBase(url, Msg("Phones join at `{address}`: the address this browser opened.", address=url))
    if lan and bound in WILDCARDS:
        url = f"{scheme}://{_host(lan)}{port}"
        return JoinBase(url, Msg("Phones join at `{address}`: this computer's address on the local network.",
                                 address=url))
    url = f"{scheme}://{_host(seen_host)}{port}"
    return JoinBase(url, Msg("This link uses `{address}`, this computer's own address.", address=url),
                    Msg("Phones cannot reach `{host}`: set ATTENTION_LAB_PUBLIC_URL, or start the class with "
                        "`python -m deploy.course --address 0.0.0.0` (or `streamlit run --server.address "
                        "0.0.0.0`).", host=seen_host))


def from_environment(seen_url: str, server_address: str | None) -> JoinBase:
    """:func:`choose` with this process's settings (``server_address``: Streamlit's ``server.address``)."""
    bound = os.environ.get(BIND_ADDRESS_ENV)
    return choose(seen_url, os.environ.get(PUBLIC_URL_ENV), bound if bound is not None else server_address,
                  lan_address())
