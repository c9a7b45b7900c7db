"""GPT-2 in the book's GPTModel: load time, process memory, and traced forward time as T grows.

Without ``--source`` a random GPT-2-small-shaped checkpoint (``transformers``' ``GPT2Config()``, ~500 MB)
is written to a temporary folder by a child process and deleted afterwards, so this process's memory
holds only what ``load_gpt2`` keeps. Memory is the resident set (VmRSS) and its peak (VmHWM, reset
before each phase through ``/proc/self/clear_refs``); Linux only.

    python -m bench.pretrained                       # random GPT-2 small, T = 16, 64, 256, 1024
    python -m bench.pretrained --source ~/gpt2       # a real folder (config.json + model.safetensors)
    python -m bench.pretrained --tokens 16 64        # fewer lengths
    python -m bench.pretrained --threads 1           # steadier on a machine others are using

What a trace holds: per traced layer, four (batch, 12, T, T) float32 tensors (scores before the mask, masked,
scaled, weights; the eval-mode dropout step shares the weights), 48 MB each at T = 1024, plus ~20 small
(T, 768) ones: ~214 MB a layer, ~2.6 GB for all 12 layers of GPT-2 small. Trace one layer
(``model(idx, trace=trace, trace_layers={k})``): it costs about what the untraced forward costs.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MAKE_CHECKPOINT = """
import sys, torch
from transformers import GPT2Config, GPT2LMHeadModel
torch.manual_seed(123)
GPT2LMHeadModel(GPT2Config()).save_pretrained(sys.argv[1])
"""


def status_mb(field: str) -> float:
    """A VmRSS / VmHWM line of /proc/self/status, in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def reset_peak() -> None:
    gc.collect()
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS


def trace_mb(trace) -> float:
    """The memory a trace's tensors hold, each storage counted once (views share their base's)."""
    storages = {}
    for step in trace:
        s = step.tensor.untyped_storage()
        storages[s.data_ptr()] = s.nbytes()
    return sum(storages.values()) / 2**20


def best_of(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", help="a GPT-2 folder or .safetensors file (default: a random GPT-2 small)")
    ap.add_argument("--tokens", type=int, nargs="+", default=[16, 64, 256, 1024])
    ap.add_argument("--layer", type=int, default=5, help="the layer traced alone (default 5)")
    ap.add_argument("--threads", type=int, help="torch threads (default: torch's); 1 is steadier on a shared machine")
    ap.add_argument("--repeats", type=int, default=3, help="forward times are the best of this many (default 3)")
    args = ap.parse_args()

    tmp = None
    source = args.source
    if source is None:
        tmp = Path(tempfile.mkdtemp(prefix="gpt2-bench-"))
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", MAKE_CHECKPOINT, str(tmp)], check=True, capture_output=True)
        size = (tmp / "model.safetensors").stat().st_size
        print(f"random GPT-2 small written to {tmp} in {time.perf_counter() - start:.1f} s ({size / 1e6:.0f} MB)")
        source = tmp
    try:
        import torch

        from attn_core import Trace, load_model
        from attn_core.models.registry import family

        if args.threads:
            torch.set_num_threads(args.threads)
        print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, load average "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        print(family("gpt2").describe(Path(source)))
        rss0 = status_mb("VmRSS")
        reset_peak()
        start = time.perf_counter()
        model = load_model(source)
        load_s = time.perf_counter() - start
        gc.collect()
        rss1, peak = status_mb("VmRSS"), status_mb("VmHWM")
        start = time.perf_counter()
        again = load_model(source)
        again_ms = (time.perf_counter() - start) * 1e3
        assert again is model
        weights_mb = sum(p.numel() * p.element_size() for p in model.parameters()) / 2**20
        print(f"load: {load_s:.2f} s; RSS {rss0:.0f} MB before (torch imported) -> {rss1:.0f} MB after "
              f"(+{rss1 - rss0:.0f} MB; parameters {weights_mb:.0f} MB), peak during load {peak:.0f} MB; "
              f"second call (shared) {again_ms:.2f} ms")

        n_layers = model.cfg["n_layers"]
        with torch.no_grad():
            model(torch.zeros(1, 8, dtype=torch.long), trace=Trace(copy=False))  # warm up kernels and allocator
        print(f"\nforward, batch 1, no grad: plain (fused attention), traced layer {args.layer} only "
              f"(trace_layers), traced all {n_layers}; Trace(copy=False) as the pipeline makes it; best of repeats")
        print(f"{'T':>5} {'plain':>9} {'1 layer':>9} {'all':>9} {'1-layer trace':>14} {'full trace':>11}")
        for T in args.tokens:
            torch.manual_seed(0)
            idx = torch.randint(0, model.cfg["vocab_size"], (1, T))
            repeats = args.repeats
            with torch.no_grad():
                plain = best_of(lambda idx=idx: model(idx), repeats)
                one = best_of(lambda idx=idx: model(idx, trace=Trace(copy=False), trace_layers={args.layer}),
                              repeats)
                one_trace = Trace(copy=False)
                model(idx, trace=one_trace, trace_layers={args.layer})
                one_mb = trace_mb(one_trace)
                if T == max(args.tokens):
                    big = [f"{st.name.split('.att.')[-1]} {st.tensor.nbytes / 2**20:.0f}" for st in one_trace
                           if st.tensor.nbytes >= 2**20]
                    breakdown = f"one layer's trace at T={T}, steps of 1 MB or more (MB): {', '.join(big)}"
                del one_trace
                full = best_of(lambda idx=idx: model(idx, trace=Trace(copy=False)), repeats)
                full_trace = Trace(copy=False)
                model(idx, trace=full_trace)
                full_mb = trace_mb(full_trace)
                del full_trace
            print(f"{T:>5} {plain * 1e3:>7.0f}ms {one * 1e3:>7.0f}ms {full * 1e3:>7.0f}ms {one_mb:>11.1f} MB "
                  f"{full_mb:>8.1f} MB")
        print(breakdown)
        gc.collect()
        end = status_mb("VmRSS")
        ctypes.CDLL("libc.so.6").malloc_trim(0)  # glibc: give freed heap pages back
        print(f"\nRSS at the end, every trace freed: {end:.0f} MB; after malloc_trim(0) {status_mb('VmRSS'):.0f} MB "
              "(what glibc kept of freed memory, not a leak)")
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
