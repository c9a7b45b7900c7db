"""The variant registry: one entry per attention variant, and everything else derives from it.

An entry says how to build the variant's module from an :class:`AttentionConfig` (every knob of one run; it lives
here because the config and the registry name each other), which of the config's knobs it uses (the sidebar greys
out the rest), how many query heads and K/V heads it has and their width, its output width, and the words pages
show (its label, a one-line caption, what d_out means for it, the summary of its sizes). Its id is the class name
and the link's ``?variant=`` value.

Adding a variant = its class (recording its steps with ``record``) + one :func:`register` call + its tests.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field

import torch.nn as nn

from attn_core.attention.classes import (
    CausalAttention,
    MultiHeadAttention,
    MultiHeadAttentionWrapper,
    SelfAttention_v1,
    SelfAttention_v2,
    check_sizes,
)
from attn_core.attention.flash import MultiHeadAttentionTiled
from attn_core.attention.masks import MaskKind
from attn_core.attention.modern import GroupedQueryAttention, MultiHeadLatentAttention
from attn_core.devices import pick_device
from attn_core.messages import N_, Msg, Problem


@dataclass(frozen=True)
class AttentionConfig:
    """Every knob of one attention run, as plain values. These defaults are the app's defaults too."""

    variant: str = "CausalAttention"
    d_in: int = 3
    d_out: int = 2
    num_heads: int = 2
    context_length: int = 1024
    dropout: float = 0.0
    mask_method: str = "neg_inf"
    causal: bool = True
    qkv_bias: bool = False
    train_mode: bool = False
    seed: int = 123
    device: str = "cpu"
    num_kv_groups: int = 1  # K/V heads of grouped-query attention (1: multi-query)
    window: int = 0  # sliding window: each query sees the last `window` keys (0: no window)
    latent_dim: int = 1  # multi-head latent attention: the latent's width per token

    @property
    def spec(self) -> Variant:
        """The variant's registry entry (``ValueError`` for an unknown one)."""
        return variant(self.variant)

    def validate(self) -> None:
        """Raise ``ValueError`` (with what to change) for what building the module does not check itself: the
        variant, the device, and the input sizes (also of a variant without a module). The class checks the rest."""
        self.spec  # noqa: B018 - raises for an unknown variant
        check_sizes(self.d_in, self.d_out)
        pick_device(self.device)

    @property
    def mask_kind(self) -> MaskKind:
        """The mask this config's module builds, in words (``MaskKind(causal=False)``, "none", for a variant without
        a mask buffer): what the pages call it, from the same knobs the module gets."""
        if not self.spec.masks:
            return MaskKind(causal=False)
        return MaskKind.of(self.causal, self.window)

    @property
    def output_width(self) -> int:
        """Width of the output (d_out * num_heads for the wrapper, d_in for simplified: the registry says)."""
        return self.spec.output_width(self)

    @property
    def head_dim(self) -> int:
        """d_k: the width of one head's queries and keys."""
        return self.spec.head_dim(self)

    def as_dict(self) -> dict:
        return asdict(self)


# The config's knobs a variant may use (d_in, seed and device apply to every variant).
KNOBS = ("d_out", "num_heads", "context_length", "mask_method", "causal", "qkv_bias", "dropout", "train_mode",
         "num_kv_groups", "window", "latent_dim")
MASKED = frozenset({"d_out", "context_length", "mask_method", "causal", "qkv_bias", "dropout", "train_mode", "window"})


def _one(cfg: AttentionConfig) -> int:
    return 1


def _heads(cfg: AttentionConfig) -> int:
    return cfg.num_heads


def _d_out(cfg: AttentionConfig) -> int:
    return cfg.d_out


@dataclass(frozen=True)
class Variant:
    """One attention variant: how to build it and what the pages need to know of it."""

    id: str  # the class name; the link's ?variant= value
    label: str  # what the variant list shows: "MultiHeadAttention (§3.6.2)" (N_-marked where it holds words)
    caption: str  # one line: what it is
    build: Callable[[AttentionConfig], nn.Module | None]  # the module for a config (None: no module, no weights)
    knobs: frozenset[str] = frozenset()  # of KNOBS: the ones this variant uses
    heads: Callable[[AttentionConfig], int] = _one  # query heads
    kv_heads: Callable[[AttentionConfig], int] | None = None  # K/V heads (None: one per query head)
    head_dim: Callable[[AttentionConfig], int] = _d_out  # d_k: the width of one head's queries and keys
    output_width: Callable[[AttentionConfig], int] = _d_out
    d_out_note: str = ""  # what d_out means here, under the sidebar's sizes ("" says nothing)
    sizes: Callable[[AttentionConfig], Msg | None] = field(default=lambda cfg: None)  # the summary's "4 heads …"
    shape_flow: bool = False  # Shape flow steps through this variant's trace (its heads are split by .view)

    @property
    def masks(self) -> bool:
        """Whether it has a causal mask buffer (then context_length bounds the number of tokens)."""
        return "context_length" in self.knobs

    def uses(self, knob: str) -> bool:
        return knob in self.knobs

    def num_kv_heads(self, cfg: AttentionConfig) -> int:
        return self.heads(cfg) if self.kv_heads is None else self.kv_heads(cfg)


