"""The masking lab, Book walkthrough, Tiled attention and Windows & sinks pages in Chinese: every section draws
without an error, no English sentence is left on the page (its own, ``attn_core``'s step and mistake texts, the
classroom popover, chart titles, the sidebar), and every number is the one the English page shows.
"""

from __future__ import annotations

import math
import re

import pytest
from i18n_check import english_left
from langs import CHINESE, ENGLISH

from apptest_utils import messages, new_app, table_text

MASKING = "app_pages/masking_lab.py"
WALK = "app_pages/walkthrough.py"
TILED = "app_pages/tiled.py"
WINDOWS = "app_pages/windows.py"
BOOK_SENTENCE = "Your journey starts with one step"  # the book's sentence, quoted as written


def own_english(at, allowed: set[str] = frozenset()) -> list[str]:
    """The runs of English words left anywhere on the page (main area and sidebar)."""
    allowed = set(allowed) | {"nan", "inf"} | set(BOOK_SENTENCE.split())  # numbers as Python prints them; the book's
    # sentence, quoted as written
    return english_left(at, allowed)


def numbers(at) -> list[float]:
    """Every number the main area shows: chart data, table cells and metric values, in order."""
    out: list[float] = []

    def add(text: str) -> None:
        out.extend(float(x.replace(",", "")) for x in re.findall(r"-?\d[\d,]*\.?\d*(?:e[-+]?\d+)?|nan|-?inf", text))

    from apptest_utils import _rows

    for el in at.main.get("vega_lite_chart"):
        for row in _rows(el):
            out.extend(float(v) for v in row.values() if isinstance(v, int | float) and not isinstance(v, bool))
    for el in at.main.get("table"):
        for cell in table_text(el).to_numpy().ravel():
            add(cell)
    for el in at.main.get("dataframe"):
        out.extend(float(v) for v in el.value.to_numpy().ravel() if isinstance(v, int | float))
    for m in at.main.get("metric"):
        add(m.value)
    return out


def same_numbers(en: list[float], zh: list[float]) -> bool:
    return len(en) == len(zh) and all(a == b or (math.isnan(a) and math.isnan(b)) for a, b in zip(en, zh))


def _open(page: str, lang: str, state: dict | None = None, **query: str):
    """The app in ``lang`` on ``page``, with ``state`` set before the page's first run."""
    from dashboard.i18n import language

    at = new_app(lang=lang, **query)
    at.run()
    at.switch_page(page)
    for k, v in (state or {}).items():
        at.session_state[k] = v
    with language(lang):  # AppTest formats a selectbox's value with its format_func in the test's thread
        at.run()
    assert not messages(at)["exception"], messages(at)
    return at


def _rerun(at, lang: str, **state):
    from dashboard.i18n import language

    for k, v in state.items():
        at.session_state[k] = v
    with language(lang):
        at.run()
    assert not messages(at)["exception"], messages(at)
    return at


def _both(page: str, state: dict | None = None, **query: str):
    return _open(page, ENGLISH, state, **query), _open(page, CHINESE, state, **query)


@pytest.fixture(autouse=True)
def _fresh(fresh_caches):
    yield


def test_masking_lab_in_chinese_section_by_section():
    en, zh = _both(MASKING)
    assert zh.title[0].value == "掩码实验室"
    assert own_english(en, {"d_k"})  # the same check finds the English page's sentences
    for section in ("Methods", "Mistakes", "Precision", "Dropout", "Scaling"):
        en, zh = _rerun(en, ENGLISH, lab_section=section), _rerun(zh, CHINESE, lab_section=section)
        assert own_english(zh, {"d_k"}) == [], (section, own_english(zh, {"d_k"}))
        assert same_numbers(numbers(en), numbers(zh)), section
        assert numbers(zh), section  # a section that shows no number would compare nothing
    # every mistake, each its own verdict and panels
    en, zh = _rerun(en, ENGLISH, lab_section="Mistakes"), _rerun(zh, CHINESE, lab_section="Mistakes")
    import torch

    from attn_core.labs.lab import masking_variants

    for v in masking_variants(torch.zeros(3, 3), 3)[2:]:
        en, zh = _rerun(en, ENGLISH, mistake=v.name), _rerun(zh, CHINESE, mistake=v.name)
        assert own_english(zh) == [], (v.name, own_english(zh))
        assert same_numbers(numbers(en), numbers(zh)), v.name
    # a sidebar dropout of 0: the lab says it uses 0.5, in Chinese
    zh = _rerun(zh, CHINESE, lab_section="Dropout")
    assert any("这里用 0.5" in m.value for m in zh.markdown), [m.value for m in zh.markdown]


