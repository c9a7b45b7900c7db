"""Plain arguments in, a module's output and Trace out: what the dashboard (and tests) call.

Everything here is keyed by plain values (strings, ints, floats), so callers can cache on
them. Module weights and dropout masks depend only on the ``seed``: the global RNG is
seeded under a lock and restored afterwards, so concurrent sessions don't disturb each other.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn

from .attention import (
    CausalAttention,
    MultiHeadAttention,
    MultiHeadAttentionWrapper,
    SelfAttention_v1,
    SelfAttention_v2,
    check_inputs,
    check_sizes,
)
from .devices import pick_device
from .simplified import simplified_attention
from .trace import Trace

VARIANTS = (
    "simplified",
    "SelfAttention_v1",
    "SelfAttention_v2",
    "CausalAttention",
    "MultiHeadAttentionWrapper",
    "MultiHeadAttention",
)
HAS_HEADS = ("MultiHeadAttentionWrapper", "MultiHeadAttention")
HAS_MASK = ("CausalAttention", "MultiHeadAttentionWrapper", "MultiHeadAttention")
_RNG_LOCK = threading.Lock()


@dataclass(frozen=True)
class AttentionConfig:
    """Every knob of one attention run, as plain values."""

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

    def validate(self) -> None:
        """Raise ``ValueError`` (with what to change) for a combination the classes cannot run."""
        if self.variant not in VARIANTS:
            raise ValueError(f"unknown variant {self.variant!r}: choose one of {', '.join(VARIANTS)}")
        heads = self.num_heads if self.variant == "MultiHeadAttention" else None
        check_sizes(self.d_in, self.d_out, self.context_length, self.dropout, self.mask_method, heads)
        if self.variant == "MultiHeadAttentionWrapper" and self.num_heads < 1:
            raise ValueError(f"num_heads must be at least 1; got {self.num_heads}")
        pick_device(self.device)

    @property
    def output_width(self) -> int:
        """Width of the output: d_out * num_heads for the wrapper, d_in for simplified, else d_out."""
        if self.variant == "simplified":
            return self.d_in
        if self.variant == "MultiHeadAttentionWrapper":
            return self.d_out * self.num_heads
        return self.d_out

    def as_dict(self) -> dict:
        return asdict(self)


def seed_rng(seed: int, device: torch.device | None = None) -> None:
    """``torch.manual_seed(seed)`` for the generators a run uses: the CPU's (weights are drawn there), and
    the device's own for dropout on a GPU. ``torch.manual_seed`` also reaches every other backend (CUDA,
    XPU, MTIA, each recording a traceback for its lazy start): ~4 ms of a 32-token run's ~20 ms on a
    machine without them. The numbers are the same."""
    torch.default_generator.manual_seed(seed)
    if device is not None and device.type == "cuda":
        torch.cuda.manual_seed(seed)
    elif device is not None and device.type == "mps":
        torch.mps.manual_seed(seed)


def build_module(cfg: AttentionConfig) -> nn.Module | None:
    """The seeded module for ``cfg`` (``None`` for simplified attention), on cfg.device."""
    cfg.validate()
    with _RNG_LOCK, torch.random.fork_rng(devices=[]):
        seed_rng(cfg.seed)
        module = _construct(cfg)
    if module is None:
        return None
    module.train(cfg.train_mode)
    return module.to(pick_device(cfg.device))


def _construct(cfg: AttentionConfig) -> nn.Module | None:
    args = (cfg.d_in, cfg.d_out)
    opts = dict(qkv_bias=cfg.qkv_bias, mask_method=cfg.mask_method, causal=cfg.causal)
    if cfg.variant == "simplified":
        return None
    if cfg.variant == "SelfAttention_v1":
        return SelfAttention_v1(*args)
    if cfg.variant == "SelfAttention_v2":
        return SelfAttention_v2(*args, qkv_bias=cfg.qkv_bias)
    if cfg.variant == "CausalAttention":
        return CausalAttention(*args, cfg.context_length, cfg.dropout, **opts)
    if cfg.variant == "MultiHeadAttentionWrapper":
        return MultiHeadAttentionWrapper(*args, cfg.context_length, cfg.dropout, cfg.num_heads, **opts)
    return MultiHeadAttention(*args, cfg.context_length, cfg.dropout, cfg.num_heads, **opts)


def run_attention(cfg: AttentionConfig, x: torch.Tensor,
                  module: nn.Module | None = None) -> tuple[torch.Tensor, Trace]:
    """Build the module for ``cfg``, run it on ``x`` (b, num_tokens, d_in) and trace every step.

    The first step is the input ``x``; the output is the last step's tensor. Dropout masks are
    drawn from the seed, so the same config and input give the same trace. ``module``: one that
    :func:`build_module` made for this ``cfg`` (a forward pass leaves it unchanged, so a caller may keep
    it for the next input instead of building it again). The trace holds the tensors the forward
    computed, not copies (``Trace(copy=False)``): treat them as read-only.
    """
    module = build_module(cfg) if module is None else module
    device = pick_device(cfg.device)
    check_inputs(x, cfg.d_in, cfg.context_length if cfg.variant in HAS_MASK else None)
    x = x.to(device)
    trace = Trace(copy=False)
    trace.record("x", x, "x = token_embeddings + pos_embeddings")  # how the page made x: the page names it
    with torch.no_grad(), _RNG_LOCK, torch.random.fork_rng(devices=[]):
        seed_rng(cfg.seed, device)
        if module is None:
            out = simplified_attention(x, "softmax", trace).context
        else:
            out = module(x, trace=trace)
    trace.check()
    return out.detach().cpu(), trace
