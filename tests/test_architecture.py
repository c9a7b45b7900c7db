"""Issue 19: one place per concept. A variant is a class + one registry entry; a step's code line is the real
line of its class's source; one mask builder; views read any shape (T_q != T_k, grouped K/V heads)."""

from __future__ import annotations

import inspect
import linecache

import numpy as np
import pytest
import torch

from apptest_utils import messages, new_app, show_section
from attn_core import VARIANTS, AttentionConfig, CausalAttention, Trace, causal_mask, register, run_attention
from attn_core.attention.variants import REGISTRY, Variant
from attn_core.tracing.trace import function_at, record
from attn_core.tracing.views import all_heads, cell_story, head_matrix, kv_head, num_heads

# --- a toy variant: its class and one registry entry, nothing else -------------------------------------------


class NoScaleAttention(CausalAttention):
    """Causal attention without the 1/sqrt(d_k) scaling (to show why the book scales)."""

    def forward(self, x: torch.Tensor, trace: Trace | None = None) -> torch.Tensor:
        b, num_tokens, d_in = x.shape
        keys = self.W_key(x)  # (b, num_tokens, d_out)
        queries = self.W_query(x)
        values = self.W_value(x)
        record(trace, "queries", queries)
        record(trace, "keys", keys)
        record(trace, "values", values)
        attn_scores = queries @ keys.transpose(1, 2)  # (b, num_tokens, num_tokens)
        record(trace, "attn_scores", attn_scores)
        mask_bool = self.mask.bool()[:num_tokens, :num_tokens]
        record(trace, "mask_bool", mask_bool)
        attn_scores_masked = attn_scores.masked_fill(mask_bool, -torch.inf)
        record(trace, "attn_scores_masked", attn_scores_masked)
        attn_weights = torch.softmax(attn_scores_masked, dim=-1)  # no division by sqrt(d_k)
        record(trace, "attn_weights", attn_weights)
        context_vec = attn_weights @ values
        record(trace, "context_vec", context_vec)
        return context_vec


TOY = Variant("NoScaleAttention", "NoScaleAttention (toy: no √d_k)", "Causal attention without the scaling.",
              lambda cfg: NoScaleAttention(cfg.d_in, cfg.d_out, cfg.context_length, cfg.dropout),
              frozenset({"d_out", "context_length"}), shape_flow=True)


@pytest.fixture
def toy_variant(fresh_caches):
    register(TOY)
    yield TOY
    REGISTRY.pop(TOY.id, None)


def test_a_registered_toy_variant_shows_in_the_sidebar_explore_and_shape_flow(toy_variant):
    at = new_app(variant=TOY.id, input_mode="learned", d_in="8", d_out="8")
    at.run()
    msgs = messages(at)
    assert not msgs["exception"] and not msgs["error"] and not msgs["warning"], msgs
    picker = at.selectbox(key="variant")
    assert TOY.id in picker.options or TOY.label in picker.options
    assert picker.value == TOY.id
    assert at.markdown[0].value.startswith(f"**{TOY.label}**")  # Explore's summary line
    assert at.number_input(key="num_heads").disabled and not at.number_input(key="d_out").disabled
    show_section(at, "Scores")
    assert not messages(at)["exception"]
    at.switch_page("app_pages/shape_flow.py").run()
    assert not messages(at)["exception"], messages(at)
    steps = []
    for _ in range(12):
        steps.append(at.subheader[0].value)
        if at.button(key="flow_step_next").disabled:
            break
        at.button(key="flow_step_next").click().run()
    assert steps[-1].endswith("`context_vec`") and any("attn_scores_masked" in s for s in steps)
    assert not any("scaled" in s for s in steps)  # the toy's own steps, not MultiHeadAttention's
    codes = [c.value for c in at.code]
    assert "context_vec = attn_weights @ values" in codes[0]


def test_the_toy_variant_runs_through_the_pipeline_without_scaling(toy_variant):
    cfg = AttentionConfig(variant=TOY.id, d_in=4, d_out=4, context_length=16)
    x = torch.randn(1, 5, 4)
    _, trace = run_attention(cfg, x)
    scores = head_matrix(trace, "scores")
    np.testing.assert_allclose(head_matrix(trace, "weights"),
                               torch.softmax(torch.tensor(scores).masked_fill(causal_mask(5), -torch.inf), -1),
                               atol=1e-6)


