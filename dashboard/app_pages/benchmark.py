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
from dashboard.i18n import N_, _, message, ngettext, sentences

BUDGET_S = 10.0  # never keep a classroom waiting longer than this
CHILD_START_S = 1.5  # a child process needs about this long to import torch before it measures anything


# The results table's columns, their units in the header (a bare "fastest" said nothing of milliseconds).
TABLE_COLUMNS = {"implementation": N_("implementation"), "ms": N_("median (ms)"), "ms_min": N_("fastest (ms)"),
                 "ms_max": N_("slowest (ms)"), "reps": N_("repeats"), "ratio_to_sdpa": N_("× raw SDPA"),
                 "peak_mb": N_("peak (MB)")}
TABLE_FORMATS = {"ms": "%.3f", "ms_min": "%.3f", "ms_max": "%.3f", "ratio_to_sdpa": "%.2f", "peak_mb": "%.1f"}
# The passes as the controls and headings name them (the values stay these identifiers, in links and the CSV).
PASSES = {"forward": N_("forward"), "forward+backward": N_("forward+backward")}
# the implementations' ids (attn_core's, kept in results) as shown; class names stay as written
IMPL_NAMES = {"MultiHeadAttention (explicit)": N_("MultiHeadAttention (explicit)"),
              "MultiHeadAttention (efficient)": N_("MultiHeadAttention (efficient)"),
              "combined QKV (efficient)": N_("combined QKV (efficient)"), "raw SDPA": N_("raw SDPA")}


def impl_name(impl: str) -> str:
    """An implementation's id as this run's language names it."""
    return _(IMPL_NAMES[impl]) if impl in IMPL_NAMES else impl


def shown_impls(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its implementations named in this run's language (for charts and tables)."""
    return frame.assign(implementation=frame["implementation"].map(impl_name))


def pass_name(pass_: str) -> str:
    """A pass in this run's language."""
    return _(PASSES[pass_]) if pass_ in PASSES else pass_


def results_table(part: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, str]]:
    """One size and pass: fastest first, units in the headers; peak memory only where it was measured (CUDA).
    Returns the table and its columns' formats (the headers are in this run's language)."""
    cols = [c for c in TABLE_COLUMNS if c in part and (c != "peak_mb" or part[c].notna().any())]
    shown = {c: _(TABLE_COLUMNS[c]) for c in cols}
    formats = {shown[c]: f for c, f in TABLE_FORMATS.items() if c in shown}
    return part[cols].sort_values("ms").rename(columns=shown), formats


def scaling_table(sdf: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, str]]:
    """Time vs T as a table: raw SDPA's time, and every other implementation as a multiple of it (with the
    columns' formats)."""
    wide = sdf.pivot(index="num_tokens", columns="implementation", values="ratio_to_sdpa")
    out = pd.DataFrame({_("T (tokens)"): wide.index})
    base = sdf[sdf["implementation"] == BASELINE].set_index("num_tokens")["ms"]
    base_col = _("{implementation} (ms)", implementation=impl_name(BASELINE))
    out[base_col] = [base.get(t) for t in wide.index]
    formats = {base_col: "%.3f"}
    for impl in (c for c in wide.columns if c != BASELINE):
        col = _("{implementation} (× {baseline})", implementation=impl_name(impl), baseline=impl_name(BASELINE))
        out[col] = wide[impl].to_numpy()
        formats[col] = "%.2f"
    return out, formats


def size_label(key: str) -> str:
    """A size as the Sizes control lists it: its name and shape."""
    size = SIZES[key]
    return ngettext("{name}: b {batch}, T {tokens}, d {d}, {n} head", "{name}: b {batch}, T {tokens}, d {d}, {n} heads",
                    size.num_heads, name=_(size.name), batch=size.batch, tokens=size.num_tokens, d=size.d)


def group_label(row: dict) -> str:
    """A size and pass as the reasons below name the measurement."""
    return _("{size}, {pass_name}", size=_(row["size"]), pass_name=pass_name(row["pass"]))


