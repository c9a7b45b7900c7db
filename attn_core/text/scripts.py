"""Which writing systems a text uses: a page starts on a model that reads them (a CJK text on Gemma 3)."""

from __future__ import annotations

# Han (with extension A and compatibility ideographs), kana, Hangul, and CJK punctuation / full-width forms
CJK_RANGES = ((0x3000, 0x303F), (0x3040, 0x30FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xAC00, 0xD7AF),
              (0xF900, 0xFAFF), (0xFF00, 0xFFEF), (0x20000, 0x2FA1F))


def is_cjk(ch: str) -> bool:
    """Whether one character is Chinese, Japanese or Korean script (or CJK punctuation)."""
    code = ord(ch)
    return any(lo <= code <= hi for lo, hi in CJK_RANGES)


def has_cjk(text: str) -> bool:
    """Whether ``text`` holds a Chinese, Japanese or Korean character (not counting CJK punctuation alone)."""
    return any(is_cjk(ch) and not 0x3000 <= ord(ch) <= 0x303F and not 0xFF00 <= ord(ch) <= 0xFFEF for ch in text)
