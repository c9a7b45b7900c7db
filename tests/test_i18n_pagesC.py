"""Learn, KV cache cost, Benchmark and Generate in Chinese: nothing raises, no English sentence is left, and every
number is the same as in English. Strict: English from ``attn_core`` (task descriptions, verdicts, model names),
from ``dashboard/drawing`` (chart titles) and from the sidebar counts as much as the pages' own.
"""

from __future__ import annotations

import math
import re

import pytest
from i18n_check import english_left
from langs import CHINESE, ENGLISH

import attn_core.labs.jobs as jobs
from apptest_utils import _rows, messages, new_app
from attn_core.labs.benchmark import Result

LEARN, KV, BENCH, GEN = "app_pages/learn.py", "app_pages/kv_cost.py", "app_pages/benchmark.py", "app_pages/generate.py"
# the book's and the libraries' words that stay as written on these pages
ALLOWED = {"emb_dim", "head_dim", "num_heads", "MultiHeadAttention", "GroupedQueryAttention", "batch", "raw",
           "wrapper", "GPTModel", "MultiHeadLatentAttention", "SWA", "GPT-2"}

pytestmark = pytest.mark.usefixtures("fresh_caches")  # tests/conftest.py


def open_in(lang: str, page: str, **query: str):
    at = new_app(lang=lang, **query)
    at.run()
    at.switch_page(page).run()
    assert not messages(at)["exception"], messages(at)
    assert not at.exception
    return at


def ours(at) -> list[str]:
    """The English runs left anywhere on the page (main area, sidebar, charts)."""
    return english_left(at, ALLOWED)


def numbers(values) -> list[float]:
    """The numbers among ``values`` (cells or chart fields), as a person reads them: "17.18 GB" and "1,024" count."""
    out = []
    for v in values:
        if isinstance(v, bool) or v is None:
            continue
        if isinstance(v, (int, float)):
            out.append(None if isinstance(v, float) and math.isnan(v) else round(float(v), 9))
            continue
        head = str(v).split(" ")[0].replace(",", "")
        try:
            out.append(float(head))
        except ValueError:
            pass
    return out


def table_numbers(at) -> list[list[float]]:
    return [numbers(df.value.to_numpy().ravel()) for df in at.dataframe]


def chart_numbers(at) -> list[list[float]]:
    return [numbers(v for row in _rows(el) for v in row.values()) for el in at.get("vega_lite_chart")]


def same_numbers(en, zh) -> None:
    assert table_numbers(en) == table_numbers(zh)
    assert chart_numbers(en) == chart_numbers(zh)
    assert any(table_numbers(zh)) or any(chart_numbers(zh))  # something was compared


# Learn -----------------------------------------------------------------------------------------------------------
def test_learn_before_training_in_chinese():
    at = open_in(CHINESE, LEARN)
    assert at.title[0].value == "学习：看注意力头如何形成"
    assert at.button(key="learn_start").label == "开始" and at.button(key="learn_load").label == "已训练的模型"
    assert at.selectbox(key="learn_task").label == "任务"
    assert "点击“开始”开始训练" in at.info[0].value
    assert any("个训练名额中有" in c.value for c in at.caption)  # the server line, its plural form
    assert ours(at) == []


def trained(lang: str):
    at = open_in(lang, LEARN)
    at.selectbox(key="learn_task").set_value("induction").run()
    at.button(key="learn_load").click().run()
    at.select_slider(key="learn_at").set_value("500").run()
    at.toggle(key="learn_zoom").set_value(True).run()  # the close-up of one head draws too
    assert not messages(at)["exception"], messages(at)
    return at


