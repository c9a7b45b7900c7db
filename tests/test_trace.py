"""Trace: the MHA shape flow of the chapter, step by step, and the record semantics."""

import pytest
import torch

from attn_core import (
    AttentionConfig,
    MultiHeadAttention,
    MultiHeadAttentionWrapper,
    Trace,
    run_attention,
    simplified_attention,
)


def test_mha_trace_is_the_chapters_shape_flow(batch):
    torch.manual_seed(123)
    mha = MultiHeadAttention(3, 2, 6, 0.0, num_heads=2)
    trace = Trace()
    out = mha(batch, trace)
    b, T, h, hd, d_out = 2, 6, 2, 1, 2
    expected = [
        ("queries", (b, T, d_out)), ("keys", (b, T, d_out)), ("values", (b, T, d_out)),
        ("keys.view", (b, T, h, hd)), ("values.view", (b, T, h, hd)), ("queries.view", (b, T, h, hd)),
        ("keys.transpose", (b, h, T, hd)), ("queries.transpose", (b, h, T, hd)),
        ("values.transpose", (b, h, T, hd)),
        ("attn_scores", (b, h, T, T)), ("mask_bool", (T, T)), ("attn_scores_masked", (b, h, T, T)),
        ("attn_scores_scaled", (b, h, T, T)), ("attn_weights", (b, h, T, T)),
        ("attn_weights_dropout", (b, h, T, T)),
        ("context_vec", (b, h, T, hd)), ("context_vec.transpose", (b, T, h, hd)),
        ("context_vec.view", (b, T, d_out)), ("out_proj", (b, T, d_out)),
    ]
    assert [(s.name, s.shape) for s in trace] == expected
    torch.testing.assert_close(trace.last().tensor, out.detach())
    assert trace["keys.transpose"].contiguous is False
    assert trace["context_vec.transpose"].contiguous is False
    assert trace["context_vec.view"].contiguous is True
    assert trace["keys.view"].axes == ("b", "num_tokens", "num_heads", "head_dim")
    for step in trace:
        assert step.code and step.note and step.tensor.device.type == "cpu"
        assert not step.tensor.requires_grad


def test_trace_copies_survive_in_place_masking(batch):
    torch.manual_seed(123)
    t = Trace()
    MultiHeadAttention(3, 2, 6, 0.0, num_heads=2)(batch, t)
    assert torch.isfinite(t["attn_scores"].tensor).all()  # recorded before masked_fill_
    assert torch.isinf(t["attn_scores_masked"].tensor).any()


def test_wrapper_records_each_head_in_its_scope(batch):
    torch.manual_seed(123)
    t = Trace()
    out = MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=3)(batch, t)
    weights = t.of_kind("weights")
    assert [s.name for s in weights] == [f"heads[{i}].attn_weights" for i in range(3)]
    assert [s.prefix for s in weights] == ["heads[0]", "heads[1]", "heads[2]"]
    torch.testing.assert_close(t.last().tensor, out.detach())


def test_simplified_attention_trace(inputs):
    t = Trace()
    res = simplified_attention(inputs, trace=t)
    assert t.kinds() == ["scores", "weights", "context"]
    torch.testing.assert_close(t["attn_weights"].tensor, res.weights)


def test_run_attention_every_variant_ends_with_its_output(batch):
    for variant in ("simplified", "SelfAttention_v1", "SelfAttention_v2", "CausalAttention",
                    "MultiHeadAttentionWrapper", "MultiHeadAttention"):
        cfg = AttentionConfig(variant, 3, 4, 2, 16)
        out, t = run_attention(cfg, batch)
        assert t.steps[0].kind == "input"
        torch.testing.assert_close(t.last().tensor, out)
        assert out.shape == (2, 6, cfg.output_width)
        assert t.of_kind("weights"), variant


def test_no_trace_records_nothing_and_matches(batch):
    torch.manual_seed(0)
    mha = MultiHeadAttention(3, 4, 6, 0.0, 2)
    t = Trace()
    torch.testing.assert_close(mha(batch), mha(batch, t), atol=1e-6, rtol=0)
    assert len(t) > 0


