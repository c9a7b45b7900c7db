"""Where the shipped data lives: ``assets/`` of the repository, or the copy a wheel installs.

A wheel maps the repository's ``assets/`` to the subpackage ``attn_core.assets`` (pyproject.toml),
so the package finds its GPT-2 ranks and checkpoints whether it runs from a checkout, an editable
install or an installed wheel."""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent
ASSETS_DIR = _HERE / "assets" if (_HERE / "assets").is_dir() else _HERE.parent / "assets"


def asset(name: str) -> Path:
    """The path of a shipped data file (it may not exist: callers say so in plain words)."""
    return ASSETS_DIR / name
