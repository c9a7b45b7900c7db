"""Text → vectors: the book's chapter 2 on the user's text (The Verdict by default), from words and BPE pieces to
the (batch, tokens, d_in) tensor Explore starts from, and queries/keys/values read as a database lookup.

One section is drawn at a time (``t2v_section``), so a slider redraws one section, and each fits a 1280x720 screen.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st
import torch

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
from attn_core.text.tokens import MAX_TEXT_CHARS, bpe_encoding, piece_labels
from attn_core.text.word_tokenizer import (
    BOOK_EXAMPLE,
    PATTERNS,
    SPECIAL_TOKENS,
    UNK,
    SimpleTokenizerV1,
    SimpleTokenizerV2,
    build_vocab,
    pattern_difference,
    split_words,
    verdict_text,
)
from dashboard.app_pages.lookup_view import lookup_section
from dashboard.app_pages.samples import TEA_ZH
from dashboard.drawing import text_charts
from dashboard.drawing.chart_cache import memo
from dashboard.drawing.present import presenting
from dashboard.drawing.sizes import content_px, narrow
from dashboard.drawing.text import row_tables, show_table, wrapping_table
from dashboard.export.slides import draw_chart, page_downloads, slide_settings
from dashboard.i18n import N_, _, ngettext
from dashboard.state import models
from dashboard.state.controls import too_long
from dashboard.state.links import code_span, error_text, md_escape
from dashboard.state.url_state import linked_choice

EXPLORE = Path(__file__).resolve().parent / "explore.py"  # absolute: st.switch_page matches main.py's st.Page paths
VERDICT, OWN = N_("The Verdict (the book's text)"), N_("Your own text")  # the radio's values; shown translated
SECTIONS = [N_("Word tokenizer"), N_("BPE side by side"), N_("Sliding windows"), N_("Embedding = lookup"),
            N_("Q/K/V as a lookup")]  # the link's values (?t2v_section=), shown translated
WINDOW_DEFAULTS = {"t2v_max_length": 4, "t2v_stride": 4, "t2v_batch": 8}  # the book's batch of 8 windows of 4
SENTENCE_CHARS = 2_000  # the sentence to encode (the text above it takes MAX_TEXT_CHARS)
MAX_STRIP = 40  # tokens drawn in the window strip (the first windows; a longer span is cut, and says so)
BPE_EXAMPLES = ["someunknownPlace", "Hello 😀", "<|endoftext|>", TEA_ZH]  # Chinese: bytes and merged pieces


def _error(e: Exception) -> None:
    st.error(md_escape(error_text(e)))


def _text_ids(name: str, text: str) -> list[int]:
    """``text`` in a model's own token ids, without the tokens it puts before any text (Gemma's ``<bos>``)."""
    tokenizer = models.model(name).tokenizer
    return tokenizer.encode(text)[len(tokenizer.encode("")):]


def _model_pieces(name: str, text: str) -> list[str]:
    """``text`` in a model's own tokens, as a person reads them."""
    tokenizer = models.model(name).tokenizer
    return piece_labels([tokenizer.token_bytes(i) for i in _text_ids(name, text)])


def _has_chinese(text: str) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" for ch in text)


def _chinese_rows(zh: str, names: list[str]) -> list[dict]:
    """Tokens per character of one Chinese sentence: GPT-2's BPE and the real models ``names`` (SmolLM2, Gemma 3,
    each Qwen file), each in its own tokenizer."""
    counts = [("GPT-2", len(bpe_ids(zh)))] + [(models.short_label(name), len(_text_ids(name, zh))) for name in names]
    return [{_("model"): label, _("tokens"): n, _("characters"): len(zh),
             _("tokens per character"): round(n / len(zh), 2)} for label, n in counts]


