"""The traced language model every family subclasses: embed -> blocks -> final norm -> out_head, as in the book's
ch05 (and gpt-fast), with each layer's attention recordable into one :class:`~attn_core.tracing.trace.Trace`.

A subclass builds ``cfg`` (a dict with at least ``n_layers``, ``n_heads``, ``emb_dim``, ``context_length``,
``vocab_size``), ``trf_blocks``, ``final_norm`` and ``out_head`` in ``__init__`` and says only what differs:

- ``embed(in_idx, start) -> x``: the blocks' input for ids placed after ``start`` cached tokens (GPT-2 adds learned
  position embeddings; a RoPE model returns its token embeddings);
- ``block_args(layer) -> tuple``: that layer's extra arguments before ``trace, cache`` (none for GPT-2; a Llama's
  RoPE tables; a model whose layers differ, e.g. per-layer RoPE bases, hands each layer its own). A layer's sliding
  window lives in its attention module (``att.window``).

Each block is called ``block(x, *model.block_args(i), trace, cache)``. :func:`run_blocks` is that loop;
:func:`walk_layers` and :func:`trace_layer` walk any such model block by block for the pages.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from attn_core.attention.kv_cache import KVCache
from attn_core.messages import Problem
from attn_core.tracing.steps import scope_name
from attn_core.tracing.trace import Trace, scope

LOSS_ROWS = 64  # positions per log-softmax: Qwen's (T, 151,936) would double the logits' memory (docs/measurements.md)
NO_TARGET = -100  # cross_entropy's ignore_index: a sequence's last position has no next token


class TracedLM(nn.Module):
    """Token ids -> logits through ``trf_blocks``, any layer's attention traced on request (see the module doc)."""

    cfg: dict
    trf_blocks: nn.Module  # nn.Sequential or nn.ModuleList of blocks
    final_norm: nn.Module
    out_head: nn.Module

    def embed(self, in_idx: torch.Tensor, start: int = 0) -> torch.Tensor:
        """The blocks' input (batch, num_tokens, emb_dim) for token ids placed after ``start`` others."""
        raise NotImplementedError

    def block_args(self, layer: int) -> tuple:
        """Layer ``layer``'s block arguments before ``trace, cache`` (none by default)."""
        return ()

    def forward(self, in_idx: torch.Tensor, trace: Trace | None = None, cache: KVCache | None = None,
                trace_layers: Collection[int] | None = None) -> torch.Tensor:
        """Token ids (batch, num_tokens) -> logits (batch, num_tokens, vocab_size); with a trace, the attention
        steps of every layer (or of the layers in ``trace_layers``) are recorded under ``trf_blocks[i].att``. With a
        KV ``cache``, the tokens come after the cached ones: their positions continue from ``cache.length``, and the
        cache grows."""
        start = self.start_after(cache, in_idx)
        traced = self.traced_layers(trace, trace_layers)
        x = self.embed(in_idx, start)  # Shape [batch_size, num_tokens, emb_size]
        x = run_blocks(self, x, cache=cache, trace=trace, traced=traced)
        x = self.final_norm(x)
        logits = self.out_head(x)
        return logits

    def start_after(self, cache: KVCache | None, in_idx: torch.Tensor) -> int:
        """The position the tokens ``in_idx`` start at: after the ``cache``'s (0 without one); a ``Problem`` for
        a cache made for another model or ids that do not fit."""
        start = 0 if cache is None else cache.length
        if cache is not None and len(cache.layers) != len(self.trf_blocks):
            raise Problem("the cache has {cache_layers} layers, the model {model_layers}: "
                          "make it with KVCache(model.cfg['n_layers'])",
                          cache_layers=len(cache.layers), model_layers=len(self.trf_blocks))
        self.check_ids(in_idx, start)
        return start

    def check_ids(self, in_idx: torch.Tensor, start: int = 0) -> None:
        """A ``Problem`` saying what is wrong with token ids (batch, num_tokens) placed after ``start`` others."""
        if in_idx.ndim != 2:
            raise Problem("expected token ids of shape (batch, num_tokens); got {shape}", shape=tuple(in_idx.shape))
        seq_len = in_idx.shape[1]
        context_length = self.cfg["context_length"]
        if start + seq_len > context_length:
            raise Problem("{n} tokens do not fit in context_length = {context_length}: the model has "
                          "{context_length} positions; shorten the text", n=start + seq_len,
                          context_length=context_length)
        if seq_len and (int(in_idx.min()) < 0 or int(in_idx.max()) >= self.cfg["vocab_size"]):
            raise Problem("token ids must lie in 0..{last} (the model's vocabulary)", last=self.cfg["vocab_size"] - 1)

    def traced_layers(self, trace: Trace | None, trace_layers: Collection[int] | None) -> frozenset[int]:
        """The layer indices to record: none without a trace, all by default, else ``trace_layers``
        (a ``Problem`` names an index the model does not have)."""
        n = self.cfg["n_layers"]
        if trace is None:
            return frozenset()
        if trace_layers is None:
            return frozenset(range(n))
        bad = [k for k in trace_layers if not isinstance(k, int) or not 0 <= k < n]
        if bad:
            raise Problem("trace_layers names {bad}, but the model's layers are 0..{last}", bad=bad, last=n - 1)
        return frozenset(trace_layers)


