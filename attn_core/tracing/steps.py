"""What each recorded step is: the one table of step kinds that the forwards, views and pages share.

A forward records a tensor under the book's variable name (``record(trace, "attn_scores", attn_scores)``);
this table says which *kind* of step that is (what pages look up: ``"scores"``, ``"weights"``, ...), the
one-line note shown beside it, its axis names by rank, and how it is coloured. Notes may name fields
(``{d_k}``) that the recording call passes (``record(trace, "attn_scores_scaled", s, d_k=d_k)``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from attn_core.messages import N_, Msg

# Axis names by rank, shared by several kinds.
_TOKENS_BY_WIDTH = {2: ("num_tokens", "d_out"), 3: ("b", "num_tokens", "d_out")}
_PER_HEAD = {4: ("b", "num_heads", "num_tokens", "head_dim")}
_SPLIT = {4: ("b", "num_tokens", "num_heads", "head_dim")}
_SQUARE = {2: ("num_tokens", "num_tokens"), 3: ("b", "num_tokens", "num_tokens"),
           4: ("b", "num_heads", "num_tokens", "num_tokens")}


@dataclass(frozen=True)
class StepKind:
    """One kind of step: its note (a format string), its axis names by rank and its colour scale."""

    kind: str
    note: str
    axes: dict[int, tuple[str, ...]] = field(default_factory=dict)
    scale: str = "scores"  # "scores" (diverging around 0), "weights" (0..1) or "mask" (bool)

    def describe(self, tensor: object, **fields: object) -> Msg:
        """The note with its fields (``{width}``: the tensor's last dimension), as a message the pages translate
        (``str()`` is the English); a field not given is shown as "…" rather than failing a trace."""
        shape = getattr(tensor, "shape", ())
        note = Msg(self.note, width=shape[-1] if len(shape) else 1, **fields)
        try:
            str(note)
        except (KeyError, ValueError, IndexError):
            return Msg(re.sub(r"\{[^}]*\}", "…", self.note))
        return note


# By the name a forward records a step under (the scope of a wrapper's head or a GPT layer is not part of it).
STEPS: dict[str, StepKind] = {
    "x": StepKind("input", N_("the input vectors, one row per token"), {3: ("b", "num_tokens", "d_in")}),
    "input": StepKind("input", N_("the normed input the attention sees (LayerNorm; RMSNorm in a Llama)"),
                      {3: ("b", "num_tokens", "d_in")}),
    "queries": StepKind("queries", N_("each input vector projected to a query (d_in -> {width})"), _TOKENS_BY_WIDTH),
    "keys": StepKind("keys", N_("each input vector projected to a key (d_in -> {width})"), _TOKENS_BY_WIDTH),
    "values": StepKind("values", N_("each input vector projected to a value (d_in -> {width})"), _TOKENS_BY_WIDTH),
    "keys.view": StepKind("keys_view", N_("d_out columns regrouped into num_heads x head_dim (no data moved)"), _SPLIT),
    "values.view": StepKind("values_view", N_("d_out columns regrouped into num_heads x head_dim (no data moved)"),
                            _SPLIT),
    "queries.view": StepKind("queries_view", N_("d_out columns regrouped into num_heads x head_dim (no data moved)"),
                             _SPLIT),
    "keys.transpose": StepKind("keys_per_head", N_("heads moved in front of tokens, so each head is a (num_tokens, "
                               "head_dim) matrix; only strides change, the tensor is no longer contiguous"), _PER_HEAD),
    "queries.transpose": StepKind("queries_per_head", N_("heads moved in front of tokens, so each head is a "
                                  "(num_tokens, head_dim) matrix; only strides change, the tensor is no longer "
                                  "contiguous"),
                                  _PER_HEAD),
    "values.transpose": StepKind("values_per_head", N_("heads moved in front of tokens, so each head is a (num_tokens, "
                                 "head_dim) matrix; only strides change, the tensor is no longer contiguous"),
                                 _PER_HEAD),
    "queries.rope": StepKind("queries_rotated", N_("RoPE: each pair of dimensions (i, i + head_dim/2) of a query "
                             "rotated by an angle that grows with its position"), _PER_HEAD),
    "keys.rope": StepKind("keys_rotated", N_("RoPE: each key rotated by its position's angle, so q . k depends on "
                          "how far apart the two tokens are"), _PER_HEAD),
    "keys.cached": StepKind("cached_keys", N_("the KV cache: the earlier positions' keys, then this call's ({width} "
                            "wide per head)"), {4: ("b", "num_heads", "num_keys", "head_dim")}),
    "values.cached": StepKind("cached_values", N_("the KV cache: the earlier positions' values, then this call's"),
                              {4: ("b", "num_heads", "num_keys", "head_dim")}),
    "keys.repeat": StepKind("keys_repeated", N_("each K/V head repeated for its {group} query heads (K1 K1 K2 K2): "
                            "repeat_interleave copies, a view by .expand would not"), _PER_HEAD),
    "values.repeat": StepKind("values_repeated", N_("each K/V head repeated for its {group} query heads"), _PER_HEAD),
    "latent": StepKind("latent", N_("each input vector compressed to the latent (d_in -> {width}): keys and values "
                       "both come from it"), {3: ("b", "num_tokens", "latent_dim")}),
    "latent.cached": StepKind("cached_latent", N_("the KV cache keeps only the latent: {width} numbers a token"),
                              {3: ("b", "num_keys", "latent_dim")}),
    "attn_scores": StepKind("scores", N_("omega[i, j] = q(i) . k(j)"), _SQUARE),
    "mask_bool": StepKind("mask", N_("True where a key is hidden ({mask} mask: {where})"), _SQUARE, "mask"),
    "attn_scores_masked": StepKind("masked_scores", N_("hidden keys set to -inf, so softmax gives them exactly 0"),
                                   _SQUARE),
    "attn_scores_scaled": StepKind("scaled_scores", N_("divided by sqrt(d_k) = sqrt({d_k}) = {sqrt_d_k:.3g} so "
                                   "softmax does not saturate"), _SQUARE),
    "attn_weights": StepKind("weights", N_("softmax over keys: each row is >= 0 and sums to 1"), _SQUARE, "weights"),
    "attn_weights_unmasked": StepKind("unmasked_weights",
                                      N_("softmax over all keys, hidden ones included (zeroed next)"),
                                      _SQUARE, "weights"),
    "attn_weights_zeroed": StepKind("zeroed_weights", N_("hidden keys' weights zeroed: rows now sum to less than 1"),
                                    _SQUARE, "weights"),
    "dropout_mask": StepKind("dropout_mask", N_("True where dropout zeroed a weight (p = {p:g})"), _SQUARE, "mask"),
    "attn_weights_dropout": StepKind("dropped_weights", N_("attention weights after dropout"), _SQUARE, "weights"),
    "context_vec": StepKind("context", N_("each token's weighted sum of values"),
                            {**_TOKENS_BY_WIDTH, 4: ("b", "num_heads", "num_tokens", "head_dim")}),
    "context_vec.transpose": StepKind("context_transpose", N_("tokens back in front of heads (not contiguous)"),
                                      _SPLIT),
    "context_vec.view": StepKind("context_merged", N_(".contiguous() copies into row-major order so .view can merge "
                                 "heads back into d_out"), {3: ("b", "num_tokens", "d_out")}),
    "out_proj": StepKind("output", N_("a linear layer mixes the heads' outputs"), {3: ("b", "num_tokens", "d_out")}),
    # One tile of the tiled loop (attn_core/attention/flash.py), recorded under the scope tile[i,j].
    "S": StepKind("tile_scores", N_("this tile's scaled scores q . k / sqrt(d_k), hidden cells -inf"),
                  {4: ("b", "num_heads", "block_q", "block_k")}),
    "m_old": StepKind("tile_max_before", N_("each row's running max before this tile"),
                      {3: ("b", "num_heads", "block_q")}),
    "l_old": StepKind("tile_sum_before", N_("each row's running sum of exp before this tile"),
                      {3: ("b", "num_heads", "block_q")}),
    "alpha": StepKind("tile_alpha", N_("exp(m_old - m): how much the old sum and accumulator shrink because the max "
                      "grew (1 when it did not)"), {3: ("b", "num_heads", "block_q")}),
    "P": StepKind("tile_exp", N_("exp(S - m): this tile's unnormalized weights"), {4: ("b", "num_heads", "block_q",
                                                                                   "block_k")}, "weights"),
    "m": StepKind("tile_max", N_("each row's running max after this tile"), {3: ("b", "num_heads", "block_q")}),
    "l": StepKind("tile_sum", N_("each row's running sum after this tile: alpha * l_old + sum(P)"),
                  {3: ("b", "num_heads", "block_q")}),
    "acc": StepKind("tile_acc", N_("the unnormalized output: alpha * acc_old + P @ v_tile"),
                    {4: ("b", "num_heads", "block_q", "head_dim")}),
}
KINDS: dict[str, StepKind] = {s.kind: s for s in STEPS.values()}  # by kind (kinds recorded under two names agree)

# What a forward records its steps *in*: a scope kind and how its prefix is spelled in step names
# (``heads[1].attn_weights``). A kind not listed is spelled ``kind[i,j]``.
SCOPES: dict[str, str] = {
    "layer": "trf_blocks[{}].att",  # one transformer block's attention (GPTModel, the Llama family)
    "head": "heads[{}]",  # one head of MultiHeadAttentionWrapper: its own CausalAttention
    "kv_head": "kv_heads[{}]",  # one K/V head and the query heads that share it
    "tile": "tile[{},{}]",  # one (query tile, key tile) block of a tiled loop (attn_core/attention/flash.py)
}


def scope_name(kind: str, *index: int) -> str:
    """A scope's prefix in step names: ``scope_name("head", 1)`` -> ``heads[1]``."""
    pattern = SCOPES.get(kind)
    if pattern is None or pattern.count("{}") != len(index):
        return f"{kind}[{','.join(str(i) for i in index)}]"
    return pattern.format(*index)


def kind_scale(kind: str) -> str:
    """How a step kind is coloured: 'weights' (0-1), 'mask' (bool) or 'scores' (diverging); unknown: scores."""
    entry = KINDS.get(kind)
    return entry.scale if entry is not None else "scores"
