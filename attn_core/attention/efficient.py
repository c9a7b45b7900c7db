"""Efficient multi-head attention beside the chapter's explicit one (nanoGPT style).

``MultiHeadAttention(..., efficient=True)`` (the default) already runs PyTorch's fused
``scaled_dot_product_attention`` whenever no Trace is asked for. This module adds the
combined-QKV variant (one ``nn.Linear(d_in, 3 * d_out)`` instead of three) and a plain
functional baseline, ``sdpa_attention``, that the benchmarks compare everything against.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from attn_core.attention.classes import MultiHeadAttention, check_inputs, check_sizes


class MultiHeadAttentionCombinedQKV(nn.Module):
    """Multi-head attention with one fused projection for queries, keys and values.

    One matmul of width 3 * d_out instead of three of width d_out: fewer kernel launches, the
    same math. ``from_multihead`` copies a MultiHeadAttention's weights for exact comparisons.
    """

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int,
                 qkv_bias: bool = False, causal: bool = True):
        super().__init__()
        check_sizes(d_in, d_out, context_length, dropout, None, num_heads)
        self.d_in, self.d_out, self.num_heads = d_in, d_out, num_heads
        self.context_length, self.causal, self.dropout = context_length, causal, dropout
        self.head_dim = d_out // num_heads
        self.qkv = nn.Linear(d_in, 3 * d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)

    @classmethod
    def from_multihead(cls, mha: MultiHeadAttention) -> MultiHeadAttentionCombinedQKV:
        bias = mha.W_query.bias is not None
        new = cls(mha.d_in, mha.d_out, mha.context_length, mha.dropout.p, mha.num_heads, bias, mha.causal)
        with torch.no_grad():
            new.qkv.weight.copy_(torch.cat([mha.W_query.weight, mha.W_key.weight, mha.W_value.weight], dim=0))
            if bias:
                new.qkv.bias.copy_(torch.cat([mha.W_query.bias, mha.W_key.bias, mha.W_value.bias], dim=0))
            new.out_proj.load_state_dict(mha.out_proj.state_dict())
        return new.to(mha.W_query.weight.device, mha.W_query.weight.dtype).train(mha.training)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_inputs(x, self.d_in, self.context_length)
        b, num_tokens, _ = x.shape
        qkv = self.qkv(x)  # (b, num_tokens, 3 * d_out)
        qkv = qkv.view(b, num_tokens, 3, self.num_heads, self.head_dim)  # split q/k/v and heads
        queries, keys, values = qkv.permute(2, 0, 3, 1, 4)  # each (b, num_heads, num_tokens, head_dim)
        context_vec = F.scaled_dot_product_attention(
            queries, keys, values, dropout_p=self.dropout if self.training else 0.0, is_causal=self.causal)
        context_vec = context_vec.transpose(1, 2).reshape(b, num_tokens, self.d_out)  # (b, num_tokens, d_out)
        return self.out_proj(context_vec)


def sdpa_attention(x: torch.Tensor, w_query: torch.Tensor, w_key: torch.Tensor, w_value: torch.Tensor,
                   w_out: torch.Tensor, b_out: torch.Tensor | None, num_heads: int,
                   causal: bool = True) -> torch.Tensor:
    """The plain functional baseline: three F.linear projections, SDPA, the output projection.

    No module, no checks: what any implementation of the same math can at best hope to match.
    """
    b, num_tokens, _ = x.shape
    d_out = w_query.shape[0]
    head_dim = d_out // num_heads
    q = F.linear(x, w_query).view(b, num_tokens, num_heads, head_dim).transpose(1, 2)
    k = F.linear(x, w_key).view(b, num_tokens, num_heads, head_dim).transpose(1, 2)
    v = F.linear(x, w_value).view(b, num_tokens, num_heads, head_dim).transpose(1, 2)
    context_vec = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return F.linear(context_vec.transpose(1, 2).reshape(b, num_tokens, d_out), w_out, b_out)
