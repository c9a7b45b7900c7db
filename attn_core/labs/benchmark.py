"""Timing every multi-head attention implementation on one device: shared by bench/ and the
dashboard's Benchmark page (which adds only the progress bar and charts).

All implementations compute the same causal multi-head attention with the same weights (taken
from one seeded MultiHeadAttention), so differences are the implementation's alone. Each time is
the median of repeated runs after warm-up; on CUDA each run is timed with CUDA events. The repeats
are interleaved: every round times each implementation once, in rotating order, so a burst of load
slows all of them alike, and one round's times can be compared pairwise (``benchmark_verdict``).
A repeat calls a fast implementation several times (at least ``MIN_REPEAT_MS`` per repeat), so the
timer's resolution and one scheduler hiccup do not decide a 0.05 ms result.
"""

from __future__ import annotations

import json
import queue
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn as nn

from attn_core.attention.classes import MultiHeadAttention, MultiHeadAttentionWrapper
from attn_core.attention.efficient import MultiHeadAttentionCombinedQKV, sdpa_attention
from attn_core.attention.masks import causal_mask
from attn_core.devices import pick_device
from attn_core.labs.benchmark_verdict import NOISY_IQR, describe_scaling, noisy_rows, quartiles  # noqa: F401 - re-exported
from attn_core.labs.lab import DTYPES
from attn_core.messages import N_, Problem

IMPLEMENTATIONS = (
    "MultiHeadAttentionWrapper",
    "MultiHeadAttention (explicit)",
    "MultiHeadAttention (efficient)",
    "combined QKV (efficient)",
    "torch.nn.MultiheadAttention",
    "raw SDPA",
)
BASELINE = "raw SDPA"


@dataclass(frozen=True)
class Size:
    """A benchmark shape: batch, tokens, embedding width (d_in = d_out) and heads."""

    name: str
    batch: int
    num_tokens: int
    d: int
    num_heads: int


SIZES = {  # names marked for translation: the results keep the English name, a page shows it translated
    "book": Size(N_("book demo (d 3, 1 head)"), 2, 6, 3, 1),
    "small": Size(N_("small"), 4, 128, 256, 4),
    "medium": Size(N_("medium"), 8, 256, 768, 12),
    "124M": Size("GPT-2 small", 8, 1024, 768, 12),  # the book's GPT_CONFIG_124M: a model name, kept as written
}


@dataclass
class Result:
    implementation: str
    size: str
    batch: int
    num_tokens: int
    d: int
    num_heads: int
    device: str
    dtype: str
    pass_: str  # "forward" or "forward+backward"
    ms: float  # median milliseconds
    ratio_to_sdpa: float | None = None  # filled in once the baseline of the same run is known
    peak_mb: float | None = None  # CUDA only
    ms_min: float | None = None  # fastest repeat
    ms_max: float | None = None  # slowest repeat
    reps: int = 0  # repeats measured (after warm-up)
    ms_q1: float | None = None  # first and third quartile of the repeats: the noise the verdict reads
    ms_q3: float | None = None
    times: list[float] | None = None  # each repeat's milliseconds, in round order (paired across implementations)
    calls: int = 1  # calls timed together in one repeat (fast implementations), the time is per call

    @property
    def spread(self) -> float:
        """(slowest - fastest) / median of the repeats: 0.1 = the repeats varied by 10% of the median."""
        if self.ms_min is None or self.ms_max is None or not self.ms:
            return 0.0
        return (self.ms_max - self.ms_min) / self.ms

    def row(self) -> dict:
        d = asdict(self)
        d["pass"] = d.pop("pass_")
        return d


