"""Plain arguments in, a module's output and Trace out: what the dashboard (and tests) call.

Everything here is keyed by plain values (strings, ints, floats), so callers can cache on
them. Module weights and dropout masks depend only on the ``seed``: the global RNG is
seeded under a lock and restored afterwards, so concurrent sessions don't disturb each other.
"""

from __future__ import annotations

import threading

import torch
import torch.nn as nn

from attn_core.attention.classes import check_inputs
from attn_core.attention.simplified import simplified_attention
from attn_core.attention.variants import AttentionConfig
from attn_core.devices import pick_device
from attn_core.tracing.trace import Trace

_RNG_LOCK = threading.Lock()


def seed_rng(seed: int, device: torch.device | None = None) -> None:
    """``torch.manual_seed(seed)`` for the generators a run uses: the CPU's (weights are drawn there), and
    the device's own for dropout on a GPU. ``torch.manual_seed`` also reaches every other backend (CUDA,
    XPU, MTIA, each recording a traceback for its lazy start): a good share of a small run's time on a machine
    without them (docs/measurements.md). The numbers are the same."""
    torch.default_generator.manual_seed(seed)
    if device is not None and device.type == "cuda":
        torch.cuda.manual_seed(seed)
    elif device is not None and device.type == "mps":
        torch.mps.manual_seed(seed)


def build_module(cfg: AttentionConfig) -> nn.Module | None:
    """The seeded module for ``cfg`` (``None`` for a variant without one), on cfg.device. The class checks
    its own sizes (``ValueError`` saying what to change)."""
    cfg.validate()
    with _RNG_LOCK, torch.random.fork_rng(devices=[]):
        seed_rng(cfg.seed)
        module = cfg.spec.build(cfg)
    if module is None:
        return None
    module.train(cfg.train_mode)
    return module.to(pick_device(cfg.device))


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
    check_inputs(x, cfg.d_in, cfg.context_length if cfg.spec.masks else None)
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
