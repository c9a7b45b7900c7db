"""Sliding windows and attention sinks on a whole model: perplexity under another mask.

StreamingLLM (Xiao et al., 2023) found that a sliding window which drops the first tokens ruins a model's
perplexity, and that keeping a few "sink" tokens visible brings it back: most heads park attention on the
first token. ``window_perplexity(model, idx, window=32, sinks=4)`` measures that on the chapter's ``GPTModel``,
GPT-2 and the Llama family (SmolLM2).

The model is never changed: the function runs a light copy of its module tree (the same parameter and
buffer tensors, its own mask buffers), so a model shared by many sessions stays as it was.
"""

from __future__ import annotations

import copy
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from attn_core.attention.masks import causal_mask
from attn_core.messages import Problem

MASK_METHODS = ("neg_inf", "renormalize")


def _masked_modules(model: nn.Module) -> list[nn.Module]:
    """The attention modules whose mask comes from their ``mask`` buffer (the chapter's, GPT-2) or is built per
    call from their ``window`` and ``sinks`` (the Llama family)."""
    return [m for m in model.modules() if hasattr(m, "window") and ("mask" in m._buffers or hasattr(m, "sinks"))]


def _light_copy(module: nn.Module) -> nn.Module:
    """The module tree copied, its parameters and buffers shared (no tensor is copied)."""
    new = copy.copy(module)
    new._parameters = dict(module._parameters)
    new._buffers = dict(module._buffers)
    new._modules = {name: None if m is None else _light_copy(m) for name, m in module._modules.items()}
    return new


def check_window(num_tokens: int, window: int | None, sinks: int, mask_method: str = "neg_inf") -> None:
    """``ValueError`` naming what works unless ``window``/``sinks``/``mask_method`` fit ``num_tokens`` tokens."""
    if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
        raise Problem("the window must be a whole number of at least 1 key (or None for full attention); "
                      "got {window!r}", window=window)
    if isinstance(sinks, bool) or not isinstance(sinks, int) or sinks < 0:
        raise Problem("sinks must be a whole number of tokens, 0 or more; got {sinks!r}", sinks=sinks)
    if sinks and sinks >= num_tokens:
        raise Problem("{sinks} sinks leave no token to predict in a {num_tokens}-token text: use fewer than "
                      "{num_tokens} sinks", sinks=sinks, num_tokens=num_tokens)
    if mask_method not in MASK_METHODS:
        raise Problem("mask_method must be one of {methods}; got {mask_method!r}", methods=", ".join(MASK_METHODS),
                      mask_method=mask_method)


def masked_like(model: nn.Module, num_tokens: int, window: int | None = None, sinks: int = 0,
                mask_method: str = "neg_inf") -> nn.Module:
    """A copy of ``model`` (sharing its weights) whose every attention layer uses the causal mask with ``window``
    and ``sinks`` for up to ``num_tokens`` tokens, masked by ``mask_method``."""
    check_window(num_tokens, window, sinks, mask_method)
    view = _light_copy(model)
    layers = _masked_modules(view)
    if not layers:
        raise Problem("{model} has no attention layer with a causal mask buffer to change", model=type(model).__name__)
    mask = causal_mask(num_tokens, window=window, sinks=sinks).float()  # True (1.0) where a key is hidden
    for att in layers:
        if "mask" in att._buffers:
            att._buffers["mask"] = mask.to(att._buffers["mask"].device)
        else:
            att.sinks = sinks
        att.window = window
        att.causal = True
        att.mask_method = mask_method
        if mask_method == "renormalize" and hasattr(att, "efficient"):
            att.efficient = False  # the fused path knows only −∞ masking
    return view


def token_losses(model: nn.Module, idx: torch.Tensor, window: int | None = None, sinks: int = 0,
                 mask_method: str = "neg_inf") -> torch.Tensor:
    """Each next-token loss (num_tokens - 1,) of the first sequence of ``idx`` (batch, num_tokens) under the
    causal mask with ``window`` keys (query i sees keys i-window+1 … i) plus the first ``sinks`` tokens."""
    if idx.ndim != 2 or idx.shape[1] < 2:
        raise Problem("perplexity needs token ids shaped (batch, num_tokens) with at least 2 tokens; got {shape}",
                      shape=tuple(idx.shape))
    return _losses(masked_like(model, idx.shape[1], window, sinks, mask_method), idx)


def own_mix_losses(model: nn.Module, idx: torch.Tensor) -> torch.Tensor:
    """Each next-token loss (num_tokens - 1,) with the model's own masks, unchanged: a Gemma 3's local layers over
    their own window, its global layers full (``token_losses`` with ``window=None`` makes every layer full)."""
    if idx.ndim != 2 or idx.shape[1] < 2:
        raise Problem("perplexity needs token ids shaped (batch, num_tokens) with at least 2 tokens; got {shape}",
                      shape=tuple(idx.shape))
    return _losses(_light_copy(model), idx)  # a copy to set to eval: the shared model is never changed


def _losses(view: nn.Module, idx: torch.Tensor) -> torch.Tensor:
    view.eval()
    with torch.inference_mode():
        logits = view(idx[:1])  # (1, num_tokens, vocab_size)
    return F.cross_entropy(logits[0, :-1].float(), idx[0, 1:], reduction="none")


def window_perplexity(model: nn.Module, idx: torch.Tensor, window: int | None = None, sinks: int = 0,
                      mask_method: str = "neg_inf") -> float:
    """exp of the mean next-token loss under a sliding ``window`` with ``sinks`` (``window=None``: full causal
    attention, the plain forward's perplexity)."""
    return math.exp(float(token_losses(model, idx, window, sinks, mask_method).mean()))
