"""Modules built only to receive a file's weights: on the meta device, their random init skipped.

On the meta device an ``nn.Embedding``'s ``normal_`` still runs through PyTorch's Python decompositions, whose first
use in a process imports several hundred modules (sympy, ``torch._dynamo``); nothing is drawn there anyway. The skip
is a ``TorchFunctionMode``, so it holds in this thread only: a model another session seeds and draws at the same time
is not touched.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch.overrides import TorchFunctionMode

_INITS = {getattr(torch.nn.init, name) for name in (
    "normal_", "uniform_", "trunc_normal_", "constant_", "ones_", "zeros_", "kaiming_uniform_", "kaiming_normal_",
    "xavier_uniform_", "xavier_normal_")} | {torch.Tensor.normal_, torch.Tensor.uniform_}


class _SkipInit(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in _INITS:
            return args[0] if args else kwargs.get("tensor")
        return func(*args, **(kwargs or {}))


@contextmanager
def empty_weights() -> Iterator[None]:
    """Build modules on the meta device with no init run (their weights come from a file next)."""
    with torch.device("meta"), _SkipInit():
        yield