def test_an_english_link_opens_the_same_section_and_mistake_in_chinese():
    """The link keeps the options' English values whatever the language shows (Streamlit's own URL binding would
    have written the translated text, and dropped an English one)."""
    mistake = "mistake: renormalize raw scores"
    zh = _open(MASKING, CHINESE, lab_section="Mistakes", mistake=mistake)
    assert [h.value for h in zh.subheader if h.value[:1].isdigit()][0].startswith("2 · ")
    assert zh.session_state["mistake"] == mistake
    zh = _rerun(zh, CHINESE, lab_section="Scaling")
    assert zh.query_params.get("lab_section") == "Scaling"
    assert "mistake" not in zh.query_params  # a link copied here opens the scaling, not the mistakes
    zh = _rerun(zh, CHINESE, lab_section="Methods")
    assert "lab_section" not in zh.query_params


def test_walkthrough_in_chinese_every_step_the_same_numbers():
    en, zh = _both(WALK)
    assert zh.title[0].value.startswith("跟着书走")
    assert own_english(en)
    assert own_english(zh) == [], own_english(zh)
    n = len(zh.select_slider[0].options)
    assert n >= 15
    for i in range(n):
        en, zh = _rerun(en, ENGLISH, walk_step=i), _rerun(zh, CHINESE, walk_step=i)
        assert own_english(zh) == [], (i, own_english(zh))
        assert same_numbers(numbers(en), numbers(zh)), i
        assert zh.success or zh.error  # every step says whether it agrees with the book
    assert any("我们的代码算出" in m.value for m in zh.markdown)


def test_walkthrough_prepares_the_next_step_in_chinese_too(monkeypatch):
    """The next step's chart is prepared in a worker thread: in the session's language, under the key the click
    reads, so "Next" builds nothing (prepared in English, the click found no chart and built it again)."""
    import threading

    from dashboard.drawing import heatmaps
    from dashboard.state import ahead

    monkeypatch.setattr(ahead, "PAUSE_S", 0.0)
    built = []

    def counted(real):
        def build(*args, **kwargs):
            built.append(threading.current_thread().name)
            return real(*args, **kwargs)
        return build

    zh = _open(WALK, CHINESE, sentence="The cat sat on the mat", input_mode="learned")
    monkeypatch.setattr(heatmaps, "heatmap_frame", counted(heatmaps.heatmap_frame))
    for i in range(1, 4):
        work = zh.session_state["walk_ahead"]
        assert work.started.wait(30)
        work.take()
        built.clear()
        zh = _rerun(zh, CHINESE, walk_step=i)
        assert not [b for b in built if not b.startswith(ahead.THREAD_NAME)], f"step {i + 1} built on the click"
    assert any("（你的句子）" in m.value for m in zh.markdown)


def test_walkthrough_on_your_own_sentence_in_chinese():
    query = dict(sentence="The cat sat on the mat", input_mode="learned")
    en, zh = _both(WALK, **query)
    for i in (0, 6, 15):
        en, zh = _rerun(en, ENGLISH, walk_step=i), _rerun(zh, CHINESE, walk_step=i)
        assert own_english(zh, {"cat", "sat", "mat"}) == [], (i, own_english(zh, {"cat", "sat", "mat"}))
        assert same_numbers(numbers(en), numbers(zh)), i
    assert any("学习得到的 token 嵌入" in c.value for c in zh.caption)
    assert any("（你的句子）" in m.value for m in zh.markdown)  # the second chart's title


