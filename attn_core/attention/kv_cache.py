"""The KV cache (the book's chapter-4 bonus material): keys and values of earlier positions, kept per layer.

Generating one token at a time, a model without a cache runs its whole text again for every new token.
With one, each layer keeps the keys and values it computed so far; a new token computes only its own query,
key and value, appends the key and value, and its query attends over every cached key. Positions continue
from the cache's length (the causal mask is sliced for queries at positions p..p+q over keys 0..k,
:func:`attn_core.attention.masks.causal_mask`).

The cache is an object the caller passes to ``forward`` (``model(idx, cache=cache)``), not state inside the
module, so one model's weights can serve many generations at once (a classroom server shares them).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class LayerCache:
    """One attention layer's cached keys and values, each (b, num_heads, num_cached, head_dim)."""

    keys: torch.Tensor | None = None
    values: torch.Tensor | None = None
    dropped: int = 0  # earlier positions no longer held (a sliding-window layer keeps only its window)

    @property
    def length(self) -> int:
        """How many positions have been cached (the next token's position), held or dropped."""
        return self.dropped + (0 if self.keys is None else int(self.keys.shape[-2]))

    def keep_last(self, n: int) -> None:
        """Hold only the last ``n`` positions' keys and values (the positions before count as dropped)."""
        held = 0 if self.keys is None else int(self.keys.shape[-2])
        if held > n:
            self.dropped += held - n
            self.keys, self.values = self.keys[..., held - n:, :], self.values[..., held - n:, :]

    @property
    def nbytes(self) -> int:
        """The bytes the cached tensors hold."""
        return sum(t.nbytes for t in (self.keys, self.values) if t is not None)

    def update(self, keys_new: torch.Tensor, values_new: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append this call's keys and values (b, num_heads, num_tokens, head_dim) after the cached ones and return
        all of them: (b, num_heads, num_cached + num_tokens, head_dim)."""
        if self.keys is None:
            self.keys, self.values = keys_new, values_new
        else:
            self.keys = torch.cat((self.keys, keys_new), dim=2)
            self.values = torch.cat((self.values, values_new), dim=2)
        return self.keys, self.values


    def update_latent(self, latent_new: torch.Tensor) -> torch.Tensor:
        """Multi-head latent attention's cache: append this call's latent (b, num_tokens, latent_dim) after the cached
        one and return all of it; the latent stands in ``keys``, and there are no values."""
        self.keys = latent_new if self.keys is None else torch.cat((self.keys, latent_new), dim=1)
        return self.keys


class KVCache:
    """A model's KV cache: one :class:`LayerCache` per transformer block."""

    def __init__(self, n_layers: int):
        self.layers = [LayerCache() for _ in range(n_layers)]

    @property
    def length(self) -> int:
        """How many positions are cached (the next token's position)."""
        return self.layers[0].length if self.layers else 0

    @property
    def nbytes(self) -> int:
        return sum(layer.nbytes for layer in self.layers)

    def shapes(self) -> list[tuple[int, ...]]:
        """Each layer's cached keys' shape, (b, num_heads, num_cached, head_dim) (values have the same)."""
        return [tuple(layer.keys.shape) if layer.keys is not None else () for layer in self.layers]

