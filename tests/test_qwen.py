"""Qwen2 and Qwen3 from tiny GGUF files written here (tests/gguf_fixtures.py), against peers: transformers' own
GGUF loading of the same file (tokens, logits, attention weights, greedy generation with and without the cache),
the book's ``Qwen3Model`` with the same weights; the family finds the files by architecture and names them by
their metadata; damaged and foreign files are ``Problem`` s that say what is wrong. Fast: no real model."""

from __future__ import annotations

import pytest
import torch
from langs import CHINESE

from attn_core.attention.kv_cache import KVCache
from attn_core.messages import Problem
from attn_core.models import registry
from attn_core.models.family_llama import FAMILY as LLAMA
from attn_core.models.family_qwen import FAMILY as QWEN
from attn_core.models.gpt import generate
from attn_core.models.traced import trace_layer, walk_layers
from tests.gguf_fixtures import (
    TEXTS,
    arch_model,
    assert_equal_to_peer,
    qwen_cfg,
    randomize,
    transformers_model,
    write_gguf,
)

load_model = QWEN.load_file
pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTENTION_LAB_CACHE", str(tmp_path / "cache"))


@pytest.fixture(scope="module", params=["qwen2", "qwen3"])
def files(request, tmp_path_factory):
    """(arch, path, our model, transformers' model, transformers' tokenizer) for one tiny file per architecture."""
    arch = request.param
    folder = tmp_path_factory.mktemp(arch)
    path = write_gguf(folder / f"tiny-{arch}.gguf", randomize(arch_model(qwen_cfg(arch))), arch)
    mp = pytest.MonkeyPatch()
    mp.setenv("ATTENTION_LAB_CACHE", str(folder / "cache"))
    ours = load_model(path)
    mp.undo()
    theirs, tokenizer = transformers_model(path)
    return arch, path, ours, theirs, tokenizer


def ids_of(model, text: str) -> torch.Tensor:
    return torch.tensor([model.tokenizer.encode(text)])


def test_the_config_is_the_files(files):
    arch, _path, ours, _theirs, _tok = files
    c = ours.cfg
    assert (c["arch"], c["n_layers"], c["n_heads"], c["n_kv_groups"], c["emb_dim"]) == (arch, 3, 4, 2, 64)
    assert c["head_dim"] == (128 if arch == "qwen3" else 16) and c["rope_base"] == 1e6 and c["tied"]
    att = ours.trf_blocks[0].att
    assert (att.W_query.bias is not None) == (arch == "qwen2") and (att.q_norm is not None) == (arch == "qwen3")
    assert ours.out_head.weight is ours.tok_emb.weight and not ours.training


def test_tokens_equal_transformers_tokenizer(files):
    _arch, _path, ours, _theirs, tokenizer = files
    for text in TEXTS:
        ids = ours.tokenizer.encode(text)
        assert ids == tokenizer.encode(text, add_special_tokens=False), text
        assert ours.tokenizer.decode(ids) == text
        assert b"".join(ours.tokenizer.token_bytes(i) for i in ids) == text.encode()
    chat = ours.tokenizer.encode(TEXTS[-1])
    assert ours.tokenizer.piece(chat[0]) == "<|im_start|>" and ours.tokenizer.is_special(chat[0])
    think = ours.tokenizer.encode("<think>ok")
    assert ours.tokenizer.piece(think[0]) == "<think>" and not ours.tokenizer.is_special(think[0])
    assert len(ours.tokenizer.encode("注意力机制")) < len("注意力机制".encode())  # Chinese merges learned


def test_logits_and_attention_weights_equal_transformers(files):
    _arch, _path, ours, theirs, _tok = files
    assert_equal_to_peer(ours, theirs, ids_of(ours, TEXTS[0] + " " + TEXTS[1]))


def test_steps_before_and_after_norm_and_rope(files):
    arch, _path, ours, _theirs, _tok = files
    one = trace_layer(ours, ids_of(ours, TEXTS[0]), 1)
    q = one["queries.transpose"].tensor
    assert q.shape[1:] == (4, q.shape[2], ours.cfg["head_dim"]) and one["keys.rope"].tensor.shape[1] == 2
    before = one["queries.norm"].tensor if arch == "qwen3" else q
    assert ("queries.norm" in one.names()) == (arch == "qwen3")
    rotated = one["queries.rope"].tensor
    torch.testing.assert_close(rotated[:, :, 0], before[:, :, 0])  # position 0: nothing rotated
    torch.testing.assert_close(rotated.norm(dim=-1), before.norm(dim=-1))  # a rotation keeps lengths
    if arch == "qwen3":  # RMSNorm per head: every query head's RMS is its norm weight's
        normed = before / ours.trf_blocks[1].att.q_norm.weight
        torch.testing.assert_close(normed.pow(2).mean(-1), torch.ones(normed.shape[:-1]), atol=1e-3, rtol=0)


