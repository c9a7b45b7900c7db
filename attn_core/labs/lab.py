"""Experiments behind the teaching pages: masking strategies and their classic mistakes,
precision, scaling, and the reshapes of multi-head attention. Pages only draw these results."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from attn_core.attention.classes import MultiHeadAttention, MultiHeadAttentionWrapper, masked_softmax
from attn_core.attention.masks import causal_mask
from attn_core.messages import N_, Msg, Problem

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def mask_neg_inf(attn_scores: torch.Tensor, d_k: int) -> torch.Tensor:
    """(a) The book's way: -inf above the diagonal, then scaled softmax."""
    mask = causal_mask(attn_scores.shape[-1], device=attn_scores.device)
    return masked_softmax(attn_scores.clone(), mask, d_k, "neg_inf")


def mask_renormalize(attn_scores: torch.Tensor, d_k: int) -> torch.Tensor:
    """(b) Softmax first, zero the future, divide each row by its sum."""
    mask = causal_mask(attn_scores.shape[-1], device=attn_scores.device)
    return masked_softmax(attn_scores.clone(), mask, d_k, "renormalize")


@dataclass(frozen=True)
class Variant:
    """One way of masking: its weights, the code, and what is right or wrong with it."""

    name: str  # a msgid (N_) that also names the variant in links and questions
    code: str
    weights: torch.Tensor
    verdict: Msg
    correct: bool
    future_weight: float  # largest weight on a future key
    row_sum_error: float  # largest |row sum - 1|
    min_weight: float  # most negative weight


def _variant(name: str, code: str, weights: torch.Tensor, verdict: Msg, correct: bool) -> Variant:
    w = weights.detach().float()
    mask = causal_mask(w.shape[-1], device=w.device)
    future = float(w.masked_select(mask).abs().max()) if mask.any() else 0.0
    return Variant(name, code, w.cpu(), verdict, correct, future,
                   float((w.sum(-1) - 1).abs().nan_to_num(float("inf")).max()), float(w.min()))


def masking_variants(attn_scores: torch.Tensor, d_k: int) -> list[Variant]:
    """The two correct methods and the classic mistakes, all on the same (num_tokens, num_tokens) scores."""
    mask = causal_mask(attn_scores.shape[-1], device=attn_scores.device)
    scaled = attn_scores / d_k**0.5
    zero_scores = torch.softmax(attn_scores.masked_fill(mask, 0.0) / d_k**0.5, dim=-1)
    raw = attn_scores.masked_fill(mask, 0.0)
    raw_renorm = raw / raw.sum(dim=-1, keepdim=True)
    no_renorm = torch.softmax(scaled, dim=-1).masked_fill(mask, 0.0)
    big_negative = torch.softmax(attn_scores.masked_fill(mask, -1e9) / d_k**0.5, dim=-1)
    return [
        _variant(N_("−∞ before softmax"), "attn_scores.masked_fill_(mask, -torch.inf)\n"
                 "torch.softmax(attn_scores / d_k**0.5, dim=-1)", mask_neg_inf(attn_scores, d_k),
                 Msg("Correct: exp(−∞) = 0, so future keys get exactly zero weight."), True),
        _variant(N_("softmax, zero, renormalize"), "w = torch.softmax(attn_scores / d_k**0.5, dim=-1)\n"
                 "w = w.masked_fill(mask, 0.0)\nw / w.sum(dim=-1, keepdim=True)", mask_renormalize(attn_scores, d_k),
                 Msg("Correct: renormalizing leaves softmax over the past keys only (no leak)."), True),
        _variant(N_("mistake: zeros in the scores"), "attn_scores.masked_fill(mask, 0.0)  # not -inf\n"
                 "torch.softmax(attn_scores / d_k**0.5, dim=-1)", zero_scores,
                 Msg("Wrong: a score of 0 is not 'nothing': exp(0) = 1, so future tokens still get weight."), False),
        _variant(N_("mistake: renormalize raw scores"), "s = attn_scores.masked_fill(mask, 0.0)\n"
                 "s / s.sum(dim=-1, keepdim=True)  # no softmax", raw_renorm,
                 Msg("Wrong: raw scores can be negative, so 'weights' can be negative or explode."), False),
        _variant(N_("mistake: no renormalization"), "w = torch.softmax(attn_scores / d_k**0.5, dim=-1)\n"
                 "w.masked_fill(mask, 0.0)  # rows no longer sum to 1", no_renorm,
                 Msg("Wrong: rows sum to less than 1, so context vectors shrink for early tokens."), False),
        _variant(N_("large negative instead of −∞"), "attn_scores.masked_fill(mask, -1e9)\n"
                 "torch.softmax(attn_scores / d_k**0.5, dim=-1)", big_negative,
                 Msg("Works in float32 (exp(−1e9) underflows to 0) and keeps fully masked rows finite; "
                     "but −1e9 does not fit in float16 (max 65504): `masked_fill` raises an error (the precision "
                     "table below), and a too-small number leaks."), True),
    ]


