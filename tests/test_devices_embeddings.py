"""Devices, embeddings and moving modules between devices."""

import pytest
import torch

from attn_core import (
    BOOK_INPUTS,
    AttentionConfig,
    MultiHeadAttention,
    Trace,
    available_devices,
    embed,
    pick_device,
    run_attention,
    sinusoidal_positions,
    tokenize,
)

HAS_CUDA = torch.cuda.is_available()
HAS_MPS = bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available())


def test_cpu_always_available():
    assert available_devices()[0] == "cpu"
    assert pick_device("cpu") == torch.device("cpu")
    assert pick_device("auto").type in {"cpu", "cuda", "mps"}


def test_unknown_device_lists_what_is_available():
    with pytest.raises(ValueError, match="not available here; choose one of: cpu"):
        pick_device("tpu")
    if not HAS_CUDA:
        with pytest.raises(ValueError, match="cuda"):
            pick_device("cuda")


@pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device on this machine")
def test_cuda_selected_and_results_match_cpu(batch):
    assert pick_device("auto").type == "cuda"
    assert pick_device("cuda") == torch.device("cuda:0")
    cfg = AttentionConfig("MultiHeadAttention", 3, 2, 2, 6, seed=123)
    out_cpu, _ = run_attention(cfg, batch)
    out_gpu, trace = run_attention(AttentionConfig(**{**cfg.as_dict(), "device": "cuda:0"}), batch)
    torch.testing.assert_close(out_gpu, out_cpu, atol=1e-4, rtol=0)
    assert all(s.tensor.device.type == "cpu" for s in trace)


@pytest.mark.skipif(not HAS_MPS, reason="no Apple MPS device on this machine")
def test_mps_selected(batch):
    assert "mps" in available_devices()
    cfg = AttentionConfig("MultiHeadAttention", 3, 2, 2, 6, device="mps")
    out, _ = run_attention(cfg, batch)
    assert out.device.type == "cpu"


def test_module_and_mask_buffer_move_with_to(batch):
    mha = MultiHeadAttention(3, 2, 6, 0.0, 2).to(torch.float64)
    assert mha.mask.dtype == torch.float64
    assert "mask" in dict(mha.named_buffers())
    t = Trace()
    mha(batch.double(), t)
    assert t.last().tensor.dtype == torch.float64


def test_learned_embeddings_deterministic_and_seeded():
    ids = [t.id for t in tokenize("the cat saw the dog")]
    a = embed(ids, 8, "learned", seed=1)
    assert a.shape == (1, 5, 8)
    torch.testing.assert_close(a, embed(ids, 8, "learned", seed=1))
    assert not torch.equal(a, embed(ids, 8, "learned", seed=2))
    assert not torch.equal(a[0, 0], a[0, 3])  # "the" twice: same token, different positions


def test_sinusoidal_and_onehot():
    pe = sinusoidal_positions(4, 6)
    torch.testing.assert_close(pe[0], torch.tensor([0.0, 1.0, 0.0, 1.0, 0.0, 1.0]))
    assert abs(pe[1, 0].item() - torch.sin(torch.tensor(1.0)).item()) < 1e-6
    ids = [5, 9, 5]
    oh = embed(ids, 4, "onehot")[0]
    torch.testing.assert_close(oh[0], oh[2])
    torch.testing.assert_close(oh.sum(-1), torch.ones(3))
    with pytest.raises(ValueError, match="distinct tokens"):
        embed([1, 2, 3], 2, "onehot")
    s = embed(ids, 5, "sinusoidal", seed=0)  # odd d_in works too
    assert s.shape == (1, 3, 5)


def test_book_inputs_mode():
    ids = [t.id for t in tokenize("Your journey starts with one step")]
    torch.testing.assert_close(embed(ids, 3, "book")[0], BOOK_INPUTS)
    with pytest.raises(ValueError, match="6 tokens of 3 numbers"):
        embed(ids[:3], 3, "book")


def test_embedding_tables_are_remembered_by_bytes_not_by_count(monkeypatch):
    """Issue 11: three input widths in one classroom (3, 16, 768) thrashed a two-table cache, and every GPT-2-size
    run redrew its 154 MB table (~0.25 s). Tables are kept up to EMBEDDING_CACHE_BYTES, least recently used first."""
    import attn_core.text.embeddings as emb

    emb.clear_embedding_cache()
    drawn = []
    real = torch.randn

    def counted(*args, **kwargs):
        drawn.append(args[:2])
        return real(*args, **kwargs)

    monkeypatch.setattr(emb.torch, "randn", counted)
    for _ in range(3):
        for d_in in (3, 16, 64):
            emb.embed([1, 2, 3], d_in, "learned", seed=123)
    assert len(drawn) == 3 * 2, drawn  # each width's token and position tables drawn once
    assert torch.equal(emb.embed([1, 2], 16, "learned", seed=123), emb.embed([1, 2], 16, "learned", seed=123))
    # the byte bound: room for about one 64-d table; the least recently used go, the last one always stays
    emb.clear_embedding_cache()
    monkeypatch.setattr(emb, "EMBEDDING_CACHE_BYTES", (emb.VOCAB_SIZE + emb.MAX_POSITIONS) * 64 * 4)
    emb.embed([1], 3, "learned", seed=123)
    emb.embed([1], 16, "learned", seed=123)
    assert list(emb._TABLES) == [(3, 123), (16, 123)]  # small tables share the room
    emb.embed([1], 64, "learned", seed=123)  # over the bound: the least recently used go
    assert list(emb._TABLES) == [(64, 123)]
    emb.embed([1], 16, "learned", seed=123)
    assert list(emb._TABLES) == [(16, 123)], "the newest stays even when it alone fills the room"
    emb.clear_embedding_cache()
    assert not emb._TABLES
