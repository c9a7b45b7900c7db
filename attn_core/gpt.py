"""The book's chapter-4 GPT model, built around our traced :class:`MultiHeadAttention`.

``GPTModel``, ``TransformerBlock`` (pre-LayerNorm), ``LayerNorm``, ``GELU`` and ``FeedForward``
keep the book's names, attribute names and module creation order, so
``torch.manual_seed(123); GPTModel(GPT_CONFIG_124M)`` gives the book's weights and its
greedy generation. Additions, off the book's path by default:

- ``cfg["attention_only"] = True`` drops the feed-forward half of every block (no ``ff``,
  no ``norm2``): the smallest circuits (induction heads) form far faster without MLPs.
- ``forward(idx, trace=...)`` records every layer's attention into one
  :class:`~attn_core.trace.Trace`, scoped per layer: ``trf_blocks[1].att.attn_weights``.
  :func:`layer_trace` cuts one layer out so the single-module view helpers read it.
  ``trace_layers={k}`` records layer ``k`` only (the others run the fused path): a trace of
  all 12 layers of GPT-2 at 1,024 tokens holds gigabytes (``bench/pretrained.py``).
"""

from __future__ import annotations

from collections.abc import Collection

import torch
import torch.nn as nn

from .attention import MultiHeadAttention
from .trace import Trace, record

GPT_CONFIG_124M: dict = {
    "vocab_size": 50257,  # Vocabulary size
    "context_length": 1024,  # Context length
    "emb_dim": 768,  # Embedding dimension
    "n_heads": 12,  # Number of attention heads
    "n_layers": 12,  # Number of layers
    "drop_rate": 0.1,  # Dropout rate
    "qkv_bias": False,  # Query-Key-Value bias
}

CONFIG_KEYS = ("vocab_size", "context_length", "emb_dim", "n_heads", "n_layers", "drop_rate", "qkv_bias")


def check_config(cfg: dict) -> None:
    """Raise ``ValueError`` with a plain message for a config ``GPTModel`` cannot build."""
    missing = [k for k in CONFIG_KEYS if k not in cfg]
    if missing:
        raise ValueError(f"the model config lacks {', '.join(missing)} (see GPT_CONFIG_124M)")
    for k in ("vocab_size", "context_length", "emb_dim", "n_heads", "n_layers"):
        if not isinstance(cfg[k], int) or cfg[k] < 1:
            raise ValueError(f"{k} must be a whole number of at least 1; got {cfg[k]!r}")
    if cfg["emb_dim"] % cfg["n_heads"]:
        raise ValueError(f"emb_dim ({cfg['emb_dim']}) must be divisible by n_heads ({cfg['n_heads']})")


def layer_scope(layer: int) -> str:
    """The trace scope of one layer's attention: ``trf_blocks[1].att``."""
    return f"trf_blocks[{layer}].att"


def layer_trace(trace: Trace, layer: int) -> Trace:
    """The steps of one layer's attention as a trace of their own (names without the prefix),
    so ``views.head_matrix`` / ``all_heads`` / ``cell_story`` read it like a single module's."""
    return trace.scoped(layer_scope(layer))


