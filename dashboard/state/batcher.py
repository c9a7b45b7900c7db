"""Sessions that ask the same model for a pass while the server's passes are busy share one padded pass.

A class presses Enter at once: thirty sentences, thirty passes of the same model, each reading all of its weights.
Here a request starts at once while fewer than ``slots`` passes run; otherwise it waits, and when a pass ends the
requests waiting for that model run together (``run(seqs, on_layers)``: one result a sequence, in order; e.g.
:func:`attn_core.models.traced.walk_many`). Each request gets back only its own result (or the batch's error); its
``on_layer`` is called with its own sequence's weights, in the thread that runs the batch.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

OnLayer = Callable[[int, Any], None] | None
Run = Callable[[list[Sequence[int]], list[OnLayer]], list[Any]]


@dataclass(eq=False)
class _Request:
    seq: Sequence[int]
    on_layer: OnLayer
    done: bool = False
    result: Any = None
    error: BaseException | None = None


class Batcher:
    """``run_one(key, seq, on_layer, run)``: ``run([seq], [on_layer])[0]``, batched with the other requests of
    ``key`` (the model) that wait for a free slot; at most ``most_tokens`` padded tokens a batch."""

    def __init__(self, slots: int = 2, most_tokens: int = 2048) -> None:
        self.slots, self.most_tokens = slots, most_tokens
        self._cv = threading.Condition()
        self._running = 0
        self._waiting: dict[Hashable, list[_Request]] = {}
        self.batches: deque[int] = deque(maxlen=256)  # the sizes of the last batches run (tests, benchmarks)

    def run_one(self, key: Hashable, seq: Sequence[int], on_layer: OnLayer, run: Run) -> Any:
        me = _Request(seq, on_layer)
        with self._cv:
            queue = self._waiting.setdefault(key, [])
            queue.append(me)
            while not me.done and not (self._running < self.slots and queue and queue[0] is me):
                self._cv.wait()
            if not me.done:  # first in line and a slot is free: lead the requests waiting behind
                batch = self._take(queue)
                if not queue:
                    self._waiting.pop(key, None)
                self._running += 1
                self.batches.append(len(batch))
        if not me.done:
            self._lead(batch, run)
        if me.error is not None:
            raise me.error
        return me.result

    def _take(self, queue: list[_Request]) -> list[_Request]:
        """The first requests of ``queue`` whose padded batch fits ``most_tokens`` (at least one), taken off it."""
        n, longest = 0, 0
        while n < len(queue):
            longest = max(longest, len(queue[n].seq))
            if n and longest * (n + 1) > self.most_tokens:
                break
            n += 1
        batch = queue[:n]
        del queue[:n]
        return batch

    def _lead(self, batch: list[_Request], run: Run) -> None:
        results: list[Any] = []
        error: BaseException | None = None
        try:
            results = run([r.seq for r in batch], [r.on_layer for r in batch])
        except BaseException as e:  # noqa: BLE001 - handed to every request of the batch, raised in its own thread
            error = e
        with self._cv:
            self._running -= 1
            for k, r in enumerate(batch):
                r.result, r.error, r.done = (None, error, True) if error is not None else (results[k], None, True)
            self._cv.notify_all()
