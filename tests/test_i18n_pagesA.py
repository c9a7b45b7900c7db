"""The Chinese interface of Explore (each section), Model view, Trained, Shape flow and Text → vectors (each section):
no exception, no English sentence left anywhere on the page (its own strings, the sidebar, charts, attn_core's
texts), and the same numbers in both languages.
"""

from __future__ import annotations

import re

import pytest
from i18n_check import english_left
from langs import CHINESE, ENGLISH, LANGS

from apptest_utils import chart_data, messages, new_app, table_text
from dashboard.app_pages.samples import CAT_ZH, TEA_ZH
from dashboard.i18n import _, language

T2V = "app_pages/text_to_vectors.py"
FLOW = "app_pages/shape_flow.py"
EXPLORE_SECTIONS = ["Model view", "Tokens", "Q, K, V", "Scores", "All heads", "Weights", "Dropout", "Output",
                    "Trained"]
T2V_SECTIONS = ["Word tokenizer", "BPE side by side", "Sliding windows", "Embedding = lookup", "Q/K/V as a lookup"]
# the user's sentence, the book's sample text and names, which stay as typed in both languages
ALLOWED = {"Your", "journey", "starts", "with", "one", "step", "Hello", "do", "you", "like", "tea", "Edith",
           "Warton", "Wharton", "Verdict", "SimpleTokenizerV1", "SimpleTokenizerV2", "MultiHeadAttention",
           "CausalAttention", "MultiHeadAttentionWrapper", "SelfAttention", "Instruct", "M"}
ZH_SENTENCE = CAT_ZH
GQA = dict(variant="GroupedQueryAttention", num_heads="4", num_kv_groups="2", d_out="8")  # every Explore section

pytestmark = pytest.mark.usefixtures("fresh_caches")  # tests/conftest.py


def run_page(page: str | None, lang: str, sections: dict | None = None, **query: str):
    """The page in ``lang`` with its link's ``query``; ``sections``: {button group key: section id} to click."""
    at = new_app(**query)
    at.query_params["lang"] = lang
    at.run()
    if page:
        at.switch_page(page).run()
    for key, section in (sections or {}).items():
        click_section(at, lang, key, section)
    assert not messages(at)["exception"], messages(at)
    return at


def click_section(at, lang: str, key: str, section: str) -> None:
    """Click the button of ``section`` in the group ``key``: it sends the label shown (AppTest's session_state would
    spell the value with str(), not with the page's format_func)."""
    with language(lang):
        shown = _(section)
        for radio in at.radio:  # the same for a radio whose options are shown translated
            if radio.value is not None and str(radio.value) not in radio.options:
                radio.set_value(_(radio.value))
    at.button_group(key=key).set_value(shown).run()
    assert at.button_group(key=key).value == section, (key, section, at.button_group(key=key).options)


def check_chinese(at, where: str) -> None:
    left = english_left(at, ALLOWED)
    assert not left, (where, left)
    shown = " ".join(m.value for m in at.markdown) + " ".join(c.value for c in at.caption)
    assert re.search(r"[\u4e00-\u9fff]", shown), where  # the page does speak Chinese


@pytest.mark.parametrize("section", EXPLORE_SECTIONS)
def test_explore_sections_in_chinese(section):
    at = run_page(None, CHINESE, {"section": section}, **GQA, train_mode="true", dropout="0.5")
    check_chinese(at, f"explore/{section}")


def test_explore_segment_labels_translated_and_link_values_kept():
    at = run_page(None, CHINESE, section="Scores")  # a link made in English opens the same section in Chinese
    sections = at.button_group(key="section")
    assert sections.value == "Scores"  # the value (and so the link) stays the English id
    assert "分数" in sections.options and "Scores" not in sections.options, sections.options  # shown translated
    assert any("掩码" in c.value for c in at.caption)


