"""The one place an attention mask is built (causal, sliding-window, offset for a KV cache) and put into words.

A mask is a bool tensor of shape (num_queries, num_keys), **True where a key is hidden** from a query,
as the book's ``mask_bool`` is. Query ``i`` sits at position ``offset + i`` and key ``j`` at position
``j``: with a KV cache the new queries come after every cached key, so ``offset`` defaults to
``num_keys - num_queries`` (0 for an ordinary square mask, the book's ``torch.triu(..., diagonal=1)``).

- causal: a query sees the keys at its own position and before (``key > query`` is hidden);
- ``window=W``: it sees only the last ``W`` of those (``key <= query - W`` is hidden too), a band;
- ``sinks=S``: the first ``S`` keys stay visible to every query whatever the window (attention sinks);
- ``causal=False``: nothing in the future is hidden (a window still applies).

:class:`MaskKind` says what such a mask is, why a cell is hidden and where the hidden cells lie, so the
pages describe the mask that was built instead of assuming the book's causal one (issue 33).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from attn_core.messages import Msg, Problem


def causal_mask(
    num_queries: int,
    num_keys: int | None = None,
    *,
    offset: int | None = None,
    window: int | None = None,
    causal: bool = True,
    sinks: int = 0,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """(num_queries, num_keys) bool mask, True where hidden (see the module docstring)."""
    num_keys = num_queries if num_keys is None else num_keys
    offset = num_keys - num_queries if offset is None else offset
    if num_queries < 0 or num_keys < 0 or offset < 0:
        raise Problem("a mask needs sizes and an offset of at least 0; got num_queries={num_queries}, "
                      "num_keys={num_keys}, offset={offset}", num_queries=num_queries, num_keys=num_keys,
                      offset=offset)
    MaskKind(causal, window, sinks)  # validates the window and the sinks
    query_pos = torch.arange(offset, offset + num_queries, device=device)[:, None]  # (num_queries, 1)
    key_pos = torch.arange(num_keys, device=device)[None, :]  # (1, num_keys)
    hidden = key_pos > query_pos if causal else torch.zeros(num_queries, num_keys, dtype=torch.bool, device=device)
    if window is not None:
        hidden = hidden | ((key_pos <= query_pos - window) & (key_pos >= sinks))
    return hidden


@dataclass(frozen=True)
class MaskKind:
    """What a mask from :func:`causal_mask` is, in words: causal, window W, window + sinks, or none.

    Positions in the words are 1-based, as the pages number tokens."""

    causal: bool = True
    window: int | None = None  # None (or 0, as the sidebar's knob says it): no window
    sinks: int = 0

    def __post_init__(self) -> None:
        if self.window is not None and (not isinstance(self.window, int) or self.window < 1):
            raise Problem("the window must be a whole number of at least 1 key; got {window!r}", window=self.window)
        if not isinstance(self.sinks, int) or self.sinks < 0:
            raise Problem("sinks must be a whole number of at least 0; got {sinks!r}", sinks=self.sinks)

    @classmethod
    def of(cls, causal: bool = True, window: int | None = None, sinks: int = 0) -> MaskKind:
        """As a config holds it: ``window`` 0 or None means no window."""
        return cls(bool(causal), window or None, sinks)

    @property
    def hides_anything(self) -> bool:
        return self.causal or self.window is not None

    @property
    def name(self) -> str:
        """"causal", "causal, window 3", "causal, window 3 + 4 sinks", "window 3, not causal" or "none"."""
        if self.window is None:
            return "causal" if self.causal else "none"
        band = f"window {self.window}" + (f" + {self.sinks} sink{'s' * (self.sinks != 1)}" if self.sinks else "")
        return f"causal, {band}" if self.causal else f"{band}, not causal"

    @property
    def where(self) -> str:
        """Where the hidden cells of a square mask lie: "above the diagonal", "above the diagonal and 3 or more
        below it", ... ("nowhere" without a mask)."""
        if self.causal and self.window == 1 and not self.sinks:
            return "everywhere but the diagonal"
        parts = ["above the diagonal"] if self.causal else []
        if self.window is not None:
            far = f"{self.window} or more below it" if self.causal else f"{self.window} or more below the diagonal"
            parts.append(far + (f" (except {_first(self.sinks)})" if self.sinks else ""))
        return " and ".join(parts) or "nowhere"

    def fields(self) -> dict[str, str]:
        """The mask's words as a recorded step's note fields (``{mask}``, ``{where}``)."""
        return {"mask": self.name, "where": self.where}

    def sees(self, query: int) -> str:
        """Which keys query ``query`` (1-based, square mask) sees: "keys 1–6", "keys 4–6", "keys 1–2 and 5–6"."""
        if self.window is None:
            return f"keys 1–{query}" if self.causal else "every key"
        first = max(query - self.window + 1, 1)
        band = (f"only key {query}" if first == query else f"keys {first}–{query}") if self.causal \
            else f"keys {first} and after"
        sinks = min(self.sinks, first - 1)
        return band if sinks == 0 else f"{_first(sinks)} (sinks) and {band.removeprefix('only ')}"

    def why_hidden(self, query: int, key: int) -> str:
        """Why key ``key`` is hidden from query ``query`` (both 1-based, square mask); "" if it is not."""
        if self.causal and key > query:
            return f"key {key} comes after query {query} (causal: no token sees the future)"
        if self.window is not None and key <= query - self.window and key > self.sinks:
            return (f"key {key} is {query - key} tokens before query {query}, outside its window of {self.window} "
                    f"(query {query} sees {self.sees(query)})")
        return ""


def _first(n: int) -> str:
    return "the first key" if n == 1 else f"the first {n} keys"