def render() -> None:
    """Draw the page. Everything it computes stays local, so nothing outlives the run."""
    st.title(_("Benchmark: every implementation on this machine"))
    st.caption(_("All implementations compute the same causal multi-head attention with the same weights. Each "
                 "time is the median of repeated runs after a warm-up; ratios are to raw SDPA measured in the same "
                 "run. A run stops after about {budget} s; changing any control cancels it.",
                 budget=format(BUDGET_S, ".0f")))

    c1, c2, c3 = st.columns(3)
    devices = available_devices()
    device = c1.selectbox(_("Device"), devices, key="bench_device")
    dtype = c2.selectbox("dtype", list(DTYPES), key="bench_dtype",
                         help=_("bfloat16 / float16 are mainly for GPUs; on a CPU they are often slower."))
    # option labels made in the run, in its language (a format_func is called outside the run too)
    pass_labels, size_labels = {p: pass_name(p) for p in PASSES}, {k: size_label(k) for k in SIZES}
    passes = c3.multiselect(_("Passes"), list(PASSES), default=["forward"], key="bench_passes",
                            format_func=pass_labels.__getitem__, select_all=False)  # its "Select all" is English
    size_names = st.multiselect(_("Sizes"), list(SIZES), default=["book", "small"], key="bench_sizes",
                                format_func=size_labels.__getitem__, select_all=False)
    impls = st.multiselect(_("Implementations"), IMPLEMENTATIONS, default=list(IMPLEMENTATIONS), key="bench_impls",
                           format_func={i: impl_name(i) for i in IMPLEMENTATIONS}.__getitem__, select_all=False)
    tokens = st.multiselect(_("Time vs T (b 1, d 256, 4 heads)"), [64, 128, 256, 512, 1024, 2048],
                            default=[128, 256, 512, 1024], key="bench_tokens", select_all=False)

    if "124M" in size_names and device == "cpu":
        st.warning(_("GPT-2 small on a CPU takes about a second per forward pass: with the {budget} s budget only a "
                     "few repetitions fit, so its numbers are rougher.", budget=format(BUDGET_S, ".0f")))
    if not passes or not (size_names or tokens):
        st.info(_("Pick at least one pass and one size (or T) to run."))
        st.stop()

    if st.button(_("Run benchmark"), type="primary", key="bench_run"):
        progress = st.progress(0.0, text=_("warming up …"))

        def report(r, done, total):
            progress.progress(done / total, text=_("{done}/{total}: {implementation} · {size} · {pass_name}: {ms} ms",
                                                   done=done, total=total, implementation=impl_name(r.implementation),
                                                   size=_(r.size), pass_name=pass_name(r.pass_),
                                                   ms=format(r.ms, ".2f")))

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
                st.error(_("The benchmark could not run: {problem}. Try a smaller size or another dtype.",
                           problem=message(e)))
                st.stop()
        st.session_state["bench_meta"] = dict(seconds=time.monotonic() - start, done=done, total=total,
                                              cut_short=cut_short)
        results = collected[0] if size_names else []
        scaling = collected[-1] if tokens else []
        progress.empty()
        st.session_state["bench_results"] = ([r.row() for r in results], [r.row() for r in scaling])

    if "bench_results" not in st.session_state:
        st.info(_("Press **Run benchmark** to time the implementations on this machine."))
        st.stop()

    rows, scaling_rows = st.session_state["bench_results"]
    meta = st.session_state.get("bench_meta", {})
    if meta.get("cut_short"):
        st.warning(ngettext("Stopped at the {budget} s budget after {seconds} s: {done} of {n} measurement finished. "
                            "Pick fewer sizes or passes for a complete run.",
                            "Stopped at the {budget} s budget after {seconds} s: {done} of {n} measurements "
                            "finished. Pick fewer sizes or passes for a complete run.", meta["total"],
                            budget=format(BUDGET_S, ".0f"), seconds=format(meta["seconds"], ".1f"), done=meta["done"]))
    noisy = noisy_rows(rows + scaling_rows)
    if noisy:
        iqr = f"{NOISY_IQR:.0%}"
        listed = sorted({_("{implementation} ({size})", implementation=impl_name(r["implementation"]),
                           size=_(r["size"])) for r in noisy})
        names = ", ".join(listed[:6] + (["…"] if len(listed) > 6 else []))
        st.warning(ngettext("**Too noisy to trust:** in {noisy} of {n} measurement the middle half of the repeats "
                            "spread over more than {iqr} of their median, or fewer than 3 repeats fit ({names}). The "
                            "machine was busy or the budget too short; run again when it is idle before comparing "
                            "ratios.",
                            "**Too noisy to trust:** in {noisy} of {n} measurements the middle half of the repeats "
                            "spread over more than {iqr} of their median, or fewer than 3 repeats fit ({names}). The "
                            "machine was busy or the budget too short; run again when it is idle before comparing "
                            "ratios.", len(rows + scaling_rows), noisy=len(noisy), iqr=iqr, names=names))
    first = (rows + scaling_rows)[0] if rows + scaling_rows else {}
    slide_settings(first.get("device", ""), None, first.get("dtype", ""))
    if rows:
        df = pd.DataFrame(rows)
        st.header(_("Implementations"))
        for n, ((size, pass_), part) in enumerate(df.groupby(["size", "pass"], sort=False)):
            st.markdown(_("**{size}** · {pass_name} · {device} · {dtype}", size=_(size), pass_name=pass_name(pass_),
                          device=part["device"].iloc[0], dtype=part["dtype"].iloc[0]))
            named = shown_impls(part)  # in the run: its language
            draw_chart(st, lambda named=named: measure_charts.bar_chart(named, "ms", "implementation", "pass",
                                                                        width=560, spread=True),
                       key=f"bench_bars_{n}", name=f"benchmark_{size}_{pass_}", table=lambda part=part: part,
                       title=_("Median time per implementation: {size}, {pass_name} (ms; line: fastest to slowest)",
                               size=_(size), pass_name=pass_name(pass_)))
            results, formats = results_table(named)
            show_table(st, results, hide_index=True, formats=formats)
            if "times" in part and part["times"].notna().all():
                v = verdict(dict(zip(part["implementation"], part["times"])))
                st.markdown(sentences(*(_(m) for m in v.sentences)))  # our names only
        st.caption(_("Bars and their numbers: the median of the repeats; the thin line on each bar runs from the "
                     "fastest to the slowest repeat. Repeats are interleaved (one of each implementation per round), "
                     "and a difference is called only when the per-round ratios' middle half lies on one side of 1 "
                     "and the medians differ by 5% or more: otherwise it is *within noise*."))
    if scaling_rows:
        sdf = pd.DataFrame(scaling_rows)
        st.header(_("Time vs number of tokens"))
        named = shown_impls(sdf)
        draw_chart(st, lambda: measure_charts.line_chart(named, "num_tokens", "ms", "implementation", width=560,
                                                 x_title=_("tokens (T)"),
                                                 y_title=_("median time per forward pass (ms)")),
                   key="bench_scaling", name="time_vs_tokens", table=lambda: sdf,
                   title=_("Forward time vs number of tokens (b 1, d 256, 4 heads)"))
        ratios, formats = scaling_table(sdf)
        show_table(st, ratios, hide_index=True, width="content", na_rep="–", formats=formats)
        st.markdown(sentences(*(_(m) for m in describe_scaling_msg(scaling_rows))))

    st.header(_("Why one implementation can be faster, and whether it was here"))
    groups = {group_label(r): {} for r in rows}
    for r in rows:
        if r.get("times"):
            groups[group_label(r)][r["implementation"]] = r["times"]
    reasons = [sentences(*(_(m) for m in paragraph)) for paragraph in explain_msg(groups)]
    if reasons:
        st.markdown("\n".join("- " + line for line in reasons))
    else:
        st.markdown(_("Run the wrapper, both `MultiHeadAttention` paths and raw SDPA to see each reason measured."))
    st.markdown(_(
        "- **No T × T weights matrix.** The explicit class materializes scores, masked scores and weights, each "
        "(b, num_heads, T, T): memory and time grow as T². The fused kernel works on tiles and never stores it — "
        "which is also why the app's traced (explicit) path is for *seeing*, and the fused path for *speed*. "
        "The time-vs-T table above shows whether that gap grew in this run."))
    all_rows = rows + scaling_rows
    if all_rows:
        csv = pd.DataFrame(all_rows).to_csv(index=False)
        st.download_button(_("Download results (CSV)"), csv, file_name="attention_benchmark.csv", mime="text/csv",
                           on_click="ignore", key="bench_csv")
    page_downloads(page="benchmark")


render()
