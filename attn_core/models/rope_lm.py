"""The one RoPE language model every GGUF family builds, written like the book's ch05 ``Llama3Model`` /
``Qwen3Model`` / ``Gemma3Model``, traced like ``GPTModel``; the families differ only by :class:`ArchConfig`.

:class:`ArchConfig` holds every fact a model file decides (sizes, RoPE bases, norm epsilon, biases, q/k norms,
windows, query scaling) and how the families' blocks differ: where the norms sit (``"pre"``: the book's Llama and
Qwen; ``"sandwich"``: Gemma 3 norms before *and after* each sub-block), the feed-forward (``"swiglu"``:
``silu(fc1(x)) * fc2(x)``; ``"geglu"``: ``gelu_tanh(fc1(x)) * fc2(x)``) and whether the token embeddings are scaled
by ``sqrt(emb_dim)`` (Gemma 3). Its defaults are the only ones: a family's loader builds it once from the file.
``model.cfg`` stays the plain dict the pages read (``model.cfg["emb_dim"]``); ``model.arch_cfg`` is the dataclass.

Names are the book's (``tok_emb``, ``trf_blocks``, ``norm1``/``norm2``, ``att``, ``ff.fc1``/``fc2``/``fc3``,
``final_norm``, ``out_head``), so a state dict loads into ``llms_from_scratch.llama3.Llama3Model`` /
``qwen3.Qwen3Model`` unchanged. A :class:`~attn_core.attention.kv_cache.KVCache` keeps each layer's K/V heads after
norm and RoPE; a windowed layer holds only its last ``window`` positions.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from functools import partial

import torch
import torch.nn as nn
import torch.nn.functional as F

from attn_core.attention.kv_cache import LayerCache
from attn_core.messages import Problem
from attn_core.models.rope_attention import GroupedQueryAttention, RMSNorm, compute_rope_params
from attn_core.models.traced import TracedLM
from attn_core.tracing.trace import Trace, record

NORM_PLACEMENTS = ("pre", "sandwich")  # norms before each sub-block; before and after it (Gemma 3)
ACTIVATIONS = {"swiglu": F.silu, "geglu": partial(F.gelu, approximate="tanh")}  # the gate's activation


@dataclass(frozen=True)
class ArchConfig:
    """A RoPE model's every fact, as its file states it (the book's config names)."""

    vocab_size: int
    context_length: int
    emb_dim: int
    n_heads: int  # query heads
    n_layers: int
    hidden_dim: int  # the feed-forward's width
    n_kv_groups: int  # K/V heads (fewer than n_heads: grouped-query attention)
    head_dim: int = 0  # 0: emb_dim // n_heads (Qwen3, Gemma 3 choose their own)
    rope_base: float = 10_000.0
    rms_eps: float = 1e-5
    tied: bool = True  # the output head is the token embedding
    qkv_bias: bool = False  # biases on W_query, W_key, W_value (Qwen2)
    qk_norm: bool = False  # an RMSNorm of each query and key head before RoPE (Qwen3, Gemma 3)
    norm_placement: str = "pre"  # one of NORM_PLACEMENTS
    feed_forward: str = "swiglu"  # one of ACTIVATIONS
    emb_scale: bool = False  # token embeddings times sqrt(emb_dim) (Gemma 3)
    windows: tuple[int | None, ...] = ()  # per layer: its sliding window, None = full; () = full everywhere
    rope_local_base: float | None = None  # the windowed layers' own RoPE base (Gemma 3); None: rope_base
    query_pre_attn_scalar: float | None = None  # scores divided by its square root; None: head_dim
    rope_freq_factors: tuple[float, ...] | None = None  # each RoPE frequency divided by its factor (Llama 3.1+)
    arch: str = ""  # the file's general.architecture

    def __post_init__(self):
        if not self.head_dim:
            object.__setattr__(self, "head_dim", self.emb_dim // self.n_heads)
        object.__setattr__(self, "windows", tuple(self.windows or ()))
        if self.rope_freq_factors is not None:
            object.__setattr__(self, "rope_freq_factors", tuple(self.rope_freq_factors))
        if self.norm_placement not in NORM_PLACEMENTS or self.feed_forward not in ACTIVATIONS:
            raise Problem("a model's norms sit {placement} (one of {placements}) and its feed-forward is {ff} (one of "
                          "{kinds})", placement=repr(self.norm_placement), placements=", ".join(NORM_PLACEMENTS),
                          ff=repr(self.feed_forward), kinds=", ".join(ACTIVATIONS))

    @classmethod
    def of(cls, cfg: ArchConfig | dict) -> ArchConfig:
        """``cfg`` as an ArchConfig (a dict's other keys, such as ``path``, are left out)."""
        if isinstance(cfg, ArchConfig):
            return cfg
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in cfg.items() if k in names})

    def as_dict(self) -> dict:
        """The plain dict ``model.cfg`` is (lists, as the disk cache's JSON holds them)."""
        d = asdict(self)
        d["windows"] = list(self.windows)
        if self.rope_freq_factors is not None:
            d["rope_freq_factors"] = list(self.rope_freq_factors)
        return d

    def window(self, layer: int) -> int | None:
        """Layer ``layer``'s sliding window (None: full causal)."""
        return self.windows[layer] if self.windows else None

    def rope_base_of(self, layer: int) -> float:
        """Layer ``layer``'s RoPE base: a windowed layer's own where the model has one."""
        local = self.window(layer) is not None and self.rope_local_base is not None
        return float(self.rope_local_base if local else self.rope_base)


