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
        return str(self.name_msg)

    @property
    def name_msg(self) -> Msg:
        """:attr:`name` as a message the pages translate."""
        w, s = self.window, self.sinks
        if w is None:
            return Msg("causal") if self.causal else Msg("none")
        if self.causal:
            if not s:
                return Msg("causal, window {window}", window=w)
            if s == 1:
                return Msg("causal, window {window} + 1 sink", window=w)
            return Msg("causal, window {window} + {sinks} sinks", window=w, sinks=s)
        if not s:
            return Msg("window {window}, not causal", window=w)
        if s == 1:
            return Msg("window {window} + 1 sink, not causal", window=w)
        return Msg("window {window} + {sinks} sinks, not causal", window=w, sinks=s)

    @property
    def where(self) -> str:
        """Where the hidden cells of a square mask lie: "above the diagonal", "above the diagonal and 3 or more
        below it", ... ("nowhere" without a mask)."""
        return str(self.where_msg)

    @property
    def where_msg(self) -> Msg:
        """:attr:`where` as a message the pages translate."""
        w, s = self.window, self.sinks
        if self.causal and w == 1 and not s:
            return Msg("everywhere but the diagonal")
        if w is None:
            return Msg("above the diagonal") if self.causal else Msg("nowhere")
        if self.causal:
            if not s:
                return Msg("above the diagonal and {window} or more below it", window=w)
            if s == 1:
                return Msg("above the diagonal and {window} or more below it (except the first key)", window=w)
            return Msg("above the diagonal and {window} or more below it (except the first {sinks} keys)", window=w,
                       sinks=s)
        if not s:
            return Msg("{window} or more below the diagonal", window=w)
        if s == 1:
            return Msg("{window} or more below the diagonal (except the first key)", window=w)
        return Msg("{window} or more below the diagonal (except the first {sinks} keys)", window=w, sinks=s)

    def fields(self) -> dict[str, Msg]:
        """The mask's words as a recorded step's note fields (``{mask}``, ``{where}``)."""
        return {"mask": self.name_msg, "where": self.where_msg}

    def sees(self, query: int) -> str:
        """Which keys query ``query`` (1-based, square mask) sees: "keys 1–6", "keys 4–6", "keys 1–2 and 5–6"."""
        return str(self.sees_msg(query))

    def sees_msg(self, query: int) -> Msg:
        """:meth:`sees` as a message the pages translate."""
        if self.window is None:
            return Msg("keys 1–{query}", query=query) if self.causal else Msg("every key")
        first = max(query - self.window + 1, 1)
        sinks = min(self.sinks, first - 1)
        if not self.causal:
            if sinks == 0:
                return Msg("keys {first} and after", first=first)
            if sinks == 1:
                return Msg("the first key (sinks) and keys {first} and after", first=first)
            return Msg("the first {sinks} keys (sinks) and keys {first} and after", sinks=sinks, first=first)
        if first == query:
            if sinks == 0:
                return Msg("only key {query}", query=query)
            if sinks == 1:
                return Msg("the first key (sinks) and key {query}", query=query)
            return Msg("the first {sinks} keys (sinks) and key {query}", sinks=sinks, query=query)
        if sinks == 0:
            return Msg("keys {first}–{query}", first=first, query=query)
        if sinks == 1:
            return Msg("the first key (sinks) and keys {first}–{query}", first=first, query=query)
        return Msg("the first {sinks} keys (sinks) and keys {first}–{query}", sinks=sinks, first=first, query=query)

    def why_hidden(self, query: int, key: int) -> str:
        """Why key ``key`` is hidden from query ``query`` (both 1-based, square mask); "" if it is not."""
        msg = self.why_hidden_msg(query, key)
        return "" if msg is None else str(msg)

    def why_hidden_msg(self, query: int, key: int) -> Msg | None:
        """:meth:`why_hidden` as a message the pages translate (None: the key is not hidden)."""
        if self.causal and key > query:
            return Msg("key {key} comes after query {query} (causal: no token sees the future)", key=key, query=query)
        if self.window is not None and key <= query - self.window and key > self.sinks:
            return Msg("key {key} is {distance} tokens before query {query}, outside its window of {window} "
                       "(query {query} sees {sees})", key=key, distance=query - key, query=query,
                       window=self.window, sees=self.sees_msg(query))
        return None