# --- the code line of every step is the real line ------------------------------------------------------------

CONFIGS = [dict(variant=v) for v in VARIANTS] + [
    dict(variant="MultiHeadAttention", mask_method="renormalize"),
    dict(variant="MultiHeadAttention", dropout=0.5, train_mode=True),
    dict(variant="CausalAttention", causal=False),
]


@pytest.mark.parametrize("kw", CONFIGS, ids=lambda kw: "-".join(str(v) for v in kw.values()))
def test_every_step_code_line_is_verbatim_in_its_class_source(kw):
    cfg = AttentionConfig(d_in=4, d_out=4, num_heads=2, context_length=16, **kw)
    _, trace = run_attention(cfg, torch.randn(1, 5, 4))
    module = cfg.spec.build(cfg)
    classes = {type(m).__name__ for m in module.modules()} if module is not None else set()
    # functions the forwards call
    helpers = {"masked_softmax", "record_dropout", "simplified_attention", "attend", "flash_attention"}
    for step in list(trace)[1:]:  # the first is the input x, described by the page that made it
        assert step.origin is not None, step.name
        filename, line = step.origin
        assert linecache.getline(filename, line).strip() == step.code.splitlines()[0].strip(), (step.name, step.code)
        name, _, lines = function_at(step.origin)
        assert step.code in "\n".join(lines), (step.name, step.code, name)  # verbatim, in the function that ran it
        owner = name.split(".")
        assert owner[0] in classes or owner[-1] in helpers, (step.name, name)
        if owner[0] in classes:  # a class's own line: also verbatim in that class's source
            cls = next(type(m) for m in module.modules() if type(m).__name__ == owner[0])
            assert step.code in inspect.getsource(cls), (step.name, name)


def test_shape_flow_marks_the_real_line_of_a_helper_step(fresh_caches):
    from apptest_utils import open_page

    at = open_page("app_pages/shape_flow.py", input_mode="learned", variant="MultiHeadAttention", d_in="8",
                   d_out="8", num_heads="4", flow_step="14")
    assert at.subheader[0].value == "14. `attn_scores_scaled`"
    at.session_state["flow_source"] = True
    at.run()
    assert any(e.label == "This line in the full source of `masked_softmax`" for e in at.expander)
    marked = next(c.value for c in at.code if "◀◀◀ this step" in c.value)
    line = next(t for t in marked.splitlines() if "◀◀◀" in t)
    assert line.split("#")[0].strip() == "attn_scores_scaled = attn_scores / d_k**0.5"


# --- one mask builder ------------------------------------------------------------------------------------------

def test_causal_mask_is_the_books_triu_and_window_and_offset_masks_follow():
    assert torch.equal(causal_mask(6), torch.triu(torch.ones(6, 6), diagonal=1).bool())
    band = causal_mask(6, window=2)
    assert band.tolist()[4] == [True, True, True, False, False, True]  # query 5 sees keys 4 and 5
    assert torch.equal(causal_mask(6, window=6), causal_mask(6))  # a window of at least T is causal
    # three new queries (positions 5, 6, 7) over 8 cached keys: the last rows of the square mask
    assert torch.equal(causal_mask(3, 8), causal_mask(8)[5:])
    assert torch.equal(causal_mask(1, 4, offset=1), torch.tensor([[False, False, True, True]]))
    assert not causal_mask(4, causal=False).any()
    assert causal_mask(4, causal=False, window=1).sum() == 6
    with pytest.raises(ValueError, match="window"):
        causal_mask(4, window=0)


def test_the_classes_buffers_and_the_lab_use_the_builder():
    ca = CausalAttention(3, 2, 7, 0.0)
    assert torch.equal(ca.mask, causal_mask(7).float()) and list(ca.state_dict()) == [
        "mask", "W_query.weight", "W_key.weight", "W_value.weight"]



