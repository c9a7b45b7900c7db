"""Issue 50: tokens a person can read, on every model. Byte pieces read as the characters they spell; a next-token
candidate that starts a character is named by its likeliest continuation ("你(1/2)") or said in words ("byte 1 of a
3-byte character"), never ⟨e4⟩; Generate's text without ``<bos>`` and without a stray space before the newest
token; Generate starts on Gemma for Chinese, and a model in the link or picked by hand wins."""

from __future__ import annotations

import re

import pytest
from langs import CHINESE

from apptest_utils import messages, new_app, open_page, show_section, table_text
from attn_core.text.scripts import has_cjk
from attn_core.text.tokens import OpenCharacter, open_character, piece_in_context

PAGE = "app_pages/generate.py"
SMOL = "SmolLM2-135M-Instruct"
GEMMA = "gemma-3-270m"
ZH = "注意力机制让每个词元都能看到句子里的其他词元。"
ZH_PROMPT = "我的猫喜欢"  # SmolLM2's likeliest next tokens here are mostly single bytes of characters (⟨e7⟩, ⟨e8⟩ ...)
RUN = re.compile(r"(.)\((\d+)/\d+\)")
pytestmark = pytest.mark.usefixtures("fresh_caches")  # tests/conftest.py


def no_errors(at) -> None:
    assert not messages(at)["exception"] and not messages(at)["error"], messages(at)


def test_a_piece_is_read_after_the_tokens_before_it():
    cat, smile = "猫".encode(), "😀".encode()
    assert piece_in_context([cat[:2]], cat[2:]) == "猫(2/2)"  # completes a character begun before it
    assert piece_in_context([], cat[:1], [cat[1:]]) == "猫(1/2)"  # its continuation names what it starts
    assert piece_in_context([b"x"], b" the") == "the"
    assert open_character([], cat[:1]) == OpenCharacter("", 1, 1, 3)
    assert open_character([], cat[:2]) == OpenCharacter("", 1, 2, 3)
    assert open_character([cat[:1]], cat[1:2]) == OpenCharacter("", 2, 2, 3)
    assert open_character([], smile[:3]) == OpenCharacter("", 1, 3, 4)
    assert open_character([], "的".encode() + cat[:1]) == OpenCharacter("的", 1, 1, 3)
    assert open_character([cat[:2]], cat[2:]) is None and open_character([], b" the") is None
    assert open_character([], b"\xe0\x80") is None and open_character([], b"\xbd") is None  # no character's start


def test_byte_pieces_in_words_in_both_languages():
    from dashboard.i18n import language
    from dashboard.state.readable import open_words

    assert open_words(OpenCharacter("", 1, 1, 3)) == "byte 1 of a 3-byte character"
    assert open_words(OpenCharacter("的", 1, 2, 3)) == "的 + bytes 1–2 of a 3-byte character"
    with language(CHINESE):
        assert open_words(OpenCharacter("", 1, 1, 3)) == "一个 3 字节字符的第 1 个字节"


def test_a_chinese_text_on_smollm2s_tokenizer_reads_as_its_characters(smollm2):
    tokens = smollm2.tokenizer.tokens(ZH)
    labels = [t.label.split(": ", 1)[1] for t in tokens]
    assert any(RUN.search(label) for label in labels), labels  # some characters are split into byte tokens
    assert "".join(RUN.sub(lambda m: m[1] if m[2] == "1" else "", label) for label in labels) == ZH


def test_smollm2s_next_token_table_after_chinese_names_characters(smollm2):
    """The Model view's next-token table showed ⟨e7⟩ ⟨e8⟩ ⟨e4 bd⟩ for SmolLM2 after Chinese: each byte piece now
    names the character its likeliest continuation makes."""
    at = new_app(model=SMOL, sentence=ZH_PROMPT)
    at.run()
    show_section(at, "Model view")
    no_errors(at)
    table = next(table_text(t) for t in at.table if "token" in table_text(t).columns)
    shown = [cell.replace("\\", "") for cell in table["token"]]  # the cells are Markdown, escaped
    assert len(shown) == 10 and not any("⟨" in s or "\ufffd" in s for s in shown), shown
    named = [s for s in shown if RUN.fullmatch(s)]
    assert len(named) >= 3 and all(has_cjk(s) or "；" in s for s in named), shown  # 猫(1/3), 你(1/2) ...


