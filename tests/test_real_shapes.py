"""bench/real_shapes.py's files at tiny size (2 layers, a 2,000-token vocabulary, the real widths and metadata):
our loader reads back the real models' configs, Q8_0 matrices and F32 norms, and a tokenizer of the vocabulary's
size; Qwen3's file gives transformers' own GGUF loading the same tokens and logits; the synthetic vocabularies are
built by their merges. What made loading them slow is checked here too: our GGUF reader against ``gguf.GGUFReader``,
Q8_0 de-quantized at once against ``gguf.quants``, no second copy of a de-quantized tensor. Fast: ~35 MB files."""

from __future__ import annotations

import time

import gguf
import numpy as np
import pytest
import torch

from attn_core.models import gguf_weights, registry
from attn_core.models.gguf_files import describe
from attn_core.models.gguf_reader import Reader
from attn_core.models.gguf_tokenizer import BYTES
from bench.real_shapes import MODELS, grow_vocab, write_model
from tests.gguf_fixtures import transformers_model

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py
VOCAB = 2_000
# each model's published config.json (Hugging Face), in the book's names
PUBLISHED = {
    "qwen2.5-0.5b": dict(arch="qwen2", emb_dim=896, n_heads=14, n_kv_groups=2, head_dim=64, hidden_dim=4_864,
                         context_length=32_768, rope_base=1e6),
    "qwen3-0.6b": dict(arch="qwen3", emb_dim=1_024, n_heads=16, n_kv_groups=8, head_dim=128, hidden_dim=3_072,
                       context_length=40_960, rope_base=1e6),
    "gemma-3-270m": dict(arch="gemma3", emb_dim=640, n_heads=4, n_kv_groups=1, head_dim=256, hidden_dim=2_048,
                         context_length=32_768, rope_base=1e6, rope_local_base=10_000.0, query_pre_attn_scalar=256.0),
}
LAYERS = {"qwen2.5-0.5b": 24, "qwen3-0.6b": 28, "gemma-3-270m": 18}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("real_shapes")


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTENTION_LAB_CACHE", str(tmp_path / "cache"))


@pytest.mark.parametrize("key", list(MODELS))
def test_a_tiny_file_holds_the_real_config_and_types(folder, key):
    path = write_model(folder, key, layers=2, vocab=VOCAB)
    model = registry.load_model(path)
    c = model.cfg
    assert {k: c[k] for k in PUBLISHED[key]} == PUBLISHED[key]
    assert (c["n_layers"], c["vocab_size"], c["tied"]) == (2, VOCAB, True) and c["rms_eps"] == pytest.approx(1e-6)
    assert MODELS[key]["cfg"]["n_layers"] == LAYERS[key]  # the full file's depth
    # 7 matrices a layer and the embedding; per layer 2 norms, and Qwen2's 3 biases or the q/k norms (and Gemma's
    # 2 post-norms), and the final norm
    per_layer = {"qwen2.5-0.5b": 2 + 3, "qwen3-0.6b": 2 + 2, "gemma-3-270m": 2 + 2 + 2}[key]
    assert c["types"] == {"Q8_0": 7 * 2 + 1, "F32": per_layer * 2 + 1}
    assert model.tokenizer.vocab_size == VOCAB
    if key.startswith("gemma"):
        assert c["windows"] == [512, 512]  # layers 0 and 1 of 6: local, over the real window
        assert model.tokenizer.encode("a b")[0] == 2  # <bos> first, as Gemma's files ask
    else:
        assert model.tokenizer.decode(model.tokenizer.encode("<|im_start|>user\n你好")) == "<|im_start|>user\n你好"
    assert describe(path).startswith(MODELS[key]["name"]) and describe(path).endswith(" · Q8_0")


def test_qwen3s_file_equals_transformers_loading(folder):
    path = write_model(folder, "qwen3-0.6b", layers=2, vocab=VOCAB)
    ours = registry.load_model(path)
    theirs, tokenizer = transformers_model(path)
    text = "The quick brown fox 你好 <|im_start|>user\n<think> 12345"
    ids = ours.tokenizer.encode(text)
    assert ids == tokenizer.encode(text) and len(ids) > 20
    with torch.no_grad():
        torch.testing.assert_close(ours(torch.tensor([ids])), theirs(torch.tensor([ids])).logits, atol=2e-5, rtol=0)


def test_the_synthetic_vocabulary_is_built_by_its_merges():
    tokens, merges = grow_vocab(list(BYTES), 151_643, seed=1)  # Qwen's regular tokens
    assert len(tokens) == len(set(tokens)) == 151_643 and len(merges) == 151_643 - 256
    known = set(BYTES)
    for (left, right), token in zip(merges, tokens[256:]):
        assert left in known and right in known and left + right == token  # each from two earlier tokens
        known.add(token)
    assert 5 <= sum(map(len, tokens)) / len(tokens) <= 8  # a trained BPE's token lengths, roughly


