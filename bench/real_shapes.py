"""The 0.5-0.6B GGUF goals on files of the real models' shapes with random weights: load time (cold and warm), the
Model view at T = 64, and one process's memory with the model loaded.

The files are written here (no download): each real model's config and metadata (layers, widths, heads, K/V heads,
head_dim, FFN, context length, RoPE bases, Gemma 3's sliding window), every matrix quantized to Q8_0 as the common
downloads are (norms and biases F32), and a tokenizer of the real vocabulary's *size*: a synthetic byte-level BPE
vocabulary with the merges that build it for Qwen (plus the special tokens and llama.cpp's ``[PAD…]`` fill up to
151,936), a scored SentencePiece-style one for Gemma (262,144 pieces, no merges: the loader rebuilds them). What the
costs depend on (shapes, dtypes, vocabulary size) is real; the weights' values are not.

    python -m bench.real_shapes                      # write the 3 files to a temp dir, measure twice, delete them
    python -m bench.real_shapes --models qwen3-0.6b --dir /tmp/real --keep
    python -m bench.real_shapes --write-only --layers 2 --vocab 2000 --dir /tmp/tiny   # the same metadata, tiny

Each load runs in a fresh process through the app's own path (``$ATTENTION_LAB_GGUF_DIR`` -> ``models.found()`` ->
``models.model(name)``) with its own ``$ATTENTION_LAB_CACHE``: cold (no de-quantized cache), then warm.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import gguf  # noqa: E402

from attn_core.models.gguf_tokenizer import BYTES  # noqa: E402
from attn_core.models.gguf_weights import expected_shapes  # noqa: E402
from tests.gguf_fixtures import add_metadata, add_spm_vocab, finish, gguf_name  # noqa: E402

QWEN_CHAT = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
# Qwen2.5's added tokens (Qwen3 adds <think>, </think> and the tool tokens): CONTROL (3) or USER_DEFINED (4)
QWEN_ADDED = [("<|endoftext|>", 3), ("<|im_start|>", 3), ("<|im_end|>", 3), ("<|object_ref_start|>", 3),
              ("<|object_ref_end|>", 3), ("<|box_start|>", 3), ("<|box_end|>", 3), ("<|quad_start|>", 3),
              ("<|quad_end|>", 3), ("<|vision_start|>", 3), ("<|vision_end|>", 3), ("<|vision_pad|>", 3),
              ("<|image_pad|>", 3), ("<|video_pad|>", 3), ("<tool_call>", 4), ("</tool_call>", 4),
              ("<|fim_prefix|>", 4), ("<|fim_middle|>", 4), ("<|fim_suffix|>", 4), ("<|fim_pad|>", 4),
              ("<|repo_name|>", 4), ("<|file_sep|>", 4)]
QWEN3_ADDED = QWEN_ADDED + [("<tool_response>", 4), ("</tool_response>", 4), ("<think>", 4), ("</think>", 4)]
GEMMA_SPECIAL = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "[multimodal]"]

# the real models' config.json (Hugging Face), in the book's names; "bpe": the tokenizer's regular tokens
# (tokenizer.json's vocabulary before its added tokens), "added": its added tokens
MODELS: dict[str, dict] = {
    "qwen2.5-0.5b": {
        "arch": "qwen2", "name": "Qwen2.5 0.5B Instruct", "size_label": "0.5B", "stem": "qwen2.5-0.5b-instruct-q8_0",
        "cfg": {"vocab_size": 151_936, "context_length": 32_768, "emb_dim": 896, "n_heads": 14, "head_dim": 64,
                "n_layers": 24, "hidden_dim": 4_864, "n_kv_groups": 2, "rope_base": 1_000_000.0, "rms_eps": 1e-6},
        "bpe": 151_643, "added": QWEN_ADDED},
    "qwen3-0.6b": {
        "arch": "qwen3", "name": "Qwen3 0.6B", "size_label": "0.6B", "stem": "Qwen3-0.6B-Q8_0",
        "cfg": {"vocab_size": 151_936, "context_length": 40_960, "emb_dim": 1_024, "n_heads": 16, "head_dim": 128,
                "n_layers": 28, "hidden_dim": 3_072, "n_kv_groups": 8, "rope_base": 1_000_000.0, "rms_eps": 1e-6},
        "bpe": 151_643, "added": QWEN3_ADDED},
    "gemma-3-270m": {
        "arch": "gemma3", "name": "Gemma 3 270m It", "size_label": "270M", "stem": "gemma-3-270m-it-Q8_0",
        "cfg": {"vocab_size": 262_144, "context_length": 32_768, "emb_dim": 640, "n_heads": 4, "head_dim": 256,
                "n_layers": 18, "hidden_dim": 2_048, "n_kv_groups": 1, "rope_base": 1_000_000.0, "rms_eps": 1e-6},
        "window": 512, "unused": 6_242},  # sliding window 512, every 6th layer global (llama.cpp's default)
}
GOALS = {"cold": 20.0, "warm": 3.0, "view": 3.0, "class_mb": 3_500.0}


def grow_vocab(alphabet: list[str], n: int, seed: int, max_len: int = 24) -> tuple[list[str], list[tuple[str, str]]]:
    """``n`` tokens: the ``alphabet``, then tokens each made of two earlier ones (the merge that builds it, in
    order), the left one any earlier token: a mean length of ~6 characters at 150,000 tokens, as trained BPEs have."""
    rng = np.random.default_rng(seed)
    tokens, merges, seen = list(alphabet[:n]), [], set(alphabet[:n])
    base = len(tokens)
    while len(tokens) < n:
        m = len(tokens)
        lefts = (m * rng.random(4_096)).astype(int)
        rights = np.where(rng.random(4_096) < 0.7, rng.integers(0, base, 4_096),
                          (m * rng.random(4_096) ** 6).astype(int))
        for a, b in zip(lefts, rights):
            left, right = tokens[a], tokens[b]
            token = left + right
            if len(token) > max_len or token in seen:
                continue
            seen.add(token)
            tokens.append(token)
            merges.append((left, right))
            if len(tokens) == n:
                break
    return tokens, merges


def qwen_tokenizer(w: gguf.GGUFWriter, spec: dict, n_vocab: int) -> None:
    """A byte-level BPE vocabulary as Qwen's files hold it: regular tokens with their merges, the added tokens,
    then ``[PAD…]`` tokens (UNUSED) up to the model's vocabulary size."""
    added = spec["added"]
    n_bpe = min(spec["bpe"], n_vocab - len(added))
    tokens, merges = grow_vocab(list(BYTES), n_bpe, seed=1)
    types = [1] * len(tokens) + [t for _tok, t in added]
    tokens += [tok for tok, _t in added]
    pads = [f"[PAD{i}]" for i in range(len(tokens), n_vocab)]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens + pads)
    w.add_token_types(types + [5] * len(pads))
    w.add_token_merges([f"{a} {b}" for a, b in merges])
    w.add_eos_token_id(n_bpe + 2)  # <|im_end|>
    w.add_pad_token_id(n_bpe)
    w.add_bos_token_id(n_bpe)
    w.add_add_bos_token(False)
    w.add_chat_template(QWEN_CHAT)


