"""KV cache cost's table of the models found here, as the page draws it on a phone: one small Markdown table a model
(its cells wrap; the projector's two data grids scrolled sideways in a 340 px column), every number the same as in
the projector's tables. A tiny Qwen3 and a tiny Gemma 3 (five local layers with a window of 4) are found beside
SmolLM2 when it is installed. Browser check of both layouts: tests/test_browser_kv_table.py."""

from __future__ import annotations

import pytest

from apptest_utils import md_tables, open_page, phone_page

KV = "app_pages/kv_cost.py"


@pytest.fixture
def tiny_models(tmp_path, monkeypatch):
    """A tiny Qwen3 and a tiny Gemma 3 in ATTENTION_LAB_GGUF_DIR; yields their labels (Qwen's, Gemma's)."""
    from attn_core.models.gemma3 import Gemma3Model
    from attn_core.models.qwen import QwenModel
    from dashboard.state import models
    from tests.gguf_fixtures import gemma_cfg, qwen_cfg, randomize, write_gguf

    qwen = write_gguf(tmp_path / "tiny-qwen3.gguf", randomize(QwenModel(qwen_cfg("qwen3"))), "qwen3")
    gemma = write_gguf(tmp_path / "tiny-gemma3.gguf", randomize(Gemma3Model(gemma_cfg())), "gemma3")
    monkeypatch.setenv("ATTENTION_LAB_GGUF_DIR", str(tmp_path))
    models.forget_found()
    yield qwen.stem, gemma.stem
    models.forget_found()


@pytest.mark.parametrize("lang", ["en", "zh"])
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

    qwen, gemma = (shown[models.label(name)] for name in tiny_models)
    # Gemma: 2,048 bytes a token a layer; 128 tokens in the global layer, 4 in each of the five local ones
    assert list(gemma.values())[-3:] == ["303.10 kB", "1.57 MB", f"{768 / 148:.2f}"]
    assert list(qwen.values())[-3:] == ["786.43 kB", "786.43 kB", "1.00"]
    assert gemma[sizes.columns[3]] == {"en": "5 of 6: 4 tokens", "zh": "6 层中的 5 层：4 个 token"}[lang]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_on_a_phone_the_variants_and_the_measured_rows_show_every_number(tiny_models, lang):
    """The variants' table and the measured rows (grids that scrolled sideways inside themselves on a phone) as
    Markdown: the variants one table, each measured row a small table of its own, every cell the projector's."""
    wide = open_page(KV, lang=lang)
    variants, measured = wide.dataframe[0].value, wide.dataframe[1].value
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
