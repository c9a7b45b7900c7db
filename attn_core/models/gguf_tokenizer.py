"""A GGUF file's own tokenizer (vocabulary, merges, pre-tokenizer, special tokens) with the ``tokenizers`` library.

Two kinds, as transformers' GGUF loader builds them (``integrations/gguf/gguf_tokenizer_mapping.py``), so the
tokens are the same:

``tokenizer.ggml.model`` = ``BPE_NAME`` is byte-level BPE as GPT-2 has it: the vocabulary is written in GPT-2's
byte alphabet (``Ġ`` for a space), the merges are pairs of those. What differs between models is how text is
split before BPE (``tokenizer.ggml.pre``, llama.cpp's names): SmolLM2 ("smollm") splits every digit on its
own, then GPT-2's pattern; Llama 3 ("llama-bpe") groups up to three digits; Qwen ("qwen2", also Qwen3's files)
splits every digit and keeps a letter run with the one non-letter before it (a Chinese phrase stays whole).
``tokenizer.ggml.model`` = ``"llama"`` is a SentencePiece vocabulary (Gemma 3): ``▁`` for a space, byte-fallback
tokens ``<0x41>``, no merges in the file: they are rebuilt from the vocabulary, best first in the file's order
(Gemma's scores do not follow its merge order), as transformers does. Tokens typed ``CONTROL`` (3) are special
tokens (``<|im_start|>``, ``<bos>``): matched whole in a text and shown as such; ``USER_DEFINED`` (4) ones
(``<think>``) are matched whole too, but are not special.
"""

from __future__ import annotations

from pathlib import Path

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

from attn_core.messages import Problem
from attn_core.text.tokens import BPE_NAME

BYTE_LEVEL_SPLIT = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
               r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# llama.cpp's pre-tokenizer names -> the regexes it splits with, in order (llama-vocab.cpp)
PRE_SPLITS: dict[str, tuple[str, ...]] = {
    "smollm": (r"\p{N}", BYTE_LEVEL_SPLIT),
    BPE_NAME: (BYTE_LEVEL_SPLIT,),
    "default": (BYTE_LEVEL_SPLIT,),
    "llama-bpe": (LLAMA3_SPLIT,),
    "llama3": (LLAMA3_SPLIT,),
    "qwen2": (QWEN2_SPLIT,),
}
SPM_NAME = "llama"  # tokenizer.ggml.model of a SentencePiece vocabulary (Gemma)
CONTROL = 3  # tokenizer.ggml.token_type of a special token
USER_DEFINED = 4  # ... of a token matched whole but not special (<think>)
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


def tokenizer_recipe(reader, path: Path) -> dict:
    """What a GGUF file's tokenizer is built from, as plain lists (``kind``, ``tokens``, ``types``, ``merges`` as
    pairs, ``pre``, ``unk``, ``special``): cached beside the de-quantized weights, since building from these lists
    is faster than parsing the built tokenizer's JSON. A ``Problem`` for a tokenizer kind or pre-tokenizer this
    module does not build, or a file without its vocabulary or merges."""
    kind = _get(reader, "tokenizer.ggml.model")
    tokens = list(_get(reader, "tokenizer.ggml.tokens", []))
    types = [int(t) for t in _get(reader, "tokenizer.ggml.token_type", [])]
    listed = [m.split(" ", 1) for m in _get(reader, "tokenizer.ggml.merges", None) or []]
    pre = _get(reader, "tokenizer.ggml.pre", "default")
    if kind == BPE_NAME:
        if pre not in PRE_SPLITS:
            raise Problem("{path} splits text with the pre-tokenizer {pre}; this loader knows {known}",
                          path=str(path), pre=repr(pre), known=", ".join(PRE_SPLITS))
        if not tokens or not listed:
            raise Problem("{path} lacks its vocabulary or merges (tokenizer.ggml.tokens / .merges)", path=str(path))
        merges = listed
    elif kind == SPM_NAME:
        if not tokens:
            raise Problem("{path} lacks its vocabulary (tokenizer.ggml.tokens)", path=str(path))
        tokens = ["\u2581" * len(t) if " " in t and not t.strip() else t for t in tokens]  # "  " spelled "▁▁"
        merges = listed or [list(m) for m in merges_from_vocab({tok: i for i, tok in enumerate(tokens)})]
    else:
        raise Problem("{path} has a {kind} tokenizer; this loader builds byte-level BPE ({bpe}: SmolLM2, Llama 3, "
                      "Qwen) and SentencePiece ({spm}: Gemma) tokenizers", path=str(path), kind=repr(kind),
                      bpe=repr(BPE_NAME), spm=repr(SPM_NAME))
    special = {k: int(v) for k in SPECIAL_KEYS
               if (v := _get(reader, f"tokenizer.ggml.{k}_token_id")) is not None}
    if _get(reader, "tokenizer.ggml.add_bos_token", kind == SPM_NAME) and "bos" in special:
        special["add_bos"] = 1
    unk = _get(reader, "tokenizer.ggml.unknown_token_id")
    return {"kind": kind, "tokens": tokens, "types": types, "merges": merges, "pre": pre,
            "unk": None if unk is None else int(unk), "special": special}


