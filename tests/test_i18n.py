"""The Chinese interface's machinery: the catalog is complete and its placeholders match, no unmarked English is
added to the dashboard, the language comes from the link, the switch or the browser and stays in every link,
the page declares it, and exported charts draw Chinese text.

The catalog tests read the ``.po`` and every helper's fragment together (the same as the app does), so they pass
once every page's messages are translated in either.
"""

from __future__ import annotations

import ast
import io
import re
from pathlib import Path

import pytest
from babel.messages.catalog import Message
from i18n_check import english_left
from langs import CHINESE, ENGLISH

from apptest_utils import new_app
from dashboard import i18n, i18n_tools
from dashboard.i18n import _, from_locale, language, ngettext

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def template():
    return i18n_tools.extracted()


# --- the catalog ----------------------------------------------------------------------------------------------

def test_every_marked_message_has_a_chinese_translation(template):
    missing = [p for p in i18n_tools.problems(CHINESE, template) if "no 中文 translation" in p]
    assert len(template) > 100  # the sidebar's, the polls', the exports' messages at least
    assert missing == [], f"{len(missing)} messages without Chinese:\n" + "\n".join(missing[:40])


def test_every_translation_has_the_english_placeholders(template):
    broken = [p for p in i18n_tools.problems(CHINESE, template) if "no 中文 translation" not in p]
    assert broken == [], "\n".join(broken)


def test_the_check_finds_a_wrong_placeholder_and_a_broken_brace(monkeypatch, template):
    english = "Attention weights of head {head}"
    wrong = {english: Message(english, "第 {heads} 个头的注意力权重"),
             "{n} values in the link could not be used:": Message("x", "链接中有 {n 个值无法使用：")}
    monkeypatch.setattr(i18n_tools, "translations", lambda code: wrong)
    cat = i18n_tools.Catalog()
    cat.add(english, locations=[("x.py", 1)])
    cat.add("{n} values in the link could not be used:", locations=[("x.py", 2)])
    cat.add("Weights", locations=[("x.py", 3)])
    found = i18n_tools.problems(CHINESE, cat)
    assert len(found) == 3
    assert "placeholders ['heads']" in found[0] and "['head']" in found[0]
    assert "does not format" in found[1]
    assert "no 中文 translation: 'Weights'" in found[2]
    assert i18n_tools.main(["nonsense"]) == 2


def test_the_catalog_is_a_gettext_catalog_for_zh_cn():
    from babel.messages.pofile import read_po

    path = i18n.po_path(CHINESE)
    text = path.read_text(encoding="utf-8")
    assert 'content-type: text/plain; charset=utf-8' in text.lower() and "Plural-Forms: nplurals=1; plural=0;" in text
    cat = read_po(io.BytesIO(text.encode()), locale="zh_CN")
    assert "Language: zh_CN" in text and cat.locale.language == CHINESE and len(cat) > 100


def test_chinese_uses_the_chapters_terms_and_fills_values():
    with language(CHINESE):
        assert _("Masking method") == "掩码方法"
        assert _("−∞ before softmax") == "softmax 之前填负无穷（−∞）"
        assert ngettext("{n} token", "{n} tokens", 3) == "3 个 token"
        assert _("{model} has {n} layers: showing layer {n}.", model="GPT-2", n=12) == "GPT-2 有 12 层：显示第 12 层。"
        assert _("") == ""  # not the catalog's header (it broke a chart with no axis title)
    assert ngettext("{n} token", "{n} tokens", 1) == "1 token"  # outside a run: English
    assert _("Masking method") == "Masking method"


# --- no unmarked English added to the dashboard -----------------------------------------------------------------

