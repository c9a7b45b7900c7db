"""One generation step with the KV cache, measured and traced: what the Generate page shows.

:func:`decode_step` appends one token: the new token alone runs through the model with the cache (timed, the
efficient path), its attention row is read from a traced run on a copy of the cache (the copy shares the cached
tensors: appending makes new ones), and, to compare, the whole text runs again without a cache (timed), with the
full T x T weights of one layer. Both traced runs stop after the layer shown (``gpt.trace_layer``). Plain values
in, plain arrays out: the page caches nothing of the model.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from attn_core.attention.kv_cache import KVCache, LayerCache
from attn_core.messages import Problem
from attn_core.models.gpt import check_generation, next_token
from attn_core.models.traced import TracedLM, trace_layer
from attn_core.text.tokens import CONTEXT_PIECES, open_character
from attn_core.tracing.views import all_heads, head_matrix

TOP = 10  # next-token candidates shown
PAGE_NEW_TOKENS = 100  # what one generation on the Generate page may add (a classroom server holds every cache)
CLOSE_STEPS = 3  # a UTF-8 character has at most 4 bytes: at most 3 more tokens close one a token opened

@dataclass(frozen=True)
class DecodeStep:
    """One new token and everything about how it was made."""

    token_id: int  # the token chosen
    position: int  # its position (0-based) in the text
    layer: int  # the layer ``row`` and ``full_weights`` come from
    top_ids: list[int]  # the TOP most likely next tokens, most likely first
    top_probs: list[float]  # their probabilities (softmax of the last logits, before temperature / top-k)
    row: np.ndarray  # (num_heads, num_keys): the chosen layer's new query row over every cached key, per head
    mask_row: np.ndarray  # (num_keys,): the mask slice the new query used (True = hidden)
    mask_slice: str  # the slice, as code: self.mask.bool()[p:p+1, :k]
    cache_shapes: list[tuple[int, ...]]  # each layer's keys after the step: (b, num_heads, num_keys, head_dim)
    cache_bytes: int  # the cache's tensors' bytes after the step (keys and values, every layer)
    seconds_cached: float  # the new token alone, through the cache
    seconds_full: float | None  # the whole text again without a cache (None when not compared)
    full_weights: np.ndarray | None  # (num_keys, num_keys): the chosen layer's ``head`` without a cache
    closing: dict[int, tuple[int, ...]] = field(default_factory=dict)  # top id -> tokens closing its character


def text_start(tokenizer, ids: list[int]) -> int:
    """Where the text a person reads starts in ``ids``: after the BOS the tokenizer puts first (Gemma's ``<bos>``,
    a token for the model, not text), else 0."""
    bos = getattr(tokenizer, "bos_id", None) if getattr(tokenizer, "add_bos", False) else None
    return 1 if bos is not None and ids[:1] == [bos] else 0


def closing_tokens(model: TracedLM, ids: list[int], cache: KVCache,
                   candidates: list[int]) -> dict[int, tuple[int, ...]]:
    """For each candidate next token that ends inside a character (a byte token of a Chinese character or an emoji):
    its likeliest continuation (greedy, on a fork of ``cache``, which holds ``ids``: unchanged) up to the token that
    closes the character, so the candidate can be shown as the character it starts ("你(1/2)"). A candidate whose
    continuation does not close it within ``CLOSE_STEPS`` tokens is left out."""
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is None:  # a model built without one (the book's GPTModel in a test): nothing to name
        return {}
    try:
        before = [tokenizer.token_bytes(t) for t in ids[-CONTEXT_PIECES:]]
        opened = [t for t in candidates if open_character(before, tokenizer.token_bytes(t)) is not None]
    except (KeyError, ValueError):  # an id outside the tokenizer's vocabulary (a random model's larger one)
        return {}
    if not opened:
        return {}
    grown = KVCache(0)  # every candidate a row of one batch: one step costs about what one row's does
    grown.layers = [LayerCache(*(None if t is None else t.expand(len(opened), *t.shape[1:])
                                 for t in (layer.keys, layer.values)), layer.dropped) for layer in cache.layers]
    rows = [[*before, tokenizer.token_bytes(t)] for t in opened]
    following: list[list[int]] = [[] for _unused in opened]
    out: dict[int, tuple[int, ...]] = {}
    tokens = torch.tensor([[t] for t in opened])
    with torch.no_grad():
        for _unused in range(CLOSE_STEPS):
            tokens = model(tokens, cache=grown)[:, -1, :].argmax(dim=-1, keepdim=True)  # (n, 1)
            for row, (cand, token) in enumerate(zip(opened, tokens[:, 0].tolist())):
                if cand in out:  # closed at an earlier step
                    continue
                following[row].append(token)
                rows[row].append(tokenizer.token_bytes(token))
                if open_character(rows[row][:-1], rows[row][-1]) is None:
                    out[cand] = tuple(following[row])
            if len(out) == len(opened):
                break
    return out


def fork(cache: KVCache) -> KVCache:
    """A copy of ``cache`` that can grow without changing it (the tensors are shared until a step appends)."""
    copy = KVCache(0)
    copy.layers = [LayerCache(layer.keys, layer.values, layer.dropped) for layer in cache.layers]
    return copy


def prefix(cache: KVCache, length: int) -> KVCache:
    """The first ``length`` positions of ``cache``, as views of its tensors (nothing is copied; it can grow
    without changing ``cache``). Positions are the second-to-last axis of keys, values and latents alike; a
    sliding-window layer holds only its last positions (``dropped`` before them)."""
    def first(t: torch.Tensor | None, dropped: int) -> torch.Tensor | None:
        return None if t is None else t.narrow(-2, 0, length - dropped)

    copy = KVCache(0)
    copy.layers = [LayerCache(first(layer.keys, layer.dropped), first(layer.values, layer.dropped), layer.dropped)
                   for layer in cache.layers]
    return copy


def prefill(model: TracedLM, ids: list[int], cache: KVCache) -> torch.Tensor:
    """Run the prompt through the model into an empty ``cache``; return the last position's logits (1, vocab)."""
    with torch.no_grad():
        return model(torch.tensor([ids]), cache=cache)[:, -1, :]