def gemma_tokenizer(w: gguf.GGUFWriter, spec: dict, n_vocab: int) -> None:
    """A SentencePiece-style vocabulary as Gemma 3's files hold it: special tokens, 256 byte-fallback tokens,
    scored pieces (``▁`` for a space; runs of spaces stored as spaces), ``<unusedN>`` tokens; no merges."""
    special = GEMMA_SPECIAL + ["<start_of_turn>", "<end_of_turn>"]
    n_unused = min(spec["unused"], n_vocab // 8)
    n_pieces = n_vocab - len(special) - 256 - 30 - n_unused
    # letters, digits, punctuation and 2,000 CJK characters, alone and with a leading space
    chars = [chr(c) for c in range(33, 127)] + [chr(c) for c in range(0x4E00, 0x4E00 + 2_000)]
    pieces, _merges = grow_vocab(chars + ["\u2581" + c for c in chars], n_pieces, seed=2)
    tokens = (special + [f"<0x{b:02X}>" for b in range(256)] + [" " * k for k in range(2, 32)] + pieces
              + [f"<unused{i}>" for i in range(n_unused)])
    add_spm_vocab(w, tokens, [3] * len(special) + [6] * 256 + [1] * (30 + len(pieces)) + [3] * n_unused)


def random_tensor(shape: tuple[int, ...], name: str, rng: np.random.Generator) -> tuple[np.ndarray, object]:
    """A random tensor of ``shape`` as the real files store it: matrices Q8_0, norms (around 1) and biases F32."""
    if len(shape) == 1:
        return (1 + 0.1 * rng.standard_normal(shape, dtype=np.float32) if "norm" in name
                else 0.02 * rng.standard_normal(shape, dtype=np.float32)), None
    data = rng.standard_normal(shape, dtype=np.float32)
    data *= 0.02
    return gguf.quants.quantize(data, gguf.GGMLQuantizationType.Q8_0), gguf.GGMLQuantizationType.Q8_0


def model_cfg(key: str, layers: int | None = None, vocab: int | None = None) -> dict:
    """The config of ``key`` as its file says it (``layers`` / ``vocab``: fewer, for a tiny file of the same
    metadata), in the book's names with the arch's flags."""
    spec = MODELS[key]
    cfg = dict(spec["cfg"], arch=spec["arch"], tied=True, qkv_bias=spec["arch"] == "qwen2",
               qk_norm=spec["arch"] != "qwen2")
    if layers:
        cfg["n_layers"] = layers
    if vocab:
        cfg["vocab_size"] = vocab
    if spec["arch"] == "gemma3":
        cfg["windows"] = [None if (i + 1) % 6 == 0 else spec["window"] for i in range(cfg["n_layers"])]
    return cfg


def write_model(folder: Path, key: str, *, layers: int | None = None, vocab: int | None = None,
                seed: int = 0) -> Path:
    """The GGUF file of ``key`` (:data:`MODELS`) in ``folder``: real metadata, random Q8_0 weights."""
    spec = MODELS[key]
    cfg = model_cfg(key, layers, vocab)
    arch = spec["arch"]
    path = folder / f"{spec['stem']}.gguf"
    w = gguf.GGUFWriter(path, arch)
    add_metadata(w, cfg, arch, window=spec.get("window"), name=spec["name"], size_label=spec["size_label"],
                 file_type=gguf.LlamaFileType.MOSTLY_Q8_0)
    (gemma_tokenizer if arch == "gemma3" else qwen_tokenizer)(w, spec, cfg["vocab_size"])
    rng = np.random.default_rng(seed)
    for name, shape in expected_shapes(cfg).items():
        data, qtype = random_tensor(shape, name, rng)
        w.add_tensor(gguf_name(name, arch), data, raw_dtype=qtype)
    finish(w)
    return path


RSS = """
def rss():
    status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines() if ":" in l)
    return {k: int(status[v].split()[0]) // 1024 for k, v in (("rss_mb", "VmRSS"), ("peak_mb", "VmHWM"))}
"""
LOAD = RSS + r"""
import json, sys, time
from attn_core.models import gguf_tokenizer, gguf_weights
spent = {}
def timed(module, fn_name, label):
    fn = getattr(module, fn_name)
    def wrapper(*a, **k):
        t0 = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            spent[label] = spent.get(label, 0.0) + time.perf_counter() - t0
    setattr(module, fn_name, wrapper)
timed(gguf_weights, "open_gguf", "open")
timed(gguf_weights, "read_tensors", "dequantize")
timed(gguf_tokenizer, "tokenizer_recipe", "tokenizer")
timed(gguf_weights, "read_gguf", "read")
timed(gguf_weights, "cached_weights", "weights")
from dashboard.state import models
spent["imports"] = time.time() - float(sys.argv[1])
t0 = time.perf_counter()
names = [f.name for f in models.found()]
assert sys.argv[2] in names, names
spent["found"] = time.perf_counter() - t0
lm = models.model(sys.argv[2])
spent["load call"] = time.perf_counter() - t0
spent["process"] = time.time() - float(sys.argv[1])
out = {k: round(v, 2) for k, v in spent.items()} | rss()
out["params"] = sum(p.numel() for p in lm.parameters())
print("RESULT", json.dumps(out))
"""

VIEW = RSS + r"""
import json, statistics, sys, time, torch
torch.set_num_threads(int(sys.argv[3]))
from bench.model_view import bench_model
from dashboard.state import models
name, T = sys.argv[1], int(sys.argv[2])
out = {k: round(statistics.median(v), 3) for k, v in bench_model(name, T, 3).items()}
walls, cpus = [], []
for seed in range(3):  # new texts: CPU time is steadier than wall time on a shared machine
    rng = torch.Generator().manual_seed(seed)
    ids = tuple(torch.randint(0, models.model(name).cfg["vocab_size"], (T,), generator=rng).tolist())
    models.clear_caches()
    cpu, wall = time.process_time(), time.perf_counter()
    models.model_view(models.handle(name), ids)
    cpus.append(time.process_time() - cpu)
    walls.append(time.perf_counter() - wall)
out |= {"view cpu": round(min(cpus), 3), "view wall": round(min(walls), 3)} | rss()
print("RESULT", json.dumps(out))
"""


def child(code: str, args: list[str], env: dict) -> dict:
    """Run ``code`` in a fresh Python process; the JSON it prints after ``RESULT``."""
    out = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                         check=False)
    line = next((x for x in out.stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        raise RuntimeError(f"the child failed:\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}")
    return json.loads(line.removeprefix("RESULT "))


def measure(folder: Path, key: str, threads: int) -> dict:
    """Cold and warm load in fresh processes (an empty cache, then the one the cold load wrote), then the Model
    view at T = 64 on ``threads`` threads."""
    stem = MODELS[key]["stem"]
    cache = Path(tempfile.mkdtemp(prefix="real_shapes_cache_", dir=folder))
    env = dict(os.environ, ATTENTION_LAB_GGUF_DIR=str(folder), ATTENTION_LAB_CACHE=str(cache),
               OMP_NUM_THREADS=str(threads), PYTHONPATH=str(ROOT))
    try:
        cold = child(LOAD, [repr(time.time()), stem], env)
        warm = child(LOAD, [repr(time.time()), stem], env)
        view = child(VIEW, [stem, "64", str(threads)], env)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return {"cold": cold, "warm": warm, "view": view}


def verdict(value: float, goal: float) -> str:
    return "pass" if value <= goal else "FAIL"


def report(key: str, m: dict) -> None:
    c, w, v = m["cold"], m["warm"], m["view"]
    print(f"{key}: {c['params'] / 1e6:.0f}M parameters", flush=True)
    print(f"  cold load  {c['process']:6.1f} s from process start (imports {c['imports']:.1f} s, models.found() "
          f"{c['found']:.1f} s, load {c['load call'] - c['found']:.1f} s: GGUF open {c.get('open', 0):.1f}, "
          f"de-quantize {c.get('dequantize', 0):.1f}, tokenizer {c.get('tokenizer', 0):.1f}, cache write "
          f"~{c['weights'] - c.get('read', 0):.1f}); goal <= {GOALS['cold']:.0f} s: "
          f"{verdict(c['process'], GOALS['cold'])}")
    print(f"  warm load  {w['process']:6.1f} s from process start (imports {w['imports']:.1f} s, found "
          f"{w['found']:.1f} s, load {w['load call'] - w['found']:.1f} s); goal <= {GOALS['warm']:.0f} s: "
          f"{verdict(w['process'], GOALS['warm'])} from start, "
          f"{verdict(w['load call'] - w['found'], GOALS['warm'])} for the load")
    print(f"  memory     {v['rss_mb']:6d} MB RSS after the Model view (peak {v['peak_mb']} MB; warm-loaded "
          f"{w['rss_mb']} MB; cold load's peak {c['peak_mb']} MB)")
    print(f"  Model view {v['model view']:6.2f} s at T = 64, median of 3 (forward {v['forward']:.2f} s; best of 3 "
          f"more: {v['view wall']:.2f} s wall, {v['view cpu']:.2f} s CPU); goal <= {GOALS['view']:.0f} s: "
          f"{verdict(v['model view'], GOALS['view'])} (median), {verdict(v['view cpu'], GOALS['view'])} (CPU)",
          flush=True)
    print("RAW", key, json.dumps(m), flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", choices=list(MODELS), default=list(MODELS))
    ap.add_argument("--dir", type=Path, help="where the files go (default: a temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the files (and reuse ones already there)")
    ap.add_argument("--write-only", action="store_true", help="write the files, measure nothing")
    ap.add_argument("--layers", type=int, help="fewer layers (a tiny file of the same metadata)")
    ap.add_argument("--vocab", type=int, help="a smaller vocabulary (a tiny file)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads for the Model view (the app: one a "
                    "session, compute.tune_torch)")
    ap.add_argument("--rounds", type=int, default=2, help="measure each file this many times")
    args = ap.parse_args(argv)
    folder = args.dir or Path(tempfile.mkdtemp(prefix="real_shapes_"))
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    try:
        for key in args.models:
            path = folder / f"{MODELS[key]['stem']}.gguf"
            if not (args.keep and path.is_file()):
                t0 = time.perf_counter()
                path = write_model(folder, key, layers=args.layers, vocab=args.vocab)
                written.append(path)
                print(f"wrote {path} ({path.stat().st_size / 2**20:,.0f} MiB) in {time.perf_counter() - t0:.0f} s",
                      flush=True)
        if args.write_only:
            return 0
        print(f"load average {os.getloadavg()[0]:.1f} / {os.getloadavg()[1]:.1f}", flush=True)
        for r in range(args.rounds):
            for key in args.models:
                print(f"round {r + 1}, load average now {os.getloadavg()[0]:.1f}", flush=True)
                report(key, measure(folder, key, args.threads))
    finally:
        if not args.keep:
            for path in written:
                path.unlink(missing_ok=True)
            if args.dir is None:
                shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
