"""Issue 12 item 4 and issue 10 item 9: the Benchmark page keeps its budget and says how far to
trust what it measured."""

import sys
import time

import pandas as pd
import pytest

from apptest_utils import clear_caches, messages, new_app
from attn_core.benchmark import BenchmarkTimeout, Size, describe_scaling, noisy_rows, run_isolated


def test_silent_child_is_killed_at_the_deadline():
    spec = dict(sizes=[Size("x", 1, 4, 4, 1)])
    t = time.monotonic()
    gen = run_isolated(spec, timeout_s=1.0, argv=[sys.executable, "-c", "import time; time.sleep(60)"])
    with pytest.raises(BenchmarkTimeout):
        list(gen)
    assert time.monotonic() - t < 3.0  # the deadline holds although the child printed nothing


def test_a_failing_child_is_a_runtime_error_not_a_timeout():
    spec = dict(sizes=[Size("x", 1, 4, 4, 1)])
    with pytest.raises(RuntimeError, match="boom"):
        list(run_isolated(spec, timeout_s=20, argv=[sys.executable, "-c", "raise SystemExit('boom')"]))


def test_results_carry_the_spread_of_their_repeats():
    spec = dict(sizes=[Size("tiny", 1, 8, 8, 2)], implementations=["MultiHeadAttention (explicit)"], reps=5)
    rows = [r.row() for r in run_isolated(spec, timeout_s=60)]
    assert [r["implementation"] for r in rows][0] == "raw SDPA"  # the baseline first: a cut-short run keeps ratios
    for r in rows:
        assert r["reps"] == 5 and r["ms_min"] <= r["ms"] <= r["ms_max"]


def row(impl, t, ms, ratio, lo=None, hi=None, reps=5):
    return dict(implementation=impl, size=f"T={t}", num_tokens=t, ms=ms, ratio_to_sdpa=ratio,
                ms_min=lo if lo is not None else ms * 0.95, ms_max=hi if hi is not None else ms * 1.05, reps=reps)


def test_noise_is_detected_from_the_spread():
    calm = row("raw SDPA", 128, 1.0, 1.0)
    wild = row("combined QKV (efficient)", 128, 1.0, 0.04, lo=0.2, hi=5.0)
    few = row("MultiHeadAttention (explicit)", 128, 1.0, 2.0, reps=2)
    assert noisy_rows([calm, wild, few]) == [wild, few]


def test_scaling_text_is_written_from_the_measurement():
    grows = [row("MultiHeadAttention (explicit)", t, ms, r) for t, ms, r in [(128, 1, 1.5), (256, 3, 2.0),
                                                                            (1024, 30, 4.0)]]
    assert "falls further behind" in describe_scaling(grows) and "1.50×" in describe_scaling(grows)
    zigzag = [row("MultiHeadAttention (explicit)", t, ms, r) for t, ms, r in [(128, 5, 3.0), (256, 2, 2.0),
                                                                             (1024, 9, 1.0)]]
    text = describe_scaling(zigzag)
    assert "falls further behind" not in text and "did not grow steadily" in text


def test_line_chart_axis_ends_at_the_data_and_legend_names_are_whole():
    from dashboard import charts

    df = pd.DataFrame([row(i, t, t / 100, 1.0) for i in ("MultiHeadAttention (efficient)", "raw SDPA")
                       for t in (128, 256, 1024)])
    spec = charts.line_chart(df, "num_tokens", "ms", "implementation").to_dict()
    assert spec["encoding"]["x"]["scale"]["domain"] == [128, 1024] and spec["encoding"]["x"]["scale"]["nice"] is False
    assert spec["encoding"]["color"]["legend"]["labelLimit"] == 0
    bars = charts.bar_chart(df, "ms", "implementation", spread=True).to_dict()
    assert any(layer.get("encoding", {}).get("x2", {}).get("field") == "ms_max" for layer in bars["layer"])


def test_line_chart_reads_with_the_sizes_one_run_measures():
    """Issue 9: a default run cut short by its 10 s budget measures one or two sizes of the time-vs-T curve; on
    log axes niced to powers of ten (0.1-10 ms) they were a few dots in a thin band of an empty chart."""
    from dashboard import charts

    impls = {"MultiHeadAttention (explicit)": [1.2, 3.5, 12, 50], "raw SDPA": [0.8, 2.0, 6, 22]}
    sizes = [128, 256, 512, 1024]

    def spec(n, **titles):
        df = pd.DataFrame([row(i, t, times[k], 1.0) for i, times in impls.items() for k, t in enumerate(sizes[:n])])
        return charts.line_chart(df, "num_tokens", "ms", "implementation", **titles).to_dict()

    for n in (1, 2):  # a short span: a linear time axis from 0 to just above the slowest time
        y = spec(n)["encoding"]["y"]
        assert y["scale"].get("type", "linear") == "linear" and y["scale"]["domain"][0] == 0, y
        assert max(t[n - 1] for t in impls.values()) < y["scale"]["domain"][1] <= 1.2 * max(impls[
            "MultiHeadAttention (explicit)"][:n])
    x = spec(1)["encoding"]["x"]
    lo, hi = x["scale"]["domain"]
    assert lo < 128 < hi and x["axis"]["values"] == [128], "one size sits inside the axis, labelled"
    full = spec(4)["encoding"]
    assert full["y"]["scale"]["type"] == "log" and full["y"]["scale"]["nice"] is False  # 0.8-50 ms: log helps
    assert 0.5 < full["y"]["scale"]["domain"][0] < 0.8 and 50 < full["y"]["scale"]["domain"][1] < 70  # fitted
    titled = spec(4, x_title="tokens (T)", y_title="time (ms)")["encoding"]
    assert titled["x"]["title"] == "tokens (T)" and titled["y"]["title"] == "time (ms)"
    assert spec(4)["mark"]["point"]["size"] >= 60  # points a projector shows
    assert spec(4)["autosize"]["type"] == "pad"  # Streamlit's "fit" gave the legend below the plot's height


@pytest.fixture
def _fresh():
    clear_caches()
    yield
    clear_caches()


def test_gpt2_both_passes_stays_within_budget_without_traceback(_fresh):
    import re
    from pathlib import Path

    page = Path(__file__).resolve().parent.parent / "dashboard" / "app_pages" / "benchmark.py"
    budget = float(re.search(r"^BUDGET_S = ([\d.]+)", page.read_text(), re.M).group(1))
    at = new_app()
    at.run()
    at.switch_page("app_pages/benchmark.py").run()
    at.multiselect(key="bench_sizes").set_value(["gpt2"])
    at.multiselect(key="bench_passes").set_value(["forward", "forward+backward"])
    at.multiselect(key="bench_tokens").set_value([]).run()
    t = time.monotonic()
    at.button(key="bench_run").click().run(timeout=120)
    elapsed = time.monotonic() - t
    assert not messages(at)["exception"], messages(at)
    assert elapsed <= budget + 2, f"{elapsed:.1f} s"
    assert any("budget" in w or "noisy" in w.lower() for w in messages(at)["warning"]) or at.dataframe