@dataclass(frozen=True)
class PrecisionRow:
    dtype: str
    device: str
    method: str
    max_diff_vs_fp32: float  # against the float32 −∞ result, over the normal rows
    fully_masked_row: str  # what a row with every key masked becomes (English)
    finite: bool  # every weight finite, the fully masked row's included
    said: Msg | None = None  # fully_masked_row as a message, translated where shown
    error: str | None = None  # PyTorch's own error when the method failed (shown as written)


def precision_table(attn_scores: torch.Tensor, d_k: int, device: str = "cpu") -> list[PrecisionRow]:
    """The masking methods in float32 / float16 / bfloat16, plus a fully masked row (−∞ gives NaN)."""
    reference = mask_neg_inf(attn_scores.float(), d_k)
    rows = []
    for name, dtype in DTYPES.items():
        s = attn_scores.to(device=device, dtype=dtype)
        mask = causal_mask(s.shape[-1], device=s.device)
        full = mask.clone()
        full[0, :] = True  # a query that may see nothing (e.g. a padding token)
        fills = {"−∞": -torch.inf, "finfo.min": torch.finfo(dtype).min, "-1e9": -1e9}
        for label, fill in fills.items():
            try:
                w = torch.softmax(s.masked_fill(mask, fill) / d_k**0.5, dim=-1).float().cpu()
                wf = torch.softmax(s.masked_fill(full, fill) / d_k**0.5, dim=-1).float().cpu()
            except RuntimeError as e:  # -1e9 does not fit in float16
                error = str(e).splitlines()[0]
                said = Msg("PyTorch error: {error}", error=error)
                rows.append(PrecisionRow(name, str(s.device), label, float("nan"), str(said), False, said, error))
                continue
            diff = float((w - reference).abs().nan_to_num(float("inf")).max())
            first = wf[0]
            if torch.isnan(first).any():
                said = Msg("NaN (0/0: every exp(−∞) is 0)")
            else:
                said = Msg("uniform 1/T = {weight} (attends to masked keys!)", weight=format(first[0].item(), ".3f"))
            finite = bool(torch.isfinite(w).all() and torch.isfinite(wf).all())  # the fully masked row too
            rows.append(PrecisionRow(name, str(s.device), label, diff, str(said), finite, said))
    return rows


def guarded_softmax(masked_scores: torch.Tensor) -> torch.Tensor:
    """Softmax that returns zeros (not NaN) for rows in which every key is masked (−∞)."""
    all_masked = torch.isneginf(masked_scores).all(dim=-1, keepdim=True)
    weights = torch.softmax(masked_scores.masked_fill(all_masked, 0.0), dim=-1)
    return weights.masked_fill(all_masked, 0.0)


@dataclass(frozen=True)
class ScalingRow:
    d_k: int
    score_std: float  # spread of q.k: grows like sqrt(d_k)
    max_weight_unscaled: float  # softmax saturates: one key takes nearly everything
    max_weight_scaled: float


