"""Time and peak memory over T: the chapter's explicit attention, our tiled loop (attn_core.attention.flash) and SDPA.

Each (implementation, T) runs in a fresh process so its peak memory is its own: the peak resident set
(ru_maxrss) during the timed runs minus the one before them, with the inputs already allocated. Times are
the median of repeats after a warm-up; ratios are to SDPA at the same T, from the same run.

    python -m bench.flash                      # T = 256 ... 8,192, causal, 4 heads, head_dim 64
    python -m bench.flash --smoke              # tiny, for CI
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

IMPLEMENTATIONS = ("explicit", "tiled", "sdpa")


def _explicit(q, k, v):
    import torch

    attn_scores = q @ k.transpose(2, 3) / q.shape[-1] ** 0.5  # (b, h, T, T): the whole matrix
    mask_bool = torch.triu(torch.ones(q.shape[2], q.shape[2], dtype=torch.bool), diagonal=1)
    attn_weights = torch.softmax(attn_scores.masked_fill(mask_bool, -torch.inf), dim=-1)
    return attn_weights @ v


def one(impl: str, T: int, heads: int, head_dim: int, block: int, reps: int) -> dict:
    """Run ``impl`` at ``T`` in this process: median ms and peak extra MB."""
    import torch
    import torch.nn.functional as F

    from attn_core.attention.flash import flash_attention

    torch.set_num_threads(max(1, torch.get_num_threads()))
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, heads, T, head_dim, generator=g) for _ in range(3))
    run = {"explicit": lambda: _explicit(q, k, v),
           "tiled": lambda: flash_attention(q, k, v, block_q=block, block_k=block),
           "sdpa": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)}[impl]
    small = [t[:, :, :block] for t in (q, k, v)]  # warm the kernels without raising the peak
    {"explicit": lambda: _explicit(*small), "tiled": lambda: flash_attention(*small, block_q=block, block_k=block),
     "sdpa": lambda: F.scaled_dot_product_attention(*small, is_causal=True)}[impl]()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    times = []
    with torch.inference_mode():
        for _ in range(reps):
            t0 = time.perf_counter()
            out = run()
            times.append((time.perf_counter() - t0) * 1e3)
            del out
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"impl": impl, "T": T, "ms": statistics.median(times), "peak_mb": max(0, peak - before) / 1024}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--T", type=int, nargs="+", default=[256, 512, 1024, 2048, 4096, 8192])
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--block", type=int, default=128, help="block_q = block_k of the tiled loop")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--smoke", action="store_true", help="T = 64, 128 and one repeat")
    ap.add_argument("--one", nargs=2, metavar=("IMPL", "T"), help=argparse.SUPPRESS)  # a child process's job
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(one(args.one[0], int(args.one[1]), args.heads, args.head_dim, args.block, args.reps)))
        return
    Ts, reps, block = ([64, 128], 1, 32) if args.smoke else (args.T, args.reps, args.block)
    print(f"causal attention, b 1, {args.heads} heads, head_dim {args.head_dim}, tiles of {block} x {block}, "
          f"median of {reps}; peak = extra resident memory while running (MB)")
    print(f"{'T':>6} | {'explicit ms':>11} {'tiled ms':>9} {'SDPA ms':>8} | {'tiled/SDPA':>10} | "
          f"{'explicit MB':>11} {'tiled MB':>8} {'SDPA MB':>8} | {'explicit/tiled MB':>17}")
    for T in Ts:
        row = {}
        for impl in IMPLEMENTATIONS:
            cmd = [sys.executable, "-m", "bench.flash", "--one", impl, str(T), "--heads", str(args.heads),
                   "--head-dim", str(args.head_dim), "--block", str(block), "--reps", str(reps)]
            done = subprocess.run(cmd, capture_output=True, text=True, cwd=Path(__file__).resolve().parent.parent,
                                  check=True)
            row[impl] = json.loads(done.stdout.strip().splitlines()[-1])
        e, t, s = row["explicit"], row["tiled"], row["sdpa"]
        ratio = e["peak_mb"] / t["peak_mb"] if t["peak_mb"] > 0 else float("inf")
        print(f"{T:>6} | {e['ms']:>11.1f} {t['ms']:>9.1f} {s['ms']:>8.1f} | {t['ms'] / s['ms']:>9.1f}x | "
              f"{e['peak_mb']:>11.1f} {t['peak_mb']:>8.1f} {s['peak_mb']:>8.1f} | {ratio:>16.1f}x")


if __name__ == "__main__":
    main()