REGISTRY: dict[str, Variant] = {}


def register(variant: Variant) -> Variant:
    """Add ``variant`` (or replace the entry of that id); it shows in every list from then on."""
    unknown = set(variant.knobs) - set(KNOBS)
    if unknown:
        raise Problem("unknown knobs {unknown} for {variant!r}: use some of {knobs}", unknown=sorted(unknown),
                      variant=variant.id, knobs=", ".join(KNOBS))
    REGISTRY[variant.id] = variant
    return variant


def variant(variant_id: str) -> Variant:
    """The entry for ``variant_id``, or ``ValueError`` listing the ones there are."""
    try:
        return REGISTRY[variant_id]
    except KeyError:
        raise Problem("unknown variant {variant!r}: choose one of {variants}", variant=variant_id,
                      variants=", ".join(REGISTRY)) from None


class _Live(Mapping):
    """A read-only, always current view of the registry: ``id -> what(entry)``."""

    def __init__(self, what: Callable[[Variant], object]) -> None:
        self._what = what

    def __getitem__(self, key: str) -> object:
        return self._what(REGISTRY[key])

    def __iter__(self) -> Iterator[str]:
        return iter(list(REGISTRY))

    def __len__(self) -> int:
        return len(REGISTRY)

    def __repr__(self) -> str:
        return repr(dict(self))


VARIANTS: Mapping[str, Variant] = _Live(lambda v: v)  # iterate for the ids, in the chapter's order
LABELS: Mapping[str, str] = _Live(lambda v: v.label)  # id -> label


def _window(cfg: AttentionConfig) -> int | None:
    return cfg.window or None


def _masked(cfg: AttentionConfig) -> dict:
    """The keyword arguments every causal class takes from a config."""
    return dict(qkv_bias=cfg.qkv_bias, mask_method=cfg.mask_method, causal=cfg.causal, window=_window(cfg))


def _simplified(cfg: AttentionConfig) -> None:
    return None  # no module: the inputs play queries, keys and values (run_attention calls simplified_attention)


def _wrapper_sizes(cfg: AttentionConfig) -> Msg:
    return Msg("{num_heads} heads × d_out {d_out} each, concatenated", num_heads=cfg.num_heads, d_out=cfg.d_out)