def chinese_table(sent: str) -> None:
    """How many tokens each model spends on one Chinese sentence (the user's when it holds Chinese)."""
    zh = sent if _has_chinese(sent) else TEA_ZH
    rows = _chinese_rows(zh, models.default_first(zh))
    st.markdown(_("**Tokens per Chinese character** on {sentence}", sentence=code_span(zh[:120])))
    if narrow():  # a phone: the grid's columns scrolled sideways; one small table a model
        row_tables(st, pd.DataFrame(rows))
    else:
        show_table(st, pd.DataFrame(rows), hide_index=True, width="stretch")
    rate = _("tokens per character")
    best = min(rows[1:], key=lambda r: r[rate], default=None)
    if best is not None and best[rate] <= 1:
        st.caption(_("Each model counted in its own tokenizer, without the token it puts before every text (Gemma's "
                     "`<bos>`). GPT-2 spends {rate} tokens a character: it splits most Chinese characters into their "
                     "UTF-8 bytes. {model} spends {best}: its vocabulary holds whole Chinese characters and common "
                     "words.", rate=rows[0][rate], model=md_escape(best[_("model")]), best=best[rate]))
    else:
        st.caption(_("Each model counted in its own tokenizer. GPT-2 spends {rate} tokens a character: it splits most "
                     "Chinese characters into their UTF-8 bytes. A model whose vocabulary holds whole Chinese "
                     "characters and words spends one or fewer (Gemma 3 from its package, or a Qwen .gguf file in "
                     "ATTENTION_LAB_GGUF_DIR, joins the table once it is found).", rate=rows[0][rate]))


def _pieces(ids: list[int]) -> list[str]:
    enc = bpe_encoding()
    return piece_labels([enc.decode_single_token_bytes(t) for t in ids])


# 1. Word tokenizer ---------------------------------------------------------------------------------------------

def word_section(text: str, sent: str) -> None:
    if not any(c.isalnum() for c in text):  # emoji or punctuation only: its "words" would be runs of symbols
        st.info(_("Your text has no words, only symbols (emoji, punctuation, signs): the word tokenizer splits text "
                  "into words at spaces and punctuation, so there is no vocabulary of words to show. Type a sentence "
                  "in words (for example: Hello, do you like tea?) or choose The Verdict; **BPE side by side** shows "
                  "how GPT-2 reads symbols (as UTF-8 bytes)."))
        return
    try:
        vocabs = {name: build_vocab(text, pattern, SPECIAL_TOKENS) for name, pattern in PATTERNS.items()}
    except ValueError as e:
        _error(e)
        return
    cols = st.columns(2)
    for col, (name, pattern) in zip(cols, PATTERNS.items()):
        vocab = vocabs[name]
        words = list(vocab)
        tokenizer = SimpleTokenizerV2(vocab, pattern)
        ids = tokenizer.encode(sent)
        with col:
            split = f"`re.split(r'{pattern}', text)`"
            st.markdown(_("**The book**: {split}", split=split) if name == "book" else
                        _("**The study notes**: {split}", split=split))
            n_words = len(vocab) - len(SPECIAL_TOKENS)
            st.metric(_("vocabulary (book)") if name == "book" else _("vocabulary (notes)"),
                      ngettext("{count} word", "{count} words", n_words, count=format(n_words, ",")))
            st.caption(_("+ {n} special tokens (V2) = {ids} ids", n=len(SPECIAL_TOKENS), ids=format(len(vocab), ",")))
            st.markdown(_("first: {first}  \nlast: {last}", first=code_span(" ".join(words[:6])),
                          last=code_span(" ".join(words[-4:]))))
            st.markdown(_("SimpleTokenizerV2 ids: {ids}", ids=code_span(str(ids))))
            st.markdown(_("decode: {text}", text=code_span(tokenizer.decode(ids))))
    only_notes, only_book = pattern_difference(text)
    if not only_notes and not only_book:
        st.markdown(_("**Why {book} vs {notes}:** both patterns give the same words here: no word of this text is "
                      "written right before `:` or `;` (the only characters the notes' pattern does not split at).",
                      book=format(len(vocabs['book']) - 2, ","), notes=format(len(vocabs['notes']) - 2, ",")))
    else:
        st.markdown(_(
            "**Why {book} vs {notes}:** the notes' pattern has no `:` and `;`, so a word written before one stays "
            "glued to it: **+{added}** words such as {added_words}; and **−{lost}** words that occur only before `:` "
            "or `;` never appear alone ({lost_words}). The ids after a changed word shift with it.",
            book=format(len(vocabs['book']) - 2, ","), notes=format(len(vocabs['notes']) - 2, ","),
            added=len(only_notes),
            added_words=code_span(" ".join(only_notes[:5])), lost=len(only_book),
            lost_words=code_span(" ".join(only_book[:5]))))
    v1 = SimpleTokenizerV1(build_vocab(text))
    try:
        st.markdown(_("SimpleTokenizerV1 (no `<|unk|>`): {ids}", ids=code_span(str(v1.encode(sent)))))
    except ValueError as e:
        st.warning(_("SimpleTokenizerV1 fails on this sentence (the book shows `KeyError: 'Hello'`): {problem}",
                     problem=md_escape(error_text(e))), icon=":material/error:")
    cols = st.columns(2)
    for col, (name, pattern) in zip(cols, PATTERNS.items()):
        words = split_words(sent, pattern)  # the two patterns may split the sentence differently ("a:b")
        if words:
            ids = SimpleTokenizerV2(vocabs[name], pattern).encode(sent)
            ids_of = _("book id") if name == "book" else _("notes id")
            table = pd.DataFrame({_("word"): words, ids_of: ids}).astype(str)
            # one word a row: the words in one long row scrolled sideways (a phone, and half of 1280 px), and the two
            # tables side by side put each word's book id next to its notes id
            show_table(col, table, hide_index=True, width="stretch", height=38 + 35 * min(len(words), 12))