def test_learn_trained_model_in_chinese_shows_the_same_numbers():
    zh = trained(CHINESE)
    progress = zh.get("progress")[0].proto.text
    assert progress.startswith("已完成 · 第 1000 / 1000 步 · 已训练 ") and " · 损失 " in progress, progress
    assert any(m.value.startswith("**第 500 步：探测输入上的注意力**（行：查询") for m in zh.markdown)
    assert any(m.value == "**第 500 步的 L1 H1**" for m in zh.markdown)
    assert any(c.value.startswith("探测输入：") for c in zh.caption)
    assert any(b.value.startswith(("这一步已达到目标。", "目标：")) for b in [*zh.success, *zh.info])
    assert ours(zh) == []
    table = zh.dataframe[0].value  # the heads' scores: Chinese headers, each verdict in Chinese
    assert {"层", "头", "结论", "平均距离"} <= set(table.columns), list(table.columns)
    assert all(CJK.search(str(v)) for v in table["结论"]), list(table["结论"])
    en = trained(ENGLISH)
    assert en.get("progress")[0].proto.text.startswith("done · step 1000 / 1000")
    same_numbers(en, zh)


def test_learn_queue_in_chinese(monkeypatch):
    monkeypatch.setattr(jobs, "MAX_JOBS", jobs.live_jobs() + 1)  # one free slot: the first Start takes it
    apps = [open_in(ENGLISH, LEARN), open_in(CHINESE, LEARN)]
    try:
        for at in apps:
            at.selectbox(key="learn_task").set_value("previous")
            at.number_input(key="learn_steps").set_value(5000)  # runs past the test: its slot stays busy
            at.selectbox(key="learn_emb").set_value(32)
            at.run()
            at.button(key="learn_start").click().run()
        at = apps[1]
        assert not messages(at)["exception"], messages(at)
        assert at.get("progress")[0].proto.text.startswith("排队中 · 第 1 位 · ")
        assert "**你在队列中排第 1 位**" in at.info[0].value
        assert at.button(key="learn_leave").label == "退出队列"
        assert ours(at) == []
    finally:
        for at in apps:
            if "learn_job" in at.session_state:
                at.session_state["learn_job"].cancel()


# KV cache cost ---------------------------------------------------------------------------------------------------
def test_kv_cost_in_chinese_shows_the_same_numbers():
    zh = open_in(CHINESE, KV)
    assert zh.title[0].value == "KV 缓存开销：各注意力变体存什么"
    total = zh.dataframe[0].value
    assert list(total.columns) == ["变体", "每个 token", "32,768 个 token", "缩小倍数"]
    assert "MQA（1 个 K/V 头）" in set(total["变体"])  # attn_core's variant names, shown translated
    assert zh.selectbox(key="kv_preset").value.startswith("Llama-3-8B-like")  # the link keeps the English name
    assert "类 Llama-3-8B（32 层，4096 维，bf16）" in zh.selectbox(key="kv_preset").options
    from apptest_utils import md_tables

    measured = next(t for t in md_tables(zh) if "实测字节数" in next(iter(t.values()))).values()  # Markdown: cells wrap
    assert {"实测字节数", "公式字节数", "相等"} <= set(next(iter(measured)))
    assert {r["相等"] for r in measured} <= {"是", "–"} and "未测量 ¹" in {r["实测字节数"] for r in measured}
    assert ours(zh) == []
    en = open_in(ENGLISH, KV)
    same_numbers(en, zh)


def test_kv_cost_own_numbers_and_their_errors_in_chinese():
    zh = open_in(CHINESE, KV, kv_preset="Your own numbers")
    assert zh.selectbox(key="kv_preset").value == "Your own numbers"  # the link keeps the English value
    assert "自定义数值" in zh.selectbox(key="kv_preset").options
    assert zh.number_input(key="kv_local").label == "窗口层数/全注意力层"
    assert ours(zh) == []
    en = open_in(ENGLISH, KV, kv_preset="Your own numbers")
    same_numbers(en, zh)
    zh.number_input(key="kv_kv_heads").set_value(5)
    zh.number_input(key="kv_emb").set_value(4100).run()
    errors = messages(zh)["error"]
    assert errors == ["emb_dim（4100）必须能被头数（32）整除。\n\nK/V 头数（5）必须能整除头数（32）："
                      "可取 1、2、4、8、16 或 32。"], errors