def test_greedy_generation_equals_transformers_with_and_without_cache(files):
    _arch, _path, ours, theirs, _tok = files
    idx = ids_of(ours, TEXTS[2])
    with torch.no_grad():
        want = theirs.generate(idx, max_new_tokens=12, do_sample=False, attention_mask=torch.ones_like(idx),
                               pad_token_id=0)
    cached = generate(ours, idx, 12, use_cache=True)
    uncached = generate(ours, idx, 12, use_cache=False)
    assert cached.tolist() == uncached.tolist() == want.tolist()


def test_the_cache_holds_the_kv_heads_after_norm_and_rope(files):
    _arch, _path, ours, _theirs, _tok = files
    idx = ids_of(ours, TEXTS[0])
    cache = KVCache(3)
    with torch.no_grad():
        ours(idx, cache=cache)
        ours(torch.tensor([[7]]), cache=cache)
    assert set(cache.shapes()) == {(1, 2, idx.shape[1] + 1, ours.cfg["head_dim"])}


def test_the_books_qwen3model_gives_the_same_logits(files):
    arch, _path, ours, _theirs, _tok = files
    if arch != "qwen3":
        pytest.skip("the book's Qwen3Model has no q/k/v biases")
    from llms_from_scratch.qwen3 import Qwen3Model

    c = ours.cfg
    cfg = {"vocab_size": c["vocab_size"], "context_length": c["context_length"], "emb_dim": c["emb_dim"],
           "n_heads": c["n_heads"], "n_layers": c["n_layers"], "hidden_dim": c["hidden_dim"],
           "head_dim": c["head_dim"], "qk_norm": True, "n_kv_groups": c["n_kv_groups"], "rope_base": c["rope_base"],
           "dtype": torch.float32}
    book = Qwen3Model(cfg).eval()
    state = {k.replace("norm.weight", "norm.scale").replace("norm1.weight", "norm1.scale")
             .replace("norm2.weight", "norm2.scale"): v for k, v in ours.state_dict().items()}
    book.load_state_dict(state)
    idx = ids_of(ours, TEXTS[1])
    with torch.no_grad():
        torch.testing.assert_close(book(idx), ours(idx), atol=1e-5, rtol=0)


def test_the_family_finds_names_and_loads_the_file(files, monkeypatch):
    arch, path, _ours, _theirs, _tok = files
    monkeypatch.setenv("ATTENTION_LAB_GGUF_DIR", str(path.parent))
    found = QWEN.find()
    assert [(f.name, f.family) for f in found] == [(path.stem, "qwen")]
    assert found[0].label == f"Tiny {arch} · 1M · F32"
    assert path.stem not in [f.name for f in LLAMA.find()]  # the Llama family no longer claims it
    assert registry.resolve(str(path)).family == "qwen"
    model = registry.load_model(path.stem)
    config = registry.model_config(model)
    assert (config.head_dim, config.n_kv_heads, config.qkv_bias, config.windows) == (
        model.cfg["head_dim"], 2, arch == "qwen2", ())
    assert config.rope_bases == (1e6,) * 3 and config.family_title == "Qwen"
    walk = walk_layers(model, ids_of(model, TEXTS[0]), on_layer=lambda i, w: None)
    assert len(walk.inputs) == 3
    one = registry.layer_attention(model, 2, mask_method="renormalize")
    x = walk.inputs[2]
    with torch.no_grad():
        torch.testing.assert_close(one(x), model.trf_blocks[2].att(x, model.cos, model.sin), atol=1e-5, rtol=0)


def test_how_to_get_names_the_files_and_the_variable():
    text = str(QWEN.how_to_get())
    assert "Qwen2.5-0.5B-Instruct" in text and "Qwen3-0.6B" in text and "ATTENTION_LAB_GGUF_DIR" in text


def test_a_damaged_file_is_a_problem_that_says_what(tmp_path):
    model = randomize(arch_model(qwen_cfg("qwen3")))
    missing = write_gguf(tmp_path / "nonorm.gguf", model, "qwen3", skip="blk.1.attn_k_norm.weight")
    with pytest.raises(Problem, match="lacks the tensor for trf_blocks.1.att.k_norm.weight.*qwen3"):
        load_model(missing)
    data = write_gguf(tmp_path / "whole.gguf", model, "qwen3").read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(data[: len(data) - 500])
    with pytest.raises(Problem, match="cut short|damaged"):
        load_model(cut)
    foreign = write_gguf(tmp_path / "falcon.gguf", model, "falcon")
    with pytest.raises(Problem, match="'falcon' model.*llama.*qwen2.*qwen3.*gemma3") as e:
        registry.load_model(foreign)
    assert e.value.msgid.startswith("{path} holds a {arch} model")


def test_the_messages_read_in_chinese(tmp_path):
    from dashboard.i18n import language, message

    foreign = write_gguf(tmp_path / "falcon.gguf", randomize(arch_model(qwen_cfg("qwen3"))), "falcon")
    with pytest.raises(Problem) as e:
        registry.load_model(foreign)
    with language(CHINESE):
        assert "架构" in message(e.value) and "qwen3" in message(e.value)
        assert "ATTENTION_LAB_GGUF_DIR" in message(QWEN.how_to_get()) and "下载" in message(QWEN.how_to_get())
