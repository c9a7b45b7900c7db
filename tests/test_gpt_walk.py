"""What the app reads from a pretrained model: ``walk_layers`` (each layer's input and the last logits, one layer's
weights at a time), ``attention_like`` (a layer's attention with other knobs, the model untouched) and the model
view's head types."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attn_core import Trace
from attn_core.labs.scores import head_scores, head_type
from attn_core.models.gpt import GPTModel, attention_like
from attn_core.models.traced import layer_trace, walk_layers

CFG = {"vocab_size": 50, "context_length": 16, "emb_dim": 16, "n_heads": 4, "n_layers": 3, "drop_rate": 0.0,
       "qkv_bias": True}


@pytest.fixture(scope="module")
def model() -> GPTModel:
    torch.manual_seed(0)
    return GPTModel(CFG).eval()


def test_walk_keeps_every_layer_input_and_the_last_logits(model):
    idx = torch.tensor([[3, 7, 1, 3, 7, 9, 2]])
    trace = Trace()
    with torch.no_grad():
        logits = model(idx, trace=trace)
    seen: dict[int, np.ndarray] = {}
    walk = walk_layers(model, idx, on_layer=lambda i, w: seen.setdefault(i, w.numpy().copy()))
    plain = walk_layers(model, idx)
    for i in range(CFG["n_layers"]):
        layer = layer_trace(trace, i)
        torch.testing.assert_close(walk.inputs[i], layer["input"].tensor)
        torch.testing.assert_close(plain.inputs[i], layer["input"].tensor)  # the fused path reads the same input
        np.testing.assert_allclose(seen[i], layer["attn_weights"].tensor[0].numpy(), atol=1e-6)
    torch.testing.assert_close(walk.last_logits, logits[0, -1])
    torch.testing.assert_close(plain.last_logits, logits[0, -1], atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="context_length"):
        walk_layers(model, torch.zeros(1, 17, dtype=torch.long))


def test_attention_like_shares_the_weights_and_leaves_the_model_alone(model):
    att = model.trf_blocks[1].att
    x = torch.randn(1, 5, CFG["emb_dim"])
    mine = attention_like(att, mask_method="renormalize", dropout=0.5, train=True)
    assert mine.W_query.weight is att.W_query.weight and mine.mask is att.mask
    assert not att.training and not model.training and mine.training
    a, b = Trace(), Trace()
    with torch.no_grad():
        att(x, a)
        attention_like(att, mask_method="renormalize")(x, b)
    torch.testing.assert_close(a["attn_weights"].tensor, b["attn_weights"].tensor)


def causal(rows: np.ndarray) -> np.ndarray:
    return rows / rows.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("pattern, want", [("previous", "previous_token"), ("sink", "first_token"),
                                           ("self", "local"), ("uniform", "broad")])
def test_head_types(pattern, want):
    T = 32
    i = np.arange(T)
    if pattern == "previous":
        w = np.eye(T, k=-1) + np.eye(T) * 1e-3
    elif pattern == "sink":
        w = np.zeros((T, T)) + np.eye(T) * 1e-3
        w[:, 0] = 1
    elif pattern == "self":
        w = np.eye(T)
    else:
        w = (i[:, None] >= i[None, :]).astype(float)
    w = causal(w)[None, None]  # (1 layer, 1 head, T, T)
    assert head_type(head_scores(w), 0, 0, T) == want
