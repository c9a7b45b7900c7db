"""The model view's build against a plain forward of the same model, side by side in one run (issue 33: goal <= 2x).

For each model found (GPT-2 folders under ``$ATTENTION_LAB_GPT2_DIR``, SmolLM2 from its wheel), on the same T token
ids, interleaved repeats of:

- **forward**: ``model(idx)`` under ``torch.no_grad()``, the plain forward (all positions' logits);
- **walk**: ``walk_layers`` without a view, what a page keeps to show a layer later (the layers' inputs);
- **explicit**: the same walk with every layer's attention through the book's explicit path with a trace, the
  weights handed to a callback that does nothing;
- **model view**: ``dashboard.state.models.model_view`` with its caches emptied, what the page pays for a new text
  (the explicit walk plus each head's scores and max-pooled thumbnail).

Without GPT-2 weights on the machine, ``--stand-in`` writes a random GPT-2-small-shaped folder (``transformers``'
``GPT2Config()``, ~500 MB; the compute is that of real weights) to a temporary folder, deleted afterwards.

    python -m bench.model_view --stand-in              # GPT-2-small shape and SmolLM2, T = 1,024, one thread
    python -m bench.model_view --tokens 256 1024 --reps 5
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MAKE_STAND_IN = """
import sys, torch
from transformers import GPT2Config, GPT2LMHeadModel
torch.manual_seed(123)
GPT2LMHeadModel(GPT2Config()).save_pretrained(sys.argv[1])
"""


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def bench_model(name: str, T: int, reps: int) -> dict[str, list[float]]:
    """Seconds of each way over ``reps`` interleaved repeats (after one warm-up round)."""
    import torch

    from attn_core.models.traced import walk_layers
    from dashboard.state import models

    lm = models.model(name)
    vocab = lm.cfg["vocab_size"]
    T = min(T, lm.cfg["context_length"])
    ids = tuple(torch.randint(0, vocab, (T,), generator=torch.Generator().manual_seed(T)).tolist())
    idx = torch.tensor([ids])

    def forward() -> None:
        with torch.no_grad():
            lm(idx)

    ways = {"forward": forward, "walk": lambda: walk_layers(lm, idx),
            "explicit": lambda: walk_layers(lm, idx, on_layer=lambda i, w: None),
            "model view": lambda: models.model_view(models.handle(name), ids)}
    times: dict[str, list[float]] = {k: [] for k in ways}
    for r in range(reps + 1):
        for k, fn in ways.items():
            models._VIEWS.clear()  # a new text: nothing kept (not timed)
            models._WALKS.clear()
            dt = timed(fn)
            if r:  # round 0 warms up
                times[k].append(dt)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, nargs="+", default=[1024])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (the app uses 1)")
    ap.add_argument("--stand-in", action="store_true", help="write a random GPT-2-small-shaped folder to time")
    ap.add_argument("--models", nargs="*", help="names as the sidebar lists them (default: every model found)")
    args = ap.parse_args()
    tmp = None
    if args.stand_in:
        tmp = Path(tempfile.mkdtemp(prefix="model_view_bench_"))
        print("writing a random GPT-2-small-shaped folder ...", flush=True)
        subprocess.run([sys.executable, "-c", MAKE_STAND_IN, str(tmp / "gpt2")], check=True)
        os.environ["ATTENTION_LAB_GPT2_DIR"] = str(tmp)
    try:
        import torch

        torch.set_num_threads(args.threads)
        from dashboard.state import models

        names = args.models or [f.name for f in models.found()]
        print(f"torch {torch.__version__}, {args.threads} thread(s), {args.reps} interleaved repeats, medians")
        print(f"{'model':<24} {'T':>5} {'forward':>9} {'walk':>9} {'explicit':>9} {'model view':>11} "
              f"{'view/forward':>13}")
        for name in names:
            for T in args.tokens:
                t = {k: statistics.median(v) for k, v in bench_model(name, T, args.reps).items()}
                print(f"{name:<24} {T:>5} {t['forward']:>8.2f}s {t['walk']:>8.2f}s {t['explicit']:>8.2f}s "
                      f"{t['model view']:>10.2f}s {t['model view'] / t['forward']:>12.2f}x", flush=True)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
