"""From token ids to the (batch, tokens, d_in) tensor attention reads (chapter 2, sections 2.6-2.8).

Sliding windows with their input/target pairs (the book's ``GPTDatasetV1`` loop, named), the first batch of
``create_dataloader_v1``, the embedding layer as a one-hot row times the weight matrix, and token + absolute
position embeddings with the book's sizes.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from attn_core.messages import Problem
from attn_core.text.data import create_dataloader_v1
from attn_core.text.tokens import ENDOFTEXT, MAX_TEXT_CHARS, bpe_encoding


@dataclass(frozen=True)
class Window:
    """One sample of the sliding window: ``inputs`` = ids[start : start + max_length], ``targets`` one further."""

    start: int
    inputs: list[int]
    targets: list[int]


def check_window(n_tokens: int, max_length: int, stride: int, batch_size: int | None = None) -> int:
    """How many windows (input/target pairs) ``n_tokens`` ids give; ValueError saying what to change when none
    would, or when fewer than one batch would (the book's loader drops an incomplete last batch)."""
    if max_length < 1:
        raise Problem("max_length is {max_length}: a window needs at least 1 token", max_length=max_length)
    if stride < 1:
        raise Problem("stride is {stride}: the window must move by at least 1 token each step (stride 0 "
                      "would take the same window forever)", stride=stride)
    if n_tokens <= max_length:  # "has only {n}": no noun after the count, right for 1 token as for many
        if n_tokens < 2:
            raise Problem("a window of max_length = {max_length} needs {needed} tokens of text (its targets reach "
                          "one token further), and the text has only {n_tokens:,}: use a longer text",
                          n_tokens=n_tokens, max_length=max_length, needed=max_length + 1)
        raise Problem("a window of max_length = {max_length} needs {needed} tokens of text (its targets reach one "
                      "token further), and the text has only {n_tokens:,}: lower max_length to at most {fits} or "
                      "use a longer text", n_tokens=n_tokens, max_length=max_length, needed=max_length + 1,
                      fits=n_tokens - 1)
    n_windows = len(range(0, n_tokens - max_length, stride))
    if batch_size is not None and batch_size > n_windows:
        raise Problem("max_length {max_length} with stride {stride} gives {n_windows} windows, fewer than "
                      "batch_size = {batch_size} (the loader drops an incomplete batch): lower batch_size to "
                      "{n_windows}, or lower stride or max_length", max_length=max_length, stride=stride,
                      n_windows=n_windows, batch_size=batch_size)
    return n_windows


def sliding_windows(token_ids: list[int], max_length: int, stride: int, limit: int | None = None) -> list[Window]:
    """``GPTDatasetV1``'s windows over ``token_ids`` (the first ``limit`` of them, or all)."""
    check_window(len(token_ids), max_length, stride)
    windows = []
    for i in range(0, len(token_ids) - max_length, stride):
        if limit is not None and len(windows) >= limit:
            break
        windows.append(Window(i, token_ids[i:i + max_length], token_ids[i + 1:i + max_length + 1]))
    return windows


def bpe_ids(text: str) -> list[int]:
    """The text's GPT-2 ids, as the book's loader reads them (``<|endoftext|>`` allowed)."""
    if text is None or not text.strip():
        raise Problem("The text is empty: type or paste some text (or choose The Verdict)")
    if len(text) > MAX_TEXT_CHARS + 1_000:  # The Verdict (20,479 characters) must fit
        raise Problem("Your text is {chars:,} characters long; this page takes up to {max_chars:,}. Shorten it",
                      chars=len(text), max_chars=MAX_TEXT_CHARS + 1_000)
    return bpe_encoding().encode(text, allowed_special={ENDOFTEXT})


def first_batch(text: str, batch_size: int, max_length: int, stride: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The first (inputs, targets) batch of ``create_dataloader_v1(shuffle=False)``: two (batch_size, max_length)
    tensors. Sizes that give no full batch raise ValueError saying what to change."""
    check_window(len(bpe_ids(text)), max_length, stride, batch_size)
    dataloader = create_dataloader_v1(text, batch_size=batch_size, max_length=max_length, stride=stride,
                                      shuffle=False)
    inputs, targets = next(iter(dataloader))
    return inputs, targets


def one_hot(token_ids: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """(…, vocab_size) rows with a single 1 at each id."""
    if token_ids.numel() and (int(token_ids.min()) < 0 or int(token_ids.max()) >= vocab_size):
        raise Problem("ids must run from 0 to {last}; got {low} to {high}", last=vocab_size - 1,
                      low=int(token_ids.min()), high=int(token_ids.max()))
    return nn.functional.one_hot(token_ids, vocab_size).to(torch.float32)


def lookup_both_ways(embedding: nn.Embedding, token_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``embedding(token_ids)`` and ``one_hot(token_ids) @ embedding.weight``: the same rows (section 2.7)."""
    with torch.no_grad():
        looked_up = embedding(token_ids)  # (…, output_dim)
        multiplied = one_hot(token_ids, embedding.num_embeddings) @ embedding.weight  # (…, V) @ (V, d) -> (…, d)
    return looked_up, multiplied


def book_embedding_example() -> tuple[nn.Embedding, torch.Tensor]:
    """Section 2.7's example: ``nn.Embedding(6, 3)`` after ``torch.manual_seed(123)`` and ids [2, 3, 5, 1]."""
    input_ids = torch.tensor([2, 3, 5, 1])
    vocab_size, output_dim = 6, 3
    torch.manual_seed(123)
    embedding_layer = nn.Embedding(vocab_size, output_dim)
    return embedding_layer, input_ids


@dataclass(frozen=True)
class InputEmbeddings:
    """Section 2.8: token embeddings + absolute position embeddings (broadcast over the batch)."""

    token_embeddings: torch.Tensor  # (batch, max_length, output_dim)
    pos_embeddings: torch.Tensor  # (max_length, output_dim)
    input_embeddings: torch.Tensor  # (batch, max_length, output_dim)
    one_hot_equal: bool  # the token embeddings equal one-hot rows @ W, checked on this batch
    max_difference: float


def input_embeddings(inputs: torch.Tensor, vocab_size: int = 50257, output_dim: int = 256,
                     seed: int = 123) -> InputEmbeddings:
    """The book's ``token_embedding_layer(inputs) + pos_embedding_layer(torch.arange(max_length))`` on one batch,
    with seeded random layers (an untrained model's; GPT-2's are learned)."""
    if output_dim < 1:
        raise Problem("output_dim is {output_dim}: the embedding needs at least 1 dimension", output_dim=output_dim)
    context_length = inputs.shape[-1]
    gen = torch.Generator().manual_seed(seed)
    token_embedding_layer = nn.Embedding(vocab_size, output_dim, _weight=torch.randn(vocab_size, output_dim,
                                                                                      generator=gen))
    pos_embedding_layer = nn.Embedding(context_length, output_dim, _weight=torch.randn(context_length, output_dim,
                                                                                       generator=gen))
    token_embeddings, multiplied = lookup_both_ways(token_embedding_layer, inputs)  # (b, T, d) both
    with torch.no_grad():
        pos_embeddings = pos_embedding_layer(torch.arange(context_length))  # (T, d)
    input_embeddings = token_embeddings + pos_embeddings  # (b, T, d) + (T, d) -> (b, T, d)
    diff = float((token_embeddings - multiplied).abs().max()) if token_embeddings.numel() else 0.0
    return InputEmbeddings(token_embeddings, pos_embeddings, input_embeddings,
                           bool(torch.equal(token_embeddings, multiplied)), diff)