def run_blocks(model: TracedLM, x: torch.Tensor, *, cache: KVCache | None = None, trace: Trace | None = None,
               traced: Collection[int] = (), stop: int | None = None) -> torch.Tensor:
    """``x`` through ``model.trf_blocks`` (``block(x, *model.block_args(i), trace, cache)``), the layers in
    ``traced`` recorded under their scope; ``stop``: the last block run (the layers after it are not needed)."""
    for i, block in enumerate(model.trf_blocks):
        layer_cache = None if cache is None else cache.layers[i]
        layer_trace_ = trace if i in traced else None
        with scope(layer_trace_, "layer", i):
            x = block(x, *model.block_args(i), layer_trace_, layer_cache)
        if i == stop:
            break
    return x


def layer_windows(model: TracedLM) -> tuple[int | None, ...]:
    """Each layer's sliding window (``block.att.window``; None: full causal), or () when every layer is full."""
    windows = tuple(getattr(block.att, "window", None) or None for block in model.trf_blocks)
    return windows if any(w is not None for w in windows) else ()


def layer_scope(layer: int) -> str:
    """The trace scope of one layer's attention: ``trf_blocks[1].att``."""
    return scope_name("layer", layer)


def layer_trace(trace: Trace, layer: int) -> Trace:
    """The steps of one layer's attention as a trace of their own (names without the prefix),
    so ``views.head_matrix`` / ``all_heads`` / ``cell_story`` read it like a single module's."""
    return trace.under(layer_scope(layer))


@dataclass(frozen=True)
class Walk:
    """What :func:`walk_layers` keeps of one forward pass: each layer's attention input, the last hidden states and
    the last logits: what every view of the sentence reads without a second pass."""

    inputs: list[torch.Tensor]  # per layer (1, T, emb_dim): the residual stream after that block's norm1
    last_logits: torch.Tensor  # (vocab_size,): the logits after the last token (not T x vocab_size)
    final: torch.Tensor  # (1, T, emb_dim): after the final norm; out_head of a few rows at a time gives any logits
    losses: torch.Tensor | None = None  # (T - 1,) nats of each next token, when the pass was asked for them


def walk_layers(model: TracedLM, idx: torch.Tensor,
                on_layer: Callable[[int, torch.Tensor], None] | None = None,
                progress: Callable[[int], None] | None = None) -> Walk:
    """``model``'s forward on token ids (1, T), block by block, keeping what a page needs to show any layer later:
    every layer's attention input (``T x emb_dim`` each), the hidden states after the final norm (one more) and the
    last position's logits only. Any family's model.

    ``on_layer(i, weights)``: each layer's attention runs the book's explicit path with a trace of its own, and
    its weights (num_heads, T, T) are handed over; the trace is dropped before the next layer, so at most one
    layer's trace is held (~214 MB for GPT-2 small at T = 1,024; all twelve would be ~2.6 GB). ``progress(i)``
    after each block. Reads the model only (no mode change, no gradients)."""
    if idx.ndim != 2 or idx.shape[0] != 1 or idx.shape[1] == 0:
        raise Problem("expected token ids of shape (1, num_tokens), at least one token; got {shape}",
                      shape=tuple(idx.shape))
    model.check_ids(idx)
    return _walk(model, idx, [idx.shape[1]], [on_layer], progress)[0]


def walk_many(model: TracedLM, seqs: Sequence[Sequence[int]],
              on_layer: Sequence[Callable[[int, torch.Tensor], None] | None] | None = None,
              losses: bool = False, workers: int = 1) -> list[Walk]:
    """:func:`walk_layers` of several token sequences in one padded pass (their ``on_layer`` each, or none): each
    is right-padded to the longest with its own last id. Attention is causal, so no real token sees a pad and every
    position is placed as alone (RoPE or learned positions from 0); each walk is cut back to its own length. Equal to
    one walk at a time up to float rounding; the weights of a batch are read once instead of once a sequence.
    ``losses``: each walk also holds its per-token losses (:func:`read_out`). ``workers``: the sequences, shortest
    first, split into that many padded passes run on threads of their own (each a core where torch runs one thread
    a call): a batch no longer waits on one core while the others idle."""
    if not seqs or any(len(s) == 0 for s in seqs):
        raise Problem("expected token ids of shape (1, num_tokens), at least one token; got {shape}", shape=(1, 0))
    each = list(on_layer or [None] * len(seqs))
    order = sorted(range(len(seqs)), key=lambda k: len(seqs[k]))  # dealt out sorted: like shares of long and short
    groups = [g for g in (order[i::max(1, workers)] for i in range(max(1, workers))) if g]
    if len(groups) == 1:
        return _walk_padded(model, seqs, each, losses)
    with ThreadPoolExecutor(len(groups)) as pool:
        parts = list(pool.map(lambda g: _walk_padded(model, [seqs[k] for k in g], [each[k] for k in g], losses),
                              groups))
    walks: list[Walk] = [None] * len(seqs)  # type: ignore[list-item]
    for group, part in zip(groups, parts):
        for k, walked in zip(group, part):
            walks[k] = walked
    return walks


