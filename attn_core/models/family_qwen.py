"""The Qwen family from GGUF files: every ``.gguf`` in ``$ATTENTION_LAB_GGUF_DIR`` whose architecture is ``qwen2``
(Qwen2.5: q/k/v biases) or ``qwen3`` (Qwen3: per-head q/k norms, its own head_dim); :mod:`attn_core.models.qwen`
is the model, :mod:`attn_core.models.gguf_weights` reads the files."""

from __future__ import annotations

import torch.nn as nn

from attn_core.messages import Msg
from attn_core.models import qwen
from attn_core.models.family import Found, ModelConfig
from attn_core.models.gguf_files import ENV_VAR, GGUFFamily
from attn_core.models.traced import layer_windows

ARCHITECTURES = ("qwen2", "qwen3")


class QwenFamily(GGUFFamily):
    name = "qwen"
    order = 20  # after SmolLM2 (installed with pip): these are files a person brings
    title = "Qwen"
    architectures = ARCHITECTURES

    def load(self, found: Found) -> nn.Module:
        return qwen.load_model_shared(found.path)

    def config(self, model: nn.Module) -> ModelConfig:
        c = model.cfg
        label = self.file_label(model)
        return ModelConfig(label, c["n_layers"], c["n_heads"], c["n_kv_groups"], c["head_dim"], c["emb_dim"],
                           c["context_length"], c["vocab_size"], "rope", "RMSNorm", bool(c.get("qkv_bias")),
                           "GroupedQueryAttention", windows=layer_windows(model),
                           rope_bases=(float(c.get("rope_base", 1e6)),) * c["n_layers"], family_title=self.title)

    def layer_attention(self, model: nn.Module, layer: int, **knobs: object) -> nn.Module:
        return qwen.LayerAttention(model, layer, **knobs)

    def how_to_get(self) -> Msg:
        return Msg("Qwen (reads Chinese and English) is not on this machine: download a GGUF file of "
                   "Qwen2.5-0.5B-Instruct or Qwen3-0.6B (Hugging Face or ModelScope) into a folder and set "
                   "{var} to that folder.", var=ENV_VAR)


FAMILY = QwenFamily()
