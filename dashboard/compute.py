"""Cached calls into attn_core, keyed by plain values (text, sizes, seed, method, device).

Results are cached with ``st.cache_resource``: a traced run at 1024 tokens holds hundreds of
MB of tensors, which ``st.cache_data`` would pickle and copy on every hit. Pages only read
them (never mutate a Trace or flip a module's mode).
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st
import torch

from attn_core import AttentionConfig, Token, Trace, embed, run_attention, tokenize


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

    @property
    def labels(self) -> list[str]:
        return [t.label for t in self.tokens]

    @property
    def key(self) -> tuple:
        """What this run is a function of: a cache key for anything drawn from it."""
        return (self.text, self.input_mode, self.cfg)


@st.cache_resource(max_entries=32, show_spinner=False)
def cached_tokens(text: str) -> list[Token]:
    return tokenize(text)


EMBEDDING_SEED = 123  # the input vectors stay put while the seed knob re-draws the attention weights


@st.cache_resource(max_entries=6, show_spinner=False)  # a T=1024 GPT-2-size trace is ~300 MB
def traced_run(text: str, input_mode: str, cfg: AttentionConfig) -> Run:
    """Tokenize, embed and run ``cfg`` on ``text``; raises ValueError for bad combinations.

    The embeddings use a fixed seed, so turning the seed knob changes only the module's weights
    and dropout masks (and costs no new 50257 x d_in embedding table)."""
    tokens = cached_tokens(text)
    x = embed([t.id for t in tokens], cfg.d_in, input_mode, seed=EMBEDDING_SEED)
    output, trace = run_attention(cfg, x)
    return Run(text, input_mode, cfg, tokens, x, output, trace)


def clear_caches() -> None:
    cached_tokens.clear()
    traced_run.clear()
