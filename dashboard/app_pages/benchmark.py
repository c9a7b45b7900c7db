"""Benchmark: how fast is each implementation here, and why the efficient one is efficient."""

from __future__ import annotations

import time

import pandas as pd
import streamlit as st

from attn_core import available_devices
from attn_core.labs.benchmark import BASELINE, IMPLEMENTATIONS, SIZES, BenchmarkTimeout, Size, run_isolated
from attn_core.labs.benchmark_verdict import NOISY_IQR, describe_scaling_msg, explain_msg, noisy_rows, verdict
from attn_core.labs.lab import DTYPES
from dashboard.drawing import measure_charts
from dashboard.drawing.text import show_table
from dashboard.export.slides import draw_chart, page_downloads, slide_settings
from dashboard.i18n import _, message
from dashboard.state.links import plural

BUDGET_S = 10.0  # never keep a classroom waiting longer than this
CHILD_START_S = 1.5  # a child process needs about this long to import torch before it measures anything


# The results table's columns, their units in the header (a bare "fastest" said nothing of milliseconds).
TABLE_COLUMNS = {"implementation": "implementation", "ms": "median (ms)", "ms_min": "fastest (ms)",
                 "ms_max": "slowest (ms)", "reps": "repeats", "ratio_to_sdpa": "× raw SDPA", "peak_mb": "peak (MB)"}
TABLE_FORMATS = {c: "%.3f" for c in TABLE_COLUMNS.values() if "(ms)" in c} | {"× raw SDPA": "%.2f", "peak (MB)": "%.1f"}


def results_table(part: pd.DataFrame) -> pd.DataFrame:
    """One size and pass: fastest first, units in the headers; peak memory only where it was measured (CUDA)."""
    cols = [c for c in TABLE_COLUMNS if c in part and (c != "peak_mb" or part[c].notna().any())]
    return part[cols].sort_values("ms").rename(columns=TABLE_COLUMNS)


def scaling_table(sdf: pd.DataFrame) -> pd.DataFrame:
    """Time vs T as a table: raw SDPA's time, and every other implementation as a multiple of it."""
    wide = sdf.pivot(index="num_tokens", columns="implementation", values="ratio_to_sdpa")
    out = pd.DataFrame({"T (tokens)": wide.index})
    base = sdf[sdf["implementation"] == BASELINE].set_index("num_tokens")["ms"]
    out[f"{BASELINE} (ms)"] = [base.get(t) for t in wide.index]
    for impl in (c for c in wide.columns if c != BASELINE):
        out[f"{impl} (× {BASELINE})"] = wide[impl].to_numpy()
    return out