# Benchmark -------------------------------------------------------------------------------------------------------
def finished_run() -> tuple[list[dict], list[dict]]:
    """Rows as a finished run leaves them: two sizes, and time vs T; two repeats only (too noisy to trust)."""
    def result(impl, size, t, ms, reps=7):
        return Result(impl, size, 4, t, 256, 4, "cpu", "float32", "forward", ms, ms, None, ms * 0.9, ms * 1.2, reps,
                      times=[ms * 0.95, ms, ms * 1.05] if reps > 2 else [ms, ms * 1.4]).row()

    impls = (("raw SDPA", 1.0), ("MultiHeadAttention (explicit)", 2.5), ("MultiHeadAttentionWrapper", 4.0),
             ("MultiHeadAttention (efficient)", 1.1))
    rows = [result(i, size, 128, ms * k, reps=2 if i == "MultiHeadAttentionWrapper" else 7)
            for size, k in (("small", 1), ("book demo (d 3, 1 head)", 0.1)) for i, ms in impls]
    scaling = [result(i, f"T={t}", t, ms * t / 128) for t in (128, 256) for i, ms in impls[:3]]
    return rows, scaling


def bench(lang: str, results=None):
    at = open_in(lang, BENCH)
    if results:
        at.session_state["bench_results"] = results
        at.run()
        assert not messages(at)["exception"], messages(at)
    return at


def test_benchmark_before_a_run_in_chinese():
    zh = bench(CHINESE)
    assert zh.title[0].value == "基准测试：本机上的每种实现"
    assert "点击“运行基准测试”" in zh.info[0].value and zh.button(key="bench_run").label == "运行基准测试"
    assert list(zh.multiselect(key="bench_passes").options) == ["前向", "前向+反向"]
    assert zh.multiselect(key="bench_passes").value == ["forward"]  # the value stays the identifier
    assert any(o.startswith("小：b 4，T 128，d 256，4 个头") for o in zh.multiselect(key="bench_sizes").options)
    assert ours(zh) == []
    zh.multiselect(key="bench_passes").set_value([]).run()
    assert "请至少选一种计算方式和一个尺寸（或 T）再运行。" in messages(zh)["info"]


def test_benchmark_results_in_chinese_show_the_same_numbers():
    rows, scaling = finished_run()
    zh = bench(CHINESE, (rows, scaling))
    results, ratios = zh.dataframe[0].value, zh.dataframe[-1].value  # two sizes, then time vs T
    assert list(results.columns) == ["实现", "中位数（ms）", "最快（ms）", "最慢（ms）", "重复次数",
                                     "相对 raw SDPA（×）"]
    assert list(ratios.columns)[:2] == ["T（token 数）", "直接调用 SDPA（ms）"]
    warnings = " ".join(messages(zh)["warning"])
    assert "**噪声太大，不可信**：14 次测量中有 2 次" in warnings, warnings
    assert any(h.value == "为什么一种实现可以更快，这里是否如此" for h in zh.header)
    assert zh.download_button(key="bench_csv").label == "下载结果（CSV）"
    assert ours(zh) == []
    en = bench(ENGLISH, (rows, scaling))
    same_numbers(en, zh)


# Generate --------------------------------------------------------------------------------------------------------
PROMPT = {"Every", "effort", "moves", "you"}  # the book's prompt, quoted as written
CJK = re.compile(r"[\u4e00-\u9fff]")


def test_generate_in_chinese_names_every_model_in_chinese():
    """Every weights choice (a real model's family, the book's random GPTModels) and a step of each say no English
    sentence; the labels come from attn_core's families as messages, translated here."""
    from dashboard.i18n import language

    with language(CHINESE):  # the AppTest formats a selectbox's options outside the run: in the same language
        at = open_in(CHINESE, GEN)
        options = at.selectbox(key="gen_model").options
        assert options and all(CJK.search(o) for o in options), options  # "（真实权重，Llama 系列）", "随机权重：…"
        for name in ("random-small", at.selectbox(key="gen_model").value):
            at.selectbox(key="gen_model").set_value(name).run()
            at.button(key="gen_next").click().run()
            assert not messages(at)["exception"] and not messages(at)["error"], messages(at)
            assert english_left(at, ALLOWED | PROMPT) == [], (name, english_left(at, ALLOWED | PROMPT))
