"""A GGUF file's own tokenizer (vocabulary, merges, pre-tokenizer, special tokens) with the ``tokenizers`` library.

``tokenizer.ggml.model`` = ``BPE_NAME`` is byte-level BPE as GPT-2 has it: the vocabulary is written in GPT-2's
byte alphabet (``Ġ`` for a space), the merges are pairs of those. What differs between models is how text is
split before BPE (``tokenizer.ggml.pre``, llama.cpp's names): SmolLM2 ("smollm") splits every digit on its
own, then GPT-2's pattern; Llama 3 ("llama-bpe") groups up to three digits. Tokens typed ``CONTROL`` (3) are
special tokens (``<|im_start|>``, ``<|endoftext|>``): matched whole in a text and shown as such.
"""

from __future__ import annotations

from pathlib import Path

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers

from attn_core.messages import Problem
from attn_core.text.tokens import BPE_NAME

BYTE_LEVEL_SPLIT = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# llama.cpp's pre-tokenizer names -> the regexes it splits with, in order (llama-vocab.cpp)
PRE_SPLITS: dict[str, tuple[str, ...]] = {
    "smollm": (r"\p{N}", BYTE_LEVEL_SPLIT),
    BPE_NAME: (BYTE_LEVEL_SPLIT,),
    "default": (BYTE_LEVEL_SPLIT,),
    "llama-bpe": (LLAMA3_SPLIT,),
    "llama3": (LLAMA3_SPLIT,),
}
CONTROL = 3  # tokenizer.ggml.token_type of a special token
SPECIAL_KEYS = ("bos", "eos", "unknown", "padding")


def byte_decoder() -> dict[str, int]:
    """GPT-2's bytes_to_unicode, reversed: the character byte-level BPE spells each byte with -> the byte."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), 256))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


BYTES = byte_decoder()


def _get(reader, key: str, default: object = None) -> object:
    f = reader.fields.get(key)
    return default if f is None else f.contents()


def build_tokenizer(reader, path: Path) -> tuple[Tokenizer, dict[str, int]]:
    """The tokenizer a GGUF file describes and its special ids (``{"bos": 1, "eos": 2, ...}``); ``ValueError`` for
    a tokenizer kind or pre-tokenizer this module does not build."""
    kind = _get(reader, "tokenizer.ggml.model")
    if kind != BPE_NAME:
        raise Problem("{path} has a {kind} tokenizer; this loader builds byte-level BPE ({expected}: SmolLM2, Llama "
                      "3) tokenizers", path=path, kind=repr(kind), expected=repr(BPE_NAME))
    pre = _get(reader, "tokenizer.ggml.pre", "default")
    if pre not in PRE_SPLITS:
        raise Problem("{path} splits text with the pre-tokenizer {pre}; this loader knows {known}", path=path,
                      pre=repr(pre), known=', '.join(PRE_SPLITS))
    tokens = list(_get(reader, "tokenizer.ggml.tokens", []))
    merges = [tuple(m.split(" ", 1)) for m in _get(reader, "tokenizer.ggml.merges", [])]
    if not tokens or not merges:
        raise Problem("{path} lacks its vocabulary or merges (tokenizer.ggml.tokens / .merges)", path=path)
    vocab = {tok: i for i, tok in enumerate(tokens)}
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(r), behavior="isolated") for r in PRE_SPLITS[pre]]
        + [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tokenizer.decoder = decoders.ByteLevel()
    types = list(_get(reader, "tokenizer.ggml.token_type", []))
    tokenizer.add_special_tokens([AddedToken(tok, special=True, normalized=False)
                                  for tok, t in zip(tokens, types) if t == CONTROL])
    special = {k: int(v) for k in SPECIAL_KEYS
               if (v := _get(reader, f"tokenizer.ggml.{k}_token_id")) is not None}
    return tokenizer, special


class GGUFTokenizer:
    """``encode(text) -> ids`` / ``decode(ids) -> text`` over a ``tokenizers.Tokenizer`` (special tokens such as
    ``<|im_start|>`` in a text are read as the special token; decoding shows them as such)."""

    def __init__(self, tokenizer_json: str, special: dict[str, int]):
        self.backend = Tokenizer.from_str(tokenizer_json)
        self.special = dict(special)
        self.vocab_size = self.backend.get_vocab_size(with_added_tokens=True)
        self.eos_id = self.special.get("eos")
        self.bos_id = self.special.get("bos")
        self.special_tokens = {t.content for t in self.backend.get_added_tokens_decoder().values() if t.special}

    def encode(self, text: str) -> list[int]:
        """The token ids of ``text`` (no BOS added: SmolLM2's ``add_bos_token`` is false)."""
        return self.backend.encode(text, add_special_tokens=False).ids

    def decode(self, ids: list[int]) -> str:
        """The text of token ids, special tokens included."""
        return self.backend.decode([int(i) for i in ids], skip_special_tokens=False)

    def piece(self, token_id: int) -> str:
        """One token as text (a space shows as a space; part of a multi-byte character as \ufffd)."""
        return self.decode([token_id])

    def token_bytes(self, token_id: int) -> bytes:
        """One token's bytes (part of a UTF-8 character for some); a special token's own text."""
        spelled = self.backend.id_to_token(int(token_id))
        if spelled is None:
            raise Problem("token id {token_id} is not in this vocabulary of {vocab_size:,}", token_id=token_id,
                          vocab_size=self.vocab_size)
        if spelled in self.special_tokens:
            return spelled.encode()
        return bytes(BYTES[c] for c in spelled)

    def tokens(self, text: str, max_tokens: int | None = None) -> list:
        """``text`` as :class:`attn_core.text.tokens.Token` s (id, piece, unique label), as ``tokens.tokenize`` gives
        GPT-2's; the same bounds and messages."""
        from attn_core.text.tokens import MAX_TEXT_CHARS, Token, readable_piece

        if text is None or not text.strip():
            raise Problem("The text is empty: type a sentence (for example: The quick brown fox)")
        if len(text) > MAX_TEXT_CHARS:
            raise Problem("Your text is {n_text:,} characters long; Attention Lab takes up to {most:,} "
                          "characters. Shorten it by {over:,} characters", n_text=len(text),
                          most=MAX_TEXT_CHARS, over=len(text) - MAX_TEXT_CHARS)
        ids = self.encode(text)
        if max_tokens is not None and len(ids) > max_tokens:
            raise Problem("Your text is {n_ids:,} tokens long; this takes up to {max_tokens:,}. Shorten it by about "
                          "{over:,} tokens", n_ids=len(ids), max_tokens=max_tokens, over=len(ids) - max_tokens)
        out = []
        for i, t in enumerate(ids):
            raw = self.token_bytes(t)
            out.append(Token(i, t, raw.decode("utf-8", errors="replace"), f"{i + 1}: {readable_piece(raw)}", raw))
        return out

    def is_special(self, token_id: int) -> bool:
        return self.backend.id_to_token(int(token_id)) in self.special_tokens
