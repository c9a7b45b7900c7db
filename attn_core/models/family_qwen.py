"""The Qwen family from GGUF files: every ``.gguf`` in ``$ATTENTION_LAB_GGUF_DIR`` whose architecture is ``qwen2``
(Qwen2.5: q/k/v biases) or ``qwen3`` (Qwen3: per-head q/k norms, its own head_dim), written like the book's ch05
``Qwen3Model`` (:class:`~attn_core.models.rope_lm.RopeLM` so configured)."""

from __future__ import annotations

from attn_core.messages import Msg
from attn_core.models.gguf_files import ENV_VAR, GGUFFamily
from attn_core.models.gguf_weights import GGUFArch

QK_NORMS = {"attn_q_norm.weight": "att.q_norm.weight", "attn_k_norm.weight": "att.k_norm.weight"}
QKV_BIASES = {"attn_q.bias": "att.W_query.bias", "attn_k.bias": "att.W_key.bias", "attn_v.bias": "att.W_value.bias"}
QWEN2 = GGUFArch("qwen2", known_as="qwen2 (Qwen2.5)", rope_base=10_000.0, rms_eps=1e-5, model={"qkv_bias": True},
                 tensors=QKV_BIASES)
QWEN3 = GGUFArch("qwen3", known_as="qwen3 (Qwen3)", rope_base=10_000.0, rms_eps=1e-5, model={"qk_norm": True},
                 tensors=QK_NORMS)


class QwenFamily(GGUFFamily):
    name = "qwen"
    order = 20  # after SmolLM2 (installed with pip): these are files a person brings
    title = "Qwen"
    gguf_archs = (QWEN2, QWEN3)

    def how_to_get(self) -> Msg:
        return Msg("Qwen (reads Chinese and English) is not on this machine: download a GGUF file of "
                   "Qwen2.5-0.5B-Instruct or Qwen3-0.6B (Hugging Face or ModelScope) into a folder and set "
                   "{var} to that folder.", var=ENV_VAR)


FAMILY = QwenFamily()
