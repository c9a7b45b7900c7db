"""Issue 20: what the class sees is true. AppTest and unit tests for the teacher's run-through items."""

from __future__ import annotations

import pytest
import torch

from apptest_utils import _rows, messages, show_section
from apptest_utils import open_page as open_app

WALK = "app_pages/walkthrough.py"
LAB = "app_pages/masking_lab.py"

pytestmark = pytest.mark.usefixtures("fresh_caches")  # tests/conftest.py


# Item 1: the book's vectors belong to the book's sentence ---------------------------------------------------
@pytest.mark.parametrize("text", ["The cat sat on the mat", "I love my dog very much"])
def test_other_six_token_sentences_get_their_own_vectors(text):
    from attn_core import BOOK_INPUTS, tokenize
    from attn_core.embeddings import embed, uses_book_inputs

    ids = [t.id for t in tokenize(text)]
    assert len(ids) == 6 and not uses_book_inputs(ids)
    with pytest.raises(ValueError, match="book's sentence"):
        embed(ids, 3, "book")
    at = open_app(sentence=text)  # the default input mode is the book's
    assert any("book's fixed inputs" in c.value for c in at.caption), [c.value for c in at.caption]
    show_section(at, "Tokens")
    assert any(m.value.startswith("**Input x (learned inputs)**") for m in at.markdown)
    rows = _rows(at.get("vega_lite_chart")[0])
    x = torch.tensor([[r["value"] for r in rows if r["q"] == q] for q in sorted({r["q"] for r in rows})])
    assert not torch.allclose(x.reshape(BOOK_INPUTS.shape), BOOK_INPUTS)


def test_the_books_sentence_keeps_the_books_vectors():
    from attn_core import BOOK_INPUTS, BOOK_SENTENCE, tokenize
    from attn_core.embeddings import embed, uses_book_inputs

    ids = [t.id for t in tokenize(BOOK_SENTENCE)]
    assert uses_book_inputs(ids) and torch.equal(embed(ids, 3, "book")[0], BOOK_INPUTS)
    at = open_app()
    assert not any("book's fixed inputs" in c.value for c in at.caption)
    show_section(at, "Tokens")
    assert any(m.value.startswith("**Input x (book inputs)**") for m in at.markdown)
    assert not messages(at)["error"]