# Streamlit calls whose first argument, ``label``, ``help``, ``text``, ``body`` or ``placeholder`` a person reads.
SHOWN_CALLS = {
    "markdown", "caption", "header", "subheader", "title", "error", "warning", "info", "success", "toast", "write",
    "button", "toggle", "checkbox", "selectbox", "radio", "multiselect", "select_slider", "segmented_control",
    "pills", "text_input", "text_area", "number_input", "slider", "download_button", "link_button", "popover",
    "expander", "spinner", "progress", "metric", "form_submit_button", "page_link", "status", "tabs",
}
SHOWN_KEYWORDS = {"label", "help", "text", "body", "placeholder", "title", "caption"}
MARKERS = {"_", "ngettext", "N_", "Msg", "Problem", "md_escape", "message", "error_text"}
# Words that stay as written in both languages (code, libraries, units, formats).
KEEP_WORDS = {"svg", "png", "csv", "zip", "gpt", "cpu", "cuda", "mps", "dropout", "softmax", "attention", "lab",
              "rope", "kv", "llama", "smollm2", "qr", "x", "d_in", "d_out", "dtype", "stride",
              "max", "vs", "one-hot"}  # code names the book's code uses, kept as written
CODE_BITS = re.compile(r"`[^`]*`|:material/[a-z_]+:|https?://\S+|\{[^{}]*\}|\$[^$]*\$|:[a-z]+\[|\]")


def _english_words(text: str) -> list[str]:
    """The words of ``text`` a person would read as English (not code, icons, placeholders, kept names)."""
    text = CODE_BITS.sub(" ", text)
    words = re.findall(r"[A-Za-z][A-Za-z0-9_'’-]+", text)
    return [w for w in words if w.lower() not in KEEP_WORDS and not re.search(r"[_0-9]", w)
            and not (w.isupper() and len(w) <= 5)]


def _literal_text(node: ast.AST) -> str | None:
    """The text of a string literal or f-string (its placeholders as ``{}``), else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _literal_text(node.left), _literal_text(node.right)
        return None if left is None and right is None else (left or "") + (right or "")
    return None


def unmarked_strings(source: str, filename: str = "<test>") -> list[str]:
    """``file:line: text`` for each English string literal passed straight to a Streamlit display call or widget
    label / help (not through ``_`` / ``ngettext``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in SHOWN_CALLS):
            continue
        shown = node.args[:1] + [k.value for k in node.keywords if k.arg in SHOWN_KEYWORDS]
        for arg in shown:
            text = _literal_text(arg)
            if text is not None and _english_words(text):
                found.append(f"{filename}:{arg.lineno}: {text[:70]!r}")
    return found


def test_the_scan_finds_an_unmarked_label_and_passes_a_marked_one():
    bad = 'st.button("Run it")\nst.caption(f"Your text has {n} tokens")\nst.number_input("x", help="Width")\n'
    good = ('st.button(_("Run it"))\nst.caption(ngettext("{n} token", "{n} tokens", n))\n'
            'st.number_input("d_out", help=_("Width"))\nst.download_button("SVG", data)\nst.markdown(f"`{code}`")\n'
            'st.popover(":material/download:")\nst.caption(md_escape(text))\n')
    assert [line.split(": ", 1)[1] for line in unmarked_strings(bad)] == [
        "'Run it'", "'Your text has {} tokens'", "'Width'"]
    assert unmarked_strings(good) == []
    # Generate's "temperature" and "seed" labels: English words, not code names kept as written
    assert len(unmarked_strings('c.number_input("temperature", 0.1, 5.0)\nc.number_input("seed", 0, 9)\n')) == 2


