"""Results of long runs kept on disk, so a restarted server has them at once.

A real model's per-token losses on a long text take most of a minute on two cores (the Windows page runs one four
times); a teacher opens the same sample text with the same settings before class and again in it. Each result is
one small ``.npy`` file named by a digest of what it depends on: the ``attn_core`` source (any change to the code
makes new names), the model's files as they are now, and the run's own inputs. The folder holds at most
``MAX_FILES`` results; the oldest go first.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path

import numpy as np

ROOT_ENV = "ATTENTION_LAB_RESULTS"  # where results are kept (default ~/.cache/attention-lab/results)
MAX_FILES = 512  # a result is one float a token: the folder stays small


@lru_cache(maxsize=1)
def code_version() -> str:
    """A digest of every ``attn_core`` source file: what a kept result was computed by."""
    import attn_core

    root = Path(attn_core.__file__).parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def results_dir() -> Path:
    """The folder of kept results (``ATTENTION_LAB_RESULTS`` or ``~/.cache/attention-lab/results``)."""
    root = os.environ.get(ROOT_ENV)
    return Path(root).expanduser() if root else Path.home() / ".cache" / "attention-lab" / "results"


def _path(key: Hashable) -> Path:
    name = hashlib.sha256(repr((code_version(), key)).encode()).hexdigest()[:32]
    return results_dir() / f"{name}.npy"


def load(key: Hashable) -> np.ndarray | None:
    """The result kept for ``key`` (a tuple of plain values), or None (none kept, or a damaged file)."""
    try:
        return np.load(_path(key), allow_pickle=False)
    except (OSError, ValueError):
        return None


def save(key: Hashable, value: np.ndarray) -> None:
    """Keep ``value`` for ``key``; a folder that cannot be written only means it is computed again next time."""
    path = _path(key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".tmp", delete=False) as f:
            np.save(f, np.asarray(value), allow_pickle=False)
        os.replace(f.name, path)  # whole or not at all: another server may read it meanwhile
        _prune(path.parent)
    except OSError:
        return


def _prune(folder: Path) -> None:
    files = sorted(folder.glob("*.npy"), key=lambda p: p.stat().st_mtime_ns)
    for old in files[:max(0, len(files) - MAX_FILES)]:
        old.unlink(missing_ok=True)


def kept(key: Hashable, compute: Callable[[], np.ndarray]) -> np.ndarray:
    """The result for ``key``: from disk when kept, else computed and kept."""
    value = load(key)
    if value is None:
        value = np.asarray(compute())
        save(key, value)
    return value


def kept_all(runs: dict[Hashable, Callable[[], np.ndarray]]) -> None:
    """Compute and keep every result of ``runs`` that is not kept yet, one per core at a time: the runs of a page
    are independent, and the server gives each session's torch calls one thread."""
    missing = {key: compute for key, compute in runs.items() if not _path(key).exists()}
    if len(missing) < 2:
        for key, compute in missing.items():
            kept(key, compute)
        return

    def one(item: tuple[Hashable, Callable[[], np.ndarray]]) -> None:
        import torch

        torch.set_num_threads(1)  # OpenMP's count is per thread: this worker's only
        kept(*item)

    with ThreadPoolExecutor(min(len(missing), os.cpu_count() or 1)) as pool:
        list(pool.map(one, missing.items()))
