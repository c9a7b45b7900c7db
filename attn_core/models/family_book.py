"""The chapter's own ``GPTModel`` with random weights (seed 123): small enough for a classroom server, or the
124M shape the book's bonus benchmark uses. Nothing to download; Generate offers it (the sidebar's Weights
choice does not: its random weights are the chapter's attention module's own)."""

from __future__ import annotations

import torch
import torch.nn as nn

from attn_core.messages import Msg, Problem
from attn_core.models.family import Family, Found, ModelConfig, Shared
from attn_core.models.gpt import GPT_CONFIG_124M, GPTModel, attention_like
from attn_core.models.traced import layer_windows
from attn_core.text.tokens import bpe_tokenizer

RANDOM_MODELS: dict[str, tuple[Msg, dict]] = {  # name -> (label, translated where shown; config)
    "random-small": (Msg("Random weights: small GPTModel (4 layers, 256-d, 4 heads)"),
                     dict(GPT_CONFIG_124M, n_layers=4, emb_dim=256, n_heads=4, context_length=256, drop_rate=0.0)),
    "random-124M": (Msg("Random weights: the 124M shape (12 layers, 768-d, 12 heads)"),
                    dict(GPT_CONFIG_124M, drop_rate=0.0)),
}


def random_model(name: str) -> GPTModel:
    """The book's ``GPTModel`` with the config ``RANDOM_MODELS[name]`` and seed-123 random weights, in eval mode."""
    if name not in RANDOM_MODELS:
        raise Problem("unknown model {name}: choose one of {names}", name=repr(name), names=', '.join(RANDOM_MODELS))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(123)
        model = GPTModel(RANDOM_MODELS[name][1]).eval()
    model.tokenizer = bpe_tokenizer()
    return model


def gpt_config(model: nn.Module, label: str | Msg, family_title: str = "") -> ModelConfig:
    """A ``GPTModel``'s facts: learned positions, LayerNorm, multi-head attention."""
    c = model.cfg
    return ModelConfig(label=label, n_layers=c["n_layers"], n_heads=c["n_heads"], n_kv_heads=c["n_heads"],
                       head_dim=c["emb_dim"] // c["n_heads"], emb_dim=c["emb_dim"], context_length=c["context_length"],
                       vocab_size=c["vocab_size"], positions="learned", norm="LayerNorm", qkv_bias=bool(c["qkv_bias"]),
                       attention="MultiHeadAttention", windows=layer_windows(model), family_title=family_title)


def gpt_layer_attention(model: nn.Module, layer: int, **knobs: object) -> nn.Module:
    """A ``GPTModel``'s layer: its own ``MultiHeadAttention``, or a copy sharing its weights with the chapter's
    knobs."""
    att = model.trf_blocks[layer].att
    return attention_like(att, **knobs) if knobs else att


class BookFamily(Family):
    name = "book"
    order = 20
    pretrained = False
    title = "the book's GPTModel"
    _shared = Shared(len(RANDOM_MODELS))

    def find(self) -> list[Found]:
        return [Found(name, None, label, self.name, label) for name, (label, _) in RANDOM_MODELS.items()]

    def load(self, found: Found) -> nn.Module:
        return self._shared.get(found.name, (), lambda: random_model(found.name))

    def config(self, model: nn.Module) -> ModelConfig:
        label = next((lab for lab, cfg in RANDOM_MODELS.values() if cfg == model.cfg), "GPTModel")
        return gpt_config(model, label, self.title)

    def layer_attention(self, model: nn.Module, layer: int, **knobs: object) -> nn.Module:
        return gpt_layer_attention(model, layer, **knobs)

    def how_to_get(self) -> Msg:
        return Msg("The book's GPTModel is built here: nothing to install.")


FAMILY = BookFamily()
