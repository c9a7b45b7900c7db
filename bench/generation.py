"""Generation with and without the KV cache, side by side in one run: tokens per second and the ratio.

The book's bonus material: the 124M model, 200 new tokens, greedy; on a laptop CPU 27 -> 144 tokens/s (~5x).
Here: the same shape with random weights (seed 123; the speed does not depend on the weights), on this machine's
CPU threads, the prompt "Every effort moves you". Both runs must give the same tokens.

    python -m bench.generation                  # 124M shape, 200 tokens
    python -m bench.generation --tokens 50 --small    # a quick look (a 3-layer, 48-wide model)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from attn_core.models.gpt import GPT_CONFIG_124M, GPTModel, generate  # noqa: E402
from attn_core.text.tokens import bpe_encoding  # noqa: E402

SMALL = dict(GPT_CONFIG_124M, n_layers=3, emb_dim=48, n_heads=4, drop_rate=0.0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=200, help="new tokens per run (default 200)")
    ap.add_argument("--small", action="store_true", help="a 3-layer, 48-wide model instead of the 124M shape")
    ap.add_argument("--prompt", default="Every effort moves you")
    args = ap.parse_args(argv)
    cfg = SMALL if args.small else dict(GPT_CONFIG_124M, drop_rate=0.0)
    torch.manual_seed(123)
    model = GPTModel(cfg).eval()
    idx = torch.tensor([bpe_encoding().encode(args.prompt)])
    print(f"model: {sum(p.numel() for p in model.parameters()):,} parameters, {cfg['n_layers']} layers, "
          f"emb_dim {cfg['emb_dim']}; prompt {idx.shape[1]} tokens + {args.tokens} new; "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    generate(model, idx, 2, use_cache=True)  # warm-up: first-call allocations
    results = {}
    for use_cache in (False, True):
        start = time.perf_counter()
        out = generate(model, idx, args.tokens, use_cache=use_cache)
        seconds = time.perf_counter() - start
        results[use_cache] = (out, seconds)
        label = "with" if use_cache else "without"
        print(f"{label:>7} KV cache: {seconds:7.2f} s  {args.tokens / seconds:8.1f} tokens/s")
    same = torch.equal(results[False][0], results[True][0])
    ratio = results[False][1] / results[True][1]
    print(f"speed-up: {ratio:.1f}x (the book: ~5x on a laptop CPU); same tokens: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
