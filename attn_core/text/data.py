"""The book's chapter-2 data pipeline: a sliding window over token ids (section 2.6)."""

from __future__ import annotations

import torch
from torch.utils.data import DataLoader, Dataset

from attn_core.messages import Problem
from attn_core.text.tokens import bpe_encoding


class GPTDatasetV1(Dataset):
    """Input/target pairs: windows of ``max_length`` token ids every ``stride`` tokens, targets
    shifted by one (the next token at every position)."""

    def __init__(self, txt: str, tokenizer, max_length: int, stride: int):
        if not isinstance(max_length, int) or max_length < 1 or not isinstance(stride, int) or stride < 1:
            raise Problem("max_length and stride must be whole numbers of at least 1; got {max_length}, {stride}",
                          max_length=max_length, stride=stride)
        self.input_ids = []
        self.target_ids = []

        # Tokenize the entire text
        token_ids = tokenizer.encode(txt, allowed_special={"<|endoftext|>"})
        if len(token_ids) <= max_length:
            raise Problem("the text needs more than max_length = {max_length} tokens; it has only {n_tokens}",
                          n_tokens=len(token_ids), max_length=max_length)

        # Use a sliding window to chunk the text into overlapping sequences of max_length
        for i in range(0, len(token_ids) - max_length, stride):
            input_chunk = token_ids[i:i + max_length]
            target_chunk = token_ids[i + 1: i + max_length + 1]
            self.input_ids.append(torch.tensor(input_chunk))
            self.target_ids.append(torch.tensor(target_chunk))

    def __len__(self) -> int:
        return len(self.input_ids)

    def __getitem__(self, idx: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.input_ids[idx], self.target_ids[idx]


def create_dataloader_v1(txt: str, batch_size: int = 4, max_length: int = 256, stride: int = 128,
                         shuffle: bool = True, drop_last: bool = True, num_workers: int = 0,
                         tokenizer=None) -> DataLoader:
    """The book's loader: GPT-2 tokens (our offline encoding unless ``tokenizer`` is given),
    :class:`GPTDatasetV1` windows, batches of (batch_size, max_length)."""
    tokenizer = bpe_encoding() if tokenizer is None else tokenizer
    dataset = GPTDatasetV1(txt, tokenizer, max_length, stride)
    return DataLoader(dataset, batch_size=batch_size, shuffle=shuffle, drop_last=drop_last,
                      num_workers=num_workers)
