"""Does this head matter? Attention weights alone can mislead (a head can attend hard and move nothing), so:

- :func:`head_ablation`: the per-token loss with some heads' context vectors zeroed (or replaced by their mean over
  positions) right before the output projection;
- :func:`patch_heads`: activation patching, the corrupted text run with the clean run's context vectors for some
  heads, and how much of the clean-vs-corrupt gap on one next token that brings back;
- :func:`value_weighted`: each weight times the size of what it moves, α_ij · ‖f_h(x_j)‖ with f_h(x) = v^h W_O[:, h]
  (Kobayashi et al. 2020);
- :func:`rollout`: the heads averaged, 0.5·A + 0.5·I, multiplied layer by layer (Abnar & Zuidema 2020).

Every model family works (its blocks call ``block.att.out_proj`` on the heads side by side). The shared model is
never changed: an edited layer is a shallow copy of its block and attention, built per call, whose ``out_proj`` is a
wrapper that edits its input; no hooks, no flags, so any number of sessions run these at once.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from attn_core.messages import Problem
from attn_core.models.traced import LOSS_ROWS, TracedLM, read_out, trace_layer, walk_layers
from attn_core.tracing.trace import Trace

HOWS = ("zero", "mean")
Edit = Callable[[torch.Tensor], torch.Tensor]  # (b, num_tokens, num_heads, head_dim) -> the same, edited


class EditedInput(nn.Module):
    """``out_proj`` with its input, the heads side by side (b, num_tokens, d_out), edited head by head first."""

    def __init__(self, out_proj: nn.Module, num_heads: int, edit: Edit):
        super().__init__()
        self.out_proj, self.num_heads, self.edit = out_proj, num_heads, edit

    def forward(self, context_vec: torch.Tensor) -> torch.Tensor:
        b, num_tokens, d_out = context_vec.shape
        head_dim = d_out // self.num_heads
        context_vec = context_vec.reshape(b, num_tokens, self.num_heads, head_dim)  # split the heads again
        context_vec = self.edit(context_vec)
        context_vec = context_vec.reshape(b, num_tokens, d_out)  # Combine heads
        return self.out_proj(context_vec)


def edited_block(block: nn.Module, edit: Edit) -> nn.Module:
    """A shallow copy of ``block`` (weights shared) whose attention's ``out_proj`` input goes through ``edit``;
    ``block`` itself is untouched (the copies own their ``_modules`` dicts)."""
    att = copy.copy(block.att)
    att._modules = dict(att._modules)
    att._modules["out_proj"] = EditedInput(block.att.out_proj, block.att.num_heads, edit)
    new = copy.copy(block)
    new._modules = dict(block._modules)
    new._modules["att"] = att
    return new


def check_tokens(model: TracedLM, idx: torch.Tensor) -> None:
    """A ``Problem`` for token ids that are not (1, T) with T >= 2 (a loss needs a next token) or do not fit."""
    if idx.ndim != 2 or idx.shape[0] != 1:
        raise Problem("expected token ids of shape (1, num_tokens); got {shape}", shape=tuple(idx.shape))
    if idx.shape[1] < 2:
        raise Problem("at least two tokens are needed (a token and the one after it); the text has {n}",
                      n=int(idx.shape[1]))
    model.check_ids(idx)


def check_layer(model: TracedLM, layer: int) -> None:
    """A ``Problem`` for a layer the model does not have."""
    n = model.cfg["n_layers"]
    if not isinstance(layer, int) or not 0 <= layer < n:
        raise Problem("the model has layers 0..{last}; got {layer}", last=n - 1, layer=layer)


def by_layer(model: TracedLM, heads: Sequence[tuple[int, int]]) -> dict[int, list[int]]:
    """``[(layer, head), ...]`` (0-based) -> {layer: [heads]}; a ``Problem`` names a head the model does not have."""
    n_layers, n_heads = model.cfg["n_layers"], model.cfg["n_heads"]
    layers: dict[int, list[int]] = {}
    for pair in heads:
        if not (isinstance(pair, tuple | list) and len(pair) == 2 and all(isinstance(k, int) for k in pair)):
            raise Problem("a head is a pair (layer, head) of whole numbers; got {head}", head=repr(pair))
        layer, head = pair
        if not (0 <= layer < n_layers and 0 <= head < n_heads):
            raise Problem("the model has layers 0..{last_layer} and heads 0..{last_head} in each; got layer {layer}, "
                          "head {head}", last_layer=n_layers - 1, last_head=n_heads - 1, layer=layer, head=head)
        layers.setdefault(layer, [])
        if head not in layers[layer]:
            layers[layer].append(head)
    return layers


def edited_hidden(model: TracedLM, idx: torch.Tensor, edits: dict[int, Edit]) -> torch.Tensor:
    """The model's last hidden states after its final norm (b, T, emb_dim) with layer ``i``'s heads edited by
    ``edits[i]`` before its output projection: the base's forward (embed -> blocks -> final norm) on per-call
    copies of those blocks. ``out_head`` of them gives the logits (:func:`edited_logits`, :func:`losses_of`)."""
    with torch.no_grad():
        x = model.embed(idx)  # Shape [batch_size, num_tokens, emb_size]
        for i, block in enumerate(model.trf_blocks):
            if i in edits:
                block = edited_block(block, edits[i])
            x = block(x, *model.block_args(i))
        return model.final_norm(x)


def edited_logits(model: TracedLM, idx: torch.Tensor, edits: dict[int, Edit]) -> torch.Tensor:
    """The model's logits (b, T, vocab_size) with the heads edited as :func:`edited_hidden` says."""
    with torch.no_grad():
        return model.out_head(edited_hidden(model, idx, edits))


