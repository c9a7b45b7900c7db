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
from attn_core.models.traced import TracedLM, run_blocks

MASK_METHODS = ("neg_inf", "renormalize")
HEAD_ROWS = 256  # positions per output-head block: smaller blocks re-read the head's weights (docs/measurements.md)
SINK_EFFECTS = ("worse", "harmless", "help", "partly", "same")  # what sinks did to a windowed model's perplexity
CLOSE = 1.05  # perplexities within 5% of each other: about the same
HELPS = 0.8  # sinks that cut the window's perplexity by a fifth or more help


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


def _losses(view: TracedLM, idx: torch.Tensor) -> torch.Tensor:
    """The forward's lines with the output head run HEAD_ROWS positions at a time: a large vocabulary's logits are
    never a whole (num_tokens, vocab_size) tensor (Gemma 3's at 1,024 tokens would be 1 GB, its log-softmax 1 more)."""
    view.eval()
    with torch.inference_mode():
        view.check_ids(idx[:1])
        x = view.final_norm(run_blocks(view, view.embed(idx[:1])))  # (1, num_tokens, emb_dim)
        rows, targets = x[0, :-1], idx[0, 1:]
        return torch.cat([F.cross_entropy(view.out_head(rows[i:i + HEAD_ROWS]).float(), targets[i:i + HEAD_ROWS],
                                          reduction="none") for i in range(0, max(len(targets), 1), HEAD_ROWS)])


def window_perplexity(model: nn.Module, idx: torch.Tensor, window: int | None = None, sinks: int = 0,
                      mask_method: str = "neg_inf") -> float:
    """exp of the mean next-token loss under a sliding ``window`` with ``sinks`` (``window=None``: full causal
    attention, the plain forward's perplexity)."""
    return math.exp(float(token_losses(model, idx, window, sinks, mask_method).mean()))


def sink_effect(full: float, windowed: float, with_sinks: float) -> str:
    """What sinks did, from three perplexities (full attention, the window alone, the window + sinks), one of
    ``SINK_EFFECTS``: "worse" (sinks raised it by a quarter or more), "harmless" (the window alone costs under 5%:
    nothing to win back), "help" (sinks cut it by a fifth or more and won back at least half of what the window
    lost), "partly" (cut by a fifth or more, less than half won back), else "same"."""
    if with_sinks >= windowed / HELPS:
        return "worse"
    if windowed <= CLOSE * full:
        return "harmless"
    if with_sinks > HELPS * windowed:
        return "same"
    return "help" if windowed - with_sinks >= (windowed - full) / 2 else "partly"
