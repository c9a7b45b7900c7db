"""Issue 28: traces declare their structure. A forward says which scopes it records in (layer, head, tile), views
and pages read heads and tiles from those declarations, and a toy variant with tile scopes renders on Explore and
Shape flow."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from apptest_utils import messages, new_app, show_section
from attn_core import AttentionConfig, CausalAttention, Trace, register, run_attention
from attn_core.attention.flash import tile_plan
from attn_core.attention.masks import causal_mask
from attn_core.attention.variants import REGISTRY, Variant
from attn_core.models.gpt import GPTModel
from attn_core.models.traced import layer_trace
from attn_core.tracing.trace import record, scope
from attn_core.tracing.views import head_matrix, kv_head, num_heads, previous_form

# --- a toy variant whose forward records tiles: its class and one registry entry ------------------------------

BLOCK = 2  # keys per tile


class KeyTiledAttention(CausalAttention):
    """Causal attention whose scores, and whose weighted sum of values, are computed key tile by key tile: each
    tile's part is recorded in its own ``"tile"`` scope, and the whole matrices after the loops."""

    def forward(self, x: torch.Tensor, trace: Trace | None = None) -> torch.Tensor:
        b, num_tokens, d_in = x.shape
        keys = self.W_key(x)  # (b, num_tokens, d_out)
        queries = self.W_query(x)
        values = self.W_value(x)
        record(trace, "queries", queries)
        record(trace, "keys", keys)
        record(trace, "values", values)
        blocks = []
        for j, start in enumerate(range(0, num_tokens, BLOCK)):
            with scope(trace, "tile", 0, j):
                attn_scores = queries @ keys[:, start:start + BLOCK].transpose(1, 2)  # (b, num_tokens, BLOCK)
                record(trace, "attn_scores", attn_scores)
            blocks.append(attn_scores)
        attn_scores = torch.cat(blocks, dim=-1)  # (b, num_tokens, num_tokens)
        record(trace, "attn_scores", attn_scores)
        mask_bool = self.mask.bool()[:num_tokens, :num_tokens]
        record(trace, "mask_bool", mask_bool)
        attn_scores_masked = attn_scores.masked_fill(mask_bool, -torch.inf)
        record(trace, "attn_scores_masked", attn_scores_masked)
        attn_scores_scaled = attn_scores_masked / keys.shape[-1] ** 0.5
        record(trace, "attn_scores_scaled", attn_scores_scaled)
        attn_weights = torch.softmax(attn_scores_scaled, dim=-1)
        record(trace, "attn_weights", attn_weights)
        context_vec = torch.zeros_like(values)  # (b, num_tokens, d_out)
        for j, start in enumerate(range(0, num_tokens, BLOCK)):
            with scope(trace, "tile", 0, j):
                block = attn_weights[:, :, start:start + BLOCK]  # (b, num_tokens, BLOCK)
                record(trace, "attn_weights", block)
            context_vec = context_vec + block @ values[:, start:start + BLOCK]
        record(trace, "context_vec", context_vec)
        return context_vec


TOY = Variant("KeyTiledAttention", "KeyTiledAttention (toy: key tiles)", "Causal attention, key tile by key tile.",
              lambda cfg: KeyTiledAttention(cfg.d_in, cfg.d_out, cfg.context_length, cfg.dropout),
              frozenset({"d_out", "context_length"}), shape_flow=True)


@pytest.fixture
def toy_variant(fresh_caches):
    register(TOY)
    yield TOY
    REGISTRY.pop(TOY.id, None)


def toy_trace(num_tokens: int = 5, d: int = 4) -> tuple[Trace, KeyTiledAttention, torch.Tensor]:
    torch.manual_seed(0)
    module = KeyTiledAttention(d, d, 16, 0.0)
    x = torch.randn(1, num_tokens, d)
    trace = Trace()
    module(x, trace)
    return trace, module, x


# --- what a trace declares ----------------------------------------------------------------------------------

