"""attn_core: every attention variant of "Coding attention mechanisms", traced.

Class names, signatures and attribute names follow the book so learners can read this
code beside it. Nothing here imports Streamlit or Altair. Every name the README's examples use
imports from here; the subpackages (attention, tracing, text, models, labs) hold the rest.
"""

from attn_core.attention.book import BOOK_INPUTS, BOOK_SENTENCE, BOOK_TOKENS
from attn_core.attention.classes import (
    MASK_METHODS,
    CausalAttention,
    MultiHeadAttention,
    MultiHeadAttentionWrapper,
    SelfAttention_v1,
    SelfAttention_v2,
    check_inputs,
    check_sizes,
    masked_softmax,
)
from attn_core.attention.kv_cache import KVCache, LayerCache
from attn_core.attention.masks import causal_mask
from attn_core.attention.modern import GroupedQueryAttention, MultiHeadLatentAttention
from attn_core.attention.pipeline import build_module, run_attention
from attn_core.attention.simplified import NORMALIZATIONS, SimplifiedAttention, simplified_attention, softmax_naive
from attn_core.attention.variants import LABELS, VARIANTS, AttentionConfig, Variant, register, variant
from attn_core.devices import available_devices, pick_device
from attn_core.labs.heads import head_ablation, patch_heads, rollout, value_weighted
from attn_core.models.gpt import GPT_CONFIG_124M, GPTModel, generate
from attn_core.models.registry import family, find_models, load_model
from attn_core.models.traced import layer_trace
from attn_core.text.embeddings import INPUT_MODES, MAX_POSITIONS, embed, sinusoidal_positions
from attn_core.text.tokens import ENDOFTEXT, ENDOFTEXT_ID, MAX_TEXT_CHARS, Token, bpe_encoding, tokenize
from attn_core.tracing.trace import Step, Trace
from attn_core.tracing.views import head_matrix

__all__ = [
    "BOOK_INPUTS", "BOOK_SENTENCE", "BOOK_TOKENS", "ENDOFTEXT", "ENDOFTEXT_ID", "GPT_CONFIG_124M", "INPUT_MODES",
    "LABELS", "MASK_METHODS", "MAX_POSITIONS", "MAX_TEXT_CHARS", "NORMALIZATIONS", "VARIANTS", "AttentionConfig",
    "CausalAttention", "GPTModel", "GroupedQueryAttention", "KVCache", "LayerCache", "MultiHeadAttention",
    "MultiHeadAttentionWrapper", "MultiHeadLatentAttention", "SelfAttention_v1", "SelfAttention_v2",
    "SimplifiedAttention", "Step", "Token", "Trace", "Variant", "available_devices", "bpe_encoding", "build_module",
    "causal_mask", "check_inputs", "check_sizes", "embed", "family", "find_models", "generate", "head_ablation",
    "head_matrix", "layer_trace", "load_model", "masked_softmax", "patch_heads", "pick_device", "register", "rollout",
    "run_attention", "simplified_attention", "sinusoidal_positions", "softmax_naive", "tokenize", "value_weighted",
    "variant",
]
