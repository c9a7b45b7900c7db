"""Byte pieces: a byte-level BPE (GPT-2, SmolLM2) splits a character it has no token for into byte tokens; every
token of the run names the character it spells and which piece it holds ("猫(1/3)"), on both tokenizers."""

from __future__ import annotations

import pytest

from attn_core import tokenize
from attn_core.text.tokens import bpe_encoding, piece_labels, readable_piece

ZH = "注意力机制让每个词元都能看到句子里的其他词元。"  # the chapter's subject, in Chinese


def check_runs(tokens, text: str = ZH) -> int:
    """Every token that holds part of a character names it (no hex, no �); returns how many tokens hold part of
    a character."""
    assert "\ufffd" not in "".join(t.label for t in tokens)
    partial = 0
    for t in tokens:
        if "\ufffd" in t.text:  # its bytes are part of a character
            partial += 1
            label = t.label.split(": ", 1)[1]
            assert "(" in label and label.endswith(")") and "⟨" not in label, label
            assert label.split("(")[0] in text, label  # the character this run of bytes spells, by name
    return partial


def test_gpt2_names_the_character_on_every_byte_token_of_a_chinese_sentence():
    tokens = tokenize(ZH)
    partial = check_runs(tokens)
    assert partial >= len(tokens) // 2, [t.label for t in tokens]  # GPT-2 spends bytes on most of these characters
    labels = [t.label.split(": ", 1)[1] for t in tokens]
    # each split character's run, in order: 机(1/n) .. 机(n/n), the same n on each
    for i, label in enumerate(labels):
        if label.endswith(")") and "(1/" in label:
            char, n = label.split("(1/")[0], int(label.split("/")[1].rstrip(")"))
            assert labels[i:i + n] == [f"{char}({k}/{n})" for k in range(1, n + 1)], labels[i:i + n]
    assert "。" in labels  # a whole character reads as written


def test_smollm2_names_the_character_on_every_byte_token(smollm2):
    tokens = smollm2.tokenizer.tokens(ZH)
    partial = check_runs(tokens)
    assert partial > 0, [t.label for t in tokens]  # SmolLM2's vocabulary lacks some of them too
    whole = [t for t in tokens if "\ufffd" not in t.text]
    assert all("⟨" not in t.label for t in tokens) and whole


def test_labels_of_runs_mixed_runs_and_stray_bytes():
    cat = "猫".encode()  # 3 bytes
    assert piece_labels([cat[:1], cat[1:], "的".encode()]) == ["猫(1/2)", "猫(2/2)", "的"]
    assert piece_labels([b" " + cat[:2], cat[2:] + "狗".encode()[:1], "狗".encode()[1:]]) == \
        ["猫(1/2)", "猫(2/2)狗(1/2)", "狗(2/2)"]  # a token can end one character and begin the next
    assert piece_labels([b"\xe7", b"x"]) == ["⟨e7⟩", "x"]  # bytes that make no character stay hex
    assert piece_labels(["\u3000".encode()[:1], "\u3000".encode()[1:]]) == ["U+3000(1/2)", "U+3000(2/2)"]
    assert piece_labels([b" starts", b" ", b""]) == ["starts", "␣", "∅"]  # whole pieces as readable_piece
    assert readable_piece(b"\xe4\xbd") == "⟨e4 bd⟩"  # one token alone cannot know its character


@pytest.mark.parametrize("text", ["I love 😀 and 猫", "你好，你喜欢喝茶吗？", "naïve café 🙂🎉"])
def test_gpt2_labels_read_back_to_the_text(text):
    tokens = tokenize(text)
    assert [t.id for t in tokens] == bpe_encoding().encode(text)
    assert len({t.label for t in tokens}) == len(tokens)
    assert check_runs(tokens, text) > 0


def test_the_generate_and_head_pages_label_a_sequence_by_its_runs():
    """Generate's and the head panel's labels (dashboard.state.readable.pieces) name the character on every byte
    token of a run, where one token alone (readable_piece) can show only hex."""
    from types import SimpleNamespace

    from attn_core.text.tokens import BPETokenizer
    from dashboard.state import readable

    tokenizer = BPETokenizer()
    ids = tokenizer.encode(ZH)
    labels = readable.pieces(SimpleNamespace(lm=SimpleNamespace(tokenizer=tokenizer)), ids)  # a handle's model
    alone = [readable_piece(tokenizer.token_bytes(t)) for t in ids]
    assert len(labels) == len(ids) and "\ufffd" not in "".join(labels)
    split = [k for k, a in enumerate(alone) if "⟨" in a]  # a token that alone is only bytes
    assert split and all("⟨" not in labels[k] and labels[k].split("(")[0] in ZH for k in split), labels
