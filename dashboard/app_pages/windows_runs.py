"""The Windows page's runs of a model under other masks: each is kept on disk (:mod:`dashboard.state.kept`), and the
runs a section needs start side by side on the cores."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import streamlit as st
import torch

from attn_core.labs.scores import first_token_score
from attn_core.labs.windows import masked_like, own_mix_losses, token_losses
from attn_core.models.gpt import GPT_CONFIG_124M, GPTModel
from attn_core.models.traced import walk_layers
from attn_core.tracing.trace import Trace
from dashboard.state import kept, models

RANDOM = "random-small"  # a small GPTModel with random weights: nothing learned, no sink
RANDOM_CFG = GPT_CONFIG_124M | {"emb_dim": 192, "n_heads": 6, "n_layers": 6, "drop_rate": 0.0}
OWN = "own"  # a run with the model's own masks (a Gemma 3's local layers at their window), not one window for all


@st.cache_resource(show_spinner=False)
def random_model() -> GPTModel:
    torch.manual_seed(0)
    return GPTModel(RANDOM_CFG).eval()


def run_model(name: str) -> torch.nn.Module:
    """The shared model, or the small random one."""
    return random_model() if name == RANDOM else models.model(name)


def run_key(name: str, ids: tuple[int, ...], window: int | str | None, sinks: int, method: str) -> tuple:
    """What a run's losses depend on (``window`` OWN: the model's own masks)."""
    source = ("random", repr(RANDOM_CFG)) if name == RANDOM else models.source_key(name)
    return ("window-losses", source, ids, window, sinks, method)


def compute(name: str, ids: tuple[int, ...], window: int | str | None, sinks: int,
            method: str) -> Callable[[], np.ndarray]:
    """The run itself, for :mod:`dashboard.state.kept`."""
    if window == OWN:
        return lambda: own_mix_losses(run_model(name), torch.tensor([ids])).numpy()
    return lambda: token_losses(run_model(name), torch.tensor([ids]), window, sinks, method).numpy()


def prepare(name: str, ids: tuple[int, ...], runs: list[tuple[int | str | None, int]]) -> None:
    """The page's runs (−∞ masking) that are not kept yet, computed side by side on the cores."""
    try:
        kept.kept_all({run_key(name, ids, w, k, "neg_inf"): compute(name, ids, w, k, "neg_inf") for w, k in runs})
    except ValueError:
        return  # settings a run refuses: the run says so where its numbers are drawn


@st.cache_data(show_spinner=False, max_entries=48)
def losses(name: str, ids: tuple[int, ...], window: int | None, sinks: int, method: str) -> np.ndarray:
    """Each next-token loss with one ``window`` (None: full) and ``sinks`` for every layer."""
    return kept.kept(run_key(name, ids, window, sinks, method), compute(name, ids, window, sinks, method))


@st.cache_data(show_spinner=False, max_entries=16)
def own_losses(name: str, ids: tuple[int, ...]) -> np.ndarray:
    """Each next-token loss with the model's own masks."""
    return kept.kept(run_key(name, ids, OWN, 0, "neg_inf"), compute(name, ids, OWN, 0, "neg_inf"))


@st.cache_data(show_spinner=False, max_entries=8)
def first_token_shares(name: str, ids: tuple[int, ...]) -> np.ndarray:
    """(layers, heads): each head's mean weight on token 1 (queries 2..T)."""
    if name != RANDOM:
        return models.model_view(models.handle(name), ids).scores["first_token"]
    shares = []
    walk_layers(run_model(name), torch.tensor([ids]), on_layer=lambda i, w: shares.append(first_token_score(w.numpy())))
    return np.stack(shares)


@st.cache_data(show_spinner=False, max_entries=8)
def methods_differ(name: str, ids: tuple[int, ...], window: int, sinks: int) -> tuple[float, float, float]:
    """(perplexity −∞, perplexity renormalize, largest |weight difference| in layer 1) on the window + sinks mask."""
    weights = []
    for method in ("neg_inf", "renormalize"):
        view = masked_like(run_model(name), len(ids), window, sinks, method)
        trace = Trace(copy=False)
        with torch.no_grad():  # not inference_mode: a trace that shares tensors checks their version counters
            view(torch.tensor([ids]), trace, trace_layers=[0])
        weights.append(trace.of_kind("weights")[-1].tensor)
    neg_inf = float(np.exp(losses(name, ids, window, sinks, "neg_inf").mean()))
    renorm = float(np.exp(losses(name, ids, window, sinks, "renormalize").mean()))
    return neg_inf, renorm, float((weights[0] - weights[1]).abs().max())
