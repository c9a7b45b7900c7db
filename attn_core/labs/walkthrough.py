"""The chapter, section 3.3 to 3.6.2, step by step with the numbers the book prints.

``book_walkthrough()`` runs each step on the book's fixed inputs and compares with the printed
value; ``book_walkthrough(x)`` runs the same code on other (num_tokens, 3) inputs, e.g. the
user's sentence, where there is no printed value to compare with.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from attn_core.attention.book import BOOK_INPUTS
from attn_core.attention.classes import (
    CausalAttention,
    MultiHeadAttention,
    MultiHeadAttentionWrapper,
    SelfAttention_v1,
    SelfAttention_v2,
)
from attn_core.attention.simplified import simplified_attention, softmax_naive
from attn_core.messages import Msg, Problem

ATOL = 1e-4  # the book prints 4 decimals

# What the book prints (1st edition, chapter 3).
PRINTED: dict[str, list] = {
    "scores_2": [0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865],
    "sum_2": [0.1455, 0.2278, 0.2249, 0.1285, 0.1077, 0.1656],
    "naive_2": [0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581],
    "softmax_2": [0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581],
    "z_2": [0.4419, 0.6515, 0.5683],
    "weights": [[0.2098, 0.2006, 0.1981, 0.1242, 0.1220, 0.1452],
                [0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581],
                [0.1390, 0.2369, 0.2326, 0.1242, 0.1108, 0.1565],
                [0.1435, 0.2074, 0.2046, 0.1462, 0.1263, 0.1720],
                [0.1526, 0.1958, 0.1975, 0.1367, 0.1879, 0.1295],
                [0.1385, 0.2184, 0.2128, 0.1420, 0.0988, 0.1896]],
    "context": [[0.4421, 0.5931, 0.5790], [0.4419, 0.6515, 0.5683], [0.4431, 0.6496, 0.5671],
                [0.4304, 0.6298, 0.5510], [0.4671, 0.5910, 0.5266], [0.4177, 0.6503, 0.5645]],
    "query_2": [0.4306, 1.4551],
    "v1_scores_2": [1.2705, 1.8524, 1.8111, 1.0795, 0.5577, 1.5440],
    "v1_weights_2": [0.1500, 0.2264, 0.2199, 0.1311, 0.0906, 0.1820],
    "v1_context_2": [0.3061, 0.8210],
    "v1": [[0.2996, 0.8053], [0.3061, 0.8210], [0.3058, 0.8203], [0.2948, 0.7939], [0.2927, 0.7891],
           [0.2990, 0.8040]],
    "v2": [[-0.0739, 0.0713], [-0.0748, 0.0703], [-0.0749, 0.0702], [-0.0760, 0.0685], [-0.0763, 0.0679],
           [-0.0754, 0.0693]],
    "masked": [[1.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000],
               [0.5517, 0.4483, 0.0000, 0.0000, 0.0000, 0.0000],
               [0.3800, 0.3097, 0.3103, 0.0000, 0.0000, 0.0000],
               [0.2758, 0.2460, 0.2462, 0.2319, 0.0000, 0.0000],
               [0.2175, 0.1983, 0.1984, 0.1888, 0.1971, 0.0000],
               [0.1935, 0.1663, 0.1666, 0.1542, 0.1666, 0.1529]],
    "causal": [[-0.4519, 0.2216], [-0.5874, 0.0058], [-0.6300, -0.0632], [-0.5675, -0.0843],
               [-0.5526, -0.0981], [-0.5299, -0.1081]],
    "wrapper": [[-0.4519, 0.2216, 0.4772, 0.1063], [-0.5874, 0.0058, 0.5891, 0.3257],
                [-0.6300, -0.0632, 0.6202, 0.3860], [-0.5675, -0.0843, 0.5478, 0.3589],
                [-0.5526, -0.0981, 0.5321, 0.3428], [-0.5299, -0.1081, 0.5077, 0.3493]],
    "mha": [[0.3190, 0.4858], [0.2943, 0.3897], [0.2856, 0.3593], [0.2693, 0.3873], [0.2639, 0.3928],
            [0.2575, 0.4028]],
}


@dataclass(frozen=True)
class BookStep:
    """One step of the walkthrough: the code, what it computed, and the book's printed value."""

    key: str
    section: str
    title: Msg  # words: str() is the English, pages translate them
    code: str
    explanation: Msg
    value: torch.Tensor
    printed: torch.Tensor | None  # None for the user's own inputs, or where the book's value is version-dependent
    check: Msg  # what "agrees" means for this step

    @property
    def agrees(self) -> bool | None:
        """True when the computed value matches the print (to 4 decimals); None if nothing to compare."""
        if self.printed is None:
            return None
        return bool(torch.allclose(self.value.float(), self.printed, atol=ATOL, rtol=0, equal_nan=True))

    @property
    def max_abs_diff(self) -> float | None:
        if self.printed is None:
            return None
        return float((self.value.float() - self.printed).abs().nan_to_num(0.0).max())


