"""The modern variants side by side in one run: time and peak memory vs T, explicit and efficient paths, a forward
and one cached decode step, each as a ratio to multi-head attention; then the book's KV-cache numbers.

Variants (d = 768, 12 heads, batch 1, float32, CPU threads as set): MHA, GQA with 4 K/V heads, MQA, MHA with a
sliding window of 256, MLA with a 96-wide latent (d / 8). Peak memory is the tensors allocated during the call
(torch's CPU profiler's allocation events), not the process's RSS.

    python -m bench.variants                     # T = 128 256 512 1024 2048 4096
    python -m bench.variants --sizes 128 512 --reps 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from attn_core import MultiHeadAttention, Trace  # noqa: E402
from attn_core.attention.kv_cache import LayerCache  # noqa: E402
from attn_core.attention.modern import GroupedQueryAttention, MultiHeadLatentAttention  # noqa: E402
from attn_core.labs.kv_cost import PRESETS, kv_cost_rows  # noqa: E402

D, HEADS = 768, 12
VARIANTS: dict[str, Callable[[int], torch.nn.Module]] = {
    "MHA": lambda T: MultiHeadAttention(D, D, T, 0.0, HEADS),
    "GQA (4 K/V)": lambda T: GroupedQueryAttention(D, D, T, 0.0, HEADS, 4),
    "MQA": lambda T: GroupedQueryAttention(D, D, T, 0.0, HEADS, 1),
    "SWA (W=256)": lambda T: MultiHeadAttention(D, D, T, 0.0, HEADS, window=256),
    "MLA (latent 96)": lambda T: MultiHeadLatentAttention(D, D, T, 0.0, HEADS, D // 8),
}


def timed(fn: Callable[[], object], reps: int) -> float:
    """Median seconds of ``fn`` over ``reps`` runs after one warm-up."""
    fn()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def peak_mb(fn: Callable[[], object]) -> float:
    """The most memory the tensors allocated during ``fn`` held at once, in MB (CPU profiler's events)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    live = peak = 0
    for event in sorted(prof.events(), key=lambda e: e.time_range.start):
        live += event.cpu_memory_usage
        peak = max(peak, live)
    return peak / 1e6


def measure(module: torch.nn.Module, T: int, reps: int) -> tuple[float, float, float, float]:
    """(explicit forward, efficient forward, one cached decode step over T keys: seconds; peak MB of the traced
    forward) for one module."""
    x = torch.randn(1, T, D)
    with torch.no_grad():
        explicit = timed(lambda: module(x, Trace(copy=False)), reps)
        efficient = timed(lambda: module(x), reps)
        cache = LayerCache()
        module(x, cache=cache)  # the prompt fills the cache
        keys, values = cache.keys, cache.values
        step = torch.randn(1, 1, D)

        def decode() -> None:  # one new token over T cached ones (the cache restored each time)
            cache.keys, cache.values = keys, values
            module(step, cache=cache)

        decode_s = timed(decode, reps * 5)
        peak = peak_mb(lambda: module(x, Trace(copy=False)))
    return explicit, efficient, decode_s, peak


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[128, 256, 512, 1024, 2048, 4096])
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args(argv)
    torch.manual_seed(123)
    print(f"d = {D}, {HEADS} heads, batch 1, float32, torch {torch.__version__}, {torch.get_num_threads()} threads; "
          f"median of {args.reps}; ratio = MHA's time / this one's (> 1: faster than MHA)")
    head = (f"{'T':>5} {'variant':<16} {'explicit fwd':>13} {'efficient fwd':>14} {'decode step':>12} {'peak MB':>8}"
            "   (explicit / efficient / decode)")
    print(head + "\n" + "-" * len(head))
    for T in args.sizes:
        base: dict[str, float] = {}
        for name, make in VARIANTS.items():
            explicit, efficient, decode_s, peak = measure(make(T + 1).eval(), T, args.reps)
            times = {"explicit": explicit, "efficient": efficient, "decode": decode_s}
            if name == "MHA":
                base = times
            ratios = " / ".join(f"{base[k] / times[k]:4.2f}" for k in times)
            print(f"{T:>5} {name:<16} {explicit * 1e3:10.2f} ms {efficient * 1e3:11.2f} ms {decode_s * 1e3:9.3f} ms "
                  f"{peak:8.1f}   ratios to MHA {ratios}")
    llama = PRESETS["Llama-3-8B-like (32 layers, 4096-d, bf16)"]
    print(f"\nKV cache of {llama.name} at {llama.context:,} tokens (the book: 17.18 GB MHA, 4.29 GB GQA, "
          "3.14 GB MHA + SWA, 0.78 GB GQA + SWA):")
    for row in kv_cost_rows(llama, llama.context):
        print(f"  {row.name:<24} {row.total_bytes / 1e9:8.2f} GB  {row.ratio:6.2f}x smaller than MHA")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
