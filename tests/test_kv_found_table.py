"""KV cache cost's table of the models found here, as the page draws it on a phone: one small Markdown table a model
(its cells wrap; the projector's two data grids scrolled sideways in a 340 px column), every number the same as in
the projector's tables. A tiny Qwen3 and a tiny Gemma 3 (five local layers with a window of 4) are found beside
SmolLM2 when it is installed. Browser check of both layouts: tests/test_browser_kv_table.py."""

from __future__ import annotations

import pandas as pd
import pytest
from langs import CHINESE, ENGLISH, LANGS

from apptest_utils import md_tables, open_page, phone_page

KV = "app_pages/kv_cost.py"


@pytest.fixture
def tiny_models(tmp_path, monkeypatch):
    """A tiny Qwen3 and a tiny Gemma 3 in ATTENTION_LAB_GGUF_DIR; yields their labels (Qwen's, Gemma's)."""
    from dashboard.state import models
    from tests.gguf_fixtures import arch_model, gemma_cfg, qwen_cfg, randomize, write_gguf

    qwen = write_gguf(tmp_path / "tiny-qwen3.gguf", randomize(arch_model(qwen_cfg("qwen3"))), "qwen3")
    gemma = write_gguf(tmp_path / "tiny-gemma3.gguf", randomize(arch_model(gemma_cfg())), "gemma3")
    monkeypatch.setenv("ATTENTION_LAB_GGUF_DIR", str(tmp_path))
    models.forget_found()
    yield qwen.stem, gemma.stem
    models.forget_found()


@pytest.mark.parametrize("lang", list(LANGS))
def test_on_a_phone_each_found_model_gets_a_table_with_every_number(tiny_models, lang):
    wide = open_page(KV, lang=lang)
    sizes, cache = wide.dataframe[-2].value, wide.dataframe[-1].value  # the projector's: sizes; cache
    model = sizes.columns[0]
    projector = sizes.merge(cache, on=model).set_index(model)
    phone = phone_page(KV, lang=lang)
    assert not phone.dataframe  # every grid gave way to Markdown tables, whose cells wrap
    shown = {}
    for table in md_tables(phone):
        if model in table.get(sizes.columns[1], {}):  # a found model's table: its rows are the projector's columns
            label = next(k for k in table[sizes.columns[1]] if k != model)
            shown[label] = {row: cells[label] for row, cells in table.items()}
    assert set(shown) == set(projector.index) and len(shown) >= 2, (shown, list(projector.index))
    for label, row in projector.iterrows():
        want = {c: f"{v:.2f}" if isinstance(v, float) else str(v) for c, v in row.items()}
        assert shown[label] == want, label
    from dashboard.state import models

    qwen, gemma = (shown[models.short_label(name)] for name in tiny_models)
    # Gemma: 2,048 bytes a token a layer; 128 tokens in the global layer, 4 in each of the five local ones
    assert list(gemma.values())[-3:] == ["303.10 kB", "1.57 MB", f"{768 / 148:.2f}"]
    assert list(qwen.values())[-3:] == ["786.43 kB", "786.43 kB", "1.00"]
    assert gemma[sizes.columns[3]] == {ENGLISH: "5 of 6: 4 tokens", CHINESE: "5 层（共 6 层）：4 个 token"}[lang]


@pytest.mark.parametrize("lang", list(LANGS))
def test_on_a_phone_the_variants_and_the_measured_rows_show_every_number(tiny_models, lang):
    """The variants' table and the measured rows (grids that scrolled sideways inside themselves on a phone) as
    Markdown: the variants one table, each measured row a small table of its own, every cell the projector's."""
    wide = open_page(KV, lang=lang)
    variants = wide.dataframe[0].value
    desktop = next(t for t in md_tables(wide) if "MultiHeadAttention" in t)  # the measured rows: Markdown
    measured = pd.DataFrame(list(desktop.values()))
    tables = md_tables(phone_page(KV, lang=lang))
    name, smaller = variants.columns[0], variants.columns[-1]
    shown = next(t for t in tables if set(next(iter(t.values()))) == set(variants.columns))
    assert list(shown) == list(variants[name])
    for _i, row in variants.iterrows():
        assert shown[row[name]] == {c: f"{v:.2f}" if c == smaller else str(v) for c, v in row.items()}, row[name]
    first, rest = measured.columns[0], list(measured.columns[1:])
    rows = {label: {field: cells[label] for field, cells in t.items()}
            for t in tables if first in t.get(rest[0], {})
            for label in t[rest[0]] if label != first}
    assert list(rows) == list(measured[first]) and len(rows) >= 6  # four variants, two found models, the window row
    for _i, row in measured.iterrows():
        assert rows[row[first]] == {c: str(row[c]) for c in rest}, row[first]


GEMMA_WORDS = {ENGLISH: ("15 of 18: 512 tokens",
                      "Gemma 3 270M, real (18 layers, 15 over a window of 512, 4 q / 1 K/V heads)"),
               CHINESE: ("15 层（共 18 层）：512 个 token",
                      "Gemma 3 270M，真实模型（18 层，其中 15 层用 512 的滑动窗口，4 个查询头 / 1 个 K/V 头）")}


@pytest.mark.parametrize("lang", list(LANGS))
def test_gemma_3_270m_named_once_with_its_sliding_windows(gemma3, lang):
    """Gemma 3 270M from its package: named once in every table (its label carries its quantization, "Gemma 3 270M
    · Q4_K_M"; its file's metadata said "Gemma 3 270m · 270M"), its cache from 3 full layers and 15 that keep 512
    positions, the measured row whole (a grid cut it at 1280x720), on the projector and on a phone."""
    windows, measured_label = GEMMA_WORDS[lang]
    wide = open_page(KV, lang=lang)
    sizes, cache = wide.dataframe[-2].value, wide.dataframe[-1].value
    model = sizes.columns[0]
    row = sizes.merge(cache, on=model).set_index(model).loc["Gemma 3 270M"]
    per_token_layer = 2 * 1 * 256 * 4  # keys and values, one K/V head of 256, float32
    total, full = per_token_layer * (3 * 32_768 + 15 * 512), per_token_layer * 18 * 32_768
    assert list(row.values[:7]) == [18, "1 × 256", windows, "32,768", f"{total / 32_768 / 1e3:.2f} kB",
                                    f"{total / 1e6:.2f} MB", f"{full / 1e9:.2f} GB"]
    assert list(row.values[4:7]) == ["6.62 kB", "217.06 MB", "1.21 GB"] and row.values[7] == pytest.approx(full / total)
    measured = next(t for t in md_tables(wide) if measured_label in t)  # whole in a cell that wraps
    cells = measured[measured_label]
    # 128 tokens, under the window: every layer keeps them all, measured = formula
    assert list(cells.values())[1:4] == ["(1, 1, 128, 256)", f"{per_token_layer * 18 * 128:,}",
                                         f"{per_token_layer * 18 * 128:,}"]
    names = [str(v) for df in (sizes, cache) for v in df[model]] + list(measured)
    assert not [n for n in names if "Q4_K_M" in n or "270m" in n], names
    phone = md_tables(phone_page(KV, lang=lang))
    assert any("Gemma 3 270M" in by_row for t in phone for by_row in t.values())
    assert not [k for t in phone for by_row in t.values() for k in by_row if "Q4_K_M" in k]
