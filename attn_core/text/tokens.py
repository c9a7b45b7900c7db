"""GPT-2 BPE tokenization with tiktoken, loaded offline from the ranks in ``assets/``.

tiktoken's ``get_encoding`` downloads its vocabulary on first use; classrooms and CI are offline, so the ranks
ship with the project (sha256-checked on load). :func:`bpe_tokenizer` is the same encoding as a model family's
tokenizer (``encode`` / ``decode`` / ``token_bytes`` / ``tokens``).
"""

from __future__ import annotations

import binascii
import hashlib
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import tiktoken
from tiktoken_ext.openai_public import r50k_pat_str

from attn_core.messages import Problem
from attn_core.paths import asset

RANKS_PATH = asset("r50k_base.tiktoken")
RANKS_SHA256 = "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"
ENDOFTEXT = "<|endoftext|>"
ENDOFTEXT_ID = 50256
VOCAB_SIZE = 50257
BPE_NAME = "gpt2"  # what tiktoken and a GGUF file's tokenizer.ggml.model call GPT-2's byte-level BPE
MAX_TEXT_CHARS = 20_000  # longer texts are refused before any work (1,024 GPT-2 tokens are ~5,000 characters)


@lru_cache(maxsize=1)
def bpe_encoding() -> tiktoken.Encoding:
    """The GPT-2 (r50k_base) encoding, built from the shipped ranks without any network access."""
    damaged = Problem("The GPT-2 vocabulary that ships with Attention Lab (assets/{file}) is missing or damaged: "
                      "restore that file from the project's repository", file=RANKS_PATH.name)
    try:
        data = RANKS_PATH.read_bytes()
    except OSError:  # missing, a directory, unreadable: say so without a server path
        raise damaged from None
    if hashlib.sha256(data).hexdigest() != RANKS_SHA256:
        raise damaged
    fields = data.split()  # "<base64 token> <rank>" per line; split at once: faster than line by line
    ranks = dict(zip(map(binascii.a2b_base64, fields[0::2]), map(int, fields[1::2])))
    return tiktoken.Encoding(
        name=BPE_NAME,
        pat_str=r50k_pat_str,
        mergeable_ranks=ranks,
        special_tokens={ENDOFTEXT: ENDOFTEXT_ID},
    )


@dataclass(frozen=True)
class Token:
    """One BPE token: its ``id``, its ``text`` piece and a unique display ``label``."""

    position: int  # 0-based
    id: int
    text: str  # the decoded piece; joining all pieces gives the text back (for whole characters)
    label: str  # "3: starts": 1-based position and a readable piece, unique per position
    raw: bytes  # the token's bytes (a piece may be part of one UTF-8 character)


_VISIBLE = {" ": "␣", "\n": "⏎", "\t": "⇥", "\r": "␍"}


def readable_piece(raw: bytes) -> str:
    """A piece as a person reads it: whitespace made visible, partial UTF-8 shown as hex bytes (alone, a token
    cannot say which character its bytes belong to: :func:`piece_labels` reads them in their run)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return _hex(raw)
    stripped = text.strip()
    if stripped:
        return stripped
    return "".join(_VISIBLE.get(c, c) for c in text) or "∅"


def _hex(raw: bytes) -> str:
    return "⟨" + " ".join(f"{b:02x}" for b in raw) + "⟩"


def _characters(data: bytes) -> list[tuple[int, int, str | None]]:
    """``data``'s UTF-8 characters as (start, end, character) byte spans; a byte that starts no character: None."""
    spans, i = [], 0
    while i < len(data):
        lead = data[i]
        n = 1 if lead < 0x80 else 2 if 0xC2 <= lead <= 0xDF else 3 if 0xE0 <= lead <= 0xEF else \
            4 if 0xF0 <= lead <= 0xF4 else 0
        try:
            spans.append((i, i + n, data[i:i + n].decode("utf-8")) if n else (i, i + 1, None))
        except UnicodeDecodeError:  # a lead byte without its continuation bytes
            spans.append((i, i + 1, None))
        i = spans[-1][1]
    return spans


def piece_labels(raws: Sequence[bytes]) -> list[str]:
    """Each token's piece as a person reads it, read in its run: a byte-level BPE (GPT-2, SmolLM2) splits a character
    it has no token for (emoji, many Chinese characters) into byte tokens, and each of them names the character and
    which part of it it holds: "猫(1/3)", "猫(2/3)", "猫(3/3)". A token of whole characters reads as
    :func:`readable_piece`; bytes that make no character stay hex (⟨e7⟩)."""
    starts, at = [], 0
    for raw in raws:
        starts.append(at)
        at += len(raw)
    characters = _characters(b"".join(raws))
    char_starts = [c[0] for c in characters]
    labels = []
    for t, raw in enumerate(raws):
        a, b = starts[t], starts[t] + len(raw)
        inside = characters[max(0, bisect_right(char_starts, a) - 1):bisect_right(char_starts, b - 1)] if raw else []
        if all(ch is not None and a <= cs and ce <= b for cs, ce, ch in inside):  # whole characters: as written
            labels.append(readable_piece(raw))
            continue
        parts: list[str] = []
        for cs, ce, ch in inside:
            if ch is None:
                parts.append(_hex(raw[max(cs, a) - a:min(ce, b) - a]))
            elif a <= cs and ce <= b:
                parts.append(ch)
            else:  # the tokens that hold this character's bytes, first to last
                first, last = bisect_right(starts, cs) - 1, bisect_right(starts, ce - 1) - 1
                shown = f"U+{ord(ch):04X}" if ch.isspace() else ch  # an ideographic space must still show
                parts.append(f"{shown}({t - first + 1}/{last - first + 1})")
        while parts[0].isspace():  # whole spaces around a part, as readable_piece strips them
            parts.pop(0)
        while parts[-1].isspace():
            parts.pop()
        labels.append("".join(parts).replace("⟩⟨", " "))
    return labels