def test_each_step_keeps_the_scopes_it_was_recorded_in():
    trace, _, _ = toy_trace(5)
    assert trace.scope_kinds() == ["tile"]
    tiles = trace.scopes_of_kind("tile")
    assert [t.index for t in tiles] == [(0, 0), (0, 1), (0, 2)]  # 5 keys in tiles of 2: three tiles, in order
    assert [t.name for t in tiles] == ["tile[0,0]", "tile[0,1]", "tile[0,2]"]
    block = trace["tile[0,1].attn_scores"]
    assert block.scopes == (tiles[1],) and block.index("tile") == (0, 1) and block.index("head") is None
    assert trace["attn_weights"].scopes == () and trace["attn_weights"].within()


def test_the_book_classes_and_models_declare_heads_layers_and_tiles():
    cfg = AttentionConfig(variant="MultiHeadAttentionWrapper", d_in=4, d_out=2, num_heads=3, context_length=8)
    _, wrapper = run_attention(cfg, torch.randn(1, 5, 4))
    assert wrapper.scope_kinds() == ["head"] and [s.index for s in wrapper.scopes_of_kind("head")] == [(0,), (1,), (2,)]
    assert wrapper.prefixes() == ["heads[0]", "heads[1]", "heads[2]"]  # the names the steps carry, as before

    cfg = AttentionConfig(variant="MultiHeadAttentionTiled", d_in=4, d_out=4, num_heads=2, context_length=8)
    _, tiled = run_attention(cfg, torch.randn(1, 5, 4))
    plan = tile_plan(causal_mask(5), 5, 5, 2, 2)
    assert [s.index for s in tiled.scopes_of_kind("tile")] == [(i, j) for i, j, c in plan.order() if c]

    gpt = GPTModel({"vocab_size": 50, "context_length": 16, "emb_dim": 8, "n_heads": 2, "n_layers": 3,
                    "drop_rate": 0.0, "qkv_bias": True}).eval()
    full = Trace()
    gpt(torch.randint(0, 50, (1, 5)), trace=full)
    assert full.scope_kinds() == ["layer"] and [s.index for s in full.scopes_of_kind("layer")] == [(0,), (1,), (2,)]
    one = layer_trace(full, 1)
    assert one.scope_kinds() == [] and all(s.scopes == () for s in one)  # the layer's own steps, as a module's


def test_a_scope_kind_without_a_spelling_is_named_by_its_kind():
    trace = Trace()
    with trace.scope("block", 2), trace.scope("head", 1):
        record(trace, "attn_weights", torch.ones(1, 2, 2))
    step = trace["block[2].heads[1].attn_weights"]
    assert [(s.kind, s.index) for s in step.scopes] == [("block", (2,)), ("head", (1,))]
    assert trace.under("block[2]")["heads[1].attn_weights"].index("head") == (1,)


# --- views read the declarations ------------------------------------------------------------------------------

def test_tiles_are_parts_of_the_whole_not_heads():
    trace, module, x = toy_trace(5)
    assert num_heads(trace) == 1 and kv_head(trace, 0) == 0
    scores = head_matrix(trace, "scores")
    assert scores.shape == (5, 5)  # the whole matrix, not a tile's (5, 2) block
    with torch.no_grad():
        q, k = module.W_query(x)[0], module.W_key(x)[0]
        np.testing.assert_allclose(scores, (q @ k.T).numpy(), atol=1e-5)  # against the scores recomputed whole
        np.testing.assert_allclose(trace["context_vec"].tensor, module(x), atol=1e-6)
    np.testing.assert_allclose(head_matrix(trace, "weights").sum(-1), 1, atol=1e-6)


@pytest.mark.parametrize("variant,heads", [("MultiHeadAttentionWrapper", 3), ("MultiHeadAttention", 3),
                                           ("GroupedQueryAttention", 3), ("MultiHeadAttentionTiled", 3),
                                           ("CausalAttention", 1)])
