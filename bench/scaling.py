"""Time and peak memory of the explicit vs the efficient MultiHeadAttention as T grows.

The explicit class materializes (b, num_heads, T, T) scores and weights, so its memory grows as
T^2; the fused SDPA path does not keep that matrix. Peak memory is measured on CUDA with
max_memory_allocated, and on the CPU as the growth of the peak resident set size of a fresh
child process running one forward pass (so one measurement cannot hide another).

    python -m bench.scaling                  # cpu, T = 128 ... 2048, b 1, d 768, 12 heads
    python -m bench.scaling --full           # T up to 4096
    python -m bench.scaling --smoke          # tiny, for CI
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from attn_core import pick_device  # noqa: E402
from attn_core.labs.benchmark import Size, build, measure  # noqa: E402

IMPLS = ("MultiHeadAttention (explicit)", "MultiHeadAttention (efficient)")


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def _child(impl: str, num_tokens: int, d: int, heads: int) -> None:
    """Run one forward pass in this (fresh) process; print its peak memory growth in MB as JSON.

    Large buffers are mmap-ed (MALLOC_MMAP_THRESHOLD_, set by the parent), so freed memory leaves
    the resident set; the kernel's peak-RSS mark (VmHWM) is reset just before the forward pass
    (``echo 5 > /proc/self/clear_refs``), so the peak is that of the pass alone."""
    size = Size("scaling", 1, num_tokens, d, heads)
    fn = build(impl, size, torch.device("cpu"), torch.float32)
    x = torch.randn(1, num_tokens, d)
    with torch.no_grad():
        fn(x[:, :8])  # warm up allocator and kernels on a tiny input
        before = _status_kb("VmRSS")
        Path("/proc/self/clear_refs").write_text("5")
        out = fn(x)
        peak = _status_kb("VmHWM")
    del out
    print(json.dumps({"peak_mb": (peak - before) / 1024}))


def cpu_peak_mb(impl: str, num_tokens: int, d: int, heads: int) -> float | None:
    """Peak memory of one forward pass, measured in a child process (None where Linux's /proc is missing)."""
    if not Path("/proc/self/clear_refs").exists():
        return None
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "131072"}
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", impl, str(num_tokens), str(d),
                          str(heads)], capture_output=True, text=True, check=True, cwd=ROOT, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])["peak_mb"]


def main(argv: list[str] | None = None) -> None:
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--child":
        _child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--tokens", type=int, nargs="+", default=None)
    ap.add_argument("--full", action="store_true", help="T up to 4096")
    ap.add_argument("--d", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args(argv)
    device = pick_device(args.device)
    d, heads = (32, 4) if args.smoke else (args.d, args.heads)
    tokens = args.tokens or ([16, 32] if args.smoke else [128, 256, 512, 1024, 2048] + ([4096] if args.full else []))
    reps = 1 if args.smoke else args.reps
    print(f"device {device} · b 1 · d {d} · {heads} heads · float32 · forward")
    print(f"{'T':>6} | {'explicit ms':>11} | {'efficient ms':>12} | {'speed-up':>8} | {'explicit MB':>11} | "
          f"{'efficient MB':>11} | {'b·h·T² weights MB':>17}")
    print("-" * 95)
    t0 = time.perf_counter()
    for t in tokens:
        size = Size("scaling", 1, t, d, heads)
        x = torch.randn(1, t, d, device=device)
        ms, mb = {}, {}
        for impl in IMPLS:
            fn = build(impl, size, device, torch.float32)
            if device.type == "cuda":
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats(device)
                base = torch.cuda.memory_allocated(device)
            ms[impl] = measure(fn, x, False, device, warmup=1, reps=reps)
            if device.type == "cuda":
                mb[impl] = (torch.cuda.max_memory_allocated(device) - base) / 2**20
            else:
                mb[impl] = cpu_peak_mb(impl, t, d, heads)
            del fn
        e, f = IMPLS
        weights_mb = heads * t * t * 4 / 2**20
        mem = " | ".join(f"{mb[i]:>11.1f}" if mb[i] is not None else f"{'n/a':>11}" for i in IMPLS)
        print(f"{t:>6} | {ms[e]:>11.2f} | {ms[f]:>12.2f} | {ms[e] / ms[f]:>7.2f}x | {mem} | {weights_mb:>17.1f}")
    print(f"\n(done in {time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