def best_of(n: int, fn) -> float:
    times = []
    for _unused in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def test_our_reader_reads_what_gguf_reads_and_sooner(folder):
    path = write_model(folder, "qwen2.5-0.5b", layers=2, vocab=VOCAB)
    ours, theirs = Reader(path), gguf.GGUFReader(path)
    assert set(theirs.fields) - set(ours.fields) == {"GGUF.version", "GGUF.tensor_count", "GGUF.kv_count"}
    assert all(ours.fields[k].contents() == theirs.fields[k].contents() for k in ours.fields)
    assert len(ours.fields["tokenizer.ggml.merges"].contents()) == VOCAB - 22 - 256
    assert len(ours.tensors) == len(theirs.tensors) == 2 * 12 + 2
    for a, b in zip(ours.tensors, theirs.tensors):
        assert (a.name, a.tensor_type, a.shape.tolist(), a.n_bytes, a.data_offset) == (
            b.name, b.tensor_type, b.shape.tolist(), b.n_bytes, b.data_offset)
        assert a.data.dtype == b.data.dtype and np.array_equal(a.data, b.data)
    # gguf's reader makes numpy views per string: seconds for a real vocabulary (docs/measurements.md)
    assert best_of(3, lambda: Reader(path)) < 0.2 * best_of(3, lambda: gguf.GGUFReader(path))


def test_q8_0_is_dequantized_as_gguf_does_bit_for_bit():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((48, 256), dtype=np.float32) * rng.choice([0.0, 1e-4, 0.02, 3.0], (48, 1))
    data = gguf.quants.quantize(x, gguf.GGMLQuantizationType.Q8_0)
    ours = gguf_weights.dequantize(data, gguf.GGMLQuantizationType.Q8_0)
    theirs = gguf.quants.dequantize(data, gguf.GGMLQuantizationType.Q8_0)
    assert ours.dtype == np.float32 and ours.shape == (48, 256) and np.array_equal(ours, theirs)
    assert np.abs(ours - x).max() <= np.abs(x).max() / 254 * 1.01  # half a step of the largest block


def test_a_dequantized_tensor_is_not_copied_again_a_mapped_one_is(folder, monkeypatch):
    path = write_model(folder, "gemma-3-270m", layers=1, vocab=VOCAB)
    made = {}
    real = gguf_weights.dequantize

    def remember(data, qtype):
        made[qtype.name] = made.get(qtype.name, []) + [out := real(data, qtype)]
        return out

    monkeypatch.setattr(gguf_weights, "dequantize", remember)
    reader = gguf_weights.open_gguf(path)
    state, types = gguf_weights.read_tensors(reader, path, gguf_weights.read_config(reader, path))
    assert types == {"Q8_0": 8, "F32": 7}
    by_type = {kind: [t for t in state.values() if any(np.shares_memory(t.numpy(), m) for m in made[kind])]
               for kind in made}
    assert len(by_type["Q8_0"]) == 8 and by_type["F32"] == []  # Q8_0: kept as made; F32: copied off the map
    assert all(t.numpy().flags.writeable for t in state.values())


def mapped_kb(path) -> int:
    """This process's resident KB of ``path``'s memory maps (/proc/self/smaps)."""
    total, inside = 0, False
    for line in open("/proc/self/smaps").read().splitlines():
        if line[:1].isdigit() or line[:1] in "abcdef" and "-" in line.split()[0]:
            inside = line.endswith(str(path))
        elif inside and line.startswith("Rss:"):
            total += int(line.split()[1])
    return total


def test_a_cold_load_lets_the_files_pages_go(folder):
    path = write_model(folder, "qwen3-0.6b", layers=2, vocab=VOCAB)
    reader = gguf_weights.open_gguf(path)
    state, _types = gguf_weights.read_tensors(reader, path, gguf_weights.read_config(reader, path))
    assert len(state) == 2 * 11 + 2
    # the float32 weights are held; the file's pages read for them are not (they all stayed resident before)
    assert mapped_kb(path) < 0.05 * path.stat().st_size / 1024


def test_per_token_losses_hold_no_second_copy_of_the_logits():
    from attn_core.labs.heads import token_losses
    from dashboard.state.cache import tune_allocator

    tune_allocator()  # the server's: freed tensors go back to the OS at once, so the peak is what was held
    logits = torch.randn(1, 501, 60_000)  # as large as Qwen's vocabulary's logits on a short text
    idx = torch.randint(0, 60_000, (1, 501))
    expected = torch.nn.functional.cross_entropy(logits[0, :-1], idx[0, 1:], reduction="none")
    with open("/proc/self/clear_refs", "w") as f:  # the peak RSS (VmHWM) starts again from now
        f.write("5")
    before = mapped_status("VmRSS")
    losses = token_losses(logits, idx)
    assert mapped_status("VmHWM") - before < 40 * 1024  # KB: blocks of rows, not a (500, 60,000) log-softmax
    torch.testing.assert_close(losses, expected, atol=1e-6, rtol=0)
    assert token_losses(logits[:, :1], idx[:, :1]).shape == (0,)


def mapped_status(field: str) -> int:
    """A /proc/self/status memory figure in KB."""
    line = next(x for x in open("/proc/self/status").read().splitlines() if x.startswith(field + ":"))
    return int(line.split()[1])
