"""What a KV cache costs: bytes per token and in total, for multi-head, grouped-query, multi-query, latent and
sliding-window attention and their mixes (the book's ch04 bonus memory estimators, in one formula).

A full-attention layer caches, per token and batch row, keys and values of every K/V head:
``2 * kv_heads * head_dim`` values; a latent layer caches ``latent_dim`` values; a sliding-window layer caches at
most ``window`` tokens. Mixes put ``local`` window layers beside each ``global`` full one, in blocks, as the book
distributes them. ``tests/test_modern.py`` checks the formula against the cache tensors' own ``nbytes``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from attn_core.messages import N_, Msg, Problem

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "float8": 1}


@dataclass(frozen=True)
class AttentionShape:
    """The sizes a KV cache depends on."""

    name: str
    n_layers: int
    n_heads: int
    head_dim: int
    kv_heads: int | None = None  # K/V heads (None: one per query head, multi-head attention)
    latent_dim: int | None = None  # multi-head latent attention: the cache keeps this many values a token
    window: int | None = None  # sliding window of the local layers (None: every layer is full)
    local: int = 1  # with a window: `local` window layers for every `global_` full ones (5:1 in Gemma 3)
    global_: int = 0
    bytes_per_value: int = 4
    label: Msg | None = None  # the name as a page shows it, translated there (None: ``name`` as written)

    @property
    def shown_name(self) -> Msg:
        """The variant's name for a page (``name`` stays the English identifier)."""
        return self.label if self.label is not None else Msg(self.name)

    def values_per_token(self) -> int:
        """Cached values per token and batch row in one layer."""
        if self.latent_dim is not None:
            return self.latent_dim
        return 2 * (self.n_heads if self.kv_heads is None else self.kv_heads) * self.head_dim

    def layers(self) -> tuple[int, int]:
        """(window layers, full layers), the book's distribution: blocks of local + global, the rest local first."""
        if self.window is None:
            return 0, self.n_layers
        block = self.local + self.global_
        blocks, rest = divmod(self.n_layers, block)
        return blocks * self.local + min(self.local, rest), blocks * self.global_ + max(0, rest - self.local)


def cache_bytes(shape: AttentionShape, tokens: int, batch: int = 1, bytes_per_value: int | None = None) -> int:
    """The KV cache's bytes for ``tokens`` tokens of ``batch`` rows, every layer."""
    per_value = shape.bytes_per_value if bytes_per_value is None else bytes_per_value
    window_layers, full_layers = shape.layers()
    kept = min(tokens, shape.window) if shape.window is not None else tokens
    return batch * shape.values_per_token() * per_value * (full_layers * tokens + window_layers * kept)


