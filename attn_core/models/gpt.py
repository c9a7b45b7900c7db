"""The book's chapter-4 GPT model, built around our traced :class:`MultiHeadAttention`.

``GPTModel``, ``TransformerBlock`` (pre-LayerNorm), ``LayerNorm``, ``GELU`` and ``FeedForward``
keep the book's names, attribute names and module creation order, so
``torch.manual_seed(123); GPTModel(GPT_CONFIG_124M)`` gives the book's weights and its
greedy generation. Additions, off the book's path by default:

- ``cfg["attention_only"] = True`` drops the feed-forward half of every block (no ``ff``,
  no ``norm2``): the smallest circuits (induction heads) form far faster without MLPs.
- ``forward(idx, trace=...)`` records every layer's attention into one
  :class:`~attn_core.tracing.trace.Trace`, scoped per layer: ``trf_blocks[1].att.attn_weights``.
  :func:`~attn_core.models.traced.layer_trace` cuts one layer out so the single-module view helpers read it.
  ``trace_layers={k}`` records layer ``k`` only (the others run the fast path): a trace of
  all 12 layers of GPT-2 at 1,024 tokens holds gigabytes (``bench/pretrained.py``).
"""

from __future__ import annotations

import torch
import torch.nn as nn

from attn_core.attention.classes import MultiHeadAttention
from attn_core.attention.kv_cache import KVCache, LayerCache
from attn_core.messages import Problem
from attn_core.models.traced import TracedLM
from attn_core.tracing.trace import Trace, record

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
    """Raise a ``Problem`` with a plain message for a config ``GPTModel`` cannot build."""
    missing = [k for k in CONFIG_KEYS if k not in cfg]
    if missing:
        raise Problem("the model config lacks {keys} (see GPT_CONFIG_124M)", keys=", ".join(missing))
    for k in ("vocab_size", "context_length", "emb_dim", "n_heads", "n_layers"):
        if not isinstance(cfg[k], int) or cfg[k] < 1:
            raise Problem("{key} must be a whole number of at least 1; got {value}", key=k, value=repr(cfg[k]))
    if cfg["emb_dim"] % cfg["n_heads"]:
        raise Problem("emb_dim ({emb_dim}) must be divisible by n_heads ({n_heads})", emb_dim=cfg["emb_dim"],
                      n_heads=cfg["n_heads"])


def attention_like(att: MultiHeadAttention, *, mask_method: str = "neg_inf", dropout: float = 0.0,
                   train: bool = False) -> MultiHeadAttention:
    """A ``MultiHeadAttention`` that shares ``att``'s weights and mask (no copy) with another masking method or
    dropout: a shared read-only model's layer, run as the chapter's knobs say without touching the model's own
    modules (their mode stays as it is)."""
    with torch.device("meta"):  # no weights drawn only to be replaced
        new = MultiHeadAttention(att.d_in, att.d_out, att.context_length, dropout, att.num_heads,
                                 qkv_bias=att.W_query.bias is not None, mask_method=mask_method, causal=att.causal,
                                 efficient=att.efficient, window=att.window)
    for name in ("W_query", "W_key", "W_value", "out_proj"):
        mine, theirs = getattr(new, name), getattr(att, name)
        mine.weight = theirs.weight
        mine.bias = theirs.bias
    new.mask = att.mask
    return new.train(train)


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
        self.attention_only = bool(cfg.get("attention_only"))  # absent: a whole block
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

    def forward(self, x: torch.Tensor, trace: Trace | None = None, cache: LayerCache | None = None) -> torch.Tensor:
        # Shortcut connection for attention block
        shortcut = x
        x = self.norm1(x)
        record(trace, "input", x)
        x = self.att(x, trace, cache)  # Shape [batch_size, num_tokens, emb_size]
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


class GPTModel(TracedLM):
    """Section 4.6: token + position embeddings, ``n_layers`` transformer blocks, final norm, output head
    (``forward``: :class:`~attn_core.models.traced.TracedLM`'s, the book's lines)."""

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

    def embed(self, in_idx: torch.Tensor, start: int = 0) -> torch.Tensor:
        """The blocks' input for token ids placed after ``start`` others: token + position embeddings (dropout)."""
        tok_embeds = self.tok_emb(in_idx)
        pos_embeds = self.pos_emb(torch.arange(start, start + in_idx.shape[1], device=in_idx.device))
        x = tok_embeds + pos_embeds  # Shape [batch_size, num_tokens, emb_size]
        return self.drop_emb(x)


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