def _seeded(seed: int, make: Callable[[], torch.nn.Module]) -> torch.nn.Module:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return make()


def book_walkthrough(inputs: torch.Tensor | None = None) -> list[BookStep]:
    """Every step of sections 3.3-3.6.2 on ``inputs`` (num_tokens, 3); the book's inputs by default."""
    book = inputs is None
    x = BOOK_INPUTS if book else inputs.detach().float().cpu()
    if x.ndim != 2 or x.shape[1] != 3 or x.shape[0] < 1:
        raise Problem("the walkthrough needs (num_tokens, 3) inputs; got {shape}", shape=tuple(x.shape))
    i = min(1, x.shape[0] - 1)  # the book's query is x(2), "journey"
    T = x.shape[0]
    batch = torch.stack((x, x))  # (2, num_tokens, 3), as in the book
    steps: list[BookStep] = []

    def add(key, section, title, code, explanation, value, check=None, printed_ok=True):
        check = Msg("equal to 4 decimals") if check is None else check
        printed = torch.tensor(PRINTED[key]) if book and printed_ok and key in PRINTED else None
        steps.append(BookStep(key, section, title, code, explanation, value.detach(), printed, check))

    with torch.no_grad():
        simple = {n: simplified_attention(x, n) for n in ("sum", "softmax_naive", "softmax")}
        add("scores_2", "3.3.1", Msg("Dot products with query x({query})", query=i + 1),
            f"query = inputs[{i}]\nattn_scores_2 = torch.empty(inputs.shape[0])\n"
            "for i, x_i in enumerate(inputs):\n    attn_scores_2[i] = torch.dot(x_i, query)",
            Msg("Each score says how well an input token matches the query: a dot product."),
            simple["softmax"].scores[i])
        add("sum_2", "3.3.1", Msg("Normalize by the sum"), "attn_weights_2_tmp = attn_scores_2 / attn_scores_2.sum()",
            Msg("Weights that sum to 1, but a simple sum misbehaves with negative or extreme scores."),
            simple["sum"].weights[i])
        add("naive_2", "3.3.1", Msg("Naive softmax"),
            "def softmax_naive(x):\n    return torch.exp(x) / torch.exp(x).sum(dim=0)",
            Msg("Softmax keeps every weight positive and emphasises large scores."), simple["softmax_naive"].weights[i])
        add("softmax_2", "3.3.1", Msg("torch.softmax"), "attn_weights_2 = torch.softmax(attn_scores_2, dim=0)",
            Msg("PyTorch's softmax: the same numbers, and stable for large inputs."), simple["softmax"].weights[i])
        big = torch.tensor([1000.0, 1001.0])
        overflow = torch.stack([softmax_naive(big), torch.softmax(big, dim=0)])
        steps.append(BookStep("overflow", "3.3.1", Msg("Naive softmax overflows"),
                              "softmax_naive(torch.tensor([1000., 1001.]))  # exp(1000) = inf\n"
                              "torch.softmax(torch.tensor([1000., 1001.]), dim=0)",
                              Msg("exp(1000) is inf in float32, and inf / inf is NaN; torch.softmax subtracts "
                                  "the maximum first, so it stays finite."), overflow,
                              torch.tensor([[float("nan"), float("nan")], [0.2689, 0.7311]]),
                              Msg("first row NaN, second row finite")))
        add("z_2", "3.3.1", Msg("Context vector z({query})", query=i + 1),
            "context_vec_2 = torch.zeros(query.shape)\nfor i, x_i in enumerate(inputs):\n"
            "    context_vec_2 += attn_weights_2[i] * x_i",
            Msg("The weighted sum of all inputs: what the query token 'sees'."), simple["softmax"].context[i])
        add("weights", "3.3.2", Msg("All attention weights"),
            "attn_scores = inputs @ inputs.T\nattn_weights = torch.softmax(attn_scores, dim=-1)",
            Msg("One matrix multiplication gives every score; each row is softmax-normalized."),
            simple["softmax"].weights)
        add("context", "3.3.2", Msg("All context vectors"), "all_context_vecs = attn_weights @ inputs",
            Msg("Every token's context vector at once."), simple["softmax"].context)

        sa_v1 = _seeded(123, lambda: SelfAttention_v1(3, 2))
        query_2 = x[i] @ sa_v1.W_query
        keys = x @ sa_v1.W_key
        values = x @ sa_v1.W_value
        attn_scores_2 = query_2 @ keys.T
        attn_weights_2 = torch.softmax(attn_scores_2 / keys.shape[-1] ** 0.5, dim=-1)
        add("query_2", "3.4.1", Msg("Trainable weights: query_2 (seed 123)"),
            "torch.manual_seed(123)\nW_query = torch.nn.Parameter(torch.rand(d_in, d_out), requires_grad=False)\n"
            "query_2 = x_2 @ W_query", Msg("Queries, keys and values are projections by trainable matrices."), query_2)
        add("v1_scores_2", "3.4.1", Msg("Scores of query 2 against every key"), "attn_scores_2 = query_2 @ keys.T",
            Msg("The same dot products, now between a query and keys."), attn_scores_2)
        add("v1_weights_2", "3.4.1", Msg("Scaled softmax"),
            "d_k = keys.shape[-1]\nattn_weights_2 = torch.softmax(attn_scores_2 / d_k**0.5, dim=-1)",
            Msg("Dividing by sqrt(d_k) keeps softmax from saturating as the dimension grows."), attn_weights_2)
        add("v1_context_2", "3.4.1", Msg("Context vector 2"), "context_vec_2 = attn_weights_2 @ values",
            Msg("The weighted sum of value vectors."), attn_weights_2 @ values)
        add("v1", "3.4.2", Msg("SelfAttention_v1 (seed 123)"),
            "torch.manual_seed(123)\nsa_v1 = SelfAttention_v1(d_in, d_out)\nprint(sa_v1(inputs))",
            Msg("The same computation as a module, for every token."), sa_v1(x))
        sa_v2 = _seeded(789, lambda: SelfAttention_v2(3, 2))
        add("v2", "3.4.2", Msg("SelfAttention_v2 (seed 789)"),
            "torch.manual_seed(789)\nsa_v2 = SelfAttention_v2(d_in, d_out)\nprint(sa_v2(inputs))",
            Msg("nn.Linear layers instead of raw parameters: better initialization, different numbers."), sa_v2(x))
        q2, k2 = sa_v2.W_query(x), sa_v2.W_key(x)
        scores = q2 @ k2.T
        mask = torch.triu(torch.ones(T, T), diagonal=1)
        masked = torch.softmax(scores.masked_fill(mask.bool(), -torch.inf) / k2.shape[-1] ** 0.5, dim=-1)
        add("masked", "3.5.1", Msg("Causal mask with −∞"),
            "mask = torch.triu(torch.ones(context_length, context_length), diagonal=1)\n"
            "masked = attn_scores.masked_fill(mask.bool(), -torch.inf)\n"
            "attn_weights = torch.softmax(masked / keys.shape[-1]**0.5, dim=1)",
            Msg("Each token may only attend to itself and earlier tokens."), masked)
        dropout = torch.nn.Dropout(0.5)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(123)
            dropped = dropout(torch.ones(6, 6))
        steps.append(BookStep("dropout", "3.5.2", Msg("Dropout on a 6×6 matrix of ones"),
                              "torch.manual_seed(123)\ndropout = torch.nn.Dropout(0.5)\n"
                              "example = torch.ones(6, 6)\nprint(dropout(example))",
                              Msg("About half the entries become 0, the others 1/(1-0.5) = 2. The exact pattern "
                                  "depends on the PyTorch version, so the check is on the values, not the print."),
                              dropped, None, Msg("every entry is 0 or 2")))
        ca = _seeded(123, lambda: CausalAttention(3, 2, T, 0.0))
        add("causal", "3.5.3", Msg("CausalAttention (seed 123)"),
            "torch.manual_seed(123)\ncontext_length = batch.shape[1]\n"
            "ca = CausalAttention(d_in, d_out, context_length, 0.0)\ncontext_vecs = ca(batch)",
            Msg("Masking and dropout in one class, for batches: output (2, 6, 2)."), ca(batch)[0])
        mhw = _seeded(123, lambda: MultiHeadAttentionWrapper(3, 2, T, 0.0, num_heads=2))
        add("wrapper", "3.6.1", Msg("MultiHeadAttentionWrapper (seed 123)"),
            "torch.manual_seed(123)\nmha = MultiHeadAttentionWrapper(d_in, d_out, context_length, 0.0, num_heads=2)\n"
            "context_vecs = mha(batch)",
            Msg("Two heads side by side: the output is d_out × num_heads = 4 wide."), mhw(batch)[0])
        mha = _seeded(123, lambda: MultiHeadAttention(3, 2, T, 0.0, num_heads=2))
        add("mha", "3.6.2", Msg("MultiHeadAttention (seed 123)"),
            "torch.manual_seed(123)\nmha = MultiHeadAttention(d_in, d_out, context_length, 0.0, num_heads=2)\n"
            "context_vecs = mha(batch)",
            Msg("One set of big projections split into heads: output d_out = 2 wide."), mha(batch)[0])
    return steps


def dropout_ok(step: BookStep) -> bool:
    """The dropout step's property check: every entry 0 or 2, some of each."""
    v = step.value
    return bool(((v == 0) | (v == 2)).all() and (v == 0).any() and (v == 2).any())
