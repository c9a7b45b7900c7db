"""Every number the chapter prints for its fixed inputs, reproduced by attn_core."""

import pytest
import torch

from attn_core import (
    MASK_METHODS,
    CausalAttention,
    MultiHeadAttention,
    MultiHeadAttentionWrapper,
    SelfAttention_v1,
    SelfAttention_v2,
    Trace,
    simplified_attention,
    softmax_naive,
)

ATOL = 1e-4  # the book prints 4 decimals


def close(actual, expected):
    torch.testing.assert_close(actual.detach().float(), torch.tensor(expected), atol=ATOL, rtol=0)


# Section 3.3.1
QUERY2_SCORES = [0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865]
ALL_SCORES = [[0.9995, 0.9544, 0.9422, 0.4753, 0.4576, 0.6310],
              [0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865],
              [0.9422, 1.4754, 1.4570, 0.8296, 0.7154, 1.0605],
              [0.4753, 0.8434, 0.8296, 0.4937, 0.3474, 0.6565],
              [0.4576, 0.7070, 0.7154, 0.3474, 0.6654, 0.2935],
              [0.6310, 1.0865, 1.0605, 0.6565, 0.2935, 0.9450]]
ALL_WEIGHTS = [[0.2098, 0.2006, 0.1981, 0.1242, 0.1220, 0.1452],
               [0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581],
               [0.1390, 0.2369, 0.2326, 0.1242, 0.1108, 0.1565],
               [0.1435, 0.2074, 0.2046, 0.1462, 0.1263, 0.1720],
               [0.1526, 0.1958, 0.1975, 0.1367, 0.1879, 0.1295],
               [0.1385, 0.2184, 0.2128, 0.1420, 0.0988, 0.1896]]
ALL_CONTEXT = [[0.4421, 0.5931, 0.5790],
               [0.4419, 0.6515, 0.5683],
               [0.4431, 0.6496, 0.5671],
               [0.4304, 0.6298, 0.5510],
               [0.4671, 0.5910, 0.5266],
               [0.4177, 0.6503, 0.5645]]


def test_query2_scores_and_three_normalizations(inputs):
    res = {n: simplified_attention(inputs, n) for n in ("sum", "softmax_naive", "softmax")}
    close(res["softmax"].scores[1], QUERY2_SCORES)
    close(res["sum"].weights[1], [0.1455, 0.2278, 0.2249, 0.1285, 0.1077, 0.1656])
    close(res["softmax_naive"].weights[1], [0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581])
    close(res["softmax"].weights[1], [0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581])
    close(softmax_naive(torch.tensor(QUERY2_SCORES)), [0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581])
    close(res["softmax"].context[1], [0.4419, 0.6515, 0.5683])  # z(2)


def test_all_weights_and_context_vectors(inputs):
    res = simplified_attention(inputs)
    close(res.scores, ALL_SCORES)
    close(res.weights, ALL_WEIGHTS)
    close(res.weights.sum(dim=-1), [1.0] * 6)
    close(res.context, ALL_CONTEXT)


def test_naive_softmax_overflows_where_torch_softmax_does_not():
    big = torch.tensor([1000.0, 1001.0])
    assert torch.isnan(softmax_naive(big)).all()
    close(torch.softmax(big, dim=-1), [0.2689, 0.7311])


def test_section_3_4_1_step_by_step(inputs):
    torch.manual_seed(123)
    sa = SelfAttention_v1(3, 2)
    x_2 = inputs[1]
    query_2 = x_2 @ sa.W_query
    close(query_2, [0.4306, 1.4551])
    keys = inputs @ sa.W_key
    close(query_2 @ keys[1], 1.8524)
    attn_scores_2 = query_2 @ keys.T
    close(attn_scores_2, [1.2705, 1.8524, 1.8111, 1.0795, 0.5577, 1.5440])
    attn_weights_2 = torch.softmax(attn_scores_2 / keys.shape[-1] ** 0.5, dim=-1)
    close(attn_weights_2, [0.1500, 0.2264, 0.2199, 0.1311, 0.0906, 0.1820])
    close(attn_weights_2 @ (inputs @ sa.W_value), [0.3061, 0.8210])


