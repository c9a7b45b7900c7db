"""Cached calls into attn_core, keyed by plain values (text, sizes, seed, method, device).

Runs are kept in a :class:`~dashboard.state.cache.ByteLRU` bounded by the bytes their traces hold
(``RUN_CACHE_BYTES``): a traced run at 1024 tokens and GPT-2 size holds ~300 MB of tensors, so a
count bound is no bound. Pages only read runs (never mutate a Trace or flip a module's mode).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import streamlit as st
import torch

from attn_core import MAX_POSITIONS, AttentionConfig, Token, Trace, build_module, embed, run_attention, tokenize
from dashboard.state.cache import ByteLRU


@dataclass(frozen=True)
class Run:
    """One traced attention run, ready to draw."""

    text: str
    input_mode: str
    cfg: AttentionConfig
    tokens: list[Token]
    x: torch.Tensor  # (1, num_tokens, d_in), CPU
    output: torch.Tensor  # (1, num_tokens, output width), CPU
    trace: Trace
    weights: str = "random"  # the chapter's random weights, or a pretrained model's name (dashboard/state/models.py)
    layer: int = 0  # which of that model's layers (0-based)

    @property
    def labels(self) -> list[str]:
        return [t.label for t in self.tokens]

    @property
    def pretrained(self) -> bool:
        return self.weights != "random"

    @property
    def key(self) -> tuple:
        """What this run is a function of: a cache key for anything drawn from it."""
        if self.pretrained:
            return (self.text, self.input_mode, self.cfg, self.weights, self.layer)
        return (self.text, self.input_mode, self.cfg)


def run_nbytes(run: Run) -> int:
    """The bytes a run's tensors hold (views of one storage counted once)."""
    seen: dict[int, int] = {}
    for t in (run.x, run.output, *(step.tensor for step in run.trace)):
        storage = t.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()
    return sum(seen.values()) + 4096 * len(run.tokens)


@st.cache_resource(max_entries=32, show_spinner=False)
def cached_tokens(text: str) -> list[Token]:
    """The text's tokens; texts over MAX_POSITIONS tokens or MAX_TEXT_CHARS characters raise ValueError
    (and are not cached), so every entry is small."""
    return tokenize(text, max_tokens=MAX_POSITIONS)


def tune_torch() -> None:
    """One intra-op thread per run. The server runs each session's script on its own thread, so torch's
    pool of one thread per core only oversubscribes the cores: on a busy 2-core machine a 32-token
    MultiHeadAttention run took 68 ms in its four Linear layers with 2 threads, and GPT-2 size at
    T=1024 took 1.23 s with 2 threads vs 0.86 s with 1 (measured; docs/measurements.md)."""
    import torch

    torch.set_num_threads(1)


EMBEDDING_SEED = 123  # the input vectors stay put while the seed knob re-draws the attention weights
# Two GPT-2-size traces at T = 1,024 (four (12, T, T) float32 tensors each), 25 long (~1,000-token)
# runs of the default settings, or hundreds of short ones; room for a third let a class's load pass its memory goal
# (docs/measurements.md).
RUN_CACHE_BYTES = 512 * 2**20
CACHE_IDLE_S = 120  # a run nobody has looked at for this long is let go: a quiet server gives memory back
_RUNS: ByteLRU[Run] = ByteLRU(RUN_CACHE_BYTES, run_nbytes, idle_s=CACHE_IDLE_S)
# A new sentence keeps the settings, so its module is the last one's: building it (seeding, drawing the
# weights, the context_length² mask buffer) was most of a short run's time. A few GPT-2-size modules (weights and
# their 1024² mask) fit (docs/measurements.md).
MODULE_CACHE_BYTES = 64 * 2**20


def module_nbytes(module: torch.nn.Module | None) -> int:
    """The bytes a module's parameters and buffers hold."""
    if module is None:
        return 64
    return sum(t.numel() * t.element_size() for t in (*module.parameters(), *module.buffers())) + 4096


_MODULES: ByteLRU[torch.nn.Module | None] = ByteLRU(MODULE_CACHE_BYTES, module_nbytes, idle_s=CACHE_IDLE_S)


def traced_run(text: str, input_mode: str, cfg: AttentionConfig) -> Run:
    """Tokenize, embed and run ``cfg`` on ``text``; raises ValueError for bad combinations.

    The embeddings use a fixed seed, so turning the seed knob changes only the module's weights
    and dropout masks (and costs no new 50257 x d_in embedding table)."""
    def build() -> Run:
        tokens = cached_tokens(text)
        x = embed([t.id for t in tokens], cfg.d_in, input_mode, seed=EMBEDDING_SEED)
        output, trace = run_attention(cfg, x, _MODULES.get(cfg, lambda: build_module(cfg)))
        return Run(text, input_mode, cfg, tokens, x, output, trace)

    return _RUNS.get((text, input_mode, cfg), build)


RUN_CACHE_FLOOR = 128 * 2**20  # what the run cache keeps however much the pretrained models hold


def reserve(nbytes: int) -> None:
    """``nbytes`` are held for the server's life elsewhere (pretrained weights: GPT-2 small's are ~475 MB): the run
    cache gives them up, so the server's memory stays within what a classroom machine was measured with."""
    _RUNS.resize(max(RUN_CACHE_FLOOR, RUN_CACHE_BYTES - nbytes))


def remember_run(key: tuple, build: Callable[[], Run]) -> Run:
    """A run built elsewhere (a pretrained model's layer, dashboard/state/models.py), kept in the same bounded cache."""
    return _RUNS.get(key, build)


def clear_caches() -> None:
    cached_tokens.clear()
    _RUNS.clear()
    _MODULES.clear()
