"""Issue 22: the Generate page, one token at a time with the KV cache (AppTest)."""

from __future__ import annotations

import numpy as np
import pytest
from langs import CHINESE, ENGLISH

from apptest_utils import messages, open_page

PAGE = "app_pages/generate.py"
pytestmark = pytest.mark.usefixtures("fresh_caches")  # tests/conftest.py


@pytest.fixture(autouse=True)
def book_model_first(monkeypatch):
    """These tests watch the book's GPTModel (the default when SmolLM2's wheel is absent; tests/test_app_llama.py
    covers the page with SmolLM2, its default when installed)."""
    from attn_core.models import gguf_files
    from dashboard.state.models import forget_found

    monkeypatch.setattr(gguf_files, "packaged_models", lambda: [])
    forget_found()
    yield
    forget_found()  # the next test finds SmolLM2 again


def test_ten_next_token_steps_grow_the_row_and_the_cache():
    at = open_page(PAGE)
    assert "Every effort moves you" in at.markdown[0].value and "Next token" in " ".join(i.value for i in at.info)
    for step in range(1, 11):
        at.button(key="gen_next").click().run()
        assert not messages(at)["exception"] and not messages(at)["error"], messages(at)
        T = 4 + step
        assert at.markdown[0].value.count(":orange-background[") == 1  # the new token, marked
        assert any(m.value.startswith(f"**Step {step}: token {T} is") for m in at.markdown)
        shapes = at.session_state["gen_state"].last.cache_shapes
        assert shapes == [(1, 4, T, 64)] * 4  # every layer's keys grow by one
        row = at.session_state["gen_state"].last.row
        assert row.shape == (4, T) and np.allclose(row.sum(axis=1), 1, atol=1e-5)  # one row per head over T keys
    gen = at.session_state["gen_state"]
    assert gen.last.cache_bytes == sum(layer.keys.nbytes + layer.values.nbytes for layer in gen.cache.layers)
    assert f"{gen.last.cache_bytes:,} bytes" in " ".join(c.value for c in at.caption)
    table = next(m.value for m in at.markdown if m.value.startswith("| layers |"))
    assert table.count("\n") == 2 and "| 1–4 | \\(1, 4, 14, 64\\) | 28672 |" in table  # 4 alike layers: one row
    timing = next(m.value for m in at.markdown if m.value.startswith("**Timed here:**"))
    assert "with the KV cache" in timing and "without it" in timing and "all 10 steps" in timing
    np.testing.assert_allclose(gen.last.full_weights[-1], gen.last.row[0], atol=1e-5)  # full matrix's last row


def test_play_stops_at_the_limit(monkeypatch):
    import attn_core.models.decoding

    monkeypatch.setattr(attn_core.models.decoding, "PAGE_NEW_TOKENS", 3)
    at = open_page(PAGE)
    at.button(key="gen_play").click().run()
    for _ in range(6):  # the live view's timer reruns it; here each run stands for one tick
        if not at.session_state["gen_playing"]:
            break
        at.run()
    assert not at.session_state["gen_playing"]
    gen = at.session_state["gen_state"]
    assert len(gen.ids) - gen.prompt_len == 3
    assert any("the limit of this page" in i.value for i in at.info) and at.button(key="gen_next").disabled


def test_next_takes_the_step_worked_out_ahead_and_draws_what_one_generator_would():
    """Each step is worked out in the background while the one before is shown; Next takes it. Sampled on copies of
    the cache and the generator, the tokens are those of one seeded generation, and one cache is kept, not two."""
    import torch

    from attn_core.attention.kv_cache import KVCache
    from attn_core.models.decoding import decode_step, prefill
    from attn_core.models.registry import find_models, load_model

    at = open_page(PAGE)
    at.segmented_control(key="gen_how").set_value("sample").run()
    at.number_input(key="gen_seed").set_value(7).run()
    for _ in range(4):
        gen = at.session_state["gen_state"]
        assert gen.ahead.started.wait(60)  # started after the last run, before any click
        ahead = gen.ahead.take()
        at.button(key="gen_next").click().run()
        assert gen.last.token_id == ahead.step.token_id and gen.cache is ahead.cache
    gen = at.session_state["gen_state"]
    assert gen.ahead.started.wait(60)
    after = gen.ahead.take().cache  # the next step's cache; the shown text's is views of it
    assert gen.cache.length == len(gen.ids) and after.length == len(gen.ids) + 1
    assert all(a.keys.untyped_storage().data_ptr() == b.keys.untyped_storage().data_ptr()
               for a, b in zip(gen.cache.layers, after.layers))
    model = load_model(next(f for f in find_models() if f.name == at.selectbox(key="gen_model").value))
    ids = list(gen.ids[:gen.prompt_len])
    cache, generator = KVCache(model.cfg["n_layers"]), torch.Generator().manual_seed(7)
    logits = prefill(model, ids, cache)
    for _ in range(4):
        step, logits = decode_step(model, ids, cache, logits, temperature=1.0, top_k=50, generator=generator,
                                   compare=False)
        ids.append(step.token_id)
    assert ids == gen.ids