def _walk_padded(model: TracedLM, seqs: Sequence[Sequence[int]],
                 on_layer: list[Callable[[int, torch.Tensor], None] | None], losses: bool) -> list[Walk]:
    """One padded pass of ``seqs`` (:func:`walk_many`)."""
    lengths = [len(s) for s in seqs]
    T = max(lengths)
    idx = torch.tensor([list(s) + [s[-1]] * (T - len(s)) for s in seqs])  # (b, T): pads after each
    model.check_ids(idx)
    return _walk(model, idx, lengths, on_layer, None, losses)


def _walk(model: TracedLM, idx: torch.Tensor, lengths: list[int],
          on_layer: list[Callable[[int, torch.Tensor], None] | None],
          progress: Callable[[int], None] | None, losses: bool = False) -> list[Walk]:
    """The loop of :func:`walk_layers` / :func:`walk_many` on ids (b, T) whose sequence ``k`` is ``lengths[k]`` long."""
    one = len(lengths) == 1

    def cut(t: torch.Tensor, k: int) -> torch.Tensor:  # (b, T, d) -> (1, n_k, d), owning its memory in a batch
        return t if one else t[k:k + 1, :lengths[k]].clone()

    inputs: list[list[torch.Tensor]] = [[] for _ in lengths]
    traced = any(f is not None for f in on_layer)
    with torch.no_grad():
        x = model.embed(idx)
        for i, block in enumerate(model.trf_blocks):
            if not traced:
                layer_input = block.norm1(x)
                x = block(x, *model.block_args(i))
            else:
                trace = Trace(copy=False)
                x = block(x, *model.block_args(i), trace)
                layer_input = trace["input"].tensor
                weights = trace.of_kind("weights")[-1].tensor  # (b, num_heads, T, T)
                for k, (n, f) in enumerate(zip(lengths, on_layer)):
                    if f is not None:
                        f(i, weights[k] if one else weights[k, :, :n, :n])
                del trace, weights
            for k in range(len(lengths)):
                inputs[k].append(cut(layer_input, k))
            if progress is not None:
                progress(i)
        final = model.final_norm(x)
        last, nats = read_out(model, final, idx, lengths, losses)
    return [Walk(inputs[k], last[k], cut(final, k), nats[k]) for k in range(len(lengths))]


def read_out(model: TracedLM, final: torch.Tensor, idx: torch.Tensor, lengths: list[int],
             losses: bool) -> tuple[list[torch.Tensor], list[torch.Tensor | None]]:
    """Each sequence's last logits (vocab_size,) and, with ``losses``, its per-token cross-entropy (n - 1,) from
    the final-normed ``final`` (b, T, emb_dim): ``out_head`` over the whole batch's rows, LOSS_ROWS at a time, so
    its weights are read once a chunk rather than once a sequence, and no (T, vocab_size) logits are held."""
    if not losses:
        last = model.out_head(final[torch.arange(len(lengths)), torch.tensor(lengths) - 1])  # (b, vocab_size)
        return [row.clone() for row in last], [None] * len(lengths)
    ends = torch.tensor(lengths).cumsum(0) - 1  # each sequence's last row among the batch's rows
    rows = torch.cat([final[k, :n] for k, n in enumerate(lengths)])  # (sum of lengths, emb_dim)
    # each row's next token; none after a sequence's last
    targets = torch.cat([torch.cat([idx[k, 1:n], idx.new_full((1,), NO_TARGET)]) for k, n in enumerate(lengths)])
    nats = torch.empty(len(rows))
    last = [torch.empty(0)] * len(lengths)
    for i in range(0, len(rows), LOSS_ROWS):
        logits = model.out_head(rows[i:i + LOSS_ROWS]).float()
        nats[i:i + LOSS_ROWS] = F.cross_entropy(logits, targets[i:i + LOSS_ROWS], reduction="none",
                                                ignore_index=NO_TARGET)
        for k in torch.nonzero((ends >= i) & (ends < i + LOSS_ROWS)).flatten().tolist():
            last[k] = logits[int(ends[k]) - i].clone()
    return last, [nats[int(e) + 1 - n:int(e)].clone() for e, n in zip(ends, lengths)]


def trace_layer(model: TracedLM, idx: torch.Tensor, layer: int, cache: KVCache | None = None) -> Trace:
    """Layer ``layer``'s attention steps on token ids ``idx`` (placed after the ``cache``'s tokens, which grows in
    the layers run), as :func:`layer_trace` cuts them: only blocks 0..layer run, so showing an early layer costs
    that share of a forward pass. Reads the model only: a shared model serves every session at once."""
    start = 0 if cache is None else cache.length
    model.check_ids(idx, start)
    trace = Trace(copy=False)
    model.traced_layers(trace, {layer})  # a Problem for a layer the model does not have
    with torch.no_grad():
        x = model.embed(idx, start)
        run_blocks(model, x, cache=cache, trace=trace, traced={layer}, stop=layer)
    return layer_trace(trace, layer)
