"""A least-recently-used cache bounded by bytes, shared by every session of the server.

A classroom server runs for hours with 30 users pasting anything: a count bound alone lets six
GPT-2-size traces (~300 MB each) pile up, so the caches here are bounded by what they hold.
Evicting returns the memory to the operating system (``release_memory``), so the server's RSS
falls back once big entries are gone.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")

_LIBC = None
try:  # glibc only: elsewhere the allocator is left alone
    _LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    _LIBC.malloc_trim  # noqa: B018  (present on glibc)
except (OSError, AttributeError):
    _LIBC = None

M_MMAP_THRESHOLD = -3


def tune_allocator() -> None:
    """Give every block above 128 KB its own mapping (glibc), so a freed tensor's memory goes
    straight back to the OS. Left alone, glibc raises this threshold after the first big free and
    later tensors land on the heap, where they stay as RSS long after they are freed."""
    if _LIBC is not None:
        _LIBC.mallopt(M_MMAP_THRESHOLD, 128 * 1024)
    try:  # pyarrow's own pool keeps freed blocks for reuse; the system allocator gives them back
        import pyarrow as pa

        pa.set_memory_pool(pa.system_memory_pool())
    except Exception:  # noqa: BLE001 - an allocator preference, never worth failing over
        pass


_LAST_TRIM = [0.0]
TRIM_EVERY_S = 5.0  # malloc_trim walks the heap (ms on a large one): not on every cache miss


def release_memory(force: bool = False) -> None:
    """Hand freed heap memory back to the OS (glibc ``malloc_trim``), at most every TRIM_EVERY_S seconds
    unless ``force``d. Blocks over 128 KB (tensors) go back at once anyway (``tune_allocator``)."""
    now = time.monotonic()
    if _LIBC is not None and (force or now - _LAST_TRIM[0] >= TRIM_EVERY_S):
        _LAST_TRIM[0] = now
        _LIBC.malloc_trim(0)


class ByteLRU(Generic[V]):
    """``get(key, build)``: the value remembered under ``key``, built on a miss; least recently used
    entries go first once the entries' sizes (``sizeof``) add up to more than ``max_bytes``, and any
    entry unused for ``idle_s`` seconds goes too (a quiet server gives its memory back)."""

    def __init__(self, max_bytes: int, sizeof: Callable[[V], int], idle_s: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.max_bytes = max_bytes
        self.sizeof = sizeof
        self.idle_s = idle_s
        self._entries: OrderedDict[Hashable, tuple[V, int, float]] = OrderedDict()
        self._lock = threading.Lock()
        if idle_s is not None:
            _sweeper(self)

    def get(self, key: Hashable, build: Callable[[], V]) -> V:
        found, value = self._hit(key)
        if found:
            return value
        value = build()
        size = self.sizeof(value)
        with self._lock:
            self._entries.pop(key, None)
            self._entries[key] = (value, size, self.clock())
            evicted = self._evict()
        if evicted:
            release_memory()
        return value

    def _evict(self) -> bool:
        """Let the least recently used entries go until the rest fit ``max_bytes`` (one always stays); the lock is
        held. Whether any went."""
        total = self.nbytes
        evicted = False
        while total > self.max_bytes and len(self._entries) > 1:
            _, (_, n, _) = self._entries.popitem(last=False)
            total -= n
            evicted = True
        return evicted

    def resize(self, max_bytes: int) -> None:
        """A new bound, the least recently used entries let go at once down to it (one entry always stays)."""
        with self._lock:
            self.max_bytes = max_bytes
            evicted = self._evict()
        if evicted:
            release_memory(force=True)

    def peek(self, key: Hashable) -> V | None:
        """The value remembered under ``key`` (marked as used), or None; never builds."""
        return self._hit(key)[1]

    def _hit(self, key: Hashable) -> tuple[bool, V | None]:
        """(whether ``key`` is remembered, its value), marking it as used."""
        with self._lock:
            if key not in self._entries:
                return False, None
            value, size, _ = self._entries.pop(key)
            self._entries[key] = (value, size, self.clock())
            return True, value

    def sweep(self, idle_s: float | None = None) -> int:
        """Drop the entries unused for the cache's idle time, or for ``idle_s`` seconds if that is shorter; return
        how many went."""
        if self.idle_s is None:  # a cache without an idle time keeps its entries
            return 0
        limit = self.idle_s if idle_s is None else min(self.idle_s, idle_s)
        now = self.clock()
        with self._lock:
            stale = [k for k, (_, _, used) in self._entries.items() if now - used > limit]
            for k in stale:
                del self._entries[k]
        if stale:
            release_memory(force=True)
        return len(stale)

    def holds(self, value: object) -> bool:
        """Whether this very object is a cached value or an item of a cached list or tuple (identity, not
        equality)."""
        with self._lock:
            return any(v is value or (isinstance(v, list | tuple) and any(x is value for x in v))
                       for v, _, _ in self._entries.values())

    @property
    def nbytes(self) -> int:
        return sum(n for _, n, _ in self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
        release_memory(force=True)


_SWEPT: weakref.WeakSet = weakref.WeakSet()
_SWEEPER: threading.Thread | None = None
SWEEP_EVERY_S = 15.0
# With no browser tab connected, an entry unused this long goes (not after the caches' own idle time): the
# server's memory comes back soon after a class closes its tabs (docs/measurements.md).
QUIET_IDLE_S = 15.0


def connected_sessions() -> int | None:
    """How many browser tabs are connected to this Streamlit server now; None outside a server (tests, scripts)
    or if Streamlit's runtime no longer says (tests/test_streamlit_internals.py)."""
    try:
        from streamlit.runtime import Runtime

        if not Runtime.exists():
            return None
        return int(Runtime.instance()._session_mgr.num_active_sessions())
    except Exception:  # noqa: BLE001 - a memory preference, never worth failing over
        return None


def sweep_all() -> None:
    """One sweep of every cache: idle entries go, and all unused for QUIET_IDLE_S once no tab is connected."""
    quiet = QUIET_IDLE_S if connected_sessions() == 0 else None
    for c in list(_SWEPT):
        c.sweep(quiet)


def _sweeper(cache: ByteLRU) -> None:
    """Register ``cache`` with the one daemon thread that sweeps idle entries every SWEEP_EVERY_S seconds."""
    global _SWEEPER
    _SWEPT.add(cache)
    if _SWEEPER is None or not _SWEEPER.is_alive():
        def loop() -> None:
            while True:
                time.sleep(SWEEP_EVERY_S)
                sweep_all()

        _SWEEPER = threading.Thread(target=loop, name="attention-lab-cache-sweeper", daemon=True)
        _SWEEPER.start()
