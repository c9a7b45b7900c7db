"""What a model family is: how its weights are found, loaded, tokenized, described and traced.

A family is one module ``attn_core/models/family_<name>.py`` holding ``FAMILY``, an instance of a
:class:`Family` subclass; :mod:`attn_core.models.registry` finds those modules itself, so adding a family edits
nothing else (a test registers its own with :func:`~attn_core.models.registry.register_family`).

Every family's model is a :class:`~attn_core.models.traced.TracedLM` (the book's ``GPTModel`` is one): ``cfg``,
``tokenizer`` (:class:`Tokenizer`), ``trf_blocks``, ``final_norm``, ``out_head`` and the two things a family says
itself, ``embed(in_idx, start)`` and ``block_args(layer)``. :func:`attn_core.models.traced.walk_layers` and
:func:`attn_core.models.traced.trace_layer` then walk any of them block by block, and :class:`ModelConfig` tells
the pages its facts (heads, K/V heads, biases, positions, per-layer windows and RoPE bases, norm).
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import torch.nn as nn

from attn_core.messages import Msg

POSITIONS = ("learned", "rope")


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """A loaded model's facts, as the pages read them: they never ask a family's name or an attention class's
    name, only these fields (built by keyword: a dozen positional facts are easy to swap)."""

    label: str | Msg  # "GPT-2 small", "SmolLM2-135M (Llama family)" (a Msg: translated where shown)
    n_layers: int
    n_heads: int  # query heads
    n_kv_heads: int  # key/value heads (= n_heads: multi-head attention; fewer: grouped-query attention)
    head_dim: int
    emb_dim: int
    context_length: int
    vocab_size: int
    positions: str  # "learned" (position embeddings added to the tokens) | "rope" (rotated queries and keys)
    norm: str  # "LayerNorm" | "RMSNorm": what each block's attention input went through
    qkv_bias: bool  # whether W_query, W_key, W_value have biases
    attention: str  # the attention variant each layer runs: the variant registry's id
    windows: tuple[int | None, ...] = ()  # per layer: its sliding window in keys, None = full causal; () = all full
    rope_bases: tuple[float, ...] = ()  # per layer: its RoPE base (theta); () without RoPE
    family_title: str = ""  # the family as a sentence names it: "SmolLM2", "GPT-2", "the book's GPTModel"

    @property
    def grouped(self) -> bool:
        """Whether query heads share K/V heads (grouped-query attention)."""
        return self.n_kv_heads < self.n_heads

    @property
    def rope(self) -> bool:
        """Whether positions are rotated into queries and keys (no position embeddings)."""
        return self.positions == "rope"

    def window(self, layer: int) -> int | None:
        """Layer ``layer``'s sliding window (keys a query sees), None for full causal attention."""
        return self.windows[layer] if self.windows else None

    @property
    def sliding_layers(self) -> tuple[int, ...]:
        """The layers that attend over a sliding window (none: full attention everywhere)."""
        return tuple(i for i, w in enumerate(self.windows) if w is not None)


@dataclass(frozen=True)
class Found:
    """One model a family found on this machine."""

    name: str  # what links and the app call it (``?model=<name>``)
    path: Path | None  # its file or folder (None: nothing on disk, e.g. random weights built here)
    label: str | Msg  # how the sidebar names it (a Msg: translated where shown)
    family: str  # its family's name
    title: str | Msg = ""  # how a longer list (Generate's) names it, with where it comes from; "" = label

    @property
    def long_label(self) -> str | Msg:
        return self.title or self.label


class Tokenizer(Protocol):
    """A model's tokenizer: text to ids and back, and each token's bytes and positions."""

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: list[int]) -> str: ...

    def token_bytes(self, token_id: int) -> bytes: ...

    def tokens(self, text: str, max_tokens: int | None = None) -> list: ...  # attn_core.text.tokens.Token


