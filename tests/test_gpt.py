"""The chapter-4 GPT model around our MultiHeadAttention, and the chapter-2 data loader."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attn_core import Trace
from attn_core.models.gpt import (
    GELU,
    GPT_CONFIG_124M,
    FeedForward,
    GPTModel,
    LayerNorm,
    TransformerBlock,
    generate_text_simple,
)
from attn_core.models.traced import layer_trace
from attn_core.text.data import GPTDatasetV1, create_dataloader_v1
from attn_core.text.tokens import bpe_encoding
from attn_core.tracing.views import all_heads, cell_story, head_matrix, num_heads

SMALL = {"vocab_size": 50, "context_length": 16, "emb_dim": 32, "n_heads": 4, "n_layers": 2,
         "drop_rate": 0.0, "qkv_bias": False}


def test_124m_parameters_and_book_generation():
    torch.manual_seed(123)
    model = GPTModel(GPT_CONFIG_124M)
    model.eval()
    assert sum(p.numel() for p in model.parameters()) == 163_009_536
    enc = bpe_encoding()
    idx = torch.tensor([enc.encode("Hello, I am")])
    out = generate_text_simple(model, idx, max_new_tokens=10, context_size=GPT_CONFIG_124M["context_length"])
    assert out[0].tolist() == [15496, 11, 314, 716, 27018, 24086, 47843, 30961, 42348, 7267, 49706, 43231,
                               47062, 34657]


def test_layernorm_gelu_feedforward_as_the_book():
    torch.manual_seed(123)
    x = torch.randn(2, 5)
    out = LayerNorm(5)(x)
    assert torch.allclose(out.mean(-1), torch.zeros(2), atol=1e-6)
    assert torch.allclose(out.var(-1, unbiased=False), torch.ones(2), atol=1e-4)
    g = GELU()(torch.tensor([-3.0, 0.0, 1.0, 3.0]))
    assert torch.allclose(g, torch.nn.functional.gelu(torch.tensor([-3.0, 0.0, 1.0, 3.0]), approximate="tanh"))
    ff = FeedForward({"emb_dim": 8})
    assert ff(torch.randn(2, 3, 8)).shape == (2, 3, 8)
    assert ff.layers[0].out_features == 32


def test_block_shapes_and_attention_only():
    torch.manual_seed(0)
    block = TransformerBlock(GPT_CONFIG_124M | {"context_length": 16})
    x = torch.rand(2, 4, 768)
    assert block(x).shape == (2, 4, 768)
    att_only = TransformerBlock(SMALL | {"attention_only": True})
    assert not hasattr(att_only, "ff") and not hasattr(att_only, "norm2")
    full = GPTModel(SMALL)
    lean = GPTModel(SMALL | {"attention_only": True})
    assert sum(p.numel() for p in lean.parameters()) < sum(p.numel() for p in full.parameters())
    assert lean(torch.randint(0, 50, (3, 7))).shape == (3, 7, 50)


def test_trace_per_layer_matches_the_untraced_forward():
    torch.manual_seed(1)
    model = GPTModel(SMALL).eval()
    idx = torch.randint(0, 50, (1, 9))
    trace = Trace()
    with torch.no_grad():
        traced = model(idx, trace=trace)
        plain = model(idx)  # the fused SDPA path
    assert torch.allclose(traced, plain, atol=1e-5)
    assert "trf_blocks[0].att.attn_weights" in trace and "trf_blocks[1].att.attn_weights" in trace
    assert trace.prefixes() == ["trf_blocks[0].att", "trf_blocks[1].att"]
    w1 = trace["trf_blocks[1].att.attn_weights"].tensor
    assert w1.shape == (1, 4, 9, 9)
    one = layer_trace(trace, 1)
    assert "attn_weights" in one and num_heads(one) == 4
    assert np.allclose(head_matrix(one, "weights", 2), w1[0, 2].numpy())
    assert all_heads(one, "weights").shape == (4, 9, 9)
    assert not np.allclose(all_heads(layer_trace(trace, 0), "weights"), all_heads(one, "weights"))
    story = cell_story(one, 5, 3, head=1)
    assert story.weight == pytest.approx(float(w1[0, 1, 5, 3]), abs=1e-6)
    with pytest.raises(KeyError):
        layer_trace(trace, 2)


def test_trace_layers_records_only_the_chosen_layer():
    torch.manual_seed(2)
    model = GPTModel(SMALL).eval()
    idx = torch.randint(0, 50, (1, 9))
    full, one = Trace(), Trace()
    with torch.no_grad():
        logits_full = model(idx, trace=full)
        logits_one = model(idx, trace=one, trace_layers={1})
    assert one.prefixes() == ["trf_blocks[1].att"]
    assert torch.allclose(logits_one, logits_full, atol=1e-5)  # layer 0 ran the fused path
    assert torch.allclose(one["trf_blocks[1].att.attn_weights"].tensor,
                          full["trf_blocks[1].att.attn_weights"].tensor, atol=1e-6)
    assert len(one) == len(full) // 2
    empty = Trace()
    model(idx, trace=empty, trace_layers=())
    assert len(empty) == 0
    with pytest.raises(ValueError, match=r"trace_layers names \[2\], but the model's layers are 0..1"):
        model(idx, trace=Trace(), trace_layers={2})


def test_model_rejects_bad_inputs():
    model = GPTModel(SMALL)
    with pytest.raises(ValueError, match="context_length"):
        model(torch.zeros(1, 17, dtype=torch.long))
    with pytest.raises(ValueError, match="vocabulary"):
        model(torch.full((1, 3), 50))
    with pytest.raises(ValueError, match="divisible"):
        GPTModel(SMALL | {"n_heads": 5})


def test_dataset_windows_and_stride_as_the_book():
    text = "In the heart of the city stood the old library, a relic from a bygone era. " * 3
    enc = bpe_encoding()
    ids = enc.encode(text)
    ds = GPTDatasetV1(text, enc, max_length=4, stride=1)
    assert len(ds) == len(ids) - 4
    x, y = ds[0]
    assert x.tolist() == ids[:4] and y.tolist() == ids[1:5]
    ds2 = GPTDatasetV1(text, enc, max_length=4, stride=4)
    assert ds2[1][0].tolist() == ids[4:8]  # stride 4: windows do not overlap
    loader = create_dataloader_v1(text, batch_size=8, max_length=4, stride=4, shuffle=False)
    inputs, targets = next(iter(loader))
    assert inputs.shape == (8, 4)
    assert torch.equal(inputs[:, 1:], targets[:, :-1])
    assert inputs[1].tolist() == ids[4:8]
    with pytest.raises(ValueError, match="more than max_length"):
        GPTDatasetV1("short", enc, max_length=4, stride=1)
