"""Token ids -> input vectors x of shape (b, num_tokens, d_in), deterministic for a seed.

Modes:
- ``"learned"``: token + absolute position embeddings, two ``nn.Embedding`` layers as in the
  book's chapter 2 (randomly initialized: not trained, but seeded).
- ``"sinusoidal"``: the same token embeddings + the original paper's sine/cosine positions.
- ``"onehot"``: each distinct token gets its own basis vector (no position information, so
  repeated words get identical vectors: a good way to see why positions are needed).
- ``"book"``: the chapter's fixed 6 x 3 inputs, for "Your journey starts with one step" only (they are
  the book's vectors for those words: another sentence given them would look as if attention ignored its words).

Everything is built on the CPU from a ``torch.Generator`` and then moved, so the same text
and seed give the same tensor on any device.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Sequence
from functools import cache

import torch
import torch.nn as nn

from attn_core.attention.book import BOOK_INPUTS, BOOK_SENTENCE
from attn_core.messages import Problem
from attn_core.text.tokens import VOCAB_SIZE, tokenize

INPUT_MODES = ("book", "learned", "sinusoidal", "onehot")
MAX_POSITIONS = 1024  # GPT-2's context length: the position table's size


# The embedding tables drawn so far, least recently used first, up to this many bytes (and always the last one):
# two GPT-2-size tables (50257 x 768 floats) or many small ones. A count bound (two tables) thrashed when a
# classroom used three widths: every run redrew its table (docs/measurements.md).
EMBEDDING_CACHE_BYTES = 320 * 2**20
_TABLES: OrderedDict[tuple[int, int], tuple[nn.Embedding, nn.Embedding]] = OrderedDict()
_TABLES_LOCK = threading.Lock()


def _table_bytes(layers: tuple[nn.Embedding, nn.Embedding]) -> int:
    return sum(layer.weight.nbytes for layer in layers)


def _embedding_layers(d_in: int, seed: int) -> tuple[nn.Embedding, nn.Embedding]:
    """Seeded token and position embedding layers, remembered (a GPT-2-size table is slow to draw)."""
    key = (d_in, seed)
    with _TABLES_LOCK:
        if key in _TABLES:
            _TABLES.move_to_end(key)
            return _TABLES[key]
    g = torch.Generator().manual_seed(seed)
    token_embedding_layer = nn.Embedding(VOCAB_SIZE, d_in, _weight=torch.randn(VOCAB_SIZE, d_in, generator=g))
    pos_embedding_layer = nn.Embedding(MAX_POSITIONS, d_in, _weight=torch.randn(MAX_POSITIONS, d_in, generator=g))
    token_embedding_layer.requires_grad_(False)
    pos_embedding_layer.requires_grad_(False)
    layers = (token_embedding_layer, pos_embedding_layer)
    with _TABLES_LOCK:
        _TABLES[key] = layers
        while len(_TABLES) > 1 and sum(map(_table_bytes, _TABLES.values())) > EMBEDDING_CACHE_BYTES:
            _TABLES.popitem(last=False)
    return layers


@cache
def _book_ids() -> tuple[int, ...]:
    return tuple(t.id for t in tokenize(BOOK_SENTENCE))


def uses_book_inputs(token_ids: Sequence[int]) -> bool:
    """Whether these tokens are the book's sentence, the one text its fixed 6 x 3 inputs belong to."""
    return tuple(int(t) for t in token_ids) == _book_ids()


def clear_embedding_cache() -> None:
    """Let go of every remembered embedding table."""
    with _TABLES_LOCK:
        _TABLES.clear()


def sinusoidal_positions(num_tokens: int, d_in: int) -> torch.Tensor:
    """PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(...): shape (num_tokens, d_in)."""
    pos = torch.arange(num_tokens, dtype=torch.float32).unsqueeze(1)  # (num_tokens, 1)
    div = torch.exp(torch.arange(0, d_in, 2, dtype=torch.float32) * (-math.log(10000.0) / d_in))
    pe = torch.zeros(num_tokens, d_in)
    pe[:, 0::2] = torch.sin(pos * div)
    pe[:, 1::2] = torch.cos(pos * div[: d_in // 2])
    return pe


def embed(
    token_ids: Sequence[int],
    d_in: int,
    mode: str = "learned",
    seed: int = 123,
    device: str | torch.device = "cpu",
) -> torch.Tensor:
    """Input embeddings for one sequence: a (1, num_tokens, d_in) float32 tensor on ``device``."""
    ids = [int(t) for t in token_ids]
    num_tokens = len(ids)
    if num_tokens == 0:
        raise Problem("there are no tokens to embed: type at least one word")
    if mode not in INPUT_MODES:
        raise Problem("unknown input mode {mode!r}: choose one of {modes}", mode=mode, modes=", ".join(INPUT_MODES))
    if not isinstance(d_in, int) or d_in < 1:
        raise Problem("d_in must be a whole number of at least 1; got {d_in!r}", d_in=d_in)
    if mode == "book":
        if d_in != BOOK_INPUTS.shape[1] or not uses_book_inputs(ids):
            raise Problem(
                "the book's fixed inputs are its vectors for the book's sentence ('{sentence}'), 6 tokens of "
                "3 numbers each; this text ({num_tokens} tokens, d_in = {d_in}) is not that. Use that sentence "
                "with d_in = 3, or choose learned / sinusoidal / one-hot inputs",
                sentence=BOOK_SENTENCE, num_tokens=num_tokens, d_in=d_in,
            )
        x = BOOK_INPUTS.clone()
    elif mode == "onehot":
        distinct = list(dict.fromkeys(ids))
        if d_in < len(distinct):
            raise Problem(
                "one-hot inputs need d_in >= the number of distinct tokens ({distinct}); "
                "d_in is {d_in}. Raise d_in or choose another input mode", distinct=len(distinct), d_in=d_in,
            )
        x = torch.zeros(num_tokens, d_in)
        x[torch.arange(num_tokens), torch.tensor([distinct.index(t) for t in ids])] = 1.0
    else:
        if num_tokens > MAX_POSITIONS:
            raise Problem(
                "{num_tokens} tokens is more than the {max_positions} positions GPT-2 has; shorten the text",
                num_tokens=num_tokens, max_positions=MAX_POSITIONS,
            )
        token_embedding_layer, pos_embedding_layer = _embedding_layers(d_in, seed)
        with torch.no_grad():
            token_embeddings = token_embedding_layer(torch.tensor(ids))  # (num_tokens, d_in)
            if mode == "learned":
                pos_embeddings = pos_embedding_layer(torch.arange(num_tokens))  # (num_tokens, d_in)
            else:
                pos_embeddings = sinusoidal_positions(num_tokens, d_in)
            x = token_embeddings + pos_embeddings
    return x.unsqueeze(0).to(device)  # (1, num_tokens, d_in)