class LayerNorm(nn.Module):
    """Section 4.2: normalize each vector to mean 0, variance 1, then a trainable scale and shift."""

    def __init__(self, emb_dim: int):
        super().__init__()
        self.eps = 1e-5
        self.scale = nn.Parameter(torch.ones(emb_dim))
        self.shift = nn.Parameter(torch.zeros(emb_dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean = x.mean(dim=-1, keepdim=True)
        var = x.var(dim=-1, keepdim=True, unbiased=False)
        norm_x = (x - mean) / torch.sqrt(var + self.eps)
        return self.scale * norm_x + self.shift


class GELU(nn.Module):
    """Section 4.3: the tanh approximation of GELU used by GPT-2."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 0.5 * x * (1 + torch.tanh(
            torch.sqrt(torch.tensor(2.0 / torch.pi)) * (x + 0.044715 * torch.pow(x, 3))
        ))


class FeedForward(nn.Module):
    """Section 4.3: emb_dim -> 4 * emb_dim -> GELU -> emb_dim."""

    def __init__(self, cfg: dict):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(cfg["emb_dim"], 4 * cfg["emb_dim"]),
            GELU(),
            nn.Linear(4 * cfg["emb_dim"], cfg["emb_dim"]),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


class TransformerBlock(nn.Module):
    """Section 4.5: pre-LayerNorm attention + shortcut, then feed-forward + shortcut.

    With ``cfg["attention_only"]`` the feed-forward half is left out."""

    def __init__(self, cfg: dict):
        super().__init__()
        self.attention_only = bool(cfg.get("attention_only", False))
        self.att = MultiHeadAttention(
            d_in=cfg["emb_dim"],
            d_out=cfg["emb_dim"],
            context_length=cfg["context_length"],
            num_heads=cfg["n_heads"],
            dropout=cfg["drop_rate"],
            qkv_bias=cfg["qkv_bias"])
        if not self.attention_only:
            self.ff = FeedForward(cfg)
        self.norm1 = LayerNorm(cfg["emb_dim"])
        if not self.attention_only:
            self.norm2 = LayerNorm(cfg["emb_dim"])
        self.drop_shortcut = nn.Dropout(cfg["drop_rate"])

    def forward(self, x: torch.Tensor, trace: Trace | None = None) -> torch.Tensor:
        # Shortcut connection for attention block
        shortcut = x
        x = self.norm1(x)
        record(trace, "input", x)
        x = self.att(x, trace)  # Shape [batch_size, num_tokens, emb_size]
        x = self.drop_shortcut(x)
        x = x + shortcut  # Add the original input back
        if self.attention_only:
            return x
        # Shortcut connection for feed forward block
        shortcut = x
        x = self.norm2(x)
        x = self.ff(x)
        x = self.drop_shortcut(x)
        x = x + shortcut  # Add the original input back
        return x


class GPTModel(nn.Module):
    """Section 4.6: token + position embeddings, ``n_layers`` transformer blocks, final norm, output head."""

    def __init__(self, cfg: dict):
        super().__init__()
        check_config(cfg)
        self.cfg = dict(cfg)
        self.tok_emb = nn.Embedding(cfg["vocab_size"], cfg["emb_dim"])
        self.pos_emb = nn.Embedding(cfg["context_length"], cfg["emb_dim"])
        self.drop_emb = nn.Dropout(cfg["drop_rate"])
        self.trf_blocks = nn.Sequential(*[TransformerBlock(cfg) for _ in range(cfg["n_layers"])])
        self.final_norm = LayerNorm(cfg["emb_dim"])
        self.out_head = nn.Linear(cfg["emb_dim"], cfg["vocab_size"], bias=False)

    def forward(self, in_idx: torch.Tensor, trace: Trace | None = None,
                trace_layers: Collection[int] | None = None) -> torch.Tensor:
        """Token ids (batch, num_tokens) -> logits (batch, num_tokens, vocab_size); with a trace,
        the attention steps of every layer (or of the layers in ``trace_layers``) are recorded
        under ``trf_blocks[i].att``."""
        if in_idx.ndim != 2:
            raise ValueError(f"expected token ids of shape (batch, num_tokens); got {tuple(in_idx.shape)}")
        batch_size, seq_len = in_idx.shape
        if seq_len > self.cfg["context_length"]:
            raise ValueError(f"{seq_len} tokens do not fit in context_length = {self.cfg['context_length']}: "
                             f"the model has {self.cfg['context_length']} positions; shorten the text")
        if seq_len and (int(in_idx.min()) < 0 or int(in_idx.max()) >= self.cfg["vocab_size"]):
            raise ValueError(f"token ids must lie in 0..{self.cfg['vocab_size'] - 1} (the model's vocabulary)")
        traced = self.traced_layers(trace, trace_layers)
        tok_embeds = self.tok_emb(in_idx)
        pos_embeds = self.pos_emb(torch.arange(seq_len, device=in_idx.device))
        x = tok_embeds + pos_embeds  # Shape [batch_size, num_tokens, emb_size]
        x = self.drop_emb(x)
        if not traced:
            x = self.trf_blocks(x)
        else:
            for i, block in enumerate(self.trf_blocks):
                if i not in traced:
                    x = block(x)
                    continue
                with trace.scope(layer_scope(i)):
                    x = block(x, trace)
        x = self.final_norm(x)
        logits = self.out_head(x)
        return logits

    def traced_layers(self, trace: Trace | None, trace_layers: Collection[int] | None) -> frozenset[int]:
        """The layer indices to record: none without a trace, all by default, else ``trace_layers``
        (a ``ValueError`` names an index the model does not have)."""
        n = self.cfg["n_layers"]
        if trace is None:
            return frozenset()
        if trace_layers is None:
            return frozenset(range(n))
        bad = [k for k in trace_layers if not isinstance(k, int) or not 0 <= k < n]
        if bad:
            raise ValueError(f"trace_layers names {bad}, but the model's layers are 0..{n - 1}")
        return frozenset(trace_layers)


def generate_text_simple(model: nn.Module, idx: torch.Tensor, max_new_tokens: int,
                         context_size: int) -> torch.Tensor:
    """Section 4.7: greedy decoding, one token at a time (idx is (batch, n_tokens))."""
    for _ in range(max_new_tokens):
        # Crop current context if it exceeds the supported context size
        idx_cond = idx[:, -context_size:]
        with torch.no_grad():
            logits = model(idx_cond)
        # Focus only on the last time step: (batch, n_token, vocab_size) -> (batch, vocab_size)
        logits = logits[:, -1, :]
        probas = torch.softmax(logits, dim=-1)  # (batch, vocab_size)
        idx_next = torch.argmax(probas, dim=-1, keepdim=True)  # (batch, 1)
        idx = torch.cat((idx, idx_next), dim=1)  # (batch, n_tokens+1)
    return idx
