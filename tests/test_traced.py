"""The traced-LM base: a toy family whose layers differ (a sliding window and its own RoPE base on layer 0, full
attention with another base on layer 1, as Gemma 3 mixes them) subclasses ``TracedLM``, says only its embedding and
each layer's arguments, and works through ``walk_layers``, ``trace_layer``, a KV cache and ``load_model`` with
nothing edited outside this file."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from attn_core import KVCache, Trace
from attn_core.messages import Problem
from attn_core.models import registry
from attn_core.models.family import Family, Found, ModelConfig, Shared
from attn_core.models.rope_attention import LayerAttention, RMSNorm, apply_rope, compute_rope_params
from attn_core.models.rope_lm import TransformerBlock
from attn_core.models.traced import TracedLM, layer_trace, layer_windows, trace_layer, walk_layers

WINDOWS = (3, None)  # layer 0 slides over the last 3 keys, layer 1 sees every earlier key
ROPE_BASES = (10_000.0, 1_000_000.0)
CFG = dict(vocab_size=64, context_length=32, emb_dim=16, n_heads=4, n_kv_groups=2, n_layers=2, hidden_dim=32)


class MixedLM(TracedLM):
    """Llama blocks, each layer with its own window and RoPE tables."""

    def __init__(self, cfg: dict):
        super().__init__()
        self.cfg = dict(cfg)
        self.tok_emb = nn.Embedding(cfg["vocab_size"], cfg["emb_dim"])
        self.trf_blocks = nn.ModuleList([TransformerBlock(cfg) for _ in range(cfg["n_layers"])])
        for block, window in zip(self.trf_blocks, WINDOWS):
            block.att.window = window  # the block holds its layer's window
        self.final_norm = RMSNorm(cfg["emb_dim"])
        self.out_head = nn.Linear(cfg["emb_dim"], cfg["vocab_size"], bias=False)
        head_dim = cfg["emb_dim"] // cfg["n_heads"]
        self.tables = [compute_rope_params(head_dim, base, cfg["context_length"]) for base in ROPE_BASES]

    def embed(self, in_idx: torch.Tensor, start: int = 0) -> torch.Tensor:
        return self.tok_emb(in_idx)

    def block_args(self, layer: int) -> tuple:
        return self.tables[layer]  # (cos, sin) of this layer's base


class MixedFamily(Family):
    name = "mixed-toy"
    order = 99
    pretrained = False
    title = "Mixed toy"
    positions = "rope"
    _shared = Shared(1)

    def find(self) -> list[Found]:
        return [Found("mixed-toy", None, "Mixed toy", self.name)]

    def load(self, found: Found) -> nn.Module:
        def build() -> MixedLM:
            torch.manual_seed(5)
            return MixedLM(CFG).eval().requires_grad_(False)

        return self._shared.get(found.name, (), build)

    def config(self, model: nn.Module) -> ModelConfig:
        c = model.cfg
        return ModelConfig(label="Mixed toy", n_layers=c["n_layers"], n_heads=c["n_heads"], n_kv_heads=c["n_kv_groups"],
                           head_dim=c["emb_dim"] // c["n_heads"], emb_dim=c["emb_dim"],
                           context_length=c["context_length"], vocab_size=c["vocab_size"], positions="rope",
                           norm="RMSNorm", qkv_bias=False, attention="GroupedQueryAttention",
                           windows=layer_windows(model), rope_bases=ROPE_BASES, family_title=self.title)

    def layer_attention(self, model: nn.Module, layer: int, **knobs: object) -> nn.Module:
        return LayerAttention(model, layer, **knobs)


@pytest.fixture
def mixed():
    family = MixedFamily()
    registry.register_family(family)
    yield registry.load_model("mixed-toy")
    registry.unregister_family(family.name)


def _weights(trace: Trace) -> torch.Tensor:
    return trace.of_kind("weights")[-1].tensor[0]  # (num_heads, T, T)


def test_each_layer_gets_its_own_window_and_rope_through_walk_layers(mixed):
    ids = torch.arange(10).unsqueeze(0)
    seen: dict[int, torch.Tensor] = {}
    walk = walk_layers(mixed, ids, on_layer=lambda i, w: seen.setdefault(i, w.clone()))
    with torch.no_grad():
        logits = mixed(ids)
    torch.testing.assert_close(walk.last_logits, logits[0, -1])  # the walk is the forward, block by block
    window0 = seen[0][:, 9]  # the last query of the sliding layer sees keys 7, 8, 9 only
    assert torch.all(window0[:, :7] == 0) and torch.allclose(window0[:, 7:].sum(-1), torch.ones(4))
    assert torch.all(seen[1][:, 9, :7] > 0)  # the full layer sees every earlier key
    trace = Trace(copy=False)
    with torch.no_grad():
        mixed(ids, trace=trace)
    for layer, base in enumerate(ROPE_BASES):  # each layer's keys rotated with its own base
        steps = layer_trace(trace, layer)
        cos, sin = compute_rope_params(4, base, CFG["context_length"])
        rotated = apply_rope(steps["keys.transpose"].tensor, cos, sin)
        torch.testing.assert_close(steps["keys.rope"].tensor, rotated)


def test_a_layer_run_alone_keeps_its_window_and_its_rope_with_the_chapters_knobs(mixed):
    """What a page runs on one layer (``registry.layer_attention``, with or without the chapter's knobs) is that
    layer of the model: its window and its RoPE base, not the first layer's."""
    ids = torch.arange(10).unsqueeze(0)
    seen: dict[int, torch.Tensor] = {}
    walk = walk_layers(mixed, ids, on_layer=lambda i, w: seen.setdefault(i, w.clone()))
    for layer in (0, 1):
        for knobs in ({}, {"mask_method": "renormalize", "dropout": 0.0}):
            trace = Trace(copy=False)
            with torch.no_grad():
                registry.layer_attention(mixed, layer, **knobs)(walk.inputs[layer], trace)
            torch.testing.assert_close(_weights(trace), seen[layer], atol=1e-6, rtol=1e-5)


def test_trace_layer_and_the_kv_cache_follow_the_layers_arguments(mixed):
    ids = torch.arange(8).unsqueeze(0)
    full = Trace(copy=False)
    with torch.no_grad():
        mixed(ids, trace=full)
    for layer in (0, 1):
        torch.testing.assert_close(_weights(trace_layer(mixed, ids, layer)), _weights(layer_trace(full, layer)))
    cache = KVCache(CFG["n_layers"])
    with torch.no_grad():
        mixed(ids[:, :-1], cache=cache)
        cached = mixed(ids[:, -1:], cache=cache)[0, -1]
        torch.testing.assert_close(cached, mixed(ids)[0, -1], atol=1e-5, rtol=1e-5)


def test_the_model_config_says_the_per_layer_facts(mixed):
    c = registry.model_config(mixed)
    assert c.windows == WINDOWS and c.sliding_layers == (0,) and c.window(0) == 3 and c.window(1) is None
    assert c.rope and c.rope_bases == ROPE_BASES and c.grouped and c.family_title == "Mixed toy"
    assert mixed.family == "mixed-toy"


def test_bad_ids_and_layers_are_problems_with_a_plain_message(mixed):
    with pytest.raises(Problem, match="do not fit in context_length = 32"):
        mixed(torch.zeros(1, 33, dtype=torch.long))
    with pytest.raises(Problem, match=r"token ids must lie in 0\.\.63"):
        walk_layers(mixed, torch.tensor([[64]]))
    with pytest.raises(Problem, match=r"the model's layers are 0\.\.1"):
        trace_layer(mixed, torch.tensor([[1]]), 2)
    with pytest.raises(Problem, match="the cache has 3 layers, the model 2"):
        mixed(torch.tensor([[1]]), cache=KVCache(3))


@pytest.mark.parametrize("knobs,fused", [({}, True), ({"mask_method": "renormalize"}, False),
                                         ({"dropout": 0.5}, False)])
def test_the_fused_path_runs_only_where_it_gives_the_explicit_paths_numbers(mixed, knobs, fused):
    """One rule for every family's attention: SDPA without a trace only for −∞ masking and no dropout; any other
    knob runs the chapter's explicit lines even untraced (a Llama's copy once ran SDPA for every knob)."""
    ids = torch.arange(10).unsqueeze(0)
    x = walk_layers(mixed, ids).inputs[1]
    one = registry.layer_attention(mixed, 1, **knobs)
    assert one.att.fused(None) is fused and not one.att.fused(Trace(copy=False))
    with torch.no_grad():
        untraced, traced = one(x), one(x, Trace(copy=False))
    torch.testing.assert_close(untraced, traced, atol=1e-5, rtol=1e-5)  # eval mode: dropout is off either way
    if not fused:
        assert torch.equal(untraced, traced)  # the same explicit lines, not SDPA's near-equal numbers