@dataclass(frozen=True)
class ModelPreset:
    """A model's sizes, and the settings its cheaper variants use."""

    name: str
    n_layers: int
    emb_dim: int
    n_heads: int
    dtype: str
    context: int  # tokens the preset is shown at
    kv_heads: int  # grouped-query attention's K/V heads
    window: int = 1024
    local: int = 5
    global_: int = 1
    latent: int | None = None  # MLA's latent width; None: the book's default

    @property
    def head_dim(self) -> int:
        return self.emb_dim // self.n_heads

    @property
    def latent_dim(self) -> int:
        """MLA's latent width: as given, else the book's default max(16, d_out // 8)."""
        return self.latent if self.latent is not None else max(16, self.emb_dim // 8)

    def shapes(self) -> list[AttentionShape]:
        """Multi-head attention and its cheaper variants at this model's sizes."""
        base = AttentionShape("MHA", self.n_layers, self.n_heads, self.head_dim,
                              bytes_per_value=DTYPE_BYTES[self.dtype])
        gqa = named(base, Msg("GQA ({kv_heads} K/V heads)", kv_heads=self.kv_heads), kv_heads=self.kv_heads)
        ratio = f"{self.local}:{self.global_}"
        swa = dict(window=self.window, local=self.local, global_=self.global_)
        return [base, gqa, named(base, Msg("MQA (1 K/V head)"), kv_heads=1),
                named(base, Msg("MLA (latent {latent})", latent=self.latent_dim), latent_dim=self.latent_dim),
                named(base, Msg("MHA + SWA {window} ({ratio})", window=self.window, ratio=ratio), **swa),
                named(gqa, Msg("GQA + SWA {window} ({ratio})", window=self.window, ratio=ratio), **swa)]


def named(shape: AttentionShape, label: Msg, **changes: object) -> AttentionShape:
    """``shape`` changed and renamed: its English name from ``label``, which a page shows translated."""
    return replace(shape, name=str(label), label=label, **changes)


# names marked for translation: a page shows them translated, the link keeps the English name
PRESETS: dict[str, ModelPreset] = {p.name: p for p in (
    ModelPreset(N_("GPT-2 small (12 layers, 768-d, float32)"), 12, 768, 12, "float32", 1024, kv_heads=4, window=256),
    ModelPreset(N_("Llama-3-8B-like (32 layers, 4096-d, bf16)"), 32, 4096, 32, "bfloat16", 32_768, kv_heads=8),
    ModelPreset(N_("SmolLM2-135M (30 layers, 576-d, 9 heads / 3 K/V, float32)"), 30, 576, 9, "float32", 8192,
                kv_heads=3),
)}


@dataclass(frozen=True)
class CostRow:
    name: str
    bytes_per_token: float  # averaged over the layers at this length (window layers stop growing)
    total_bytes: int
    ratio: float  # multi-head attention's bytes / these
    label: Msg | None = None  # the name as a page shows it (translated there)


def kv_cost_rows(preset: ModelPreset, tokens: int, batch: int = 1) -> list[CostRow]:
    """Each variant's cache at ``tokens`` tokens, and how many times smaller than multi-head attention's it is."""
    shapes = preset.shapes()
    totals = [cache_bytes(s, tokens, batch) for s in shapes]
    return [CostRow(s.name, t / max(tokens * batch, 1), t, totals[0] / t, s.shown_name) for s, t in zip(shapes, totals)]


@dataclass(frozen=True)
class ModelCost:
    """A real model's KV cache from its own config: every layer's K/V heads x head_dim, and a window layer keeping
    only its window."""

    n_layers: int
    kv_heads: int
    head_dim: int
    windows: tuple[int | None, ...]  # per layer: its window in tokens, None = full (every token kept)
    tokens: int
    bytes_per_value: int
    total_bytes: int  # at ``tokens`` tokens, batch 1
    full_bytes: int  # the same model with every layer full

    @property
    def window_layers(self) -> tuple[int, ...]:
        return tuple(i for i, w in enumerate(self.windows) if w is not None)

    @property
    def saving(self) -> float:
        """How many times smaller the model's own mix keeps its cache than all-full layers."""
        return self.full_bytes / self.total_bytes


def model_cost(n_layers: int, kv_heads: int, head_dim: int, windows: tuple[int | None, ...], tokens: int,
               bytes_per_value: int = 4) -> ModelCost:
    """A model's cache at ``tokens`` tokens (batch 1): ``2 * kv_heads * head_dim`` values a token in each layer,
    a window layer holding at most its window of tokens. ``windows``: () when every layer is full."""
    if tokens < 1:
        raise Problem("the context must be at least 1 token; got {tokens}", tokens=tokens)
    per_layer = 2 * kv_heads * head_dim * bytes_per_value  # bytes a token in one layer
    windows = tuple(windows) or (None,) * n_layers
    kept = sum(tokens if w is None else min(tokens, w) for w in windows)
    return ModelCost(n_layers, kv_heads, head_dim, windows, tokens, bytes_per_value, per_layer * kept,
                     per_layer * n_layers * tokens)