def _mha_sizes(cfg: AttentionConfig) -> Msg:
    return Msg("{num_heads} heads × head_dim {head_dim} = d_out {d_out}", num_heads=cfg.num_heads,
               head_dim=cfg.d_out // cfg.num_heads, d_out=cfg.d_out)


register(Variant(
    "simplified", N_("Simplified (no weights, §3.3)"),
    "Each token's input vector is its own query, key and value: scores are dot products of the inputs.",
    _simplified, head_dim=lambda cfg: cfg.d_in, output_width=lambda cfg: cfg.d_in))
register(Variant(
    "SelfAttention_v1", "SelfAttention_v1 (§3.4)",
    "Trainable W_query, W_key, W_value as raw parameter matrices; scaled dot-product attention, no mask.",
    lambda cfg: SelfAttention_v1(cfg.d_in, cfg.d_out), frozenset({"d_out"})))
register(Variant(
    "SelfAttention_v2", "SelfAttention_v2 (§3.4)",
    "The same with nn.Linear layers (better initialization, optional bias).",
    lambda cfg: SelfAttention_v2(cfg.d_in, cfg.d_out, qkv_bias=cfg.qkv_bias), frozenset({"d_out", "qkv_bias"})))
register(Variant(
    "CausalAttention", "CausalAttention (§3.5)",
    "Self-attention with a causal mask (no token sees the future) and dropout, for batches.",
    lambda cfg: CausalAttention(cfg.d_in, cfg.d_out, cfg.context_length, cfg.dropout, **_masked(cfg)), MASKED))
register(Variant(
    "MultiHeadAttentionWrapper", "MultiHeadAttentionWrapper",
    "§3.6.1: num_heads independent CausalAttention heads, their outputs concatenated.",
    lambda cfg: MultiHeadAttentionWrapper(cfg.d_in, cfg.d_out, cfg.context_length, cfg.dropout, cfg.num_heads,
                                          **_masked(cfg)),
    MASKED | {"num_heads"}, heads=_heads, output_width=lambda cfg: cfg.d_out * cfg.num_heads,
    d_out_note=N_("d_out is **per head**: the wrapper's output is d_out × num_heads wide."), sizes=_wrapper_sizes))
register(Variant(
    "MultiHeadAttention", "MultiHeadAttention (§3.6.2)",
    "One set of W_query, W_key, W_value split into num_heads heads by .view: one matmul for all heads.",
    lambda cfg: MultiHeadAttention(cfg.d_in, cfg.d_out, cfg.context_length, cfg.dropout, cfg.num_heads,
                                   **_masked(cfg)),
    MASKED | {"num_heads"}, heads=_heads, head_dim=lambda cfg: cfg.d_out // cfg.num_heads,
    d_out_note=N_("d_out is the **total** width: each head gets head_dim = d_out / num_heads."), sizes=_mha_sizes,
    shape_flow=True))


def _gqa_sizes(cfg: AttentionConfig) -> Msg:
    share = cfg.num_heads // cfg.num_kv_groups if cfg.num_kv_groups and cfg.num_heads % cfg.num_kv_groups == 0 else 0
    values = dict(num_heads=cfg.num_heads, num_kv_groups=cfg.num_kv_groups, share=share,
                  head_dim=cfg.d_out // cfg.num_heads)
    if cfg.num_kv_groups == 1:
        return Msg("{num_heads} query heads share 1 K/V head ({share} each) × head_dim {head_dim}", **values)
    return Msg("{num_heads} query heads share {num_kv_groups} K/V heads ({share} each) × head_dim {head_dim}",
               **values)


register(Variant(
    "GroupedQueryAttention", "GroupedQueryAttention (GQA)",
    "Llama 3's attention: num_heads query heads share num_kv_groups K/V heads, so the KV cache is num_heads / "
    "num_kv_groups times smaller.",
    lambda cfg: GroupedQueryAttention(cfg.d_in, cfg.d_out, cfg.context_length, cfg.dropout, cfg.num_heads,
                                      cfg.num_kv_groups, **_masked(cfg)),
    MASKED | {"num_heads", "num_kv_groups"}, heads=_heads, kv_heads=lambda cfg: cfg.num_kv_groups,
    head_dim=lambda cfg: cfg.d_out // cfg.num_heads, sizes=_gqa_sizes, shape_flow=True,
    d_out_note=N_("d_out is the queries' total width; keys and values are num_kv_groups × head_dim wide.")))
register(Variant(
    "MultiQueryAttention", N_("Multi-query (GQA, 1 K/V head)"),
    "Every query head shares one K/V head: the smallest KV cache of the grouped family.",
    lambda cfg: GroupedQueryAttention(cfg.d_in, cfg.d_out, cfg.context_length, cfg.dropout, cfg.num_heads, 1,
                                      **_masked(cfg)),
    MASKED | {"num_heads"}, heads=_heads, kv_heads=_one, head_dim=lambda cfg: cfg.d_out // cfg.num_heads,
    sizes=lambda cfg: Msg("{num_heads} query heads share 1 K/V head × head_dim {head_dim}", num_heads=cfg.num_heads,
                          head_dim=cfg.d_out // cfg.num_heads),
    shape_flow=True))
register(Variant(
    "MultiHeadLatentAttention", "MultiHeadLatentAttention",
    "DeepSeek's attention: keys and values up-projected from one latent of latent_dim numbers a token, so the KV "
    "cache keeps only the latent.",
    lambda cfg: MultiHeadLatentAttention(cfg.d_in, cfg.d_out, cfg.context_length, cfg.dropout, cfg.num_heads,
                                         cfg.latent_dim, **_masked(cfg)),
    MASKED | {"num_heads", "latent_dim"}, heads=_heads, head_dim=lambda cfg: cfg.d_out // cfg.num_heads,
    sizes=lambda cfg: Msg("{num_heads} heads × head_dim {head_dim}, keys and values from a {latent_dim}-wide latent",
                          num_heads=cfg.num_heads, head_dim=cfg.d_out // cfg.num_heads, latent_dim=cfg.latent_dim),
    shape_flow=True))
register(Variant(
    "MultiHeadAttentionTiled", N_("MultiHeadAttention, tiled"),
    "FlashAttention's loop: MultiHeadAttention computed tile by tile with an online softmax (running max m, sum "
    "l): the num_tokens x num_tokens matrix is never held; −∞ masking only.",
    lambda cfg: MultiHeadAttentionTiled(cfg.d_in, cfg.d_out, cfg.context_length, cfg.num_heads,
                                        qkv_bias=cfg.qkv_bias, causal=cfg.causal, window=_window(cfg)),
    frozenset({"d_out", "num_heads", "context_length", "causal", "qkv_bias", "window"}), heads=_heads,
    head_dim=lambda cfg: cfg.d_out // cfg.num_heads, sizes=_mha_sizes,
    d_out_note=N_("d_out is the **total** width: each head gets head_dim = d_out / num_heads.")))
