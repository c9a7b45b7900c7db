"""The Phi-3 family from GGUF files: every ``.gguf`` in ``$ATTENTION_LAB_GGUF_DIR`` whose architecture is ``phi3``
(Phi-3 mini and medium). The model is the book's Llama (:class:`~attn_core.models.rope_lm.RopeLM`: RoPE, RMSNorm,
grouped-query attention, SwiGLU, an output head of its own); what differs is the file: each layer stores its queries,
keys and values as one fused ``attn_qkv`` matrix (the chapter's "combined QKV" idea in a real model: one matmul,
split by rows into ``W_query``, ``W_key``, ``W_value``) and its SwiGLU gate and up projections as one ``ffn_up``
(``fc1`` above ``fc2``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from attn_core.messages import Msg, Problem
from attn_core.models.gguf_files import ENV_VAR, GGUFFamily
from attn_core.models.gguf_weights import GGUFArch

TENSORS = {"attn_qkv.weight": ("att.W_query.weight", "att.W_key.weight", "att.W_value.weight"),
           "ffn_up.weight": ("ff.fc1.weight", "ff.fc2.weight")}


def read_more(get: Callable[[str, object], object], cfg: dict, path: Path) -> dict:
    """Phi-3 rotates every dimension of a head: a file rotating fewer (Phi-2's partial RoPE) is not read here."""
    rotated = get("rope.dimension_count", None)
    if rotated is not None and int(rotated) != cfg["head_dim"]:
        raise Problem("{path} rotates {rotated} of each head's {head_dim} dimensions; this loader reads RoPE over the "
                      "whole head", path=str(path), rotated=int(rotated), head_dim=cfg["head_dim"])
    return {}


# its SentencePiece vocabulary reads a text as if after a space, as transformers builds Phi-3's tokenizer
PHI3 = GGUFArch("phi3", known_as="phi3 (Phi-3)", rope_base=10_000.0, rms_eps=1e-5, tensors=TENSORS,
                read_more=read_more, tokenizer={"prefix_space": True})


class Phi3Family(GGUFFamily):
    name = "phi3"
    order = 40  # after SmolLM2, Qwen and Gemma 3
    title = "Phi-3"
    gguf_archs = (PHI3,)

    def how_to_get(self) -> Msg:
        return Msg("Phi-3 (queries, keys and values in one fused matrix) is not on this machine: download a GGUF file "
                   "of Phi-3-mini-4k-instruct into a folder and set {var} to that folder.", var=ENV_VAR)


FAMILY = Phi3Family()