@pytest.mark.parametrize("query", [
    {},
    {"variant": "MultiHeadAttention", "d_out": "2", "num_heads": "2"},
    {"variant": "GroupedQueryAttention", "window": "2", "d_out": "8", "num_heads": "4", "mask_method": "renormalize"},
])
def test_tiled_in_chinese_every_tile(query):
    en, zh = _both(TILED, **query)
    assert zh.title[0].value == "分块注意力（FlashAttention）"
    assert own_english(en)
    skipped = 0
    for n in range(len(zh.select_slider[0].options)):
        en, zh = _rerun(en, ENGLISH, tile_step=n), _rerun(zh, CHINESE, tile_step=n)
        assert own_english(zh) == [], (n, own_english(zh))
        assert same_numbers(numbers(en), numbers(zh)), n
        skipped += any("被跳过" in m.value for m in zh.markdown)
    assert skipped == 3 if not query else skipped > 0  # the book's sentence in tiles of 2: the 3 upper tiles
    if "num_heads" in query and "window" not in query:  # head 2 of the book example corrects its running max
        en, zh = _rerun(en, ENGLISH, tile_head=1), _rerun(zh, CHINESE, tile_head=1)
        assert any("被修正了" in c.value for c in zh.caption), [c.value for c in zh.caption]
        assert own_english(zh) == [] and same_numbers(numbers(en), numbers(zh))


def test_tiled_too_many_tiles_in_chinese():
    zh = _open(TILED, CHINESE, sentence=" ".join(["word"] * 100), input_mode="learned", context_length="256")
    assert any("太多" in w.value for w in zh.warning) and own_english(zh, {"word"}) == []


def test_windows_in_chinese_every_section():
    from dashboard.state import models

    # one text in both languages: each language's sample is its own (The Verdict, a Chinese essay)
    state = {"win_model": "random-small", "win_tokens": 64, "win_text": "Your sentence (sidebar)"}
    en, zh = _both(WINDOWS, state, sentence=" ".join(["the cat sat on the mat and looked at the dog"] * 8))
    assert zh.title[0].value == "滑动窗口与注意力汇聚"
    assert own_english(en)
    for section in ("Window and sinks", "Sinks in every layer", "RoPE on real queries and keys"):
        en, zh = _rerun(en, ENGLISH, win_section=section), _rerun(zh, CHINESE, win_section=section)
        assert own_english(zh) == [], (section, own_english(zh))
        assert same_numbers(numbers(en), numbers(zh)), section
    zh = _rerun(zh, CHINESE, win_section="Window and sinks", sentence="Your journey starts with one step")
    assert any("你的文本只有" in w.value for w in zh.warning)
    if (real := models.default_model()) is None:
        return
    en, zh = _both(WINDOWS, {"win_model": real, "win_tokens": 64, "win_section": "RoPE on real queries and keys",
                             "win_text": "Your sentence (sidebar)"},
                   sentence=" ".join(["the cat sat on the mat and looked at the dog"] * 8))
    assert own_english(zh) == [], own_english(zh)
    assert same_numbers(numbers(en), numbers(zh))
    assert any(m.label.startswith("整个句子后移") for m in zh.metric)


def test_ask_the_class_in_chinese_teacher_and_phone(tmp_path, monkeypatch):
    """The masking lab's poll, asked in Chinese: the popover, the teacher's panel, the phone page with the question,
    and both after the reveal show no English sentence (attn_core's question texts are messages, translated)."""
    from dashboard.classroom import store as ps
    from dashboard.classroom.ui import _stores

    monkeypatch.setenv(ps.DB_ENV, str(tmp_path / "class.sqlite3"))
    try:
        teacher = _open(MASKING, CHINESE)
        assert own_english(teacher, {"d_k"}) == [], own_english(teacher, {"d_k"})  # the popover included
        teacher.button(key="poll_ask_masking_lab").click().run()
        assert not messages(teacher)["exception"], messages(teacher)
        code = teacher.session_state["poll_room"]["code"]
        phone = new_app(code=code, lang=CHINESE)
        phone.run()
        phone.switch_page("app_pages/answer.py").run()
        assert not messages(phone)["exception"], messages(phone)
        choices = [b for b in phone.button if b.key and b.key.startswith("choice_")]
        assert choices and any("？" in m.value for m in [*phone.markdown, *phone.subheader]), phone.markdown  # zh
        choices[0].click().run()
        for at in (teacher.run(), phone):
            assert own_english(at, {"d_k"}) == [], own_english(at, {"d_k"})
        teacher.button(key="poll_reveal").click().run()
        phone.run()
        for at in (teacher, phone):
            assert not messages(at)["exception"], messages(at)
            assert own_english(at, {"d_k"}) == [], own_english(at, {"d_k"})
        assert any(s.value.startswith("正确答案") for s in teacher.success), [s.value for s in teacher.success]
    finally:
        _stores.clear()
