"""What attn_core says to a person is a whole template with named values: English for Python users (``str()``),
the session's language on the dashboard (``dashboard.i18n``), from the same message id and values."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from langs import CHINESE

from attn_core.attention.masks import MaskKind
from attn_core.attention.pipeline import run_attention
from attn_core.attention.variants import AttentionConfig
from attn_core.labs import questions
from attn_core.labs.scores import verdict_msg
from attn_core.messages import Msg, Problem, either
from attn_core.text.tokens import tokenize
from dashboard.i18n import _, language, message

ROOT = Path(__file__).resolve().parents[1]


def test_a_problem_is_english_for_python_and_chinese_on_the_dashboard():
    with pytest.raises(ValueError) as caught:  # still a ValueError: every `except ValueError` keeps working
        tokenize("x" * 20_001)
    e = caught.value
    assert isinstance(e, Problem) and e.values == {"chars": 20_001, "max_chars": 20_000, "cut": 1}
    assert str(e) == ("Your text is 20,001 characters long; Attention Lab takes up to 20,000 characters. "
                      "Shorten it by 1 characters")
    assert message(e) == str(e)  # English outside a Chinese run
    with language(CHINESE):
        assert message(e) == "你的文本有 20,001 个字符；Attention Lab 最多接受 20,000 个字符。请删去 1 个字符"


def test_a_msg_inside_a_msg_is_translated_too():
    """The mask step's note names the mask (a Msg as a value): both parts come out in Chinese."""
    _unused, trace = run_attention(AttentionConfig(variant="MultiHeadAttention", d_in=4, d_out=4, window=2),
                                   torch.randn(1, 5, 4))
    note = trace["mask_bool"].note
    assert str(note) == ("True where a key is hidden (causal, window 2 mask: above the diagonal and 2 or more below "
                         "it)")
    with language(CHINESE):
        assert _(note) == "键被遮掩的位置为 True（因果，窗口 2 掩码：对角线上方，以及对角线下方 2 格及更远处）"
        assert _(MaskKind(True, 2, 1).why_hidden_msg(6, 2)) == (
            "键 2 在查询 6 之前 4 个 token，超出了它大小为 2 的窗口（查询 6 能看到第一个键（注意力汇聚）以及键 5–6）")


def test_a_poll_question_is_stored_once_and_read_in_each_readers_language():
    """A teacher in English and a student in Chinese read the same stored question (its JSON holds message ids)."""
    H, T = 4, 6
    rng = np.random.default_rng(0)
    w = rng.random((H, T, T)) * np.tril(np.ones((T, T)))
    w /= w.sum(-1, keepdims=True)
    stored = questions.previous_token_head(w, layer=1).to_dict()
    english = questions.Question.from_dict(stored).in_words(str)
    assert english.prompt.startswith("Which head of layer 2 is the previous-token head")
    with language(CHINESE):
        chinese = questions.Question.from_dict(stored).in_words(message)
    assert chinese.prompt.startswith("第 2 层的哪个头是“前一个 token”头")
    assert chinese.choices == tuple(c.replace("head", "头") for c in english.choices)
    assert chinese.answer == english.answer  # votes are by index: both languages count together


def test_a_head_verdict_in_both_languages():
    scores = {name: np.full((1, 1), v) for name, v in
              (("previous_token", 0.9), ("induction", np.nan), ("first_token", 0.1), ("mean_distance", 1.0),
               ("entropy", 0.2))}
    key, words, value = verdict_msg(scores, 0, 0)
    assert (key, str(words), value) == ("previous_token", "layer 1 head 1: previous-token head, 0.90", 0.9)
    with language(CHINESE):
        assert _(words) == "第 1 层头 1：“前一个 token”头，0.90"


def test_every_message_attn_core_marks_outside_models_has_its_chinese():
    """Each template of attn_core (models/ has its own helper) is in the Chinese catalog: none falls back to
    English on a Chinese page."""
    from babel.messages.extract import extract_from_dir

    from dashboard.i18n import catalog

    found = [msg for _file, _line, msg, _comments, _context in extract_from_dir(
        str(ROOT / "attn_core"), method_map=[("models/**.py", "ignore"), ("**.py", "python")],
        keywords={"N_": None, "Msg": None, "Problem": None})]
    assert len(found) > 250, "the extraction read nothing: check the keywords (babel.cfg)"
    zh = catalog(CHINESE)
    missing = sorted({m for m in found if isinstance(m, str) and zh.gettext(m) == m
                      and m not in {"torch.softmax", "omega[i, j] = q(i) . k(j)"}})  # code: the same in Chinese
    assert not missing, f"add these to the Chinese catalog: {missing[:10]}"


def test_msg_and_problem_carry_the_same_template():
    p = Problem("head {head} does not exist: this module has {H} head(s); pick 1-{H}", head=9, H=4)
    assert p.msg == Msg("head {head} does not exist: this module has {H} head(s); pick 1-{H}", head=9, H=4)
    with language(CHINESE):
        assert message(p) == "头 9 不存在：这个模块有 4 个头；请在 1-4 中选择"


def test_allowed_values_are_listed_as_a_sentence_says_them_not_as_a_range():
    """Issue 52 item 20: "use num_heads in [1, 5]" read as a range that includes 2; it meant 1 or 5."""
    from attn_core import MultiHeadAttention

    assert str(either([1, 5])) == "1 or 5" and str(either([1, 2, 4, 8])) == "1, 2, 4 or 8" and either([3]) == "3"
    with pytest.raises(ValueError) as caught:
        MultiHeadAttention(3, 5, 8, 0.0, 2)
    assert "use num_heads 1 or 5," in str(caught.value) and "[" not in str(caught.value)
    with language(CHINESE):
        assert _(either([1, 2, 4, 8])) == "1、2、4 或 8"
        assert "num_heads 可取 1 或 5，" in message(caught.value)
