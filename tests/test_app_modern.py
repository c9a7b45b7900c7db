"""Issue 23 in the app: the modern variants on Explore and Shape flow, their knobs in the link, and the KV cache
cost page (AppTest)."""

from __future__ import annotations

import pytest

from apptest_utils import _rows, chart_with, messages, open_page, show_section

pytestmark = pytest.mark.usefixtures("fresh_caches")  # tests/conftest.py
GQA = dict(variant="GroupedQueryAttention", input_mode="learned", d_in="16", d_out="16", num_heads="8",
           num_kv_groups="2")


@pytest.mark.parametrize("query", [
    GQA, dict(GQA, variant="MultiQueryAttention"), dict(GQA, variant="MultiHeadLatentAttention", latent_dim="4"),
    dict(GQA, variant="MultiHeadAttention", window="3"),
], ids=["gqa", "mqa", "mla", "swa"])
def test_each_modern_variant_runs_on_explore_and_shape_flow(query):
    at = open_page(**query)
    for section in ("Q, K, V", "Scores", "All heads", "Weights", "Output"):
        show_section(at, section)
        assert not messages(at)["exception"] and not messages(at)["error"], (section, messages(at))
    at.switch_page("app_pages/shape_flow.py").run()
    names = []
    for _ in range(30):
        names.append(at.subheader[0].value)
        if at.button(key="flow_step_next").disabled:
            break
        at.button(key="flow_step_next").click().run()
        assert not messages(at)["exception"], messages(at)
    assert names[-1].endswith("`out_proj`")
    if query["variant"] in ("GroupedQueryAttention", "MultiQueryAttention"):
        assert any("keys.repeat" in n for n in names)  # the repeat of K/V heads is a step
    if query["variant"] == "MultiHeadLatentAttention":
        assert any("`latent`" in n for n in names)


def test_gqa_shows_which_kv_head_each_query_head_reads():
    at = open_page(**GQA)
    assert "8 query heads share 2 K/V heads (4 each)" in at.markdown[0].value
    show_section(at, "All heads")
    rows = chart_with(at, "head 5 · K/V 2")
    assert {r["panel"] for r in rows} >= {"head 1 · K/V 1", "head 4 · K/V 1", "head 5 · K/V 2", "head 8 · K/V 2"}


def test_a_sliding_window_shows_the_band():
    at = open_page(**dict(GQA, variant="MultiHeadAttention", window="2"))
    show_section(at, "Scores")
    assert any(m.value.startswith("**mask: causal, window 2 (1 = hidden)**") for m in at.markdown)
    mask = next(rows for el in at.get("vega_lite_chart") if "panel" not in (rows := _rows(el))[0])
    hidden = {(r["q"], r["k"]) for r in mask if r["value"] == 1}
    assert (5, 3) in hidden and (5, 4) not in hidden and (5, 5) not in hidden  # query 6 sees tokens 5 and 6


@pytest.mark.parametrize("query, message", [
    (dict(GQA, num_kv_groups="3"), "must divide num_heads (8)"),
    (dict(GQA, variant="MultiHeadLatentAttention", latent_dim="40"), "latent_dim must be a whole number from 1 to"),
])
def test_impossible_sizes_say_what_works(query, message):
    at = open_page(**query)
    assert any(message in e for e in messages(at)["error"]), messages(at)


def test_the_kv_cost_page_reproduces_the_books_numbers_and_measures_the_cache():

    at = open_page("app_pages/kv_cost.py")
    table = at.dataframe[0].value
    totals = dict(zip(table["variant"], table["32,768 tokens"]))
    assert totals["MHA"] == "17.18 GB" and totals["GQA (8 K/V heads)"] == "4.29 GB"
    assert totals["MHA + SWA 1024 (5:1)"] == "3.14 GB" and totals["GQA + SWA 1024 (5:1)"] == "784.33 MB"
    from apptest_utils import md_tables

    every = next(t for t in md_tables(at) if "measured bytes" in next(iter(t.values())))  # Markdown: cells wrap
    # the real models' own rows, when installed, say so in their name: read from the page as drawn, not from a
    # second look for the models after the run (on a busy CI box it once disagreed with the page's)
    rows = [cells for name, cells in every.items() if ", real (" not in name]
    measured = [cells for cells in rows if cells["equal"] != "–"]
    assert len(measured) == 4 and all(c["measured bytes"] == c["formula bytes"] for c in measured), measured
    assert {c["equal"] for c in measured} == {"yes"}
    # the window row says why nothing was measured, instead of "None"
    window = [cells for cells in rows if cells["equal"] == "–"]
    assert len(window) == 1 and window[0]["measured bytes"].startswith("not measured")
    assert any("keeps every token" in c.value for c in at.caption)
    at.selectbox(key="kv_preset").set_value("Your own numbers").run()
    totals = dict(zip(at.dataframe[0].value["variant"], at.dataframe[0].value["32,768 tokens"]))
    assert "MLA (latent 512)" in totals  # the book's default, emb_dim / 8
    at.number_input(key="kv_latent").set_value(256).run()
    totals = dict(zip(at.dataframe[0].value["variant"], at.dataframe[0].value["32,768 tokens"]))
    assert totals["MLA (latent 256)"] == "536.87 MB"  # 32 layers x 256 values x 2 bytes x 32,768 tokens
    linked = open_page("app_pages/kv_cost.py", kv_preset="Your own numbers", kv_latent="128", kv_layers="16")
    totals = dict(zip(linked.dataframe[0].value["variant"], linked.dataframe[0].value["32,768 tokens"]))
    assert totals["MLA (latent 128)"] == "134.22 MB"  # a link opens on your numbers: 16 x 128 x 2 x 32,768
    at.number_input(key="kv_kv_heads").set_value(5).run()
    assert any("must divide heads (32): use 1, 2, 4, 8, 16 or 32." in e for e in messages(at)["error"]), messages(at)