MAX_NEW_TOKENS = 1000  # a generation asks for at most this many tokens (a classroom server is shared)


def check_generation(idx: torch.Tensor, max_new_tokens: int, temperature: float, top_k: int | None,
                     vocab_size: int) -> None:
    """Raise a ``Problem`` with a plain message for a generation that cannot run."""
    if idx.ndim != 2:
        raise Problem("expected token ids of shape (batch, num_tokens); got {shape}", shape=tuple(idx.shape))
    if idx.shape[1] == 0:
        raise Problem("the prompt is empty: type at least one word to continue")
    if not isinstance(max_new_tokens, int) or not 1 <= max_new_tokens <= MAX_NEW_TOKENS:
        raise Problem("max_new_tokens must be a whole number from 1 to {most}; got {value}", most=MAX_NEW_TOKENS,
                      value=repr(max_new_tokens))
    if not temperature >= 0.0:
        raise Problem("temperature must be 0 (greedy: always the most likely token) or more; got {value}",
                      value=repr(temperature))
    if top_k is not None and (not isinstance(top_k, int) or not 1 <= top_k <= vocab_size):
        raise Problem("top_k must be a whole number from 1 to the vocabulary size {vocab_size}, or None for "
                      "no limit; got {value}", vocab_size=vocab_size, value=repr(top_k))


def next_token(logits: torch.Tensor, temperature: float = 0.0, top_k: int | None = None,
               generator: torch.Generator | None = None) -> torch.Tensor:
    """The next token id (batch, 1) from the last position's logits (batch, vocab_size), as the book's chapter 5
    ``generate`` picks it: keep the ``top_k`` largest logits, then greedy (temperature 0: the argmax, as
    ``generate_text_simple``) or sample from softmax(logits / temperature) with ``generator``."""
    if top_k is not None:
        top_logits, _ = torch.topk(logits, top_k)
        min_val = top_logits[:, -1:]
        logits = torch.where(logits < min_val, torch.tensor(float("-inf"), device=logits.device), logits)
    if temperature > 0.0:
        logits = logits / temperature
        probas = torch.softmax(logits, dim=-1)  # (batch, vocab_size)
        return torch.multinomial(probas, num_samples=1, generator=generator)  # (batch, 1)
    return torch.argmax(logits, dim=-1, keepdim=True)  # (batch, 1)


def generate(model: TracedLM, idx: torch.Tensor, max_new_tokens: int, *, use_cache: bool = True,
             temperature: float = 0.0, top_k: int | None = None, context_size: int | None = None,
             generator: torch.Generator | None = None) -> torch.Tensor:
    """Token ids (b, T) -> (b, T + max_new_tokens), one token at a time; greedy by default, exactly the book's
    ``generate_text_simple`` then.

    ``use_cache``: a :class:`KVCache` keeps every layer's keys and values, so each new token
    runs alone through the model (same tokens as without it). ``context_size`` (default: the model's
    context_length): a longer text drops its oldest tokens, the book's ``idx[:, -context_size:]``; every position
    then shifts, so the cache is rebuilt from the kept tokens at each such step."""
    context_size = model.cfg["context_length"] if context_size is None else context_size
    if not isinstance(context_size, int) or not 1 <= context_size <= model.cfg["context_length"]:
        raise Problem("context_size must be from 1 to the model's context_length {context_length}; got {value}",
                      context_length=model.cfg["context_length"], value=repr(context_size))
    check_generation(idx, max_new_tokens, temperature, top_k, model.cfg["vocab_size"])
    cache = KVCache(len(model.trf_blocks)) if use_cache else None
    with torch.no_grad():
        for _ in range(max_new_tokens):
            if cache is not None and 0 < cache.length < context_size:
                logits = model(idx[:, -1:], cache=cache)  # the new token alone: every earlier one is cached
            else:
                idx_cond = idx[:, -context_size:]  # crop the context if it exceeds the supported size
                cache = KVCache(len(model.trf_blocks)) if use_cache else None
                logits = model(idx_cond, cache=cache)
            idx_next = next_token(logits[:, -1, :], temperature, top_k, generator)  # (batch, 1)
            idx = torch.cat((idx, idx_next), dim=1)  # (batch, n_tokens+1)
    return idx