def build(name: str, size: Size, device: torch.device, dtype: torch.dtype, seed: int = 123) -> Callable:
    """A callable x -> output for implementation ``name``, with weights shared across implementations."""
    torch.manual_seed(seed)
    mha = MultiHeadAttention(size.d, size.d, size.num_tokens, 0.0, size.num_heads, efficient=False)
    mha = mha.to(device=device, dtype=dtype).eval()
    if name == "MultiHeadAttention (explicit)":
        return mha
    if name == "MultiHeadAttention (efficient)":
        fast = MultiHeadAttention(size.d, size.d, size.num_tokens, 0.0, size.num_heads, efficient=True)
        fast.load_state_dict(mha.state_dict())
        return fast.to(device=device, dtype=dtype).eval()
    if name == "combined QKV (efficient)":
        return MultiHeadAttentionCombinedQKV.from_multihead(mha).eval()
    if name == "MultiHeadAttentionWrapper":
        torch.manual_seed(seed)
        wrapper = MultiHeadAttentionWrapper(size.d, size.d // size.num_heads, size.num_tokens, 0.0, size.num_heads)
        return wrapper.to(device=device, dtype=dtype).eval()
    if name == "torch.nn.MultiheadAttention":
        ref = nn.MultiheadAttention(size.d, size.num_heads, bias=True, batch_first=True)
        with torch.no_grad():
            ref.in_proj_weight.copy_(torch.cat([mha.W_query.weight, mha.W_key.weight, mha.W_value.weight]))
            ref.in_proj_bias.zero_()
            ref.out_proj.load_state_dict(mha.out_proj.state_dict())
        ref = ref.to(device=device, dtype=dtype).eval()
        mask = causal_mask(size.num_tokens, device=device)
        return lambda x: ref(x, x, x, attn_mask=mask, is_causal=True, need_weights=False)[0]
    if name == "raw SDPA":
        w = [mha.W_query.weight, mha.W_key.weight, mha.W_value.weight, mha.out_proj.weight]
        b_out = mha.out_proj.bias
        return lambda x: sdpa_attention(x, *w, b_out, size.num_heads)
    raise Problem("unknown implementation {name!r}: choose from {implementations}", name=name,
                  implementations=", ".join(IMPLEMENTATIONS))


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def time_once(fn: Callable, x: torch.Tensor, backward: bool, device: torch.device, number: int = 1) -> float:
    """Milliseconds per call, over ``number`` calls (and backwards) timed together; CUDA events on CUDA."""
    if backward:
        def step():
            fn(x).float().sum().backward()
    else:
        def step():
            with torch.no_grad():
                fn(x)
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(number):
            step()
        end.record()
        torch.cuda.synchronize(device)
        return start.elapsed_time(end) / number
    _sync(device)
    t = time.perf_counter()
    for _ in range(number):
        step()
    _sync(device)
    return (time.perf_counter() - t) * 1e3 / number


MIN_REPEAT_MS = 2.0  # one repeat lasts at least this long (several calls of a fast implementation)
MAX_CALLS = 200


def measure(fn: Callable, x: torch.Tensor, backward: bool, device: torch.device, warmup: int = 2,
            reps: int = 5, budget_s: float | None = None) -> float:
    """Median milliseconds over ``reps`` runs after ``warmup`` (stops early past ``budget_s``)."""
    return statistics.median(measure_all(fn, x, backward, device, warmup, reps, budget_s))


def measure_all(fn: Callable, x: torch.Tensor, backward: bool, device: torch.device, warmup: int = 2,
                reps: int = 5, budget_s: float | None = None) -> list[float]:
    """The milliseconds of each of up to ``reps`` runs after ``warmup`` (stops early past ``budget_s``)."""
    return measure_rounds({"fn": fn}, x, backward, device, warmup, reps, budget_s)[0]["fn"]


def measure_rounds(fns: dict[str, Callable], x: torch.Tensor, backward: bool, device: torch.device,
                   warmup: int = 2, reps: int = 5, budget_s: float | None = None,
                   ) -> tuple[dict[str, list[float]], dict[str, int], dict[str, float | None]]:
    """Time every function in ``fns`` once per round, in rotating order, for up to ``reps`` rounds.

    Returns (each one's milliseconds per round, calls per repeat, peak CUDA MB of its warm-up). Past ``budget_s``
    no new round starts once 3 are done; one that would end past twice the budget does not start at all (one
    round is always measured). A slow first warm-up call (over a 20th of the budget) is the only warm-up."""
    t0 = time.perf_counter()
    calls: dict[str, int] = {}
    peaks: dict[str, float | None] = {}
    for name, fn in fns.items():
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        for _ in range(max(1, warmup)):
            t = time_once(fn, x, backward, device)
            if budget_s is not None and t > budget_s * 1e3 / 20:
                break
        peaks[name] = torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else None
        calls[name] = max(1, min(MAX_CALLS, int(MIN_REPEAT_MS / max(t, 1e-4)) + 1)) if t < MIN_REPEAT_MS else 1
    names = list(fns)
    times: dict[str, list[float]] = {n: [] for n in names}
    round_s = 0.0
    for r in range(max(1, reps)):
        spent = time.perf_counter() - t0
        if r and budget_s is not None and (spent > budget_s and r >= 3 or spent + round_s > 2 * budget_s):
            break
        start = time.perf_counter()
        for name in names[r % len(names):] + names[:r % len(names)]:  # nobody always goes first (or last)
            times[name].append(time_once(fns[name], x, backward, device, calls[name]))
        round_s = time.perf_counter() - start
    return times, calls, peaks


def run(sizes: Iterable[Size], implementations: Iterable[str] = IMPLEMENTATIONS, device: str = "cpu",
        dtype: str = "float32", passes: Iterable[str] = ("forward",), warmup: int = 2, reps: int = 5,
        budget_s: float | None = None, on_result: Callable[[Result, int, int], None] | None = None) -> list[Result]:
    """Time every implementation x size x pass; ratios are to raw SDPA in the same rounds.

    ``budget_s`` bounds the whole run: each size and pass gets an equal share of what is left, and rounds
    stop early when it is spent. ``on_result(result, done, total)`` reports progress (a size and pass at once:
    its implementations are measured together, round by round)."""
    dev = pick_device(device)
    if dtype not in DTYPES:
        raise Problem("unknown dtype {dtype!r}: choose one of {dtypes}", dtype=dtype, dtypes=", ".join(DTYPES))
    dt = DTYPES[dtype]
    impls = list(dict.fromkeys([BASELINE, *implementations]))  # the baseline first: a run cut short keeps ratios
    groups = [(s, p) for s in sizes for p in passes]
    total = len(groups) * len(impls)
    t_start = time.perf_counter()
    results: list[Result] = []
    for n, (size, pass_) in enumerate(groups):
        share = None if budget_s is None else (budget_s - (time.perf_counter() - t_start)) / (len(groups) - n)
        g = torch.Generator().manual_seed(0)
        x = torch.randn(size.batch, size.num_tokens, size.d, generator=g).to(device=dev, dtype=dt)
        backward = pass_ == "forward+backward"
        fns = {}
        for name in impls:
            fns[name] = build(name, size, dev, dt)
            if not backward and isinstance(fns[name], nn.Module):
                fns[name].requires_grad_(False)
        times, calls, peaks = measure_rounds(fns, x, backward, dev, warmup, reps,
                                             None if share is None else max(share, 0.05))
        base = times[BASELINE]
        for name in impls:
            ts = times[name]
            q1, med, q3 = quartiles(ts)
            ratio = quartiles([a / b for a, b in zip(ts, base)])[1]  # paired by round: the same load
            r = Result(name, size.name, size.batch, size.num_tokens, size.d, size.num_heads, str(dev), dtype, pass_,
                       med, ratio, peaks[name], min(ts), max(ts), len(ts), q1, q3, ts, calls[name])
            results.append(r)
            if on_result:
                on_result(r, len(results), total)
    return results


def format_table(results: list[Result]) -> str:
    """A plain-text table, one block per size and pass, fastest first."""
    lines = []
    keys = list(dict.fromkeys((r.size, r.batch, r.num_tokens, r.d, r.num_heads, r.pass_) for r in results))
    for size, b, t, d, h, pass_ in keys:
        rows = sorted((r for r in results if (r.size, r.pass_) == (size, pass_)), key=lambda r: r.ms)
        r0 = rows[0]
        lines.append(f"\n{size} (b={b}, T={t}, d={d}, h={h}) · {pass_} · {r0.device} · {r0.dtype}")
        lines.append(f"  {'implementation':<32}{'median ms':>12}{'x raw SDPA':>12}" + (
            f"{'peak MB':>10}" if r0.peak_mb is not None else ""))
        for r in rows:
            peak = f"{r.peak_mb:>10.1f}" if r.peak_mb is not None else ""
            lines.append(f"  {r.implementation:<32}{r.ms:>12.3f}{r.ratio_to_sdpa:>12.2f}{peak}")
    return "\n".join(lines)


class BenchmarkTimeout(TimeoutError):
    """The child process was still running at the deadline and was killed (results so far stand)."""


def _pump(stream, lines: queue.Queue) -> None:
    """Copy a child's output lines into ``lines`` (on a thread, so the reader can wait with a timeout)."""
    try:
        for line in stream:
            lines.put(line)
    except (OSError, ValueError):  # the pipe closed under us when the child was killed
        pass
    lines.put(None)


def run_isolated(spec: dict, timeout_s: float = 60.0, *, argv: list[str] | None = None) -> Iterator[Result]:
    """``run(**spec)`` in a fresh Python process, yielding each result as it arrives.

    Timing inside a busy server process is skewed by its other threads (they take the GIL for
    milliseconds at a time); a child process has the interpreter to itself. The child is killed
    ``timeout_s`` after the start even when it prints nothing (then :class:`BenchmarkTimeout` is
    raised after the results that did arrive); closing the generator (a Streamlit rerun cancels the
    page) kills it too. ``argv`` replaces the child's command (tests)."""
    deadline = time.monotonic() + timeout_s
    sizes = [asdict(s) for s in spec.pop("sizes")]
    payload = json.dumps({**spec, "sizes": sizes})
    root = str(Path(__file__).resolve().parents[2])
    argv = argv or [sys.executable, "-c", "from attn_core.labs.benchmark import _child_main; _child_main()"]
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=root)
    lines: queue.Queue = queue.Queue()
    try:
        assert proc.stdin and proc.stdout
        try:
            proc.stdin.write(payload)
            proc.stdin.close()
        except BrokenPipeError:  # the child exited without reading: its return code says why
            pass
        threading.Thread(target=_pump, args=(proc.stdout, lines), daemon=True).start()
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BenchmarkTimeout(f"stopped after {timeout_s:.0f} s")
            try:
                line = lines.get(timeout=remaining)
            except queue.Empty:
                raise BenchmarkTimeout(f"stopped after {timeout_s:.0f} s") from None
            if line is None:
                break
            yield Result(**json.loads(line))
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            raise BenchmarkTimeout(f"stopped after {timeout_s:.0f} s") from None
        if proc.returncode != 0:
            err = proc.stderr.read() if proc.stderr else ""
            raise RuntimeError(f"benchmark process failed: {err.strip().splitlines()[-1] if err else proc.returncode}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _child_main() -> None:
    spec = json.loads(sys.stdin.read())
    spec["sizes"] = [Size(**s) for s in spec["sizes"]]

    def emit(r: Result, done: int, total: int) -> None:
        print(json.dumps(asdict(r)), flush=True)

    run(**spec, on_result=emit)