def test_shape_flow_shows_that_expand_makes_no_copy_and_repeat_interleave_does():
    from attn_core.labs.lab import kv_sharing

    repeated, expanded, merged = kv_sharing(2, 4)
    assert repeated.copies and repeated.shape == (1, 8, 4, 2)
    assert not expanded.copies and expanded.stride[2] == 0  # a view: the group axis has stride 0
    assert merged.copies and merged.shape == (1, 8, 4, 2)
    assert repeated.same_as_repeat and expanded.same_as_repeat and merged.same_as_repeat
    at = open_page("app_pages/shape_flow.py", **GQA)
    assert "How 8 query heads share 2 K/V heads" in [h.value for h in at.header]
    table = at.dataframe[0].value
    assert list(table["copies the keys"]) == ["yes", "no (a view)", "yes"]


def test_a_bad_kv_preset_in_the_link_is_named():
    from apptest_utils import new_app

    at = new_app(kv_preset="<b>bogus</b>")
    at.run()
    at.switch_page("app_pages/kv_cost.py").run()
    warnings = " ".join(messages(at)["warning"])
    assert "kv\\_preset" in warnings and "` <b>bogus</b> `" in warnings, warnings  # the value only in a code span


def test_the_kv_cost_page_reads_the_found_models_own_configs(tmp_path, monkeypatch):
    """A tiny Qwen3 and a tiny Gemma 3 in ATTENTION_LAB_GGUF_DIR: each row from the model's own config, Gemma's
    five local layers keeping only their window of 4 tokens."""
    from attn_core.labs.kv_cost import model_cost
    from dashboard.state import models
    from tests.gguf_fixtures import arch_model, gemma_cfg, qwen_cfg, randomize, write_gguf

    qwen = write_gguf(tmp_path / "tiny-qwen3.gguf", randomize(arch_model(qwen_cfg("qwen3"))), "qwen3")
    gemma = write_gguf(tmp_path / "tiny-gemma3.gguf", randomize(arch_model(gemma_cfg())), "gemma3")
    monkeypatch.setenv("ATTENTION_LAB_GGUF_DIR", str(tmp_path))
    models.forget_found()
    at = open_page("app_pages/kv_cost.py")
    assert "The models found here, from their own configs" in [h.value for h in at.header]
    sizes, cache = at.dataframe[-2].value, at.dataframe[-1].value  # the config's sizes; the cache at its context
    rows = {r["model"]: r for r in sizes.merge(cache, on="model").to_dict("records")}
    g, q = rows[models.short_label(gemma.stem)], rows[models.short_label(qwen.stem)]
    # Gemma: 2 x 1 K/V head x 256 x 4 bytes = 2,048 bytes a token a layer; 128 tokens in the global layer, 4 in each
    # of the five local ones
    assert (g["layers"], g["K/V heads × head_dim"], g["window layers"]) == (6, "1 × 256", "5 of 6: 4 tokens")
    assert g["KV cache"] == "303.10 kB" and g["if every layer were full"] == "1.57 MB"  # 2,048 x 148; x 768
    assert g["× smaller"] == pytest.approx(768 / 148)
    assert (q["layers"], q["K/V heads × head_dim"], q["window layers"]) == (3, "2 × 128", "none (every layer full)")
    assert q["KV cache"] == q["if every layer were full"] == "786.43 kB" and q["× smaller"] == 1  # 4,096 x 3 x 128
    assert model_cost(6, 1, 256, (4,) * 5 + (None,), 2).total_bytes == 2_048 * 12  # shorter than the window
    from apptest_utils import md_tables

    measured = next(t for t in md_tables(at) if "measured bytes" in next(iter(t.values())))  # Markdown: cells wrap
    g = next(cells for name, cells in measured.items() if name.startswith("Tiny gemma3"))
    assert g["cache shape per layer"] == "(1, 1, 4, 256)"  # the cache drops what the window hides
    assert g["equal"] == "yes" and g["measured bytes"] == f"{2_048 * (128 + 5 * 4):,}"
    assert next(cells for name, cells in measured.items() if name.startswith("Tiny qwen3"))["equal"] == "yes"
    with pytest.raises(ValueError, match="at least 1 token; got 0"):
        model_cost(6, 1, 256, (), 0)
    models.forget_found()
