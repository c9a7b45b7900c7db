"""Generation speed of our Qwen3 model against the book's KV-cache ``Qwen3Model`` on the same random weights (a small
synthetic Qwen3: no real file is needed), and of a synthetic Gemma 3 of the same size with its local layers, in one
run on this machine.

    python -m bench.families                 # 1 thread (as the app), 64 new tokens
    python -m bench.families --threads 2 --tokens 128 --layers 12

Measured (wall time and, steadier on a busy machine, this process's CPU time; the ratio is by CPU time):
greedy tokens/s with our KV cache, the book's ``llms_from_scratch.kv_cache.qwen3.Qwen3Model`` with its
``generate_text_simple`` (same weights, same tokens expected), ours without a cache; then our Gemma 3 with and
without its cache (5 of every 6 layers over a window of 512).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from attn_core.models.gpt import generate  # noqa: E402
from attn_core.models.rope_lm import RopeLM  # noqa: E402
from tests.gguf_fixtures import arch_model  # noqa: E402


def timed(fn, repeat: int = 2, clock=time.perf_counter) -> tuple[object, float]:
    """(the last result, the best of ``repeat`` times in seconds by ``clock``)."""
    best, out = float("inf"), None
    for _ in range(repeat):
        start = clock()
        out = fn()
        best = min(best, clock() - start)
    return out, best


def synthetic(args: argparse.Namespace) -> dict:
    """A Qwen3-0.6B-shaped config, narrower and shallower (head_dim 128, grouped K/V heads, tied head)."""
    return {"arch": "qwen3", "vocab_size": args.vocab, "context_length": 2048, "emb_dim": args.emb_dim,
            "n_heads": 8, "head_dim": 128, "n_layers": args.layers, "hidden_dim": 3 * args.emb_dim, "n_kv_groups": 4,
            "rope_base": 1e6, "rms_eps": 1e-6, "tied": True, "qk_norm": True}


def book_model(ours: RopeLM) -> torch.nn.Module:
    """The book's KV-cache Qwen3Model holding our weights (its RMSNorm calls the weight ``scale``)."""
    from llms_from_scratch.kv_cache.qwen3 import Qwen3Model

    c = ours.cfg
    cfg = {k: c[k] for k in ("vocab_size", "context_length", "emb_dim", "n_heads", "n_layers", "hidden_dim",
                             "head_dim", "n_kv_groups", "rope_base")} | {"qk_norm": True, "dtype": torch.float32}
    book = Qwen3Model(cfg)
    book.load_state_dict({k.replace("norm.weight", "norm.scale").replace("norm1.weight", "norm1.scale")
                          .replace("norm2.weight", "norm2.scale"): v for k, v in ours.state_dict().items()})
    return book.eval()


def randomize(model: torch.nn.Module) -> torch.nn.Module:
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(1 + 0.1 * torch.randn_like(p)) if "norm" in name else p.normal_(0, 0.05)
    return model.eval().requires_grad_(False)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=64, help="new tokens per generation (default 64)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1, as the app)")
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--emb-dim", type=int, default=512)
    ap.add_argument("--vocab", type=int, default=32_768)
    ap.add_argument("--prompt-tokens", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=5, help="alternated rounds; the best of each is kept")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    from llms_from_scratch.kv_cache.generate import generate_text_simple as book_generate

    cfg = synthetic(args)
    model = randomize(arch_model(cfg))
    book = book_model(model)
    prompt = torch.randint(0, args.vocab, (1, args.prompt_tokens), generator=torch.Generator().manual_seed(1))
    n = args.tokens
    print(f"synthetic Qwen3: {args.layers} layers, emb_dim {args.emb_dim}, 8 heads x 128 (4 K/V heads), vocab "
          f"{args.vocab:,}; prompt {args.prompt_tokens} tokens, {n} new, {args.threads} thread(s)")
    generate(model, prompt, 2)  # warm-up
    book_generate(book, prompt, 2)
    fns = {"ours, KV cache": lambda: generate(model, prompt, n, use_cache=True),
           "book kv_cache Qwen3Model": lambda: book_generate(book, prompt, n, use_cache=True),
           "ours, no cache": lambda: generate(model, prompt, n, use_cache=False)}
    best = {name: float("inf") for name in fns}
    best_cpu = dict(best)
    outs = {}
    for _round in range(args.rounds):  # alternated, so a busy moment of the machine does not fall on one side
        for name, fn in fns.items():
            start, start_cpu = time.perf_counter(), time.process_time()
            outs[name] = fn()
            best[name] = min(best[name], time.perf_counter() - start)
            best_cpu[name] = min(best_cpu[name], time.process_time() - start_cpu)
    runs = {name: (outs[name], n / best_cpu[name]) for name in fns}
    for name in fns:
        print(f"{name:>26}: {n / best[name]:7.1f} tokens/s wall, {n / best_cpu[name]:7.1f} per CPU second "
              f"(best of {args.rounds}, alternated)")
    ours, book_tps, uncached = (runs[k][1] for k in runs)
    same = all(torch.equal(runs["ours, KV cache"][0], out) for out, _ in runs.values())
    print(f"ours with cache / book's (CPU time: steadier than wall time on a shared machine): {ours / book_tps:.2f}x; "
          f"/ ours uncached: {ours / uncached:.1f}x; same tokens: {same}")

    gemma = randomize(arch_model(cfg | {"arch": "gemma3", "rope_local_base": 10_000.0, "query_pre_attn_scalar": 128.0,
                                        "windows": [None if (i + 1) % 6 == 0 else 512 for i in range(args.layers)]}))
    generate(gemma, prompt, 2)
    for name, cache in (("Gemma 3, KV cache", True), ("Gemma 3, no cache", False)):
        _out, seconds = timed(lambda: generate(gemma, prompt, n, use_cache=cache))  # noqa: B023
        print(f"{name:>26}: {n / seconds:7.1f} tokens/s (best of 2)")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
