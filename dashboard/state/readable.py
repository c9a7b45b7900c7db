"""Tokens as a person reads them, on every model: byte tokens joined into the characters they spell ("猫(1/3)"), a
next-token candidate read after the text before it, and one that starts a character named by its likeliest
continuation (``decoding.closing_tokens``) or, when none closes it, said in words ("byte 1 of a 3-byte character")
instead of hex (⟨e4⟩). Every page that shows a model's tokens one at a time reads them here."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from attn_core.attention.kv_cache import KVCache
from attn_core.models.decoding import closing_tokens, prefill
from attn_core.text.tokens import CONTEXT_PIECES, OpenCharacter, open_character, piece_in_context, piece_labels
from dashboard.i18n import _
from dashboard.state import models

CLOSING_TOKENS = 256  # a next-token table names the characters its byte pieces start for texts up to this long
CLOSING_KEPT = 256  # texts whose candidates' continuations are kept (a few ids each)
_CLOSING: dict[tuple, dict[int, tuple[int, ...]]] = {}  # (model, ids, candidates) -> their closing tokens
_LOCK = threading.Lock()


def pieces(h: models.Handle, token_ids: list[int]) -> list[str]:
    """A sequence of the tokens of ``h``'s model as a person reads it: the byte tokens of one character each name it
    ("猫(1/3)" …, :func:`attn_core.text.tokens.piece_labels`), where one token alone could show only hex."""
    try:
        tokenizer = h.lm.tokenizer
        return piece_labels([tokenizer.token_bytes(t) for t in token_ids])
    except (KeyError, ValueError):  # an id outside the vocabulary: each token on its own
        return [next_piece(h, [], t) for t in token_ids]


def next_piece(h: models.Handle, before: Sequence[int], token_id: int, closing: Sequence[int] = ()) -> str:
    """A token of ``h``'s model as a person reads it after the tokens ``before`` it (a next-token candidate, the
    newest token): a byte token that completes a character names it ("猫(3/3)"), and so does one that starts a
    character the tokens ``closing`` it complete (its likeliest continuation: "你(1/2)"); one left open says which of
    its bytes it holds (:func:`open_words`), never hex alone."""
    try:
        tokenizer = h.lm.tokenizer
        context = [tokenizer.token_bytes(t) for t in before[-CONTEXT_PIECES:]]
        raw = tokenizer.token_bytes(token_id)
        after = [tokenizer.token_bytes(t) for t in closing]
    except (KeyError, ValueError):  # an id outside the vocabulary
        return f"#{token_id}"
    opened = open_character(context, raw)
    shown = piece_in_context(context, raw, after)
    return open_words(opened) if opened is not None and (not after or "⟨" in shown) else shown


def closing(h: models.Handle, ids: tuple[int, ...], candidates: Sequence[int]) -> dict[int, tuple[int, ...]]:
    """For the candidates after ``ids`` that start a character: the likeliest tokens closing it
    (``decoding.closing_tokens``, after one pass over ``ids`` into a KV cache), for texts of up to
    ``CLOSING_TOKENS`` tokens; nothing to run (``{}``) when no candidate is a byte piece, as in English."""
    tokenizer = h.lm.tokenizer
    try:
        context = [tokenizer.token_bytes(t) for t in ids[-CONTEXT_PIECES:]]
        if len(ids) > CLOSING_TOKENS or all(open_character(context, tokenizer.token_bytes(t)) is None
                                            for t in candidates):
            return {}
    except (KeyError, ValueError):
        return {}
    key = (h.source, ids, tuple(candidates))
    held = _CLOSING.get(key)
    if held is None:
        lm = h.lm
        cache = KVCache(lm.cfg["n_layers"])
        prefill(lm, list(ids), cache)
        held = closing_tokens(lm, list(ids), cache, list(candidates))
        with _LOCK:  # sessions run in threads
            _CLOSING[key] = held
            while len(_CLOSING) > CLOSING_KEPT:
                _CLOSING.pop(next(iter(_CLOSING)))
    return held


def open_words(opened: OpenCharacter) -> str:
    """A piece that ends inside a character, in words: "byte 1 of a 3-byte character" (after its whole characters)."""
    if opened.first == opened.last:
        words = _("byte {first} of a {size}-byte character", first=opened.first, size=opened.size)
    else:
        words = _("bytes {first}–{last} of a {size}-byte character", first=opened.first, last=opened.last,
                  size=opened.size)
    return f"{opened.text} + {words}" if opened.text else words
