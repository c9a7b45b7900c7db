"""Issue 41 item 13: a text over a box's limit is taken and refused with its count (the browser used to drop a paste
over ``max_chars`` without a word), an over-long prompt link is cut with a warning, emoji-only text gets a plain
explanation instead of an empty word list (AppTest)."""

from __future__ import annotations

import pytest
from langs import CHINESE

from apptest_utils import messages, open_page
from attn_core import MAX_TEXT_CHARS

pytestmark = pytest.mark.usefixtures("fresh_caches")  # tests/conftest.py

T2V = "app_pages/text_to_vectors.py"
GENERATE = "app_pages/generate.py"


def refused(at, chars: int, limit: int) -> str:
    """The error that names the text's count, the limit and the cut (AppTest escapes nothing in st.error)."""
    errors = messages(at)["error"]
    assert not messages(at)["exception"], messages(at)
    hits = [e for e in errors if f"{chars:,} characters long" in e and f"{limit:,}" in e and f"{chars - limit:,}" in e]
    assert hits, errors
    return hits[0]


def test_too_long_names_the_count_the_limit_and_the_cut():
    from dashboard.state.controls import too_long

    assert too_long("a" * 200, 200) is None and too_long(None, 5) is None
    assert too_long("a" * 2_345, 2_000) == ("Your text is 2,345 characters long; this box takes up to 2,000. "
                                            "Shorten it by 345 characters.")


def test_no_text_box_counts_up_to_a_second_limit():
    """Issue 52 item 19: the Sentence box's counter read "25000/200000" (max_chars was 10x the limit, so that the
    browser took an over-long paste) while 20,000 is the limit. The boxes set no max_chars: their one limit is the
    code's, named in the refusal with the count."""
    boxes = {}
    for page, section in ((None, None), (T2V, "Q/K/V as a lookup"), (GENERATE, None)):
        at = open_page(page) if page else open_page()
        if page == T2V:
            at.session_state["t2v_source"] = "Your own text"
            at.session_state["t2v_section"] = section
            at.run()
        for box in list(at.text_area) + list(at.text_input):
            boxes[box.key] = box.max_chars
    assert {"sentence", "t2v_text", "t2v_sentence", "t2v_query", "gen_prompt"} <= set(boxes), boxes
    assert {k: v for k, v in boxes.items() if v and k != "join_code"} == {}, boxes


def test_a_sidebar_sentence_over_the_limit_is_refused_with_its_count():
    at = open_page()
    at.sidebar.text_area(key="sentence").set_value("word " * 5_000 + "x").run()  # 25,001 characters
    refused(at, 25_001, MAX_TEXT_CHARS)


def test_text_to_vectors_refuses_an_over_long_text_sentence_or_query():
    at = open_page(T2V)
    at.session_state["t2v_source"] = "Your own text"  # the radio's value (its label is translated)
    at.run()
    at.text_area(key="t2v_text").set_value("tea " * 5_500).run()  # 22,000 characters
    refused(at, 22_000, MAX_TEXT_CHARS)
    at.text_area(key="t2v_text").set_value("Hello, do you like tea?").run()
    at.text_input(key="t2v_sentence").set_value("tea " * 600).run()  # 2,400 characters
    refused(at, 2_400, 2_000)
    at.text_input(key="t2v_sentence").set_value("Hello, do you like tea?").run()
    at.session_state["t2v_section"] = "Q/K/V as a lookup"
    at.run()
    at.text_input(key="t2v_query").set_value("Edith " * 50).run()  # 300 characters
    refused(at, 300, 200)


def test_emoji_only_text_says_it_has_no_words():
    at = open_page(T2V)
    at.session_state["t2v_source"] = "Your own text"  # the radio's value (its label is translated)
    at.run()
    at.text_area(key="t2v_text").set_value("😀😀 🎉 👍👍!").run()
    infos = messages(at)["info"]
    assert any("no words, only symbols" in i for i in infos), infos
    shown = " ".join(m.value for m in at.markdown)
    assert "such as ``" not in shown and "SimpleTokenizerV2 ids" not in shown, shown
    assert not at.metric  # no "3 words" vocabulary of emoji


def test_a_text_without_colons_says_both_patterns_agree():
    at = open_page(T2V)
    at.session_state["t2v_source"] = "Your own text"  # the radio's value (its label is translated)
    at.run()
    at.text_area(key="t2v_text").set_value("Hello, do you like tea? I do.").run()
    shown = " ".join(m.value for m in at.markdown)
    assert "both patterns give the same words here" in shown and "such as" not in shown, shown


def test_emoji_only_text_in_chinese():
    from apptest_utils import new_app

    at = new_app(lang=CHINESE)
    # set before the page draws its radio: AppTest matches a radio's value to its label, here translated
    at.session_state["t2v_source"] = "Your own text"
    at.session_state["t2v_text"] = "😀😀 🎉"
    at.run()
    at.switch_page(T2V).run()
    infos = messages(at)["info"]
    assert not messages(at)["exception"] and any("没有单词，只有符号" in i for i in infos), messages(at)


@pytest.fixture
def book_model(monkeypatch):
    """The book's GPTModel on Generate (SmolLM2, the default when its wheel is installed, is heavier)."""
    from attn_core.models import gguf_files
    from dashboard.state.models import forget_found

    monkeypatch.setattr(gguf_files, "packaged_models", lambda: [])
    forget_found()
    yield
    forget_found()


def test_an_over_long_prompt_is_refused_and_an_over_long_link_is_cut_with_a_warning(book_model):
    at = open_page(GENERATE)
    at.text_input(key="gen_prompt").set_value("a" * 2_500).run()
    refused(at, 2_500, 2_000)
    at = open_page(GENERATE, gen_prompt="b" * 2_600)
    warnings = " ".join(messages(at)["warning"])
    assert "gen\\_prompt" in warnings and "2,600 characters long" in warnings and "by 600" in warnings, warnings
    assert at.text_input(key="gen_prompt").value == "b" * 2_600  # shown whole (it was cut to 2,000 silently)
    refused(at, 2_600, 2_000)


def test_a_one_token_text_is_not_called_1_tokens():
    from attn_core.text.text_pipeline import check_window

    with pytest.raises(ValueError) as e:
        check_window(1, 4, 1)
    assert "1 tokens" not in str(e.value) and "the text has only 1: use a longer text" in str(e.value)
    with pytest.raises(ValueError, match="has only 3: lower max_length to at most 2 or use a longer text"):
        check_window(3, 4, 1)
    from attn_core.text.data import GPTDatasetV1
    from attn_core.text.tokens import bpe_encoding

    with pytest.raises(ValueError, match="needs more than max_length = 4 tokens; it has only 1$"):
        GPTDatasetV1("Hi", bpe_encoding(), max_length=4, stride=1)
    at = open_page(T2V)
    at.session_state["t2v_source"] = "Your own text"
    at.session_state["t2v_section"] = "Sliding windows"
    at.run()
    at.text_area(key="t2v_text").set_value("Hi").run()  # one GPT-2 token
    errors = " ".join(messages(at)["error"])
    assert "the text has only 1\\: use a longer text" in errors and "1 tokens" not in errors, messages(at)  # escaped