def token_losses(logits: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """Per-token cross-entropy in nats (T - 1): the loss of each next token given the ones before it; LOSS_ROWS
    positions at a time, so a large vocabulary's log-softmax is never a second (T, vocab_size) tensor."""
    rows, targets = logits[0, :-1], idx[0, 1:]
    return torch.cat([F.cross_entropy(rows[i:i + LOSS_ROWS].float(), targets[i:i + LOSS_ROWS], reduction="none")
                      for i in range(0, max(len(targets), 1), LOSS_ROWS)])


def losses_of(model: TracedLM, hidden: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """:func:`token_losses` from the final-normed hidden states (1, T, emb_dim), ``out_head`` LOSS_ROWS positions
    at a time: no (T, vocab_size) logits are ever held, and a kept forward pass (a walk) needs no second one."""
    with torch.no_grad():
        return read_out(model, hidden, idx, [idx.shape[1]], losses=True)[1][0]


def top_of(model: TracedLM, hidden: torch.Tensor, k: int = 5) -> list[tuple[int, float]]:
    """The ``k`` likeliest next tokens (id, probability) after the last position of final-normed ``hidden``."""
    with torch.no_grad():
        probas = torch.softmax(model.out_head(hidden[:, -1:])[0, -1].float(), dim=-1)
    values, ids = torch.topk(probas, min(k, probas.numel()))
    return [(int(i), float(p)) for i, p in zip(ids, values)]


def knock_out(heads: list[int], how: str) -> Edit:
    """An edit that zeroes ``heads`` or sets each to its mean over the positions."""
    def edit(context_vec: torch.Tensor) -> torch.Tensor:  # (b, num_tokens, num_heads, head_dim)
        context_vec = context_vec.clone()
        if how == "zero":
            context_vec[:, :, heads] = 0.0
        else:
            context_vec[:, :, heads] = context_vec[:, :, heads].mean(dim=1, keepdim=True)
        return context_vec
    return edit


def head_ablation(model: TracedLM, idx: torch.Tensor, heads: Sequence[tuple[int, int]],
                  how: str = "zero") -> torch.Tensor:
    """Per-token losses (nats, length T - 1) of ``model`` on token ids ``idx`` (1, T) with the context vectors of
    ``heads`` ((layer, head) pairs, 0-based; ``[]``: the plain model) zeroed (``how="zero"``) or replaced by their
    mean over the positions (``how="mean"``) right before each layer's output projection."""
    return knocked(model, idx, heads, how)[0]


def knocked(model: TracedLM, idx: torch.Tensor, heads: Sequence[tuple[int, int]], how: str = "zero",
            k: int = 5) -> tuple[torch.Tensor, list[tuple[int, float]]]:
    """One forward pass with ``heads`` knocked out (as :func:`head_ablation`): the per-token losses and the ``k``
    likeliest next tokens (id, probability) after the last token."""
    if how not in HOWS:
        raise Problem("how must be one of {hows}; got {how}", hows=", ".join(HOWS), how=repr(how))
    check_tokens(model, idx)
    layers = by_layer(model, heads)
    hidden = edited_hidden(model, idx, {layer: knock_out(hs, how) for layer, hs in layers.items()})
    return losses_of(model, hidden, idx), top_of(model, hidden, k)


@dataclass(frozen=True)
class Patch:
    """What :func:`patch_heads` measured: the metric on the clean, corrupted and patched runs, and the share of the
    clean-vs-corrupt gap the patched heads bring back (1: all of it, 0: none)."""

    metric: str  # "logit" (the target's logit) or "logit difference" (target minus foil)
    clean: float
    corrupt: float
    patched: float

    @property
    def effect(self) -> float:
        return (self.patched - self.corrupt) / (self.clean - self.corrupt)


def patch_heads(model: TracedLM, clean_idx: torch.Tensor, corrupt_idx: torch.Tensor,
                heads: Sequence[tuple[int, int]], target: int, foil: int | None = None) -> Patch:
    """Activation patching: run the corrupted ids with the clean run's context vectors for ``heads`` and measure,
    after the last token, m = the ``target`` token's logit (or, with a ``foil``, target minus foil: the logit
    difference). ``Patch.effect`` = (m_patched - m_corrupt) / (m_clean - m_corrupt)."""
    check_tokens(model, clean_idx)
    check_tokens(model, corrupt_idx)
    if clean_idx.shape != corrupt_idx.shape:
        raise Problem("the clean text has {clean} tokens and the corrupted one {corrupt}: patching needs the same "
                      "number of tokens", clean=int(clean_idx.shape[1]), corrupt=int(corrupt_idx.shape[1]))
    last = model.cfg["vocab_size"] - 1
    if not (isinstance(target, int) and 0 <= target <= last):
        raise Problem("the target token must be an id in 0..{last}; got {token}", last=last, token=repr(target))
    if foil is not None and not (isinstance(foil, int) and 0 <= foil <= last):
        raise Problem("the foil token must be an id in 0..{last}; got {token}", last=last, token=repr(foil))
    layers = by_layer(model, heads)
    kept: dict[int, torch.Tensor] = {}

    def keep(layer: int) -> Edit:
        def edit(context_vec: torch.Tensor) -> torch.Tensor:
            kept[layer] = context_vec
            return context_vec
        return edit

    def put_back(layer: int, hs: list[int]) -> Edit:
        def edit(context_vec: torch.Tensor) -> torch.Tensor:
            context_vec = context_vec.clone()
            context_vec[:, :, hs] = kept[layer][:, :, hs]
            return context_vec
        return edit

    def metric(logits: torch.Tensor) -> float:
        last = logits[0, -1].float()
        return float(last[target] - (last[foil] if foil is not None else 0.0))

    clean = metric(edited_logits(model, clean_idx, {layer: keep(layer) for layer in layers}))
    corrupt = metric(edited_logits(model, corrupt_idx, {}))
    if clean == corrupt:
        raise Problem("the clean and corrupted texts give the target the same score: there is no gap for a head to "
                      "close; change a token that matters")
    patched = metric(edited_logits(model, corrupt_idx, {layer: put_back(layer, hs) for layer, hs in layers.items()}))
    return Patch("logit" if foil is None else "logit difference", clean, corrupt, patched)


def weights_and_moved(model: TracedLM, idx: torch.Tensor, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Layer ``layer``'s attention weights α (num_heads, T, T) and ‖f_h(x_j)‖ (num_heads, T): the size of what head h
    moves from token j, f_h(x_j) = v_j^h W_O[:, h] (its value vector times its slice of the output projection, bias
    left out; with grouped-query attention the K/V head each query head reads; with a norm after the attention, as
    Gemma 3 has, times that norm's gain, so that each row's shares are those of what reaches the residual stream)."""
    check_layer(model, layer)
    if idx.ndim != 2 or idx.shape[0] != 1 or idx.shape[1] == 0:
        raise Problem("expected token ids of shape (1, num_tokens), at least one token; got {shape}",
                      shape=tuple(idx.shape))
    return moved_of(model, layer, trace_layer(model, idx, layer))


def moved_of(model: TracedLM, layer: int, trace: Trace) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`weights_and_moved` from layer ``layer``'s attention trace (its steps without the layer's prefix): a
    page that kept the layer's input runs that one attention layer, not the blocks before it."""
    attn_weights = trace.of_kind("weights")[-1].tensor[0]  # (num_heads, T, T)
    values = trace["values.transpose"].tensor[0]  # (num_kv_groups or num_heads, T, head_dim)
    num_heads, head_dim = attn_weights.shape[0], values.shape[-1]
    values = values.repeat_interleave(num_heads // values.shape[0], dim=0)  # (num_heads, T, head_dim), K1 K1 K2 ...
    block = model.trf_blocks[layer]
    W_O = block.att.out_proj.weight  # (emb_dim, num_heads * head_dim)
    post = getattr(block, "post_attention_norm", None)  # Gemma 3 norms what attention adds: x + g ⊙ o / rms(o)
    if post is not None:  # its gain g weighs each dimension; 1 / rms(o) is one factor a row, the same for every j
        W_O = W_O * post.weight[:, None]
    W_O = W_O.view(W_O.shape[0], num_heads, head_dim).permute(1, 2, 0)  # (num_heads, head_dim, emb_dim)
    with torch.no_grad():
        moved = (values @ W_O).norm(dim=-1)  # (num_heads, T): ‖f_h(x_j)‖
    return attn_weights, moved


def value_weighted(model: TracedLM, idx: torch.Tensor, layer: int) -> torch.Tensor:
    """(num_heads, T, T): α_ij · ‖f_h(x_j)‖ (:func:`weights_and_moved`; Kobayashi et al. 2020). A weight on a token
    whose transformed value is small moves little."""
    attn_weights, moved = weights_and_moved(model, idx, layer)
    return attn_weights * moved[:, None, :]


def mean_attention(model: TracedLM, idx: torch.Tensor) -> torch.Tensor:
    """(layers, T, T): each layer's attention weights averaged over its heads (one forward, one layer held)."""
    means: list[torch.Tensor] = []
    walk_layers(model, idx, on_layer=lambda i, w: means.append(w.mean(dim=0)))
    return torch.stack(means)


def rollout_of(mean_weights: torch.Tensor) -> torch.Tensor:
    """Attention rollout from head-averaged weights (layers, T, T): Ã = 0.5·A + 0.5·I (the residual stream), rows
    renormalized, R_l = Ã_l R_(l-1); row i of R_l: where token i's information after layer l came from."""
    T = mean_weights.shape[-1]
    eye = torch.eye(T, dtype=mean_weights.dtype)
    result, joint = [], eye
    for attn_weights in mean_weights:
        mixed = 0.5 * attn_weights + 0.5 * eye
        mixed = mixed / mixed.sum(dim=-1, keepdim=True)
        joint = mixed @ joint
        result.append(joint)
    return torch.stack(result)


def rollout(model: TracedLM, idx: torch.Tensor) -> torch.Tensor:
    """(layers, T, T): attention rollout (Abnar & Zuidema 2020) of ``model`` on token ids ``idx`` (1, T)."""
    return rollout_of(mean_attention(model, idx))