class FeedForward(nn.Module):
    """A gated feed-forward: act(fc1(x)) * fc2(x), then fc3 back to emb_dim (SwiGLU: SiLU; GeGLU: tanh GELU)."""

    def __init__(self, cfg: ArchConfig):
        super().__init__()
        self.fc1 = nn.Linear(cfg.emb_dim, cfg.hidden_dim, bias=False)  # gate
        self.fc2 = nn.Linear(cfg.emb_dim, cfg.hidden_dim, bias=False)  # up
        self.fc3 = nn.Linear(cfg.hidden_dim, cfg.emb_dim, bias=False)  # down
        self.activation = ACTIVATIONS[cfg.feed_forward]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x_fc1 = self.fc1(x)
        x_fc2 = self.fc2(x)
        x = self.activation(x_fc1) * x_fc2
        return self.fc3(x)


class TransformerBlock(nn.Module):
    """RMSNorm -> attention (-> RMSNorm when sandwiched) + shortcut, then RMSNorm -> feed-forward (-> RMSNorm) +
    shortcut: the book's Llama 3 / Qwen3 block, and Gemma 3's with ``norm_placement="sandwich"``."""

    def __init__(self, cfg: ArchConfig | dict, layer: int = 0):
        super().__init__()
        cfg = ArchConfig.of(cfg)
        self.att = GroupedQueryAttention(cfg.emb_dim, cfg.n_heads, cfg.n_kv_groups, cfg.head_dim,
                                         qkv_bias=cfg.qkv_bias, qk_norm=cfg.qk_norm, rms_eps=cfg.rms_eps,
                                         window=cfg.window(layer), query_pre_attn_scalar=cfg.query_pre_attn_scalar)
        self.ff = FeedForward(cfg)
        self.norm1 = RMSNorm(cfg.emb_dim, eps=cfg.rms_eps)  # Gemma's input_layernorm
        self.norm2 = RMSNorm(cfg.emb_dim, eps=cfg.rms_eps)  # Gemma's pre_feedforward_layernorm
        sandwich = cfg.norm_placement == "sandwich"
        self.post_attention_norm = RMSNorm(cfg.emb_dim, eps=cfg.rms_eps) if sandwich else None
        self.post_ffn_norm = RMSNorm(cfg.emb_dim, eps=cfg.rms_eps) if sandwich else None

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, trace: Trace | None = None,
                cache: LayerCache | None = None) -> torch.Tensor:
        shortcut = x
        x = self.norm1(x)
        record(trace, "input", x)
        x = self.att(x, cos, sin, trace, cache)  # Shape [batch_size, num_tokens, emb_size]
        if self.post_attention_norm is not None:  # a sandwich: the attention's output normed before the shortcut
            x = self.post_attention_norm(x)
        x = x + shortcut  # Add the original input back
        shortcut = x
        x = self.norm2(x)
        x = self.ff(x)
        if self.post_ffn_norm is not None:
            x = self.post_ffn_norm(x)
        x = x + shortcut  # Add the original input back
        return x


class RopeLM(TracedLM):
    """The book's ``Llama3Model`` (and ``Qwen3Model``, ``Gemma3Model`` by configuration): token embedding (no
    position embedding: RoPE inside each attention), ``n_layers`` blocks, final RMSNorm, output head (tied to the
    embedding when ``tied``)."""

    def __init__(self, cfg: ArchConfig | dict):
        super().__init__()
        self.arch_cfg = a = ArchConfig.of(cfg)
        extra = {} if isinstance(cfg, ArchConfig) else cfg
        self.cfg = dict(extra) | a.as_dict() | {"drop_rate": 0.0}
        self.tok_emb = nn.Embedding(a.vocab_size, a.emb_dim)
        self.trf_blocks = nn.ModuleList([TransformerBlock(a, i) for i in range(a.n_layers)])
        self.final_norm = RMSNorm(a.emb_dim, eps=a.rms_eps)
        self.out_head = nn.Linear(a.emb_dim, a.vocab_size, bias=False)
        if a.tied:
            self.out_head.weight = self.tok_emb.weight
        self.tokenizer = None  # set by the family's loader
        if not self.tok_emb.weight.is_meta:  # built for a file's weights: its loader makes the tables
            self.init_rope()

    def init_rope(self) -> None:
        """(Re)compute the RoPE tables (a model built on the meta device gets real ones here), and the windowed
        layers' own when they have a base of their own."""
        a = self.arch_cfg
        freq_factors = list(a.rope_freq_factors) if a.rope_freq_factors is not None else None
        cos, sin = compute_rope_params(head_dim=a.head_dim, theta_base=a.rope_base, context_length=a.context_length,
                                       freq_factors=freq_factors)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        if a.rope_local_base is not None:
            cos_local, sin_local = compute_rope_params(a.head_dim, a.rope_local_base, a.context_length)
            self.register_buffer("cos_local", cos_local, persistent=False)
            self.register_buffer("sin_local", sin_local, persistent=False)

    def embed(self, in_idx: torch.Tensor, start: int = 0) -> torch.Tensor:
        """The blocks' input: token embeddings (scaled by sqrt(emb_dim) where the family does; positions are
        rotated into queries and keys later)."""
        x = self.tok_emb(in_idx)  # Shape [batch_size, num_tokens, emb_size]
        if self.arch_cfg.emb_scale:
            x = x * self.cfg["emb_dim"] ** 0.5
        return x

    def block_args(self, layer: int) -> tuple:
        """Layer ``layer``'s RoPE tables: a windowed layer's own base where the model has one, else the global."""
        a = self.arch_cfg
        if a.window(layer) is not None and a.rope_local_base is not None:
            return self.cos_local, self.sin_local
        return self.cos, self.sin
