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


def release_memory() -> None:
    """Hand freed heap memory back to the OS (glibc ``malloc_trim``)."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


class ByteLRU(Generic[V]):
    """``get(key, build)``: the value remembered under ``key``, built on a miss; least recently used
    entries go first once the entries' sizes (``sizeof``) add up to more than ``max_bytes``."""

    def __init__(self, max_bytes: int, sizeof: Callable[[V], int]) -> None:
        self.max_bytes = max_bytes
        self.sizeof = sizeof
        self._entries: OrderedDict[Hashable, tuple[V, int]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, build: Callable[[], V]) -> V:
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key][0]
        value = build()
        size = self.sizeof(value)
        with self._lock:
            self._entries[key] = (value, size)
            self._entries.move_to_end(key)
            total = self.nbytes
            evicted = False
            while total > self.max_bytes and len(self._entries) > 1:
                _, (_, n) = self._entries.popitem(last=False)
                total -= n
                evicted = True
        if evicted:
            release_memory()
        return value

    @property
    def nbytes(self) -> int:
        return sum(n for _, n in self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
        release_memory()