def test_no_unmarked_english_in_the_dashboard():
    found = []
    for path in sorted((ROOT / "dashboard").rglob("*.py")):
        found += unmarked_strings(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    assert found == [], f"{len(found)} strings a person reads are not marked for translation:\n" + "\n".join(found)


def test_the_files_of_the_language_machinery_have_no_unmarked_english():
    """The part of the scan this branch owns, so that it holds whatever the pages' state."""
    mine = ["dashboard/main.py", "dashboard/guard.py", "dashboard/app_pages/answer.py", *map(str, (
        p.relative_to(ROOT) for d in ("state", "classroom", "export")
        for p in sorted((ROOT / "dashboard" / d).rglob("*.py"))))]
    found = [f for name in mine if (ROOT / name).exists()
             for f in unmarked_strings((ROOT / name).read_text(encoding="utf-8"), name)]
    assert found == []


# --- the language of a visit ----------------------------------------------------------------------------------

def test_the_browsers_locale_picks_the_language():
    assert [from_locale(x) for x in ("zh-CN", "zh_TW", CHINESE, "ZH-hans")] == [CHINESE] * 4
    assert [from_locale(x) for x in ("en-US", "de-DE", "", None, "zu")] == [ENGLISH] * 5


def test_a_fragments_rerun_speaks_the_sessions_language(monkeypatch):
    """A fragment's rerun skips main.py (no start_run) on a thread of its own: lang() reads the session's choice."""
    import contextvars
    import types

    import streamlit.runtime.scriptrunner as runner

    session = types.SimpleNamespace(session_state={"lang": CHINESE})
    monkeypatch.setattr(runner, "get_script_run_ctx", lambda suppress_warning=False: session)
    fresh = contextvars.Context()  # no language set in it, as on the fragment's new thread
    assert fresh.run(i18n.lang) == CHINESE and fresh.run(_, "Masking method") == "掩码方法"
    session.session_state = {}
    assert fresh.run(i18n.lang) == ENGLISH


def test_the_page_declares_its_language():
    assert i18n.html_lang_script(CHINESE).startswith('<script>document.documentElement.lang = "zh-CN";')
    # Streamlit's own "Help for X" and "Choose an option" get this run's words in Chinese
    script = i18n.html_lang_script(CHINESE)
    assert '"Help for ": "“{label}”的说明"' in script and "请选择" in script
    assert "attnLabWords = null" in i18n.html_lang_script(ENGLISH)
    assert 'lang = "en"' in i18n.html_lang_script(ENGLISH)
    for code, want in ((CHINESE, "zh-CN"), (ENGLISH, ENGLISH)):
        at = new_app()
        at.query_params["lang"] = code
        at.run()
        bodies = [getattr(e.proto, "body", "") for e in at.get("html")]
        assert any(f'documentElement.lang = "{want}"' in b for b in bodies), bodies


def test_a_chinese_link_shows_the_sidebar_in_chinese_and_keeps_lang():
    at = new_app(sentence="Your journey starts with one step")
    at.query_params["lang"] = CHINESE
    at.run()
    assert not at.exception
    assert english_left(at.sidebar) == []  # every sidebar text: its knobs, the missing models' how-to, presenting
    assert at.sidebar.get("text_area")[0].label == "句子"
    assert [b.label for b in at.sidebar.button][:1] == ["书中的例子"]
    assert at.query_params["lang"] == CHINESE
    at.sidebar.number_input(key="d_out").set_value(4).run()  # a knob's change keeps the language in the link
    assert at.query_params["lang"] == CHINESE and at.query_params["d_out"] == "4"


def test_a_plain_link_is_english_and_says_so_in_the_link():
    at = new_app()
    at.run()  # AppTest has no browser locale: English, the source language
    assert at.query_params["lang"] == ENGLISH
    assert at.sidebar.get("text_area")[0].label == "Sentence"


def test_the_switch_reruns_in_the_other_language_and_writes_the_link():
    at = new_app()
    at.run()
    switch = at.sidebar.get("segmented_control")[0]
    assert list(switch.options) == ["English", "中文"] and switch.value == ENGLISH
    switch.set_value(CHINESE).run()
    assert at.query_params["lang"] == CHINESE and at.sidebar.get("text_area")[0].label == "句子"
    at.sidebar.get("segmented_control")[0].set_value(ENGLISH).run()
    assert at.query_params["lang"] == ENGLISH and at.sidebar.get("text_area")[0].label == "Sentence"


def test_a_bad_lang_gets_the_one_bad_link_warning():
    at = new_app()
    at.query_params["lang"] = "fr"
    at.run()
    assert [w.value for w in at.warning] == [
        "The link's **lang** = ` fr ` is not valid here: using English instead."]
    assert at.query_params["lang"] == ENGLISH
    at.run()  # said once
    assert not at.warning


def test_bad_link_values_are_warned_in_chinese():
    at = new_app(d_out="x9")
    at.query_params["lang"] = CHINESE
    at.run()
    assert any("链接中的 **d\\_out** = ` x9 ` 在这里无效（应为 1 到 1024 之间的整数）：改用 2。" in w.value
               for w in at.warning), [w.value for w in at.warning]


def test_a_page_with_its_own_controls_names_the_knob_pages_from_main():
    at = new_app()
    at.query_params["lang"] = CHINESE
    at.run()
    at.switch_page("app_pages/kv_cost.py").run()
    caption = at.sidebar.caption[0].value
    assert "本页有自己的控件" in caption and "探索" in caption and "跟着书走一遍" in caption
    assert not at.sidebar.get("text_area")  # no knob on a page that reads none


def test_the_poll_join_link_carries_the_teachers_language(monkeypatch):
    import streamlit as st

    from dashboard.classroom import ui

    monkeypatch.setattr(type(st.context), "url", property(lambda self: "http://10.0.0.5:8501/explore"),
                        raising=False)
    with language(CHINESE):
        assert ui.join_link("AB12") == "http://10.0.0.5:8501/answer?code=AB12&lang=zh"
    assert ui.join_link("AB12").endswith("?code=AB12&lang=en")


def test_the_phone_page_is_chinese_with_its_own_switch():
    at = new_app()
    at.query_params["lang"] = CHINESE
    at.run()
    at.switch_page("app_pages/answer.py").run()
    assert not at.exception
    assert at.header[0].value == "回答课堂提问"
    assert at.get("segmented_control") and english_left(at) == []


def test_a_models_caption_is_made_from_its_config_in_both_languages():
    from attn_core.models.family import ModelConfig
    from dashboard.state.controls import model_caption

    sizes = dict(n_layers=12, head_dim=64, emb_dim=576, context_length=1024, vocab_size=50257)
    llama_like = ModelConfig(label="M", n_heads=9, n_kv_heads=3, positions="rope", norm="RMSNorm", qkv_bias=False,
                             attention="GroupedQueryAttention", **sizes)
    gpt_like = ModelConfig(label="G", n_heads=12, n_kv_heads=12, positions="learned", norm="LayerNorm", qkv_bias=True,
                           attention="MultiHeadAttention", **sizes)
    assert model_caption(llama_like, "M", 3) == (
        "M's own sizes: GroupedQueryAttention, 9 query heads sharing 3 K/V heads, causal. RoPE rotates its queries "
        "and keys. Its q/k/v projections have no biases. Its input vectors are layer 3's input: the residual stream "
        "after RMSNorm. The chapter's masking method and dropout below act on this layer's copy only.")
    with language(CHINESE):
        assert model_caption(gpt_like, "G", 1) == (
            "G 自己的尺寸：MultiHeadAttention，12 个头，因果。它的 token 带有学习得到的位置嵌入。"
            "它的 q/k/v 投影有偏置。它的输入向量就是第 1 层的输入：经过 LayerNorm 的残差流。"
            "下面本章的掩码方法和 dropout 只作用于这一层的副本。")


# --- exported charts draw Chinese ---------------------------------------------------------------------------------

def test_an_exported_png_draws_chinese_glyphs():
    import altair as alt
    import pandas as pd

    from dashboard.export import formats

    def png(title: str) -> bytes:
        chart = alt.Chart(pd.DataFrame({"token": ["你", "好"], "v": [1, 2]})).mark_bar().encode(
            x="v:Q", y=alt.Y("token:N", title=None)).properties(title=title, width=200, height=60)
        return formats.chart_png(chart, scale=1)

    chinese, boxes, empty = png("注意力权重"), png("\ue000\ue001\ue002\ue003\ue004"), png("")
    assert chinese != boxes and chinese != empty and boxes != empty
    assert formats.register_cjk_fonts() or not any(Path(d).is_dir() for d in formats.CJK_FONT_DIRS)


def test_an_exported_chinese_title_is_set_in_a_sans_cjk_face():
    import altair as alt
    import pandas as pd

    from dashboard.export import formats

    chart = alt.Chart(pd.DataFrame({"x": ["a", "b"], "y": [1, 2]})).mark_bar().encode(x="x:N", y="y:Q")
    chinese = formats.titled(chart, "注意力权重", "CausalAttention · 6 个 token").title
    assert chinese.font == chinese.subtitleFont == formats.CJK_TITLE_FONTS
    assert formats.titled(chart, "weights", "CausalAttention · T6").title.font is alt.Undefined
    if formats.register_cjk_fonts():  # the default face drew this title in a serif, not bold
        plain = chart.properties(title=alt.TitleParams("注意力权重", anchor="start", fontSize=16),
                                 padding=formats.SLIDE_PADDING)
        assert formats.chart_png(formats.titled(chart, "注意力权重"), scale=1) != formats.chart_png(plain, scale=1)


def test_one_chinese_name_per_thing():
    """Issue 52 item 14: 汇聚 token beside 注意力汇聚 token, 掩码实验 beside 掩码实验室, and the Benchmark page
    性能测试 in the sidebar but 基准测试 in its heading."""
    texts = [t for m in i18n_tools.translations(CHINESE).values()
             for t in (m.string if isinstance(m.string, (list, tuple)) else [m.string]) if t]
    assert not [t for t in texts if re.search(r"(?<!注意力)汇聚 token", t)]
    assert not [t for t in texts if re.search(r"掩码实验(?!室)", t)]
    with language(CHINESE):
        page, heading = _("Benchmark"), _("Benchmark: every implementation on this machine")
    assert heading.startswith(page + "：") and page == "基准测试"


def test_chinese_reads_as_written_not_as_translated():
    """Issue 52 item 15: a native reader's list of phrasings that read translated, and signs doubled with words."""
    texts = [t for m in i18n_tools.translations(CHINESE).values()
             for t in (m.string if isinstance(m.string, (list, tuple)) else [m.string]) if t]
    stiff = ["按行的相对颜色", "每个部分都跟着它", "换一个）", "完整的 {ratio} 倍", "按 **", "进行训练", "多出 **+",
             "少了 **−", "} B 对 {", "崩坏", "层搭配", "*汇聚*", "Learn 页面", "逐个走过", "侧边栏的 **句子** 框"]
    assert {p: [t for t in texts if p in t] for p in stiff if any(p in t for t in texts)} == {}
    with language(CHINESE):
        assert _("Relative colours per row") == "按行相对着色"
        assert _("Look at one head (every section follows it)") == "查看单个头（以下各部分都显示这个头）"
        assert _("{ratio}x full", ratio="12.4") == "是完整因果注意力的 12.4 倍"
        assert _("Passes") == "计算" and _("temperature") == "温度" and _("seed") == "随机种子"
        assert _("{explicit} B vs {tiled} B", explicit=144, tiled=48) == "144 B 对比 48 B"  # fits its box at 1280
        assert _("training") == "训练"  # the sidebar's toggle: "训练模式" was cut to "训练…" beside the seed


def test_english_words_glued_to_chinese_text_are_found():
    """A translated sentence with an untranslated name inside ("输入为normed residual stream（d_in 576）"): Unicode's
    word boundary does not fall between 为 and n, so the run went unseen."""
    from i18n_check import english_runs

    assert english_runs(["输入为normed residual stream（d_in 576）"]) == ["normed residual stream"]
    assert english_runs(["输入为归一化后的残差流（d_in 576）", "softmax 之前填负无穷（−∞）"]) == []


def test_every_chinese_bold_closes_as_markdown_renders_it():
    """"**本机计时：**这" printed its asterisks: CommonMark closes bold after a punctuation mark only before a space or
    another mark, so a bold label ending in ：or 。 runs straight into Chinese text unbolded. The mark goes outside."""
    from babel.messages.pofile import read_po
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark")

    def stars(text: str) -> int:  # asterisk pairs left over in the rendered text, code spans aside
        return re.sub(r"<code>.*?</code>", "", md.render(text), flags=re.S).count("**")

    with open(Path(i18n.get(CHINESE).po), "rb") as f:
        catalog = read_po(f)
    unclosed = [str(t)[:60] for m in catalog if m.id
                for i, t in zip(*(x if isinstance(x, (list, tuple)) else [x] for x in (m.id, m.string)))
                if "**" in t and stars(t) > stars(i)]
    assert unclosed == [], unclosed