# 2. BPE side by side -------------------------------------------------------------------------------------------

def bpe_section(text: str, sent: str) -> None:
    vocab = build_vocab(text, specials=SPECIAL_TOKENS)
    v2 = SimpleTokenizerV2(vocab)
    names = models.default_first(sent)[:1 if narrow() else None]  # a phone: one model's column, the default
    counts, pieces = [], []
    for example in [sent, *BPE_EXAMPLES]:
        words = v2.encode(example)
        ids = bpe_ids(example)
        count = {_("text"): example, _("word tokens"): len(words), f"{UNK}": words.count(vocab[UNK]),
                 _("GPT-2 BPE tokens"): len(ids)}
        piece = {_("text"): example, _("GPT-2 pieces"): " · ".join(_pieces(ids)), _("GPT-2 ids"): str(ids)}
        for name in names:  # each real model in its own tokens (Gemma's: whole Chinese words)
            own = _model_pieces(name, example)
            count[_("{model} tokens", model=models.short_label(name))] = len(own)
            piece[_("{model} pieces", model=models.short_label(name))] = " · ".join(own)
        counts.append(count)
        pieces.append(piece)
    if narrow():  # a phone: one small table an example (its counts, then its pieces), every cell wrapping
        row_tables(st, pd.DataFrame([{**count, **piece} for count, piece in zip(counts, pieces)]))
    else:  # two tables, each narrow enough that its columns share the projector's main column: counts, then pieces
        st.markdown(wrapping_table(counts, _("text")))
        st.markdown(wrapping_table(pieces, _("text")))
    st.caption(_("BPE has no unknown words: a word it never saw splits into known sub-words, an emoji or most "
                 "Chinese characters into their UTF-8 bytes, one token per piece (each names its character and "
                 "which piece it holds: 猫(1/3) 猫(2/3) 猫(3/3)), and `<|endoftext|>` is one special token (50256). "
                 "The word tokenizer maps every word outside its {n}-word vocabulary to `<|unk|>` and loses it.",
                 n=format(len(vocab) - 2, ",")))
    if not names:
        st.caption(_(":material/info: The real model's tokenizer (SmolLM2) shows here beside GPT-2's once it is "
                     "installed."))
    elif len(names) == 1 and models.why_default(names[0], sent):
        st.caption(md_escape(models.why_default(names[0], sent)))
    chinese_table(sent)


# 3. Sliding windows --------------------------------------------------------------------------------------------

def _set_book(max_length: int, stride: int, batch: int) -> None:
    st.session_state.update(t2v_max_length=max_length, t2v_stride=stride, t2v_batch=batch)


