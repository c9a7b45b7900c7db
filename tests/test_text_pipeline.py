"""Chapter 2 against the book's printed numbers (issue 34): the word tokenizers, the sliding window, embeddings, and
the lookup reading of attention."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attn_core.text.lookup import hard_lookup, head_lookup, soft_lookup, table_lookup
from attn_core.text.text_pipeline import (
    book_embedding_example,
    bpe_ids,
    check_window,
    first_batch,
    input_embeddings,
    lookup_both_ways,
    one_hot,
    sliding_windows,
)
from attn_core.text.word_tokenizer import (
    BOOK_EXAMPLE,
    BOOK_PATTERN,
    NOTES_PATTERN,
    SPECIAL_TOKENS,
    SimpleTokenizerV1,
    SimpleTokenizerV2,
    build_vocab,
    pattern_difference,
    split_words,
    verdict_text,
)

BOOK_IDS = [1131, 5, 355, 1126, 628, 975, 10, 1130, 55, 988, 956, 984, 722, 988, 1131, 7]  # section 2.4
NOTES_IDS_START = [1160, 5, 362, 1155]  # the study notes' print


@pytest.fixture(scope="module")
def verdict() -> str:
    return verdict_text()


def test_vocabulary_sizes_on_the_verdict(verdict):
    assert len(split_words(verdict)) == 4690  # section 2.2: len(preprocessed)
    assert len(build_vocab(verdict)) == 1130
    assert len(build_vocab(verdict, NOTES_PATTERN)) == 1159
    assert len(build_vocab(verdict, specials=SPECIAL_TOKENS)) == 1132
    only_notes, only_book = pattern_difference(verdict)
    assert all(w[-1] in ":;" for w in only_notes)
    assert len(build_vocab(verdict)) + len(only_notes) - len(only_book) == 1159


@pytest.mark.parametrize("pattern, expected", [(BOOK_PATTERN, BOOK_IDS), (NOTES_PATTERN, None)])
def test_v2_ids_of_the_book_example(verdict, pattern, expected):
    vocab = build_vocab(verdict, pattern, SPECIAL_TOKENS)
    tokenizer = SimpleTokenizerV2(vocab, pattern)
    ids = tokenizer.encode(BOOK_EXAMPLE)
    if expected is not None:
        assert ids == expected
    else:
        assert ids[:4] == NOTES_IDS_START and ids[0] == vocab["<|unk|>"] == 1160
    assert tokenizer.decode(ids) == "<|unk|>, do you like tea? <|endoftext|> In the sunlit terraces of the <|unk|>."


def test_v1_round_trip_and_unknown_word(verdict):
    tokenizer = SimpleTokenizerV1(build_vocab(verdict))
    text = """"It's the last he painted, you know," Mrs. Gisburn said with pardonable pride."""
    ids = tokenizer.encode(text)
    assert ids[:6] == [1, 56, 2, 850, 988, 602]  # section 2.3's print
    assert tokenizer.decode(ids) == '" It\' s the last he painted, you know," Mrs. Gisburn said with pardonable pride.'
    with pytest.raises(ValueError, match="'Hello'") as err:
        tokenizer.encode("Hello, do you like tea?")
    assert "SimpleTokenizerV2" in str(err.value)
    with pytest.raises(ValueError, match="<|unk|>"):
        SimpleTokenizerV2(build_vocab(verdict))


def test_printed_batches(verdict):
    inputs, targets = first_batch(verdict, batch_size=1, max_length=4, stride=1)
    assert inputs.tolist() == [[40, 367, 2885, 1464]] and targets.tolist() == [[367, 2885, 1464, 1807]]
    inputs, targets = first_batch(verdict, batch_size=8, max_length=4, stride=4)
    assert inputs.shape == targets.shape == (8, 4)
    assert inputs[1].tolist() == [1807, 3619, 402, 271] and inputs[-1].tolist() == [284, 3285, 326, 11]
    assert targets[-1].tolist() == [3285, 326, 11, 287]
    assert torch.equal(inputs[:, 1:], targets[:, :-1])  # targets are the inputs shifted by one


@pytest.mark.parametrize("max_length, stride, batch_size", [(4, 1, 1), (4, 4, 8), (256, 128, 4), (7, 3, 5),
                                                             (16, 20, 2)])
def test_loader_equals_the_books(verdict, monkeypatch, max_length, stride, batch_size):
    from llms_from_scratch import ch02

    from attn_core.text.data import create_dataloader_v1
    from attn_core.text.tokens import bpe_encoding

    monkeypatch.setattr(ch02.tiktoken, "get_encoding", lambda name: bpe_encoding())  # offline: our shipped ranks
    theirs = list(ch02.create_dataloader_v1(verdict, batch_size=batch_size, max_length=max_length, stride=stride,
                                            shuffle=False))
    ours = list(create_dataloader_v1(verdict, batch_size=batch_size, max_length=max_length, stride=stride,
                                     shuffle=False))
    assert len(ours) == len(theirs) > 0
    for (xi, yi), (xt, yt) in zip(ours, theirs):
        assert torch.equal(xi, xt) and torch.equal(yi, yt)
    windows = sliding_windows(bpe_ids(verdict), max_length, stride, limit=batch_size)
    assert [w.inputs for w in windows] == ours[0][0].tolist()
    assert [w.targets for w in windows] == ours[0][1].tolist()


@pytest.mark.parametrize("n, max_length, stride, batch, words", [
    (10, 4, 0, None, "stride is 0"), (10, 0, 1, None, "max_length is 0"),
    (4, 4, 1, None, "lower max_length to at most 3"), (10, 4, 4, 8, "lower batch_size to 2")])
def test_bad_window_sizes_say_what_to_change(n, max_length, stride, batch, words):
    with pytest.raises(ValueError, match=words):
        check_window(n, max_length, stride, batch)


def test_bad_text():
    with pytest.raises(ValueError, match="empty"):
        bpe_ids("   ")
    with pytest.raises(ValueError, match="max_length"):
        first_batch("Hi there", 1, 4, 1)


def test_embedding_is_a_one_hot_row_times_the_weights(verdict):
    layer, input_ids = book_embedding_example()
    assert torch.allclose(layer.weight[3], torch.tensor([-0.4015, 0.9666, -1.1481]), atol=1e-4)  # the book's print
    looked_up, multiplied = lookup_both_ways(layer, input_ids)
    assert torch.equal(looked_up, multiplied) and looked_up.shape == (4, 3)
    assert one_hot(input_ids, 6)[0].tolist() == [0, 0, 1, 0, 0, 0]
    inputs, _ = first_batch(verdict, batch_size=8, max_length=4, stride=4)
    emb = input_embeddings(inputs)
    assert emb.token_embeddings.shape == (8, 4, 256) and emb.pos_embeddings.shape == (4, 256)
    assert emb.input_embeddings.shape == (8, 4, 256) and emb.one_hot_equal and emb.max_difference == 0
    assert torch.equal(emb.input_embeddings[3], emb.token_embeddings[3] + emb.pos_embeddings)  # broadcast


def test_hard_and_soft_lookup():
    keys = ["Jane Austen", "Charles Dickens", "Edith Wharton"]
    assert hard_lookup("edith  wharton", keys) == 2 and hard_lookup("Edith Warton", keys) is None
    years = np.array([1813.0, 1859.0, 1908.0])
    sharp = table_lookup("Edith Warton", keys, 0.01, years)  # misspelled: still the best match
    assert sharp.best == 2 and sharp.weights[2] > 0.99 and abs(sharp.blend - 1908) < 1
    flat = table_lookup("Edith Warton", keys, 100.0, years)
    assert np.allclose(flat.weights, 1 / 3, atol=0.01) and abs(flat.blend - years.mean()) < 1
    with pytest.raises(ValueError, match="temperature"):
        soft_lookup(np.ones(2), np.ones((3, 2)), 0.0)


def test_head_lookup_is_the_models_softmax():
    from attn_core.attention.classes import MultiHeadAttention
    from attn_core.tracing.trace import Trace
    from attn_core.tracing.views import head_matrix

    torch.manual_seed(0)
    mha = MultiHeadAttention(8, 6, 10, 0.0, 2).eval()
    trace = Trace()
    mha(torch.randn(1, 5, 8), trace=trace)
    q, k, v = (head_matrix(trace, kind, 1) for kind in ("queries", "keys", "values"))
    weights, context = head_matrix(trace, "weights", 1), head_matrix(trace, "context", 1)
    for i in range(5):
        h = head_lookup(q, k, v, i)
        assert np.allclose(h.weights, weights[i], atol=1e-6) and np.allclose(h.context, context[i], atol=1e-5)
    sharp = head_lookup(q, k, v, 4, temperature=0.001)
    assert sharp.weights.max() > 0.999
