"""The one place an attention mask is built: causal, sliding-window, and offset (KV cache) masks.

A mask is a bool tensor of shape (num_queries, num_keys), **True where a key is hidden** from a query,
as the book's ``mask_bool`` is. Query ``i`` sits at position ``offset + i`` and key ``j`` at position
``j``: with a KV cache the new queries come after every cached key, so ``offset`` defaults to
``num_keys - num_queries`` (0 for an ordinary square mask, the book's ``torch.triu(..., diagonal=1)``).

- causal: a query sees the keys at its own position and before (``key > query`` is hidden);
- ``window=W``: it sees only the last ``W`` of those (``key <= query - W`` is hidden too), a band;
- ``causal=False``: nothing in the future is hidden (a window still applies);
- ``sinks=S`` (with a window): the first ``S`` keys stay visible to every later query, the "attention sinks"
  that StreamingLLM keeps beside the window.
"""

from __future__ import annotations

import torch


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
        raise ValueError(f"a mask needs sizes and an offset of at least 0; got num_queries={num_queries}, "
                         f"num_keys={num_keys}, offset={offset}")
    if window is not None and (not isinstance(window, int) or window < 1):
        raise ValueError(f"the window must be a whole number of at least 1 key; got {window!r}")
    if not isinstance(sinks, int) or sinks < 0:
        raise ValueError(f"sinks must be a whole number of keys, 0 or more; got {sinks!r}")
    query_pos = torch.arange(offset, offset + num_queries, device=device)[:, None]  # (num_queries, 1)
    key_pos = torch.arange(num_keys, device=device)[None, :]  # (1, num_keys)
    hidden = key_pos > query_pos if causal else torch.zeros(num_queries, num_keys, dtype=torch.bool, device=device)
    if window is not None:
        outside = key_pos <= query_pos - window
        if sinks:
            outside = outside & (key_pos >= sinks)  # the first `sinks` keys are never outside the window
        hidden = hidden | outside
    return hidden