def test_heads_are_read_from_head_scopes_or_the_num_heads_axis(variant, heads):
    cfg = AttentionConfig(variant=variant, d_in=4, d_out=6, num_heads=3, num_kv_groups=1, context_length=8)
    _, trace = run_attention(cfg, torch.randn(1, 5, 4))
    assert num_heads(trace) == heads == cfg.spec.heads(cfg)
    kv = [kv_head(trace, h) for h in range(heads)]
    assert kv == ([0] * heads if variant == "GroupedQueryAttention" else list(range(heads)))  # one shared K/V head


def _labelled(label: str, tensor: torch.Tensor) -> torch.Tensor:
    return tensor


def _flow_toy(x: torch.Tensor, trace: Trace) -> torch.Tensor:
    attn_scores = x @ x.transpose(1, 2)  # (b, num_tokens, num_tokens)
    record(trace, "attn_scores", attn_scores)
    record(trace, "attn_scores_scaled", attn_scores / 2)
    attn_weights = torch.softmax(attn_scores / 2, dim=-1)
    record(trace, "attn_weights", attn_weights)
    context_vec = _labelled("attn_scores", attn_weights) @ x  # a variable's name in a string literal
    record(trace, "context_vec", context_vec)
    return context_vec


def test_previous_form_follows_the_statements_syntax_not_its_text():
    trace = Trace()
    _flow_toy(torch.randn(1, 3, 2), trace)
    steps = list(trace)
    prev = {s.name: (p[0], p[1].name) if (p := previous_form(steps, i)) else None for i, s in enumerate(steps)}
    assert trace["attn_weights"].flow.var == "attn_weights"
    assert prev["attn_scores"] is None
    assert prev["attn_scores_scaled"] == ("attn_scores", "attn_scores")
    assert prev["attn_weights"] == ("attn_scores_scaled", "attn_scores_scaled")  # the expression fed in whole
    assert prev["context_vec"] == ("attn_weights", "attn_weights")  # "attn_scores" in quotes is no variable


# --- pages: a toy variant with tile scopes, and the tiled MultiHeadAttention -----------------------------------

@pytest.mark.parametrize("variant_id", [TOY.id, "MultiHeadAttentionTiled"])
def test_a_variant_with_tile_scopes_renders_on_explore_and_shape_flow(toy_variant, variant_id):
    at = new_app(variant=variant_id, input_mode="learned", d_in="8", d_out="8", num_heads="2")
    at.run()
    msgs = messages(at)
    assert not msgs["exception"] and not msgs["error"], msgs
    assert at.session_state["_settings"].cfg.variant == variant_id
    sections = at.segmented_control(key="section").options
    assert "Scores" in sections and "Weights" in sections
    assert ("All heads" in sections) == (variant_id != TOY.id)  # the toy has one head, whatever its tiles
    for name in sections:
        show_section(at, name)
        assert not messages(at)["exception"], (name, messages(at)["exception"][:1])
    show_section(at, "Weights")
    assert any(s.value.startswith("Cell story") for s in at.subheader)
    at.switch_page("app_pages/shape_flow.py").run()
    assert not messages(at)["exception"], messages(at)
    titles = []
    for _ in range(40):
        titles.append(at.subheader[0].value)
        if at.button(key="flow_step_next").disabled:
            break
        at.button(key="flow_step_next").click().run()
        assert not messages(at)["exception"], (titles[-1], messages(at)["exception"][:1])
    assert titles[-1].endswith("`context_vec`") or titles[-1].endswith("`out_proj`")
    if variant_id == TOY.id:  # the toy's own steps, tiles included
        assert any("tile[0,1].attn_scores" in t for t in titles)


def test_a_page_with_its_own_controls_has_no_settings(fresh_caches):
    at = new_app()
    at.run()
    made = at.session_state["_settings"]
    at.switch_page("app_pages/kv_cost.py").run()
    assert not messages(at)["exception"]
    assert "_settings" not in at.session_state  # nothing rebuilt from the widgets' state for a page that reads none
    at.switch_page("app_pages/explore.py").run()
    assert at.session_state["_settings"].cfg == made.cfg and at.session_state["_settings"].text == made.text
