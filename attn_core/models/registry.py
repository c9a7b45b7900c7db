"""The model-family registry: the only way the app and the benchmarks list (:func:`find_models`) and load
(:func:`load_model`) models.

The built-in families are the modules ``attn_core/models/family_*.py`` (each holds ``FAMILY``), imported on first
use; :func:`register_family` adds another (a test's toy family), :func:`unregister_family` removes it. A family
whose weights are missing lists nothing and says how to get them (:func:`missing`): it never stops the others.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import threading
from pathlib import Path

import torch.nn as nn

from attn_core.messages import Problem
from attn_core.models.family import Family, Found, ModelConfig

_FAMILIES: dict[str, Family] = {}
_LOCK = threading.Lock()
_BUILTIN_LOADED = False


def _builtin() -> None:
    """Import the ``family_*`` modules once and register their ``FAMILY``."""
    global _BUILTIN_LOADED
    if _BUILTIN_LOADED:
        return
    import attn_core.models as package

    with _LOCK:
        if _BUILTIN_LOADED:
            return
        for info in pkgutil.iter_modules(package.__path__):
            if info.name.startswith("family_"):
                family = importlib.import_module(f"{package.__name__}.{info.name}").FAMILY
                _FAMILIES.setdefault(family.name, family)
        _BUILTIN_LOADED = True


def register_family(family: Family) -> None:
    """Add a family (``ValueError`` when another of that name is registered)."""
    _builtin()
    with _LOCK:
        if family.name in _FAMILIES and _FAMILIES[family.name] is not family:
            raise Problem("a model family named {name} is already registered", name=repr(family.name))
        _FAMILIES[family.name] = family


def unregister_family(name: str) -> None:
    """Remove a family (tests)."""
    with _LOCK:
        _FAMILIES.pop(name, None)


def families() -> list[Family]:
    """Every registered family, in their ``order``."""
    _builtin()
    with _LOCK:
        return sorted(_FAMILIES.values(), key=lambda f: f.order)


def family(name: str) -> Family:
    """The family called ``name`` (``ValueError`` naming the known ones)."""
    for fam in families():
        if fam.name == name:
            return fam
    raise Problem("no model family {name}: the families are {families}", name=repr(name),
                  families=', '.join(f.name for f in families()))


def find_models() -> list[Found]:
    """The models on this machine, family by family; a family that fails to look lists nothing."""
    found: list[Found] = []
    for fam in families():
        try:
            found += fam.find()
        except (OSError, ValueError):
            continue
    return found


def missing(found: list[Found] | None = None) -> list[Family]:
    """The families of real weights none of which is on this machine, or in ``found`` (each says ``how_to_get()``)."""
    have = {f.family for f in (find_models() if found is None else found)}
    return [fam for fam in families() if fam.pretrained and fam.name not in have]


def default_model(found: list[Found] | None = None, cjk: bool = False) -> Found | None:
    """The model pages that need real weights start with: for a Chinese, Japanese or Korean text (``cjk``) the first
    of a family whose tokens are CJK words (Gemma 3), else, or without one, the first of a ``default`` family
    (SmolLM2); None when there is neither."""
    found = find_models() if found is None else found
    if cjk:
        readers = {fam.name for fam in families() if fam.reads_cjk}
        hit = next((f for f in found if f.family in readers), None)
        if hit is not None:
            return hit
    defaults = {fam.name for fam in families() if fam.default}
    return next((f for f in found if f.family in defaults), None)


def resolve(name_or_path: str | os.PathLike | Found, found: list[Found] | None = None) -> Found:
    """A found model's name, or a file or folder one family recognizes, as a :class:`Found` (``ValueError``)."""
    if isinstance(name_or_path, Found):
        return name_or_path
    text = os.fspath(name_or_path)
    for f in find_models() if found is None else found:
        if f.name == text:
            return f
    path = Path(text).expanduser()
    if path.exists():
        for fam in families():
            hit = fam.found_at(path)
            if hit is not None:
                return hit
        raise Problem("{path} is not a model file or folder any family reads ({families})", path=path,
                      families=', '.join(f.title or f.name for f in families()))
    raise Problem("the model “{text}” is not on this machine: pick another, or name its file or folder", text=text)


def load_model(name_or_path: str | os.PathLike | Found) -> nn.Module:
    """The shared, read-only traced model of a found model's name (``"SmolLM2-135M-Instruct"``, a GPT-2 size, ...) or
    of a file or folder: ``model.cfg``, ``model.tokenizer`` and ``model.family`` set. ``ValueError`` saying what
    is wrong (never network)."""
    found = resolve(name_or_path)
    fam = family(found.family)
    model = fam.load(found)
    if getattr(model, "family", None) != fam.name:
        model.family = fam.name
    return model


def family_of(model: nn.Module) -> Family:
    """The family a model from :func:`load_model` belongs to."""
    return family(getattr(model, "family", ""))


def model_config(model: nn.Module) -> ModelConfig:
    """A loaded model's sizes (:class:`ModelConfig`)."""
    return family_of(model).config(model)


def layer_attention(model: nn.Module, layer: int, **knobs: object) -> nn.Module:
    """Layer ``layer``'s attention as one module ``forward(x, trace=None)`` (see :meth:`Family.layer_attention`)."""
    n = model.cfg["n_layers"]
    if not 0 <= layer < n:
        raise Problem("the model has layers 0..{last}; got {layer}", last=n - 1, layer=layer)
    return family_of(model).layer_attention(model, layer, **knobs)