def test_generate_on_smollm2_in_chinese_reads_characters_without_a_stray_space(smollm2):
    at = open_page(PAGE, gen_model=SMOL, gen_prompt=ZH_PROMPT)
    assert at.selectbox(key="gen_model").value == SMOL
    for _unused in range(4):
        at.button(key="gen_next").click().run()
        no_errors(at)
        text = at.markdown[0].value
        assert text.startswith(ZH_PROMPT) and "\ufffd" not in text, text
        assert " :orange-background" not in text, text  # Chinese has no space before a word
    table = next(m.value for m in at.markdown if m.value.startswith("| token |"))
    assert "⟨" not in table and "\\u" not in table and "'" not in table, table  # not repr's bytes or quotes
    assert "\\\\" not in table and re.search(r"\| .\\\(1/\d\\\) \|", table), table  # escaped once: 喜(1/3)


def test_generate_in_english_keeps_the_tokens_own_space_only(smollm2):
    at = open_page(PAGE)
    assert at.selectbox(key="gen_model").value == SMOL  # English: SmolLM2
    for _unused in range(3):
        at.button(key="gen_next").click().run()
    no_errors(at)
    gen = at.session_state["gen_state"]
    text = at.markdown[0].value
    word = smollm2.tokenizer.decode(gen.ids[-1:])
    assert text == f"{smollm2.tokenizer.decode(gen.ids[:-1])} :orange-background[**{word.strip()}**]", text
    assert word.startswith(" ")  # the one space before the mark is the token's own


def test_generate_in_chinese_starts_on_gemma_and_writes_chinese_without_bos(gemma3):
    at = open_page(PAGE, lang=CHINESE)
    assert at.selectbox(key="gen_model").value == GEMMA
    prompt = at.text_input(key="gen_prompt").value
    assert prompt == "每一份努力都让你"
    captions = " ".join(c.value for c in at.caption)
    assert "选用" in captions and "Gemma 使用条款" in captions, captions  # why, and its terms
    assert "\\`" not in captions and "\\:" not in captions, captions  # the terms' Markdown drawn, not escaped
    for _unused in range(4):
        at.button(key="gen_next").click().run()
    no_errors(at)
    gen = at.session_state["gen_state"]
    assert gen.ids[0] == gemma3.tokenizer.bos_id  # the model reads <bos> ...
    text = at.markdown[0].value
    assert text.startswith(prompt) and "bos" not in text and " :orange-background" not in text, text  # ... not shown
    new = gemma3.tokenizer.decode(gen.ids[gen.prompt_len:])
    assert has_cjk(new), new  # Gemma continues in Chinese
    step = next(m.value for m in at.markdown if m.value.startswith("**第 4 步"))
    assert "<bos>" not in at.markdown[0].value and "bos" not in step


def test_a_model_in_the_link_or_picked_by_hand_wins_over_the_default(gemma3, smollm2):
    at = open_page(PAGE, lang=CHINESE, gen_model=SMOL)
    assert at.selectbox(key="gen_model").value == SMOL  # the link wins over Chinese's default
    assert not any("选用" in c.value for c in at.caption)
    at = open_page(PAGE)
    assert at.selectbox(key="gen_model").value == SMOL
    at.text_input(key="gen_prompt").set_value(ZH_PROMPT).run()
    assert at.selectbox(key="gen_model").value == GEMMA  # untouched, it follows the prompt's script
    assert any("Chinese, Japanese or Korean" in c.value for c in at.caption)
    at.selectbox(key="gen_model").set_value(SMOL).run()
    at.text_input(key="gen_prompt").set_value(ZH_PROMPT + "吃鱼").run()
    assert at.selectbox(key="gen_model").value == SMOL  # picked by hand: it stays
    at.text_input(key="gen_prompt").set_value("Every effort moves you").run()
    assert at.selectbox(key="gen_model").value == SMOL
    no_errors(at)