def test_explore_numbers_identical_in_both_languages():
    rows = {}
    for lang in LANGS:
        at = run_page(None, lang, {"section": "Weights"})
        rows[lang] = [(r["q"], r["k"], r["value"]) for r in chart_data(at, "weights")]
        story = [m.value for m in at.markdown if "1. **" in m.value]
        rows[lang + "_story"] = re.findall(r"-?\d+\.\d+", story[0])
    assert rows[ENGLISH] == rows[CHINESE] and rows[ENGLISH]
    assert rows["en_story"] == rows["zh_story"] and rows["en_story"]


def test_explore_on_a_chinese_sentence():
    """GPT-2's byte pieces and the real model's tokens on a Chinese sentence: Explore and Model view run, labels
    stay readable (no replacement characters)."""
    at = run_page(None, CHINESE, {"section": "Tokens"}, sentence=ZH_SENTENCE)
    labels = list(at.dataframe[0].value.iloc[:, 0])
    assert labels and all("\ufffd" not in label for label in labels)
    assert any("猫" in label for label in labels) and any(label.endswith("/3)") for label in labels)  # byte pieces
    assert any("UTF-8" in c.value for c in at.caption)  # the byte pieces are explained
    click_section(at, CHINESE, "section", "Model view")
    assert not messages(at)["exception"] and not messages(at)["error"], messages(at)
    pieces = list(table_text(at.table[0]).iloc[:, 0])
    assert pieces and all("\ufffd" not in p for p in pieces)


def test_explore_on_a_real_models_layer_names_its_input_in_chinese():
    """The summary line read "normed residual stream 输入" on a real model's layer: the input's name went in
    untranslated."""
    at = run_page(None, CHINESE, model="SmolLM2-135M-Instruct", layer="3")
    check_chinese(at, "Explore on SmolLM2's layer 3")
    assert any("输入为归一化后的残差流" in m.value for m in at.markdown), [m.value for m in at.markdown][:3]


def test_model_view_numbers_identical_in_both_languages():
    probs = {}
    for lang in LANGS:
        at = run_page(None, lang, {"section": "Model view"}, model="SmolLM2-135M-Instruct")  # named: zh starts on Gemma
        probs[lang] = list(table_text(at.table[0]).iloc[:, 1])
    assert probs[ENGLISH] == probs[CHINESE] and probs[ENGLISH]


def test_shape_flow_in_chinese_with_the_same_numbers():
    seen = {}
    for lang in LANGS:
        at = run_page(FLOW, lang, **GQA)
        if lang == CHINESE:
            check_chinese(at, "shape_flow")
        cells = [c for t in at.dataframe for c in t.value.to_numpy().ravel().tolist()]
        cells += [c for t in at.table for c in table_text(t).to_numpy().ravel().tolist()]
        seen[lang] = [m.value for m in at.metric] + [c for c in cells if re.search(r"\d", str(c))]  # not "yes"
    assert seen[ENGLISH] == seen[CHINESE] and len(seen[ENGLISH]) > 20


@pytest.mark.parametrize("section", T2V_SECTIONS)
def test_text_to_vectors_sections_in_chinese(section):
    at = run_page(T2V, CHINESE, {"t2v_section": section})
    check_chinese(at, f"t2v/{section}")


def test_text_to_vectors_numbers_identical_and_chinese_sample_readable():
    from apptest_utils import md_tables

    tables, cells = {}, {}
    for lang in LANGS:
        at = run_page(T2V, lang, {"t2v_section": "BPE side by side"})
        tables[lang] = [[list(row.values()) for row in table.values()] for table in md_tables(at)]
        # a row's cells as a set: Chinese puts its default model (Gemma) first among the columns
        cells[lang] = [[sorted(map(str, row)) for row in table] for table in tables[lang]]
    assert len(tables[ENGLISH]) == 2 and cells[ENGLISH] == cells[CHINESE]  # counts and pieces: the same cells
    row = next(r for r in tables[CHINESE][1] if r[0] == TEA_ZH)
    assert "你" in row[1]  # GPT-2's pieces name the character their bytes spell, never mojibake
    assert "\ufffd" not in " ".join(str(c) for c in row)