def build_tokenizer(recipe: dict) -> Tokenizer:
    """The ``tokenizers`` Tokenizer a :func:`tokenizer_recipe` describes, its special and user-defined tokens
    added."""
    tokens, types = recipe["tokens"], recipe["types"]
    vocab = {tok: i for i, tok in enumerate(tokens)}
    merges = [tuple(m) for m in recipe["merges"]]
    if recipe["kind"] == BPE_NAME:
        tokenizer = byte_level(vocab, merges, recipe["pre"])
        alphabet = set(BYTES)
        control = [tok for tok, t in zip(tokens, types) if t == CONTROL and set(tok) <= alphabet]
    else:
        unk = recipe["unk"]
        tokenizer = sentencepiece(vocab, merges, tokens[unk] if unk is not None else None,
                                  prefix_space=bool(recipe.get("prefix_space")))
        control = [tok for tok, t in zip(tokens, types) if t == CONTROL]
    tokenizer.add_special_tokens([AddedToken(tok, special=True, normalized=False) for tok in control])
    tokenizer.add_tokens([AddedToken(tok, special=False, normalized=False)
                          for tok, t in zip(tokens, types) if t == USER_DEFINED])
    return tokenizer


def byte_level(vocab: dict[str, int], merges: list[tuple[str, str]], pre: str) -> Tokenizer:
    """Byte-level BPE with the pre-tokenizer the file names."""
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(r), behavior="isolated") for r in PRE_SPLITS[pre]]
        + [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tokenizer.decoder = decoders.ByteLevel()
    return tokenizer


def sentencepiece(vocab: dict[str, int], merges: list[tuple[str, str]], unk_token: str | None,
                  prefix_space: bool = False) -> Tokenizer:
    """A SentencePiece BPE vocabulary (``▁`` for a space, byte fallback) with its merges: the file's, or rebuilt
    from the vocabulary in the file's order. ``prefix_space``: a text reads as if after a space (``▁`` before it,
    dropped again when decoding), as a family's module may ask."""
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=True, byte_fallback=True,
                                     unk_token=unk_token))
    spaces = normalizers.Replace(" ", "\u2581")
    tokenizer.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), spaces]) if prefix_space else spaces
    tokenizer.pre_tokenizer = pre_tokenizers.Split(" ", behavior="merged_with_previous")
    steps = [decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()]
    tokenizer.decoder = decoders.Sequence(steps + ([decoders.Strip(" ", 1, 0)] if prefix_space else []))
    return tokenizer


def merges_from_vocab(vocab: dict[str, int]) -> list[tuple[str, str]]:
    """Every split of a token into two tokens of the vocabulary, the earlier token's first (transformers'
    ``generate_merges`` with the file's order as the score)."""
    merges = []
    for merge, index in vocab.items():
        local = [(merge[:k], merge[k:], index) for k in range(1, len(merge))
                 if merge[:k] in vocab and merge[k:] in vocab]
        merges += sorted(local, key=lambda m: (vocab[m[0]], vocab[m[1]]))
    merges.sort(key=lambda m: (-m[2], len(m[0]), len(m[1])), reverse=True)
    return [(left, right) for left, right, _unused in merges]


class GGUFTokenizer:
    """``encode(text) -> ids`` / ``decode(ids) -> text`` over a ``tokenizers.Tokenizer`` (special tokens such as
    ``<|im_start|>`` in a text are read as the special token; decoding shows them as such)."""

    def __init__(self, recipe: dict):
        self.backend = build_tokenizer(recipe)
        self.special = dict(recipe["special"])
        self.vocab_size = self.backend.get_vocab_size(with_added_tokens=True)
        self.eos_id = self.special.get("eos")
        self.bos_id = self.special.get("bos")
        self.special_tokens = {t.content for t in self.backend.get_added_tokens_decoder().values() if t.special}
        self.add_bos = bool(self.special.get("add_bos")) and self.bos_id is not None
        self.byte_level = isinstance(self.backend.decoder, decoders.ByteLevel)

    def encode(self, text: str) -> list[int]:
        """The token ids of ``text``, after a BOS when the file asks for one (Gemma; SmolLM2's and Qwen's
        ``add_bos_token`` is false)."""
        ids = self.backend.encode(text, add_special_tokens=False).ids
        return [self.bos_id, *ids] if self.add_bos else ids

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
        if self.byte_level:
            return bytes(BYTES[c] for c in spelled)
        if len(spelled) == 6 and spelled.startswith("<0x") and spelled.endswith(">"):  # SentencePiece byte fallback
            return bytes([int(spelled[3:5], 16)])
        return spelled.replace("\u2581", " ").encode()

    def tokens(self, text: str, max_tokens: int | None = None) -> list:
        """``text`` as :class:`attn_core.text.tokens.Token` s (id, piece, unique label), as ``tokens.tokenize`` gives
        GPT-2's; the same bounds and messages."""
        from attn_core.text.tokens import MAX_TEXT_CHARS, make_tokens

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
        return make_tokens(ids, [self.token_bytes(t) for t in ids])

    def is_special(self, token_id: int) -> bool:
        return self.backend.id_to_token(int(token_id)) in self.special_tokens
