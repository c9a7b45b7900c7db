"""Every multi-head attention implementation, side by side, on one device.

Median time of repeated runs after warm-up (CUDA events on a GPU), forward and forward+backward,
with each row's ratio to raw SDPA measured in the same run. Sizes go from the book's demo to
GPT-2 small (--full).

    python -m bench.implementations                  # cpu, fp32, book/small/medium
    python -m bench.implementations --full           # + GPT-2 small (b 8, T 1024, d 768, h 12)
    python -m bench.implementations --device cuda    # fp32, bf16 and fp16 on a GPU
    python -m bench.implementations --smoke          # tiny, for CI
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from attn_core import pick_device  # noqa: E402
from attn_core.labs.benchmark import IMPLEMENTATIONS, SIZES, format_table, run  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="auto", help="cpu, cuda, cuda:N, mps or auto (default)")
    ap.add_argument("--dtype", nargs="+", default=None,
                    help="float32 / bfloat16 / float16 (default: float32 on cpu, all three on a GPU)")
    ap.add_argument("--sizes", nargs="+", default=None, choices=list(SIZES))
    ap.add_argument("--full", action="store_true", help="include GPT-2 small (b 8, T 1024, d 768, h 12)")
    ap.add_argument("--passes", nargs="+", default=["forward", "forward+backward"],
                    choices=["forward", "forward+backward"])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--smoke", action="store_true", help="tiny and quick: the book demo only, 1 rep")
    args = ap.parse_args(argv)

    device = pick_device(args.device)
    sizes = args.sizes or (["book"] if args.smoke else ["book", "small", "medium"] + (["124M"] if args.full else []))
    dtypes = args.dtype or (["float32"] if device.type == "cpu" else ["float32", "bfloat16", "float16"])
    reps, warmup = (1, 1) if args.smoke else (args.reps, args.warmup)
    print(f"device {device} · implementations: {', '.join(IMPLEMENTATIONS)}")
    t0 = time.perf_counter()
    for dtype in dtypes:
        results = run([SIZES[s] for s in sizes], device=str(device), dtype=dtype, passes=args.passes,
                      reps=reps, warmup=warmup)
        print(format_table(results))
    print(f"\n(done in {time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