def test_changing_the_layer_shown_traces_the_step_at_that_layer():
    """The row and the full matrix are the chosen layer's, also for a step made while another layer was shown."""
    import torch

    from attn_core.models.registry import find_models, load_model
    from attn_core.models.traced import trace_layer
    from attn_core.tracing.views import all_heads

    at = open_page(PAGE)
    for _ in range(2):
        at.button(key="gen_next").click().run()
    first = at.session_state["gen_state"].last.row
    at.selectbox(key="gen_layer").set_value(2).run()
    gen = at.session_state["gen_state"]
    model = load_model(next(f for f in find_models() if f.name == at.selectbox(key="gen_model").value))
    want = all_heads(trace_layer(model, torch.tensor([gen.ids]), 2), "weights")[:, -1, :]  # no cache: last row
    assert gen.last.layer == 2 and not np.allclose(gen.last.row, first)
    np.testing.assert_allclose(gen.last.row, want, atol=1e-5)
    np.testing.assert_allclose(gen.last.full_weights[-1], gen.last.row[0], atol=1e-5)
    assert any(m.value.startswith("**The new query's attention, layer 3**") for m in at.markdown)
    at.button(key="gen_next").click().run()  # worked out ahead at layer 3 already, or traced again
    assert at.session_state["gen_state"].last.layer == 2


@pytest.mark.parametrize("prompt, message", [
    ("   ", "The text is empty"),
    ("word " * 300, "continues prompts of up to 200 tokens"),
])
def test_bad_prompts_say_what_to_change(prompt, message):
    at = open_page(PAGE)
    at.text_input(key="gen_prompt").set_value(prompt).run()
    errors = messages(at)["error"]
    assert not messages(at)["exception"] and any(message in e for e in errors), errors


def test_sampling_is_seeded_and_special_and_markdown_text_stays_literal():
    at = open_page(PAGE)
    at.text_input(key="gen_prompt").set_value("**bold** <|endoftext|> [x](http://e.example)").run()
    at.segmented_control(key="gen_how").set_value("sample").run()
    for _ in range(3):
        at.button(key="gen_next").click().run()
    first = list(at.session_state["gen_state"].ids)
    assert not messages(at)["exception"] and not messages(at)["error"], messages(at)
    text = at.markdown[0].value
    assert text.startswith("\\*\\*bold\\*\\*") and "\\[x\\]" in text  # escaped: shown as typed
    at.button(key="gen_reset").click().run()
    for _ in range(3):
        at.button(key="gen_next").click().run()
    assert at.session_state["gen_state"].ids == first  # the same seed draws the same tokens


def test_gpt2_weights_found_on_this_machine_generate_like_the_book(tmp_path, monkeypatch):
    """A GPT-2 folder named by ATTENTION_LAB_GPT2_DIR is a choice; its greedy tokens are generate()'s."""
    pytest.importorskip("transformers")
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from attn_core.models.family_gpt2 import ENV_VAR, load_gpt2
    from attn_core.models.gpt import generate
    from attn_core.text.tokens import bpe_encoding

    folder = tmp_path / "tiny-gpt2"
    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(n_layer=2, n_head=4, n_embd=32, attn_implementation="eager")).save_pretrained(folder)
    monkeypatch.setenv(ENV_VAR, str(folder))
    at = open_page(PAGE)
    options = at.selectbox(key="gen_model").options
    assert any("OpenAI's weights" in o for o in options), options
    assert not any("GPT-2 weights are not on this machine" in t.value for t in at.text)  # found: no how-to
    name = next(o for o in options if "OpenAI" in o).split(" (")[0]
    at.selectbox(key="gen_model").set_value(name).run()
    for _ in range(4):
        at.button(key="gen_next").click().run()
    assert not messages(at)["exception"] and not messages(at)["error"], messages(at)
    gen = at.session_state["gen_state"]
    prompt = torch.tensor([bpe_encoding().encode("Every effort moves you")])
    assert gen.ids == generate(load_gpt2(folder), prompt, 4)[0].tolist()
    assert gen.last.cache_shapes == [(1, 4, 8, 8)] * 2
    (folder / "model.safetensors").write_bytes(b"not a safetensors file")  # damaged while the server runs
    from attn_core.models.family_gpt2 import clear_shared

    clear_shared()
    at2 = open_page(PAGE)
    at2.selectbox(key="gen_model").set_value(name).run()
    assert any("model.safetensors" in e for e in messages(at2)["error"]), messages(at2)