def test_every_mask_is_named_by_what_it_hides():
    """Issue 33: the words come from the same knobs as the mask, and a cell called hidden is hidden."""
    from attn_core.attention.masks import MaskKind

    kinds = {MaskKind(): "causal", MaskKind(True, 1): "causal, window 1",
             MaskKind(True, 3, 2): "causal, window 3 + 2 sinks", MaskKind(False): "none",
             MaskKind(False, 2): "window 2, not causal"}
    for kind, name in kinds.items():
        assert kind.name == name
        mask = causal_mask(6, window=kind.window, causal=kind.causal, sinks=kind.sinks)
        for i in range(6):
            for j in range(6):  # a reason exactly where the mask hides the cell
                assert bool(kind.why_hidden(i + 1, j + 1)) == bool(mask[i, j]), (name, i, j)
    # the window's reason says "before" (the story said key 1 "comes after" query 6)
    assert MaskKind(True, 1).why_hidden(6, 1).startswith("key 1 is 5 tokens before query 6, outside its window of 1")
    assert MaskKind(True, 2, 1).sees(6) == "the first key (sinks) and keys 5–6"
    assert MaskKind.of(True, 0) == MaskKind() and AttentionConfig(variant="SelfAttention_v2").mask_kind.name == "none"


def test_causal_off_with_a_window_hides_only_the_far_past():
    """causal=False with a window: the module's mask is the band of the past, the future stays visible (it was the
    causal band whatever the toggle said)."""
    cfg = AttentionConfig(variant="MultiHeadAttention", d_in=4, d_out=4, causal=False, window=2)
    _, trace = run_attention(cfg, torch.randn(1, 5, 4))
    mask = head_matrix(trace, "mask", 0)
    assert np.array_equal(mask.astype(bool), causal_mask(5, causal=False, window=2).numpy())
    assert "window 2, not causal" in str(trace["mask_bool"].note)

# --- views for any shape --------------------------------------------------------------------------------------

def test_views_read_weights_with_fewer_queries_than_keys():
    trace = Trace()
    queries, keys, values = torch.randn(1, 4, 3, 2), torch.randn(1, 4, 9, 2), torch.randn(1, 4, 9, 2)
    attn_scores = queries @ keys.transpose(2, 3)  # (1, 4, 3, 9): 3 new queries over 9 keys
    mask = causal_mask(3, 9)
    attn_weights = torch.softmax((attn_scores / 2**0.5).masked_fill(mask, -torch.inf), dim=-1)
    trace.record("queries.transpose", queries, "q")
    trace.record("keys.transpose", keys, "k")
    trace.record("values.transpose", values, "v")
    trace.record("mask_bool", mask, "m")
    trace.record("attn_scores_scaled", attn_scores / 2**0.5, "s")
    trace.record("attn_weights", attn_weights, "w")
    trace.record("context_vec", attn_weights @ values, "c")
    assert num_heads(trace) == 4 and all_heads(trace, "weights").shape == (4, 3, 9)
    assert head_matrix(trace, "weights", 3).shape == (3, 9)
    story = cell_story(trace, 0, 6, head=2)  # the first new query sits at position 7: key 7 is visible
    assert not story.masked and story.weight > 0
    np.testing.assert_allclose(story.dot, float(queries[0, 2, 0] @ keys[0, 2, 6]), rtol=1e-6)
    assert cell_story(trace, 0, 8, head=2).masked
    with pytest.raises(ValueError, match="3 x 9"):
        cell_story(trace, 3, 0)


def test_views_map_eight_query_heads_to_two_kv_heads():
    trace = Trace()
    queries, keys = torch.randn(1, 8, 5, 4), torch.randn(1, 2, 5, 4)
    trace.record("queries.transpose", queries, "q")
    trace.record("keys.transpose", keys, "k")
    trace.record("attn_weights", torch.softmax(torch.randn(1, 8, 5, 5), dim=-1), "w")
    assert [kv_head(trace, h) for h in range(8)] == [0, 0, 0, 0, 1, 1, 1, 1]  # K1 K1 K1 K1 K2 K2 K2 K2
    np.testing.assert_array_equal(head_matrix(trace, "keys", 5), keys[0, 1].numpy())
    np.testing.assert_array_equal(head_matrix(trace, "queries", 5), queries[0, 5].numpy())