def render() -> None:
    """Draw the page. Everything it computes stays local, so nothing outlives the run."""
    st.title("Benchmark: every implementation on this machine")
    st.caption("All implementations compute the same causal multi-head attention with the same weights. Each time "
               "is the median of repeated runs after a warm-up; ratios are to raw SDPA measured in the same run. "
               f"A run stops after about {BUDGET_S:.0f} s; changing any control cancels it.")

    c1, c2, c3 = st.columns(3)
    devices = available_devices()
    device = c1.selectbox("Device", devices, key="bench_device")
    dtype = c2.selectbox("dtype", list(DTYPES), key="bench_dtype",
                         help="bfloat16 / float16 are mainly for GPUs; on a CPU they are often slower.")
    passes = c3.multiselect("Passes", ["forward", "forward+backward"], default=["forward"], key="bench_passes")
    size_names = st.multiselect("Sizes", list(SIZES), default=["book", "small"], key="bench_sizes",
                                format_func=lambda k: f"{SIZES[k].name}: b {SIZES[k].batch}, T {SIZES[k].num_tokens}, "
                                                      f"d {SIZES[k].d}, {plural(SIZES[k].num_heads, 'head')}")
    impls = st.multiselect("Implementations", IMPLEMENTATIONS, default=list(IMPLEMENTATIONS), key="bench_impls")
    tokens = st.multiselect("Time vs T (b 1, d 256, 4 heads)", [64, 128, 256, 512, 1024, 2048],
                            default=[128, 256, 512, 1024], key="bench_tokens")

    if "124M" in size_names and device == "cpu":
        st.warning("GPT-2 small on a CPU takes about a second per forward pass: with the 10 s budget only a few "
                   "repetitions fit, so its numbers are rougher.")
    if not passes or not (size_names or tokens):
        st.info("Pick at least one pass and one size (or T) to run.")
        st.stop()

    if st.button("Run benchmark", type="primary", key="bench_run"):
        progress = st.progress(0.0, text="warming up …")

        def report(r, done, total):
            progress.progress(done / total, text=f"{done}/{total}: {r.implementation} · {r.size} · {r.pass_}: "
                                                 f"{r.ms:.2f} ms")

        start = time.monotonic()
        deadline = start + BUDGET_S  # one deadline for the whole run, child start-up included
        scaling_impls = ["MultiHeadAttention (explicit)", "MultiHeadAttention (efficient)", BASELINE]
        jobs = []
        if size_names:
            jobs.append(dict(sizes=[SIZES[k] for k in size_names], implementations=impls, device=device, dtype=dtype,
                             passes=passes, warmup=2, reps=9))
        if tokens:
            jobs.append(dict(sizes=[Size(f"T={t}", 1, t, 256, 4) for t in sorted(tokens)],
                             implementations=scaling_impls, device=device, dtype=dtype, passes=["forward"],
                             warmup=2, reps=7))
        total = sum(len(j["sizes"]) * len(j["passes"]) * len(set(j["implementations"]) | {BASELINE}) for j in jobs)
        collected: list[list] = []
        done = 0
        cut_short = False
        for n, job in enumerate(jobs):
            part: list = []
            collected.append(part)
            # The first of two jobs gets 60% of what is left; the child is killed at its share.
            share = (deadline - time.monotonic()) * (0.6 if n == 0 and len(jobs) == 2 else 1.0)
            if share < CHILD_START_S + 0.5:
                cut_short = True
                continue
            job["budget_s"] = share - CHILD_START_S
            try:
                for r in run_isolated(job, timeout_s=share):  # a child process: the server's threads
                    part.append(r)                            # would skew the timings
                    done += 1
                    report(r, done, total)
            except BenchmarkTimeout:
                cut_short = True
            except RuntimeError as e:
                progress.empty()
                st.error(f"The benchmark could not run: {message(e)}. Try a smaller size or another dtype.")
                st.stop()
        st.session_state["bench_meta"] = dict(seconds=time.monotonic() - start, done=done, total=total,
                                              cut_short=cut_short)
        results = collected[0] if size_names else []
        scaling = collected[-1] if tokens else []
        progress.empty()
        st.session_state["bench_results"] = ([r.row() for r in results], [r.row() for r in scaling])

    if "bench_results" not in st.session_state:
        st.info("Press **Run benchmark** to time the implementations on this machine.")
        st.stop()

    rows, scaling_rows = st.session_state["bench_results"]
    meta = st.session_state.get("bench_meta", {})
    if meta.get("cut_short"):
        st.warning(f"Stopped at the {BUDGET_S:.0f} s budget after {meta['seconds']:.1f} s: {meta['done']} of "
                   f"{meta['total']} measurements finished. Pick fewer sizes or passes for a complete run.")
    noisy = noisy_rows(rows + scaling_rows)
    if noisy:
        names = ", ".join(sorted({f"{r['implementation']} ({r['size']})" for r in noisy})[:6])
        st.warning(f"**Too noisy to trust:** in {len(noisy)} of {len(rows + scaling_rows)} measurements the middle "
                   f"half of the repeats spread over more than {NOISY_IQR:.0%} of their median, or fewer than 3 "
                   "repeats fit "
                   f"({names}{' …' if len(noisy) > 6 else ''}). The machine was busy or the budget too short; "
                   "run again when it is idle before comparing ratios.")
    first = (rows + scaling_rows)[0] if rows + scaling_rows else {}
    slide_settings(first.get("device", ""), None, first.get("dtype", ""))
    if rows:
        df = pd.DataFrame(rows)
        st.header("Implementations")
        for n, ((size, pass_), part) in enumerate(df.groupby(["size", "pass"], sort=False)):
            st.markdown(f"**{size}** · {pass_} · {part['device'].iloc[0]} · {part['dtype'].iloc[0]}")
            draw_chart(st, lambda part=part: measure_charts.bar_chart(part, "ms", "implementation", "pass", width=560,
                                                              spread=True),
                       key=f"bench_bars_{n}", name=f"benchmark_{size}_{pass_}", table=lambda part=part: part,
                       title=f"Median time per implementation: {size}, {pass_} (ms; line: fastest to slowest)")
            show_table(st, results_table(part), hide_index=True, formats=TABLE_FORMATS)
            if "times" in part and part["times"].notna().all():
                v = verdict(dict(zip(part["implementation"], part["times"])))
                st.markdown(" ".join(_(m) for m in v.sentences))  # our names only
        st.caption("Bars and their numbers: the median of the repeats; the thin line on each bar runs from the fastest "
                   "to the slowest repeat. Repeats are interleaved (one of each implementation per round), and a "
                   "difference is called only when the per-round ratios' middle half lies on one side of 1 and the "
                   "medians differ by 5% or more: otherwise it is *within noise*.")
    if scaling_rows:
        sdf = pd.DataFrame(scaling_rows)
        st.header("Time vs number of tokens")
        draw_chart(st, lambda: measure_charts.line_chart(sdf, "num_tokens", "ms", "implementation", width=560,
                                                 x_title="tokens (T)", y_title="median time per forward pass (ms)"),
                   key="bench_scaling", name="time_vs_tokens", table=lambda: sdf,
                   title="Forward time vs number of tokens (b 1, d 256, 4 heads)")
        ratios = scaling_table(sdf)
        show_table(st, ratios, hide_index=True, width="content", na_rep="–",
                   formats={c: "%.3f" if c.endswith("(ms)") else "%.2f" for c in ratios.columns if c != "T (tokens)"})
        st.markdown(" ".join(_(m) for m in describe_scaling_msg(scaling_rows)))

    st.header("Why one implementation can be faster, and whether it was here")
    groups = {f"{r['size']}, {r['pass']}": {} for r in rows}
    for r in rows:
        if r.get("times"):
            groups[f"{r['size']}, {r['pass']}"][r["implementation"]] = r["times"]
    reasons = [" ".join(_(m) for m in paragraph) for paragraph in explain_msg(groups)]
    st.markdown("\n".join(f"- {line}" for line in reasons) if reasons else
                "Run the wrapper, both `MultiHeadAttention` paths and raw SDPA to see each reason measured.")
    st.markdown(
        "- **No T × T weights matrix.** The explicit class materializes scores, masked scores and weights, each "
        "(b, num_heads, T, T): memory and time grow as T². The fused kernel works on tiles and never stores it — "
        "which is also why the app's traced (explicit) path is for *seeing*, and the fused path for *speed*. "
        "The time-vs-T table above shows whether that gap grew in this run.")
    all_rows = rows + scaling_rows
    if all_rows:
        csv = pd.DataFrame(all_rows).to_csv(index=False)
        st.download_button("Download results (CSV)", csv, file_name="attention_benchmark.csv", mime="text/csv",
                           on_click="ignore", key="bench_csv")
    page_downloads(page="benchmark")


render()