def test_without_gpt2_the_page_says_how_to_get_it_as_plain_text(monkeypatch, tmp_path):
    from attn_core.models.family_gpt2 import ENV_VAR

    monkeypatch.setenv(ENV_VAR, str(tmp_path / "nothing-here"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    at = open_page(PAGE)
    how = [t.value for t in at.text if "GPT-2 weights are not on this machine" in t.value]
    assert how and "python -m attn_core.models.pretrained download" in how[0]


def test_a_bad_link_value_on_the_page_is_named():
    """The page's own link values (its weights, the choice) are checked like the sidebar's, not dropped silently."""
    from apptest_utils import new_app

    at = new_app(gen_model="bogus", gen_how="x")
    at.run()
    at.switch_page(PAGE).run()
    warnings = " ".join(messages(at)["warning"])
    assert "gen\\_model" in warnings and "bogus" in warnings and "gen\\_how" in warnings, warnings


def test_a_link_keeps_the_prompt_and_the_no_cache_matrix_is_labelled():
    """Issue 33 item 8: the prompt was not in the link; the "without cache" matrix was an unlabelled image."""
    import json

    from apptest_utils import spec_json, spec_nodes

    at = open_page(PAGE, gen_prompt="Once upon a time")
    assert at.text_input(key="gen_prompt").value == "Once upon a time"
    at.button(key="gen_next").click().run()
    assert not messages(at)["exception"], messages(at)
    shown = " ".join(m.value for m in at.markdown) + " ".join(c.value for c in at.caption)
    assert "Without the cache: attention weights, layer 1, head 1" in shown
    titles = [n.get("title") for el in at.get("vega_lite_chart") for n in spec_nodes(json.loads(spec_json(el)))]
    assert "queries, tokens 1–5 top to bottom" in titles and "keys, tokens 1–5 left to right" in titles
    assert "Top left: token 1 “Once”" in shown


@pytest.mark.parametrize("present", ["false", "true"])
def test_next_tokens_pagedown_hint_is_styled_readable(present):
    """Issue 33: the red "Next token" button's PageDown hint was faded pink on red. The page style draws a primary
    button's shortcut hint in full white on a darker patch (checked in Chromium: opacity 1, white on rgba(0,0,0,.3))."""
    from dashboard.drawing.present import KBD_CSS

    at = open_page(PAGE, present=present)
    assert at.button(key="gen_next").proto.type == "primary"
    assert any(KBD_CSS in h.proto.body for h in at.get("html")), "the page style lacks the hint's colours"


def test_the_page_speaks_chinese():
    """?lang=zh: the page's own sentences come from the catalog (the chapter's terms), the numbers stay."""
    from i18n_check import english_left, shown_text

    from dashboard.i18n import language

    with language(CHINESE):  # the AppTest formats options outside the run: in the same language
        at = open_page(PAGE, lang=CHINESE)
        at.button(key="gen_next").click().run()
        assert not messages(at)["exception"] and not messages(at)["error"], messages(at)
        shown = " ".join(shown_text(at))
        left = " ".join(english_left(at))
        title = at.title[0].value
        prompt, n = at.text_input(key="gen_prompt").value, len(at.session_state["gen_state"].ids)
    assert prompt == "每一份努力都让你"  # the default prompt in Chinese too
    assert title == "生成：借助 KV 缓存，一次一个 token" and f"**第 1 步：token {n} 是" in shown
    assert "本机计时" in shown and "KV 缓存，每一层" in shown and "这一步最可能的 10 个 token" in shown and "◀" in shown
    assert "不用缓存：注意力权重，第 1 层，头 1" in shown and "显示的层" in shown and "提示词" in shown
    for english in ("Timed here", "every layer", "most likely", "Without the cache", "Prompt and settings",
                    "Layer shown", "Next token", "one token at a time"):
        assert english not in left and english not in shown, english


def test_the_candidates_are_this_steps_with_the_chosen_one_marked():
    """Issue 41 item 9: the table was titled "next tokens (after this one)" but is the distribution the new token was
    chosen from (greedy: its top row is always the token just generated). Now it says so and marks the chosen one."""
    at = open_page(PAGE)
    for _unused in range(2):
        at.button(key="gen_next").click().run()
    step = at.session_state["gen_state"].last
    assert step.top_ids[0] == step.token_id  # greedy: the chosen token is this distribution's most likely
    shown = " ".join(m.value for m in at.markdown)
    assert "**The 10 most likely tokens at this step**" in shown and "◀ marks the chosen one" in shown
    assert "after this one" not in shown
    table = next(m.value for m in at.markdown if m.value.startswith("| token |"))
    rows = table.splitlines()[2:]
    assert len(rows) == 10 and rows[0].endswith("| ◀ |") and all(r.endswith("|  |") for r in rows[1:]), rows


def test_a_sampled_token_below_the_shown_candidates_is_named():
    """The chosen token is marked only where it is: sampled from below the rows shown (the book's untrained model
    spreads its probability over the whole vocabulary), no row is marked and the sentence names the token."""
    at = open_page(PAGE)
    at.segmented_control(key="gen_how").set_value("sample").run()
    at.number_input(key="gen_top_k").set_value(0).run()
    at.number_input(key="gen_temperature").set_value(2.0).run()
    from dashboard.state import models, readable
    from dashboard.state.links import md_escape

    outside = 0
    for _unused in range(3):
        at.button(key="gen_next").click().run()
        step, step_ids = at.session_state["gen_state"].last, at.session_state["gen_state"].ids
        table = next(m.value for m in at.markdown if m.value.startswith("| token |"))
        heading = next(m.value for m in at.markdown if m.value.startswith("**The 10 most likely tokens at this step**"))
        if step.token_id in step.top_ids:
            assert "◀ marks the chosen one" in heading and table.count("◀") == 1
        else:
            outside += 1
            h = models.handle(at.selectbox(key="gen_model").value)
            token = readable.next_piece(h, step_ids[:-1], step.token_id)
            assert f"the chosen one, {md_escape(token)}, was sampled from below them" in heading, heading
            assert "◀" not in table
    assert outside >= 1


def test_the_no_cache_matrix_has_token_axes_and_says_the_colour_its_masked_cells_are_drawn_in():
    """Issue 41 item 9: the 9 x 9 matrix was an image without axes captioned "grey = masked" while its masked cells
    (weight 0 after the softmax) are the scale's dark purple. Now: cells with the tokens on both axes, and the
    caption names the colour the scale gives 0."""
    import json

    from apptest_utils import _rows, spec_json, spec_nodes
    from dashboard.drawing.rasters import raster_rgb
    from dashboard.drawing.scales import DEFAULT_COLOUR_MAP
    from dashboard.state import models, readable

    at = open_page(PAGE)
    for _unused in range(5):
        at.button(key="gen_next").click().run()
    gen = at.session_state["gen_state"]
    T = len(gen.ids)
    assert T == 9 and not at.get("imgs")  # no image: the matrix is drawn as cells
    keys_title = "keys, tokens 1–9 left to right"
    chart = next(el for el in at.get("vega_lite_chart")
                 if any(n.get("title") == keys_title for n in spec_nodes(json.loads(spec_json(el)))))
    cells = _rows(chart)
    name = at.selectbox(key="gen_model").value
    labels = [f"{i + 1}: {p}" for i, p in enumerate(readable.pieces(models.handle(name), gen.ids))]
    assert [r["col"] for r in sorted(cells, key=lambda r: r["k"]) if r["q"] == 0] == labels  # keys: every token
    assert [r["row"] for r in sorted(cells, key=lambda r: r["q"]) if r["k"] == 0] == labels  # queries: every token
    nodes = spec_nodes(json.loads(spec_json(chart)))
    assert any(n.get("field") == "col" and n.get("title") == "keys, tokens 1–9 left to right" for n in nodes)
    assert any(n.get("field") == "row" and n.get("title") == "queries, tokens 1–9 top to bottom" for n in nodes)
    masked = [r for r in cells if r["k"] > r["q"]]
    assert masked and all(r["value"] == 0 and not r["masked"] for r in masked)  # weight 0, not a grey −∞ cell
    caption = next(c.value for c in at.caption if c.value.startswith("Top left"))
    assert "grey" not in caption and "weight 0, shown in dark purple" in caption, caption
    assert DEFAULT_COLOUR_MAP == "viridis" and tuple(raster_rgb(np.zeros((1, 1)), "weights")[0, 0]) == (68, 1, 84)


def test_a_raster_says_grey_only_when_it_draws_grey():
    from dashboard.drawing import matrices
    from dashboard.i18n import language

    class Box:
        def __init__(self):
            self.captions = []

        def image(self, *a, **k):
            pass

        def caption(self, text):
            self.captions.append(text)

        def markdown(self, text):
            pass

    weights = np.tril(np.full((30, 30), 1 / 30))
    scores = np.where(np.tril(np.ones((30, 30))) > 0, 0.5, -np.inf)
    with language(ENGLISH):
        plain, masked = Box(), Box()
        matrices.show_matrix(plain, weights, ["a"] * 30, ["a"] * 30, matrices.Look(scale="weights", raster=True),
                             key="w")
        matrices.show_matrix(masked, scores, ["a"] * 30, ["a"] * 30, matrices.Look(raster=True), key="s")
    assert "grey" not in plain.captions[0] and "grey = masked" in masked.captions[0]