V1_OUT = [[0.2996, 0.8053], [0.3061, 0.8210], [0.3058, 0.8203],
          [0.2948, 0.7939], [0.2927, 0.7891], [0.2990, 0.8040]]
V2_OUT = [[-0.0739, 0.0713], [-0.0748, 0.0703], [-0.0749, 0.0702],
          [-0.0760, 0.0685], [-0.0763, 0.0679], [-0.0754, 0.0693]]


def test_self_attention_v1_seed_123(inputs):
    torch.manual_seed(123)
    close(SelfAttention_v1(3, 2)(inputs), V1_OUT)


def test_self_attention_v2_seed_789(inputs):
    torch.manual_seed(789)
    close(SelfAttention_v2(3, 2)(inputs), V2_OUT)


def test_exercise_3_1_v1_with_v2_weights_equals_v2(inputs):
    torch.manual_seed(789)
    sa_v2 = SelfAttention_v2(3, 2)
    sa_v1 = SelfAttention_v1(3, 2)
    sa_v1.W_query = torch.nn.Parameter(sa_v2.W_query.weight.T)
    sa_v1.W_key = torch.nn.Parameter(sa_v2.W_key.weight.T)
    sa_v1.W_value = torch.nn.Parameter(sa_v2.W_value.weight.T)
    torch.testing.assert_close(sa_v1(inputs), sa_v2(inputs))
    close(sa_v1(inputs), V2_OUT)


V2_WEIGHTS = [[0.1921, 0.1646, 0.1652, 0.1550, 0.1721, 0.1510],
              [0.2041, 0.1659, 0.1662, 0.1496, 0.1665, 0.1477],
              [0.2036, 0.1659, 0.1662, 0.1498, 0.1664, 0.1480],
              [0.1869, 0.1667, 0.1668, 0.1571, 0.1661, 0.1564],
              [0.1830, 0.1669, 0.1670, 0.1588, 0.1658, 0.1585],
              [0.1935, 0.1663, 0.1666, 0.1542, 0.1666, 0.1529]]
MASKED_WEIGHTS = [[1.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000],
                  [0.5517, 0.4483, 0.0000, 0.0000, 0.0000, 0.0000],
                  [0.3800, 0.3097, 0.3103, 0.0000, 0.0000, 0.0000],
                  [0.2758, 0.2460, 0.2462, 0.2319, 0.0000, 0.0000],
                  [0.2175, 0.1983, 0.1984, 0.1888, 0.1971, 0.0000],
                  [0.1935, 0.1663, 0.1666, 0.1542, 0.1666, 0.1529]]
MASKED_SCORES = [[0.2899, None, None, None, None, None],
                 [0.4656, 0.1723, None, None, None, None],
                 [0.4594, 0.1703, 0.1731, None, None, None],
                 [0.2642, 0.1024, 0.1036, 0.0186, None, None],
                 [0.2183, 0.0874, 0.0882, 0.0177, 0.0786, None],
                 [0.3408, 0.1270, 0.1290, 0.0198, 0.1290, 0.0078]]


def test_section_3_5_causal_weights_by_both_methods(inputs):
    torch.manual_seed(789)
    sa_v2 = SelfAttention_v2(3, 2)
    trace = Trace()
    sa_v2(inputs, trace)
    close(trace["attn_weights"].tensor, V2_WEIGHTS)
    expected_masked = torch.tensor([[v if v is not None else float("-inf") for v in row] for row in MASKED_SCORES])
    for method in MASK_METHODS:
        torch.manual_seed(789)
        ca = CausalAttention(3, 2, 6, 0.0, mask_method=method)
        # CausalAttention creates W_query, W_key, W_value in v2's order: same seed, same weights.
        torch.testing.assert_close(ca.W_query.weight, sa_v2.W_query.weight)
        t = Trace()
        ca(inputs.unsqueeze(0), t)
        close(t["attn_weights"].tensor[0], MASKED_WEIGHTS)
        if method == "neg_inf":
            torch.testing.assert_close(t["attn_scores_masked"].tensor[0], expected_masked, atol=ATOL, rtol=0)
        else:
            close(t["attn_weights_unmasked"].tensor[0], V2_WEIGHTS)
            zeroed = t["attn_weights_zeroed"].tensor[0]
            close(zeroed, torch.tril(torch.tensor(V2_WEIGHTS)).tolist())  # the book's masked_simple