def test_previous_form_is_the_same_tensor_one_step_earlier():
    from attn_core import AttentionConfig, run_attention
    from attn_core.tracing.views import previous_form

    cfg = AttentionConfig(variant="MultiHeadAttention", d_in=8, d_out=8, num_heads=4, context_length=16)
    _, trace = run_attention(cfg, torch.randn(1, 10, 8))
    steps = list(trace)
    prev = {s.name: (p[0], p[1].name) if (p := previous_form(steps, i)) else None for i, s in enumerate(steps)}
    assert prev["x"] is None
    for var in ("queries", "keys", "values"):
        assert prev[f"{var}.view"] == (var, var)
        assert prev[f"{var}.transpose"] == (var, f"{var}.view")
    assert prev["attn_scores_masked"] == ("attn_scores", "attn_scores")
    assert prev["attn_weights"] == ("attn_scores_scaled", "attn_scores_scaled")
    assert prev["context_vec.view"] == ("context_vec", "context_vec.transpose")


def test_unchanged_tensor_recorded_twice_shares_its_copy():
    """Dropout in eval mode returns its input: the trace keeps one copy, not two."""
    from attn_core import BOOK_INPUTS, CausalAttention, Trace

    torch.manual_seed(123)
    ca = CausalAttention(3, 2, 6, 0.5).eval()
    trace = Trace()
    ca(BOOK_INPUTS.unsqueeze(0), trace)
    w, d = trace["attn_weights"].tensor, trace["attn_weights_dropout"].tensor
    assert d.untyped_storage().data_ptr() == w.untyped_storage().data_ptr()
    ca.train()  # active dropout makes a new tensor: its own copy
    trace = Trace()
    ca(BOOK_INPUTS.unsqueeze(0), trace)
    w, d = trace["attn_weights"].tensor, trace["attn_weights_dropout"].tensor
    assert d.untyped_storage().data_ptr() != w.untyped_storage().data_ptr()
    assert not torch.equal(w, d)


def test_a_tensor_changed_in_place_is_copied_again():
    from attn_core import Trace

    t = torch.zeros(3)
    trace = Trace()
    trace.record("a", t, "a = zeros")
    t += 1
    trace.record("b", t, "a += 1")
    assert trace["a"].tensor.tolist() == [0, 0, 0] and trace["b"].tensor.tolist() == [1, 1, 1]


def test_a_trace_without_copies_holds_the_tensors_and_keeps_scores_from_before_the_mask():
    """run_attention's Trace(copy=False): no copy of each (b, heads, T, T) tensor (~280 MB at GPT-2 size, 1,024
    tokens), yet the scores recorded before masked_fill_ keep their future cells."""
    from attn_core import MultiHeadAttention, Trace

    torch.manual_seed(0)
    mha = MultiHeadAttention(8, 8, 5, 0.0, num_heads=2).eval()
    x = torch.randn(1, 5, 8)
    shared, copied = Trace(copy=False), Trace()
    with torch.no_grad():
        mha(x, shared)
        mha(x, copied)
    shared.check()
    for step in copied:
        assert torch.equal(step.tensor, shared[step.name].tensor), step.name
    assert torch.isfinite(shared["attn_scores"].tensor).all()  # copied before the mask changed it
    assert torch.isinf(shared["attn_scores_masked"].tensor).any()
    weights = shared["attn_weights"].tensor  # the forward's own tensor: the scaled scores' softmax, not a copy
    assert weights.untyped_storage().data_ptr() == shared["attn_weights_dropout"].tensor.untyped_storage().data_ptr()


def test_a_held_tensor_changed_in_place_unannounced_raises():
    from attn_core import Trace
    from attn_core.tracing.trace import ChangedInPlace

    t = torch.zeros(3)
    trace = Trace(copy=False)
    trace.record("a", t, "a = zeros")
    t.view(3)[0] = 1  # through a view: the same version counter
    with pytest.raises(ChangedInPlace, match="'a'"):
        trace.record("b", t, "a[0] = 1")
    t = torch.zeros(3)
    trace = Trace(copy=False)
    trace.record("a", t, "a = zeros")
    trace.before_change(t)
    t += 1
    trace.record("b", t, "a += 1")
    trace.check()
    assert trace["a"].tensor.tolist() == [0, 0, 0] and trace["b"].tensor.tolist() == [1, 1, 1]
