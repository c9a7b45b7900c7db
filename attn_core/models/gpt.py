"""The book's chapter-4 GPT model, built around our traced :class:`MultiHeadAttention`.

``GPTModel``, ``TransformerBlock`` (pre-LayerNorm), ``LayerNorm``, ``GELU`` and ``FeedForward``
keep the book's names, attribute names and module creation order, so
``torch.manual_seed(123); GPTModel(GPT_CONFIG_124M)`` gives the book's weights and its
greedy generation. Additions, off the book's path by default:

- ``cfg["attention_only"] = True`` drops the feed-forward half of every block (no ``ff``,
  no ``norm2``): the smallest circuits (induction heads) form far faster without MLPs.
- ``forward(idx, trace=...)`` records every layer's attention into one
  :class:`~attn_core.tracing.trace.Trace`, scoped per layer: ``trf_blocks[1].att.attn_weights``.
  :func:`layer_trace` cuts one layer out so the single-module view helpers read it.
  ``trace_layers={k}`` records layer ``k`` only (the others run the fused path): a trace of
  all 12 layers of GPT-2 at 1,024 tokens holds gigabytes (``bench/pretrained.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

import torch
import torch.nn as nn

from attn_core.attention.classes import MultiHeadAttention
from attn_core.attention.kv_cache import KVCache, LayerCache
from attn_core.tracing.steps import scope_name
from attn_core.tracing.trace import Trace, record, scope

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
    return scope_name("layer", layer)


def layer_trace(trace: Trace, layer: int) -> Trace:
    """The steps of one layer's attention as a trace of their own (names without the prefix),
    so ``views.head_matrix`` / ``all_heads`` / ``cell_story`` read it like a single module's."""
    return trace.scoped(layer_scope(layer))


@dataclass(frozen=True)
class Walk:
    """What :func:`walk_layers` keeps of one forward pass: each layer's attention input and the last logits."""

    inputs: list[torch.Tensor]  # per layer (1, T, emb_dim): the residual stream after that block's norm1
    last_logits: torch.Tensor  # (vocab_size,): the logits after the last token (not T x vocab_size)


def walk_layers(model: nn.Module, idx: torch.Tensor,
                on_layer: Callable[[int, torch.Tensor], None] | None = None,
                progress: Callable[[int], None] | None = None) -> Walk:
    """``model``'s forward on token ids (1, T), block by block, keeping what a page needs to show any layer later:
    every layer's attention input (``T x emb_dim`` each) and the last position's logits only. Any family's model
    (``model.embed`` gives the blocks' input and their extra arguments, e.g. a Llama's RoPE tables).

    ``on_layer(i, weights)``: each layer's attention runs the book's explicit path with a trace of its own, and
    its weights (num_heads, T, T) are handed over; the trace is dropped before the next layer, so at most one
    layer's trace is held (~214 MB for GPT-2 small at T = 1,024; all twelve would be ~2.6 GB). ``progress(i)``
    after each block. Reads the model only (no mode change, no gradients)."""
    if idx.ndim != 2 or idx.shape[0] != 1 or idx.shape[1] == 0:
        raise ValueError(f"expected token ids of shape (1, num_tokens), at least one token; got {tuple(idx.shape)}")
    model.check_ids(idx)
    with torch.no_grad():
        x, block_args = model.embed(idx)
        return walk_blocks(model, x, block_args, on_layer, progress)


def walk_blocks(model: nn.Module, x: torch.Tensor, block_args: tuple, on_layer: Callable | None,
                progress: Callable | None) -> Walk:
    """The block-by-block loop of :func:`walk_layers` from the embedded input ``x``, for any model whose blocks are
    called ``block(x, *block_args, trace)`` (a Llama passes its RoPE tables)."""
    inputs = []
    for i, block in enumerate(model.trf_blocks):
        if on_layer is None:
            inputs.append(block.norm1(x))
            x = block(x, *block_args)
        else:
            trace = Trace(copy=False)
            x = block(x, *block_args, trace)
            inputs.append(trace["input"].tensor)
            on_layer(i, trace.of_kind("weights")[-1].tensor[0])
            del trace
        if progress is not None:
            progress(i)
    last = model.out_head(model.final_norm(x[:, -1:, :]))[0, -1]
    return Walk(inputs, last)


def run_blocks(model: nn.Module, x: torch.Tensor, block_args: tuple = (), *, cache: KVCache | None = None,
               trace: Trace | None = None, traced: Collection[int] = (), stop: int | None = None) -> torch.Tensor:
    """``x`` through ``model.trf_blocks`` (``block(x, *block_args, trace, cache)``), the layers in ``traced``
    recorded under their scope; ``stop``: the last block run (the layers after it are not needed)."""
    for i, block in enumerate(model.trf_blocks):
        layer_cache = None if cache is None else cache.layers[i]
        layer_trace_ = trace if i in traced else None
        with scope(layer_trace_, "layer", i):
            x = block(x, *block_args, layer_trace_, layer_cache)
        if i == stop:
            break
    return x