CAUSAL_OUT = [[-0.4519, 0.2216], [-0.5874, 0.0058], [-0.6300, -0.0632],
              [-0.5675, -0.0843], [-0.5526, -0.0981], [-0.5299, -0.1081]]
WRAPPER_OUT = [[-0.4519, 0.2216, 0.4772, 0.1063], [-0.5874, 0.0058, 0.5891, 0.3257],
               [-0.6300, -0.0632, 0.6202, 0.3860], [-0.5675, -0.0843, 0.5478, 0.3589],
               [-0.5526, -0.0981, 0.5321, 0.3428], [-0.5299, -0.1081, 0.5077, 0.3493]]
MHA_OUT = [[0.3190, 0.4858], [0.2943, 0.3897], [0.2856, 0.3593],
           [0.2693, 0.3873], [0.2639, 0.3928], [0.2575, 0.4028]]


@pytest.mark.parametrize("method", MASK_METHODS)
@pytest.mark.parametrize("traced", [False, True])
def test_causal_attention_seed_123(batch, method, traced):
    torch.manual_seed(123)
    ca = CausalAttention(3, 2, batch.shape[1], 0.0, mask_method=method)
    out = ca(batch, Trace() if traced else None)
    assert out.shape == (2, 6, 2)
    close(out[0], CAUSAL_OUT)
    close(out[1], CAUSAL_OUT)


@pytest.mark.parametrize("method", MASK_METHODS)
@pytest.mark.parametrize("traced", [False, True])
def test_wrapper_seed_123(batch, method, traced):
    torch.manual_seed(123)
    mha = MultiHeadAttentionWrapper(3, 2, batch.shape[1], 0.0, num_heads=2, mask_method=method)
    out = mha(batch, Trace() if traced else None)
    assert out.shape == (2, 6, 4)
    close(out[0], WRAPPER_OUT)
    close(out[1], WRAPPER_OUT)


@pytest.mark.parametrize("method", MASK_METHODS)
@pytest.mark.parametrize("traced", [False, True])
def test_multihead_attention_seed_123(batch, method, traced):
    torch.manual_seed(123)
    mha = MultiHeadAttention(3, 2, batch.shape[1], 0.0, num_heads=2, mask_method=method)
    out = mha(batch, Trace() if traced else None)
    assert out.shape == (2, 6, 2)
    close(out[0], MHA_OUT)
    close(out[1], MHA_OUT)


def test_both_mask_methods_give_the_same_weights_on_random_scores():
    torch.manual_seed(0)
    x = torch.randn(3, 40, 16)
    traces = {}
    for method in MASK_METHODS:
        torch.manual_seed(1)
        t = Trace()
        MultiHeadAttention(16, 16, 64, 0.0, 4, mask_method=method)(x, t)
        traces[method] = t
    w = {m: traces[m]["attn_weights"].tensor for m in MASK_METHODS}
    diff = (w["neg_inf"] - w["renormalize"]).abs().max().item()
    assert diff < 1e-6
    assert torch.triu(w["neg_inf"], diagonal=1).abs().max() == 0  # no weight on the future
    torch.testing.assert_close(w["neg_inf"].sum(-1), torch.ones(3, 4, 40))


def test_non_causal_flag_gives_plain_self_attention(inputs):
    torch.manual_seed(789)
    expected = SelfAttention_v2(3, 2)(inputs)
    torch.manual_seed(789)
    ca = CausalAttention(3, 2, 6, 0.0, causal=False)
    torch.testing.assert_close(ca(inputs.unsqueeze(0))[0], expected)