def windows_section(text: str) -> None:
    c = st.columns([1, 1, 1, 2])
    max_length = c[0].slider("max_length", 1, 32, key="t2v_max_length")
    stride = c[1].slider("stride", 0, 32, key="t2v_stride", help=_("0 is refused: the window would not move."))
    batch = c[2].slider("batch_size", 1, 16, key="t2v_batch")
    with c[3]:
        st.button(_("Book: max_length {n}, stride {stride}, batch {batch}", n=4, stride=1, batch=1), key="t2v_book1",
                  on_click=_set_book, args=(4, 1, 1))
        st.button(_("Book: max_length {n}, stride {stride}, batch {batch}", n=4, stride=4, batch=8), key="t2v_book8",
                  on_click=_set_book, args=(4, 4, 8))
    try:
        ids = bpe_ids(text)
        n_windows = check_window(len(ids), max_length, stride, batch)
        inputs, targets = first_batch(text, batch, max_length, stride)
    except ValueError as e:
        _error(e)
        return
    windows = sliding_windows(ids, max_length, stride, limit=batch)
    span = min(windows[-1].start + max_length + 1, MAX_STRIP)
    frame = text_charts.window_frame(ids[:span], _pieces(ids[:span]),
                                     [(w.start, w.inputs, w.targets) for w in windows])
    labels = text_charts.window_row_labels(len(windows))
    cell_px = max(12, min(40, (content_px() - 140) // span))
    values = dict(tokens=f"{len(ids):,}", windows=f"{n_windows:,}", skipped=stride - max_length)
    if stride < max_length:
        line = ngettext("**{tokens} GPT-2 tokens → {windows} windows** (a new one every {n} token; they overlap). "
                        "The first batch:",
                        "**{tokens} GPT-2 tokens → {windows} windows** (a new one every {n} tokens; they overlap). "
                        "The first batch:", stride, **values)
    elif stride == max_length:
        line = ngettext("**{tokens} GPT-2 tokens → {windows} windows** (a new one every {n} token; no overlap). "
                        "The first batch:",
                        "**{tokens} GPT-2 tokens → {windows} windows** (a new one every {n} tokens; no overlap). "
                        "The first batch:", stride, **values)
    else:
        line = ngettext("**{tokens} GPT-2 tokens → {windows} windows** (a new one every {n} tokens; {skipped} token "
                        "skipped between them). The first batch:",
                        "**{tokens} GPT-2 tokens → {windows} windows** (a new one every {n} tokens; {skipped} tokens "
                        "skipped between them). The first batch:", stride - max_length, **values | {"n": stride})
    st.markdown(line)
    slide_settings(extra=f"max_length{max_length}_stride{stride}_batch{batch}")
    draw_chart(st, lambda: text_charts.window_strip(frame, list(frame[frame.row == 0].piece), labels, cell_px),
               key="t2v_windows", name="sliding_windows", title=_("Sliding windows over the token strip"),
               table=lambda: frame)
    if windows[-1].start + max_length + 1 > MAX_STRIP:
        st.caption(_("The strip shows the first {n} tokens; later windows are cut at its end.", n=MAX_STRIP))
    left, right = st.columns(2)
    with left:
        pairs = pd.DataFrame({_("input x"): [str(w.inputs) for w in windows],
                              _("target y (shifted by 1)"): [str(w.targets) for w in windows]})
        show_table(st, pairs.head(8), width="stretch")
    with right:
        st.code(f"# (batch_size, max_length)\ninputs.shape == targets.shape == {tuple(inputs.shape)}\n"
                f"inputs:\n{inputs}\ntargets:\n{targets}", language="python")


# 4. Embedding = lookup -----------------------------------------------------------------------------------------

def _open_in_explore(text: str) -> None:
    st.session_state["sentence"] = text
    st.session_state["input_mode"] = "learned"  # token + position embeddings: this section's picture
    st.session_state["_t2v_explore"] = True


def _embedding_summary(text: str, batch: int, max_length: int, stride: int) -> dict:
    inputs, _ = first_batch(text, batch, max_length, stride)
    emb = input_embeddings(inputs)
    return {"shapes": (tuple(emb.token_embeddings.shape), tuple(emb.pos_embeddings.shape),
                       tuple(emb.input_embeddings.shape)),
            "equal": emb.one_hot_equal, "diff": emb.max_difference,
            "first": emb.input_embeddings[0, 0, :4].numpy().copy()}


def embedding_section(text: str, sent: str) -> None:
    layer, input_ids = book_embedding_example()
    looked_up, multiplied = lookup_both_ways(layer, input_ids)
    left, mid, right = st.columns([5, 6, 5])
    with left:
        st.markdown(_("**W** = `nn.Embedding(6, 3).weight` (seed 123)"))
        show_table(st, pd.DataFrame(layer.weight.detach().numpy(), columns=["d0", "d1", "d2"]).round(4),
                   width="stretch")
    with mid:
        st.markdown(_("**one-hot** of ids `{ids}` (4 × 6)", ids=input_ids.tolist()))
        hot = pd.DataFrame(one_hot(input_ids, 6).numpy().astype(int), index=input_ids.tolist(),
                           columns=[str(c) for c in range(6)])
        # six narrow columns: all of them fit the third of a 1280x720 page (default widths scrolled after column 4)
        show_table(st, hot, width="stretch",
                   column_config={c: st.column_config.NumberColumn(c, width=34) for c in hot.columns})
    with right:
        st.markdown("**one-hot @ W** = `embedding_layer(ids)`")
        show_table(st, pd.DataFrame(multiplied.numpy(), index=input_ids.tolist()).round(4), width="stretch")
        st.markdown(_("equal: **{equal}**", equal=torch.equal(looked_up, multiplied)))
    max_length, stride, batch = (st.session_state[k] for k in WINDOW_DEFAULTS)
    try:
        s = memo(("t2v_emb", text, batch, max_length, stride),
                 lambda: _embedding_summary(text, batch, max_length, stride))
    except ValueError as e:
        _error(e)
        return
    tok, pos, total = s["shapes"]
    st.markdown(_("**On the first batch** (Sliding windows' sizes), GPT-2's 50,257 ids → 256-d: token embeddings "
                  "`{tok}` + position embeddings `{pos}` → input embeddings `{total}` (the position rows broadcast "
                  "over the batch). One-hot × W equals the lookup on all {n} ids: **{equal}** (max difference "
                  "{diff}).", tok=tok, pos=pos, total=total, n=tok[0] * tok[1], equal=s["equal"],
                  diff=format(s['diff'], ".1e")))
    st.code("token_embeddings = token_embedding_layer(inputs)               # " + str(tok) + "\n"
            "pos_embeddings = pos_embedding_layer(torch.arange(max_length))  # " + str(pos) + "\n"
            "input_embeddings = token_embeddings + pos_embeddings           # " + str(total), language="python")
    st.button(_("Open this sentence in Explore →"), key="t2v_explore", on_click=_open_in_explore, args=(sent,),
              type="primary", help=_("Explore starts here: the sentence's token + position embeddings, x of shape "
                                     "(1, tokens, d_in)."))
    st.caption(_("Explore reads the sentence above: {sentence}", sentence=code_span(sent[:120])))
    if st.session_state.pop("_t2v_explore", False):
        st.switch_page(EXPLORE)


def render() -> None:
    for key, default in WINDOW_DEFAULTS.items():  # kept while another section is open (an undrawn widget forgets)
        st.session_state[key] = st.session_state.get(key, default)
    if not presenting():
        st.title(_("Text → vectors"))
        st.caption(_("Chapter 2 of the book on your text: words and BPE pieces become ids, a sliding window cuts "
                     "them into input/target batches, and an embedding lookup turns ids into the (batch, tokens, "
                     "d_in) tensor attention reads. Then queries, keys and values as a database lookup."))
    c1, c2 = st.columns([1, 2])
    source = c1.radio(_("Text"), [VERDICT, OWN], key="t2v_source", format_func=_)
    if source == OWN:
        text = c2.text_area(_("Your text (the vocabulary and the windows come from it)"), verdict_text()[:600],
                            key="t2v_text", height=100)
    else:
        text = verdict_text()
        c2.caption(_("Edith Wharton, *The Verdict* (1908; public domain): {n} characters, the book's chapter-2 "
                     "text.", n=format(len(text), ",")))
    sent = c2.text_input(_("Sentence to encode"), BOOK_EXAMPLE, key="t2v_sentence",
                         help=_("The book's example; try a Chinese one too, such as {sample}", sample=TEA_ZH))
    if not text.strip():
        st.error(_("The text is empty: type or paste some text, or choose The Verdict."))
        return
    if problem := too_long(text, MAX_TEXT_CHARS) if source == OWN else None:
        st.error(problem)
        return
    if problem := too_long(sent, SENTENCE_CHARS):
        st.error(problem)
        return
    if not sent.strip():
        st.error(_("The sentence is empty: type one (for example: Hello, do you like tea?)."))
        return
    section = linked_choice(st.segmented_control, _("Section"), SECTIONS, "t2v_section", SECTIONS[0])
    if section == SECTIONS[0]:
        word_section(text, sent)
    elif section == SECTIONS[1]:
        bpe_section(text, sent)
    elif section == SECTIONS[2]:
        windows_section(text)
    elif section == SECTIONS[3]:
        embedding_section(text, sent)
    else:
        lookup_section(sent)
    page_downloads(page="text-to-vectors")


render()
