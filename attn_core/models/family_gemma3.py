"""The Gemma 3 family from GGUF files: every ``.gguf`` in ``$ATTENTION_LAB_GGUF_DIR`` whose architecture is
``gemma3`` (sliding-window layers with their own RoPE base, norms before and after each sub-block, GeGLU);
:mod:`attn_core.models.gemma3` is the model, :mod:`attn_core.models.gguf_weights` reads the files."""

from __future__ import annotations

import torch.nn as nn

from attn_core.messages import Msg
from attn_core.models import gemma3, qwen
from attn_core.models.family import Found, ModelConfig
from attn_core.models.gguf_files import ENV_VAR, GGUFFamily
from attn_core.models.traced import layer_windows

ARCHITECTURES = ("gemma3",)


class Gemma3Family(GGUFFamily):
    name = "gemma3"
    order = 30  # after SmolLM2 and Qwen
    title = "Gemma 3"
    architectures = ARCHITECTURES

    def load(self, found: Found) -> nn.Module:
        return gemma3.load_model_shared(found.path)

    def config(self, model: nn.Module) -> ModelConfig:
        c = model.cfg
        label = self.file_label(model)
        bases = tuple(float(c["rope_local_base"] if w else c["rope_base"]) for w in c["windows"])
        return ModelConfig(label, c["n_layers"], c["n_heads"], c["n_kv_groups"], c["head_dim"], c["emb_dim"],
                           c["context_length"], c["vocab_size"], "rope", "RMSNorm", False, "GroupedQueryAttention",
                           windows=layer_windows(model), rope_bases=bases, family_title=self.title)

    def layer_attention(self, model: nn.Module, layer: int, **knobs: object) -> nn.Module:
        return qwen.LayerAttention(model, layer, **knobs)

    def how_to_get(self) -> Msg:
        return Msg("Gemma 3 (sliding-window attention) is not on this machine: download a GGUF file of "
                   "gemma-3-270m-it (Hugging Face or ModelScope) into a folder and set {var} to that folder.",
                   var=ENV_VAR)


FAMILY = Gemma3Family()