CONTEXT_PIECES = 3  # a UTF-8 character has at most 4 bytes: at most 3 earlier tokens hold the start of one


def piece_in_context(before: Sequence[bytes], raw: bytes, after: Sequence[bytes] = ()) -> str:
    """One token's piece (a next-token candidate, the newest token) read after the tokens ``before`` it and, when
    known, the ones ``after`` it (:func:`piece_labels`): a byte token that completes a character begun before it
    names it ("猫(3/3)"), one that ``after`` completes names it too ("猫(1/3)")."""
    context = list(before[-CONTEXT_PIECES:])
    return piece_labels([*context, raw, *after])[len(context)]


@dataclass(frozen=True)
class OpenCharacter:
    """A piece that ends inside a UTF-8 character whose last bytes are not there yet (a next-token candidate such as
    ⟨e4⟩ of a Chinese character): which of the character's bytes it holds, 1-based, and the whole characters of
    the piece before them (``text``, often "")."""

    text: str
    first: int
    last: int
    size: int


def open_character(before: Sequence[bytes], raw: bytes) -> OpenCharacter | None:
    """When ``raw`` read after ``before`` ends inside a character that only later bytes can complete: which of its
    bytes ``raw`` holds; None when ``raw`` ends on a character boundary (or its last bytes make no character)."""
    context = b"".join(before[-CONTEXT_PIECES:])
    data = context + raw
    if not raw:
        return None
    start = len(data) - 1
    while start > 0 and len(data) - start < 4 and 0x80 <= data[start] < 0xC0:  # back over continuation bytes
        start -= 1
    lead = data[start]
    size = 2 if 0xC2 <= lead <= 0xDF else 3 if 0xE0 <= lead <= 0xEF else 4 if 0xF0 <= lead <= 0xF4 else 0
    held = len(data) - start
    if not size or held >= size:
        return None
    try:  # the bytes so far must be a valid start of a character (not ⟨e0 80⟩ …)
        data[start:].decode("utf-8")
    except UnicodeDecodeError as e:
        if e.reason != "unexpected end of data":
            return None
    own = max(0, start - len(context))  # where the open character starts inside raw
    text = piece_in_context(before, raw[:own]) if own else ""
    return OpenCharacter(text, max(1, len(context) - start + 1), held, size)


def tokenize(text: str, max_tokens: int | None = None) -> list[Token]:
    """GPT-2 BPE tokens of ``text``; a typed ``<|endoftext|>`` becomes the special token 50256.

    Input is bounded before any work: texts over ``MAX_TEXT_CHARS`` characters, and (with
    ``max_tokens``) texts of more tokens, raise ValueError saying how much to cut."""
    if text is None or not text.strip():
        raise Problem("The text is empty: type a sentence (for example: Your journey starts with one step)")
    if len(text) > MAX_TEXT_CHARS:
        raise Problem("Your text is {chars:,} characters long; Attention Lab takes up to {max_chars:,} characters. "
                      "Shorten it by {cut:,} characters", chars=len(text), max_chars=MAX_TEXT_CHARS,
                      cut=len(text) - MAX_TEXT_CHARS)
    enc = bpe_encoding()
    ids = enc.encode(text, allowed_special={ENDOFTEXT})
    if max_tokens is not None and len(ids) > max_tokens:
        raise Problem("Your text is {n_tokens} tokens long; Attention Lab shows up to {max_tokens} tokens (GPT-2's "
                      "context length). Shorten the text by about {cut} tokens", n_tokens=len(ids),
                      max_tokens=max_tokens, cut=len(ids) - max_tokens)
    return make_tokens(ids, [enc.decode_single_token_bytes(tid) for tid in ids])


def make_tokens(ids: Sequence[int], raws: Sequence[bytes]) -> list[Token]:
    """Tokens from their ids and bytes, labelled "position: piece" (:func:`piece_labels`), for every tokenizer."""
    return [Token(i, int(tid), raw.decode("utf-8", errors="replace"), f"{i + 1}: {piece}", raw)
            for i, (tid, raw, piece) in enumerate(zip(ids, raws, piece_labels(raws)))]


class BPETokenizer:
    """GPT-2's BPE as a model family's tokenizer (the book's GPTModel and GPT-2 read these ids)."""

    def encode(self, text: str) -> list[int]:
        return bpe_encoding().encode(text, allowed_special={ENDOFTEXT})

    def decode(self, ids: list[int]) -> str:
        return bpe_encoding().decode(ids)

    def token_bytes(self, token_id: int) -> bytes:
        return bpe_encoding().decode_single_token_bytes(token_id)

    def tokens(self, text: str, max_tokens: int | None = None) -> list[Token]:
        return tokenize(text, max_tokens)


@lru_cache(maxsize=1)
def bpe_tokenizer() -> BPETokenizer:
    """The one :class:`BPETokenizer` (the encoding itself is built on first use)."""
    return BPETokenizer()