def scaling_weights(d_k: int, num_tokens: int = 8, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(unscaled, scaled) softmax weights for random unit-variance queries and keys of width d_k."""
    scores = _random_scores(d_k, num_tokens, seed)
    return torch.softmax(scores, -1), torch.softmax(scores / d_k**0.5, -1)


SCALING_SAMPLES = 64  # random (q, k) draws averaged per d_k: one 8 x 8 draw jumped about from row to row (d_k = 512)


def scaling_table(d_ks: tuple[int, ...] = (2, 8, 32, 128, 512), num_tokens: int = 8, seed: int = 0,
                  samples: int = SCALING_SAMPLES) -> list[ScalingRow]:
    """Softmax sharpens as d_k grows unless scores are divided by sqrt(d_k): per d_k, the std of q.k and the mean
    largest weight of a row, over ``samples`` seeded draws of (num_tokens, d_k) queries and keys."""
    if samples < 1:
        raise Problem("samples must be at least 1 (got {samples})", samples=samples)
    rows = []
    for d_k in d_ks:
        scores = torch.stack([_random_scores(d_k, num_tokens, seed + i) for i in range(samples)])
        # scores: (samples, num_tokens, num_tokens)
        unscaled, scaled = torch.softmax(scores, -1), torch.softmax(scores / d_k**0.5, -1)
        rows.append(ScalingRow(d_k, float(scores.std()), float(unscaled.max(-1).values.mean()),
                               float(scaled.max(-1).values.mean())))
    return rows


def _random_scores(d_k: int, num_tokens: int, seed: int) -> torch.Tensor:
    """q @ k.T for random unit-variance q, k of width d_k: their spread grows like sqrt(d_k)."""
    g = torch.Generator().manual_seed(seed * 100_003 + d_k)
    q = torch.randn(num_tokens, d_k, generator=g)
    k = torch.randn(num_tokens, d_k, generator=g)
    return q @ k.T


# ---- multi-head reshapes ------------------------------------------------------------------------

@dataclass(frozen=True)
class Reshape:
    """The numbers 0..d_out-1 of each token, before and after the head split."""

    flat: torch.Tensor  # (num_tokens, d_out): what W_query gives
    viewed: torch.Tensor  # (num_tokens, num_heads, head_dim) after .view
    transposed: torch.Tensor  # (num_heads, num_tokens, head_dim) after .transpose(1, 2) (batch dropped)
    head_of_column: torch.Tensor  # (d_out,) which head each column goes to
    view_error: str  # what PyTorch says to .view right after a transpose
    transposed_contiguous: bool
    transposed_stride: tuple[int, ...]
    fixed_stride: tuple[int, ...]


def reshape_demo(num_tokens: int, d_out: int, num_heads: int) -> Reshape:
    """Run the real .view/.transpose on numbered columns, and the .view-after-transpose error."""
    if d_out % num_heads:
        raise Problem("d_out ({d_out}) must be divisible by num_heads ({num_heads})", d_out=d_out, num_heads=num_heads)
    head_dim = d_out // num_heads
    b = 1
    flat = torch.arange(num_tokens * d_out, dtype=torch.float32).view(b, num_tokens, d_out)
    viewed = flat.view(b, num_tokens, num_heads, head_dim)
    transposed = viewed.transpose(1, 2)
    try:
        transposed.view(b, num_tokens, d_out)
        error = ""
    except RuntimeError as e:
        error = str(e).split("\n")[0]
    back = transposed.transpose(1, 2).contiguous()
    return Reshape(flat[0], viewed[0], transposed[0], torch.arange(d_out) // head_dim, error,
                   transposed.is_contiguous(), tuple(transposed.stride()), tuple(back.stride()))


def wrapper_as_multihead(wrapper: MultiHeadAttentionWrapper) -> MultiHeadAttention:
    """A MultiHeadAttention computing exactly what ``wrapper`` computes: each head's W stacked into
    the big W_query/W_key/W_value (rows = output features) and out_proj set to the identity."""
    heads = list(wrapper.heads)
    first = heads[0]
    d_in, head_width = first.d_in, first.d_out
    num_heads = len(heads)
    bias = first.W_query.bias is not None
    mha = MultiHeadAttention(d_in, head_width * num_heads, first.context_length, first.dropout.p, num_heads,
                             qkv_bias=bias, mask_method=first.mask_method, causal=first.causal)
    with torch.no_grad():
        for name in ("W_query", "W_key", "W_value"):
            big = getattr(mha, name)
            big.weight.copy_(torch.cat([getattr(h, name).weight for h in heads], dim=0))
            if bias:
                big.bias.copy_(torch.cat([getattr(h, name).bias for h in heads], dim=0))
        mha.out_proj.weight.copy_(torch.eye(head_width * num_heads))
        mha.out_proj.bias.zero_()
    return mha.to(first.W_query.weight.device).train(wrapper.training)


BOOK_HEADS_A = torch.tensor([[[[0.2745, 0.6584, 0.2775, 0.8573],
                               [0.8993, 0.0390, 0.9268, 0.7388],
                               [0.7179, 0.7058, 0.9156, 0.4340]],
                              [[0.0772, 0.3565, 0.1479, 0.5331],
                               [0.4066, 0.2318, 0.4545, 0.9737],
                               [0.4606, 0.5159, 0.4220, 0.5786]]]])  # (b=1, num_heads=2, num_tokens=3, head_dim=4)


def batched_vs_loop(a: torch.Tensor = BOOK_HEADS_A) -> tuple[torch.Tensor, list[torch.Tensor], float]:
    """Section 3.6.2: ``a @ a.transpose(2, 3)`` equals one ``first_head @ first_head.T`` per head."""
    batched = a @ a.transpose(2, 3)
    per_head = []
    for h in range(a.shape[1]):
        head = a[0, h, :, :]
        per_head.append(head @ head.T)
    diff = max(float((batched[0, h] - per_head[h]).abs().max()) for h in range(a.shape[1]))
    return batched, per_head, diff


@dataclass(frozen=True)
class SharingWay:
    """One way to give every query head its group's K/V head: the code, the result's shape and strides."""

    code: str
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    copies: bool  # whether it wrote a new tensor (False: a view of the keys' memory)
    same_as_repeat: bool  # holds the numbers repeat_interleave gives (K1 K1 K2 K2), in some shape


def kv_sharing(num_kv_groups: int, group_size: int, num_tokens: int = 4, head_dim: int = 2) -> list[SharingWay]:
    """Grouped-query attention's K/V heads (b=1, num_kv_groups, num_tokens, head_dim) shared by ``group_size`` query
    heads each, three ways: ``repeat_interleave`` (copies), ``expand`` (a view: stride 0 on the group axis, no
    copy) and ``expand`` then ``reshape`` to num_heads (copies, as a view cannot merge a stride-0 axis)."""
    keys = torch.arange(num_kv_groups * num_tokens * head_dim, dtype=torch.float32).view(
        1, num_kv_groups, num_tokens, head_dim)
    num_heads = num_kv_groups * group_size
    repeated = keys.repeat_interleave(group_size, dim=1)  # (1, num_heads, num_tokens, head_dim)
    expanded = keys[:, :, None].expand(1, num_kv_groups, group_size, num_tokens, head_dim)
    merged = expanded.reshape(1, num_heads, num_tokens, head_dim)
    ways = [("keys.repeat_interleave(group_size, dim=1)", repeated),
            ("keys[:, :, None].expand(b, num_kv_groups, group_size, T, head_dim)", expanded),
            ("keys[:, :, None].expand(...).reshape(b, num_heads, T, head_dim)", merged)]
    return [SharingWay(code, tuple(t.shape), tuple(t.stride()),
                       t.untyped_storage().data_ptr() != keys.untyped_storage().data_ptr(),
                       torch.equal(t.reshape(repeated.shape), repeated)) for code, t in ways]
