"""GPT-2 BPE tokenization, offline."""

import socket

import pytest

from attn_core import ENDOFTEXT_ID, tokenize
from attn_core.text.tokens import readable_piece

REFERENCE = "Hello, do you like tea? <|endoftext|> In the sunlit terracesof someunknownPlace."
REFERENCE_IDS = [15496, 11, 466, 345, 588, 8887, 30, 220, 50256, 554, 262, 4252, 18250, 8812, 2114,
                 1659, 617, 34680, 27271, 13]


@pytest.fixture
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError("network access attempted in an offline test")
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)


def test_reference_sentence_offline(no_network, monkeypatch):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "/nonexistent-cache")
    from attn_core.text.tokens import bpe_encoding
    bpe_encoding.cache_clear()
    assert [t.id for t in tokenize(REFERENCE)] == REFERENCE_IDS


def test_endoftext_is_special():
    toks = tokenize("a<|endoftext|>b")
    assert ENDOFTEXT_ID in [t.id for t in toks]
    assert any(t.label.endswith("<|endoftext|>") for t in toks)


def test_pieces_join_back_and_labels_are_unique():
    text = "the cat saw the dog and the bird"
    toks = tokenize(text)
    assert "".join(t.text for t in toks) == text
    assert [t.label for t in toks][:4] == ["1: the", "2: cat", "3: saw", "4: the"]
    assert len({t.label for t in toks}) == len(toks)


def test_book_sentence_labels():
    assert [t.label for t in tokenize("Your journey starts with one step")] == [
        "1: Your", "2: journey", "3: starts", "4: with", "5: one", "6: step"]


def test_partial_utf8_pieces_get_readable_labels():
    toks = tokenize("你好世界 🙂🎉 naïve")
    for t in toks:
        assert "\ufffd" not in t.label
    assert any(t.label.endswith("(1/3)") for t in toks)  # a split character named on its pieces (test_piece_labels)
    assert readable_piece(b"\xe4\xbd") == "⟨e4 bd⟩"
    assert readable_piece(b" ") == "␣" and readable_piece(b"\n") == "⏎"


@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_empty_text_is_a_clear_error(text):
    with pytest.raises(ValueError, match="empty"):
        tokenize(text)


def test_html_is_just_text():
    toks = tokenize("<script>alert(1)</script>")
    assert "".join(t.text for t in toks) == "<script>alert(1)</script>"