def trace_layer(model: nn.Module, idx: torch.Tensor, layer: int, cache: KVCache | None = None) -> Trace:
    """Layer ``layer``'s attention steps on token ids ``idx`` (placed after the ``cache``'s tokens, which grows in
    the layers run), as :func:`layer_trace` cuts them: only blocks 0..layer run, so showing an early layer costs
    that share of a forward pass. Reads the model only: a shared model serves every session at once."""
    start = 0 if cache is None else cache.length
    model.check_ids(idx, start)
    trace = Trace(copy=False)
    model.traced_layers(trace, {layer})  # a ValueError for a layer the model does not have
    with torch.no_grad():
        x, block_args = model.embed(idx, start)
        run_blocks(model, x, block_args, cache=cache, trace=trace, traced={layer}, stop=layer)
    return layer_trace(trace, layer)


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

    def forward(self, in_idx: torch.Tensor, trace: Trace | None = None, cache: KVCache | None = None,
                trace_layers: Collection[int] | None = None) -> torch.Tensor:
        """Token ids (batch, num_tokens) -> logits (batch, num_tokens, vocab_size); with a trace, the attention
        steps of every layer (or of the layers in ``trace_layers``) are recorded under ``trf_blocks[i].att``. With a
        KV ``cache``, the tokens come after the cached ones: their positions continue from ``cache.length``, and the
        cache grows."""
        start = self.start_after(cache, in_idx)
        traced = self.traced_layers(trace, trace_layers)
        x, _ = self.embed(in_idx, start)  # Shape [batch_size, num_tokens, emb_size]
        if not traced and cache is None:
            x = self.trf_blocks(x)
        else:
            x = run_blocks(self, x, cache=cache, trace=trace, traced=traced)
        x = self.final_norm(x)
        logits = self.out_head(x)
        return logits

    def embed(self, in_idx: torch.Tensor, start: int = 0) -> tuple[torch.Tensor, tuple]:
        """The blocks' input for token ids placed after ``start`` others: token + position embeddings (dropout),
        and the blocks' extra arguments (none here; a Llama's RoPE tables)."""
        tok_embeds = self.tok_emb(in_idx)
        pos_embeds = self.pos_emb(torch.arange(start, start + in_idx.shape[1], device=in_idx.device))
        x = tok_embeds + pos_embeds  # Shape [batch_size, num_tokens, emb_size]
        return self.drop_emb(x), ()

    def start_after(self, cache: KVCache | None, in_idx: torch.Tensor) -> int:
        """The position the tokens ``in_idx`` start at: after the ``cache``'s (0 without one); a ``ValueError`` for
        a cache made for another model or ids that do not fit."""
        start = 0 if cache is None else cache.length
        if cache is not None and len(cache.layers) != len(self.trf_blocks):
            raise ValueError(f"the cache has {len(cache.layers)} layers, the model {len(self.trf_blocks)}: "
                             "make it with KVCache(model.cfg['n_layers'])")
        self.check_ids(in_idx, start)
        return start

    def check_ids(self, in_idx: torch.Tensor, start: int = 0) -> None:
        """A ``ValueError`` saying what is wrong with token ids (batch, num_tokens) placed after ``start`` others."""
        if in_idx.ndim != 2:
            raise ValueError(f"expected token ids of shape (batch, num_tokens); got {tuple(in_idx.shape)}")
        seq_len = in_idx.shape[1]
        if start + seq_len > self.cfg["context_length"]:
            raise ValueError(f"{start + seq_len} tokens do not fit in context_length = {self.cfg['context_length']}: "
                             f"the model has {self.cfg['context_length']} positions; shorten the text")
        if seq_len and (int(in_idx.min()) < 0 or int(in_idx.max()) >= self.cfg["vocab_size"]):
            raise ValueError(f"token ids must lie in 0..{self.cfg['vocab_size'] - 1} (the model's vocabulary)")

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


MAX_NEW_TOKENS = 1000  # a generation asks for at most this many tokens (a classroom server is shared)


def check_generation(idx: torch.Tensor, max_new_tokens: int, temperature: float, top_k: int | None,
                     vocab_size: int) -> None:
    """Raise ``ValueError`` with a plain message for a generation that cannot run."""
    if idx.ndim != 2:
        raise ValueError(f"expected token ids of shape (batch, num_tokens); got {tuple(idx.shape)}")
    if idx.shape[1] == 0:
        raise ValueError("the prompt is empty: type at least one word to continue")
    if not isinstance(max_new_tokens, int) or not 1 <= max_new_tokens <= MAX_NEW_TOKENS:
        raise ValueError(f"max_new_tokens must be a whole number from 1 to {MAX_NEW_TOKENS}; got {max_new_tokens!r}")
    if not temperature >= 0.0:
        raise ValueError(f"temperature must be 0 (greedy: always the most likely token) or more; got {temperature!r}")
    if top_k is not None and (not isinstance(top_k, int) or not 1 <= top_k <= vocab_size):
        raise ValueError(f"top_k must be a whole number from 1 to the vocabulary size {vocab_size}, or None for "
                         f"no limit; got {top_k!r}")


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


def generate(model: GPTModel, idx: torch.Tensor, max_new_tokens: int, *, use_cache: bool = True,
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
        raise ValueError(f"context_size must be from 1 to the model's context_length {model.cfg['context_length']}; "
                         f"got {context_size!r}")
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