def decode_step(model: TracedLM, ids: list[int], cache: KVCache, logits: torch.Tensor, *, layer: int = 0, head: int = 0,
                temperature: float = 0.0, top_k: int | None = None, generator: torch.Generator | None = None,
                compare: bool = True) -> tuple[DecodeStep, torch.Tensor]:
    """Choose the next token from ``logits`` (the last position's, (1, vocab)), run it through the model with the
    ``cache`` (which grows by one), and return the step and the new last logits. ``ids`` is the text so far (its
    length is the cache's); ``compare`` also runs the whole text again without a cache (``head``'s full matrix)."""
    if cache.length != len(ids):
        raise Problem("the cache holds {length} positions but the text has {n_ids} tokens", length=cache.length,
                      n_ids=len(ids))
    if len(ids) + 1 > model.cfg["context_length"]:
        raise Problem("the text has reached this model's context_length ({context_length} tokens): a next token "
                      "would need a position it has not learned. Press Reset, or shorten the prompt",
                      context_length=model.cfg['context_length'])
    check_generation(torch.tensor([ids]), 1, temperature, top_k, model.cfg["vocab_size"])
    probas = torch.softmax(logits, dim=-1)[0]
    top = torch.topk(probas, min(TOP, probas.numel()))
    token_id = int(next_token(logits, temperature, top_k, generator))
    closing = closing_tokens(model, ids, cache, [int(i) for i in top.indices])
    with torch.no_grad():
        start = time.perf_counter()
        next_logits = model(torch.tensor([[token_id]]), cache=cache)[:, -1, :]  # the step: the new token alone
        seconds_cached = time.perf_counter() - start
    seconds_full = None
    if compare:
        with torch.no_grad():
            start = time.perf_counter()
            model(torch.tensor([ids + [token_id]]))  # the same step without a cache: every position again
            seconds_full = time.perf_counter() - start
    step = DecodeStep(
        token_id=token_id, position=len(ids), layer=layer, top_ids=[int(i) for i in top.indices],
        top_probs=[float(p) for p in top.values], row=np.empty(0), mask_row=np.empty(0), mask_slice="",
        cache_shapes=cache.shapes(), cache_bytes=cache.nbytes, seconds_cached=seconds_cached,
        seconds_full=seconds_full, full_weights=None, closing=closing)
    return show_layer(step, model, ids + [token_id], cache, layer, head), next_logits


def show_layer(step: DecodeStep, model: TracedLM, ids: list[int], cache: KVCache, layer: int,
               head: int = 0) -> DecodeStep:
    """``step`` seen at ``layer``: the new query's row, from a traced run of the last token of ``ids`` over the
    cache of the ones before it (``cache`` holds all of ``ids``: views of it, nothing copied), and, if the step
    was compared, ``head``'s full matrix from a traced run of all of ``ids`` without a cache."""
    num_keys = len(ids)
    one = trace_layer(model, torch.tensor([ids[-1:]]), layer, cache=prefix(cache, num_keys - 1))
    full = None
    if step.seconds_full is not None:
        full = head_matrix(trace_layer(model, torch.tensor([ids]), layer), "weights", head).copy()  # kept per session
    return replace(step, layer=layer, row=all_heads(one, "weights")[:, 0, :],
                   mask_row=one["mask_bool"].tensor[0].numpy().copy(),
                   mask_slice=_mask_code(one["mask_bool"].code, num_keys), full_weights=full)


def _mask_code(code: str, num_keys: int) -> str:
    """The mask line that ran, with this step's numbers: a slice of the module's buffer (GPT), or a mask built for
    the one new query over every cached key (the Llama family builds it per call)."""
    if "self.mask" in code:
        return f"self.mask.bool()[{num_keys - 1}:{num_keys}, :{num_keys}]"
    return f"causal_mask(1, {num_keys})"