class Family:
    """A model family. Subclasses set the class attributes and implement the methods that raise."""

    name: str = ""  # unique: the registry's key, and each Found's family
    order: int = 100  # families are listed (and their models offered) by this, smallest first
    pretrained: bool = True  # real weights: offered in the sidebar's Weights choice (False: Generate only)
    default: bool = False  # pages that need real weights start with this family's first model
    title: str = ""  # what a missing-weights message names: "GPT-2", "SmolLM2"
    positions: str = "learned"  # its models' ModelConfig.positions, known before one is loaded
    reads_cjk: bool = False  # its tokens are CJK words: pages start on it for Chinese, Japanese or Korean text

    def find(self) -> list[Found]:
        """The models of this family on this machine (cheap: no weights read)."""
        raise NotImplementedError

    def found_at(self, path: Path) -> Found | None:
        """``path`` as one of this family's models, or None when it is not this family's kind of file."""
        return None

    def load(self, found: Found) -> nn.Module:
        """The shared, read-only traced model of ``found`` (loaded once per process, thread-safe, bounded);
        ``ValueError`` saying what is wrong with the files."""
        raise NotImplementedError

    def config(self, model: nn.Module) -> ModelConfig:
        """The loaded model's facts (:class:`ModelConfig`): what pages read instead of its family's name."""
        raise NotImplementedError

    def layer_attention(self, model: nn.Module, layer: int, **knobs: object) -> nn.Module:
        """Layer ``layer``'s attention as one module, ``forward(x, trace=None)``, sharing the model's weights;
        ``knobs`` (``mask_method``, ``dropout``, ``train``): the chapter's, on a copy that shares the weights."""
        raise NotImplementedError

    def how_to_get(self) -> Msg:
        """One sentence: this family's weights are missing, and the install step that brings them."""
        return Msg("{family} is not on this machine.", family=self.title or self.name)

    def notice(self, found: Found) -> Msg | None:
        """One line a page shows under the model: the weights' licence, when it asks for one."""
        return None

    def stamp(self, found: Found) -> tuple:
        """What changes when the files are replaced (the app's caches key on it)."""
        return files_stamp(found.path)


@functools.lru_cache(maxsize=256)
def resolved(path: str) -> Path:
    """``path`` with ``~`` expanded and its links followed, worked out once per process: a page asks for its model
    many times a run, and each ``Path.resolve`` looked at every folder on the way."""
    return Path(path).expanduser().resolve()


def file_stamp(path: Path | None) -> tuple:
    """What changes when a file is replaced: size and modification time (None: no file)."""
    if path is None:
        return ()
    st = path.stat()
    return (st.st_size, st.st_mtime_ns)


def files_stamp(path: Path | None) -> tuple:
    """:func:`file_stamp` of a file, or of every file directly in a folder (by name)."""
    if path is None or not path.exists():
        return ()
    if path.is_file():
        return file_stamp(path)
    return tuple((p.name, *file_stamp(p)) for p in sorted(path.iterdir()) if p.is_file())


class Shared:
    """Models kept once per process, at most ``size``, least recently used dropped first: every caller gets the
    same model for the same key and stamp (a replaced file is loaded again). Loads run one at a time (a server's
    memory holds one file being read, not several) and callers asking for the same model at once share one load;
    a model already loaded is returned without waiting for a load."""

    def __len__(self) -> int:
        return len(self._models)

    def __init__(self, size: int):
        self.size = size
        self._models: OrderedDict[object, tuple[tuple, nn.Module]] = OrderedDict()
        self._lock = threading.Lock()  # guards _models, held for dictionary operations only
        self._load_lock = threading.Lock()

    def _hit(self, key: object, stamp: tuple) -> nn.Module | None:
        with self._lock:
            hit = self._models.get(key)
            if hit is None or hit[0] != stamp:
                return None
            self._models.move_to_end(key)
            return hit[1]

    def get(self, key: object, stamp: tuple, build: Callable[[], nn.Module]) -> nn.Module:
        if (model := self._hit(key, stamp)) is not None:
            return model
        with self._load_lock:
            if (model := self._hit(key, stamp)) is not None:  # loaded while this call waited
                return model
            with self._lock:
                self._models.pop(key, None)  # a replaced file: let the old model go before loading the new one
            model = build()
            with self._lock:
                self._models[key] = (stamp, model)
                while len(self._models) > self.size:
                    self._models.popitem(last=False)
            return model

    def clear(self) -> None:
        """Forget every model (tests; the models go once nobody holds them)."""
        with self._lock:
            self._models.clear()
