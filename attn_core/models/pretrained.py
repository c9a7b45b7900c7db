"""OpenAI's GPT-2 weights in the book's ``GPTModel`` (chapter 5, "Loading pretrained weights").

    python -m attn_core.models.pretrained download [gpt2|gpt2-medium|gpt2-large|gpt2-xl] [--dir D]
    python -m attn_core.models.pretrained check [D]      # verify a folder (default: every one found here)
    python -m attn_core.models.pretrained list           # the GPT-2 sizes found on this machine

``load_gpt2(source)`` reads Hugging Face's GPT-2 layout (``config.json`` + ``model.safetensors``, as
``openai-community/gpt2`` ships it) the way the book's ``load_weights_into_gpt`` does: Conv1D weights
transposed, ``c_attn`` split into ``W_query`` / ``W_key`` / ``W_value``, ``qkv_bias=True``, the output
head tied to ``wte``. Every problem with the files is a ``ValueError`` naming the file and what is wrong.

``load_gpt2_shared`` loads each file once per process and hands every caller the same model (eval mode,
no gradients, no dropout): callers only read it. ``find_gpt2`` lists the sizes present locally (a folder
named by ``$ATTENTION_LAB_GPT2_DIR`` or by the caller, then the Hugging Face cache, without network).
``huggingface_hub`` is imported only to download or to look in its cache.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import struct
import sys
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn as nn

from attn_core.models.gpt import GPTModel

ENV_VAR = "ATTENTION_LAB_GPT2_DIR"  # a GPT-2 folder, or a folder of gpt2/, gpt2-medium/, ... folders
WEIGHTS_FILE = "model.safetensors"
CONFIG_FILE = "config.json"
GPT2_FILES = (CONFIG_FILE, WEIGHTS_FILE)

# name -> (emb_dim, n_layers, n_heads), the four sizes OpenAI released
GPT2_SIZES: dict[str, tuple[int, int, int]] = {
    "gpt2": (768, 12, 12),
    "gpt2-medium": (1024, 24, 16),
    "gpt2-large": (1280, 36, 20),
    "gpt2-xl": (1600, 48, 25),
}
HF_REPOS = {name: f"openai-community/{name}" for name in GPT2_SIZES}
LEGACY_REPOS = {name: name for name in GPT2_SIZES}  # the ids before the rename; old caches use them

# Tensors some writers add that GPTModel does not need: the causal-mask buffers of old transformers
# versions, and the output head, which GPT-2 ties to wte.
IGNORED_KEY = re.compile(r"(h\.\d+\.attn\.(bias|masked_bias)|lm_head\.weight)")
FLOAT_DTYPES = ("F32", "F16", "BF16")  # read as float32
MAX_HEADER_BYTES = 100_000_000  # safetensors' own limit


@dataclass(frozen=True)
class GPT2Files:
    """What ``check_gpt2`` found: the files, the book-style config and the size."""

    weights: Path
    config_file: Path | None  # None: no config.json beside the weights (the config came from the shapes)
    cfg: dict  # GPTModel's config (vocab_size, context_length, emb_dim, n_heads, n_layers, drop_rate, qkv_bias)
    num_params: int  # parameters, the tied output head counted once
    name: str | None  # "gpt2", "gpt2-medium", ... or None for another GPT-2 shape

    def describe(self) -> str:
        c = self.cfg
        return (f"{self.name or 'a GPT-2-shaped model'}: {self.num_params:,} parameters, {c['n_layers']} layers x "
                f"{c['n_heads']} heads, {c['emb_dim']} wide, {c['context_length']:,} positions, "
                f"{c['vocab_size']:,} tokens")


def size_name(cfg: dict) -> str | None:
    """``"gpt2"`` ... ``"gpt2-xl"`` when ``cfg`` has one of the released shapes, else None."""
    if cfg.get("vocab_size") != 50257 or cfg.get("context_length") != 1024:
        return None
    shape = (cfg.get("emb_dim"), cfg.get("n_layers"), cfg.get("n_heads"))
    return next((name for name, s in GPT2_SIZES.items() if s == shape), None)


def shape_words(cfg: dict) -> str:
    """A GPT-2 config's size in words, e.g. "3 layers × 4 heads, 48 wide" (what a folder holds, whatever its name)."""
    return f"{cfg['n_layers']} layers × {cfg['n_heads']} heads, {cfg['emb_dim']} wide"


def how_to_get_gpt2(name: str = "gpt2", why: str = "GPT-2 weights are not on this machine") -> str:
    """One sentence: ``why``, then how to get a GPT-2 folder onto a machine without network and how to name it."""
    return (f"{why}: on a computer with internet run "
            f"`python -m attn_core.models.pretrained download {name} --dir gpt2-weights` (or save `config.json` and "
            f"`model.safetensors` of `{HF_REPOS.get(name, HF_REPOS['gpt2'])}` from huggingface.co into a folder "
            f"`{name}`), copy the folder here and name it in the environment variable `{ENV_VAR}` "
            f"(it then shows in the app's Weights choice).")


# --- reading the files --------------------------------------------------------------------------

def resolve_source(source: str | os.PathLike) -> tuple[Path, Path | None]:
    """(the weights file, its config.json or None) for a GPT-2 folder or a ``.safetensors`` file."""
    path = Path(source).expanduser()
    if not path.exists():
        raise ValueError(f"{path} does not exist: give a GPT-2 folder (config.json + model.safetensors) "
                         f"or a .safetensors file")
    if path.is_dir():
        weights = path / WEIGHTS_FILE
        if not weights.is_file():
            other = sorted(p.name for p in path.glob("*.safetensors")) + sorted(
                p.name for p in path.glob("pytorch_model*.bin"))
            hint = (f"; it holds {', '.join(other)}: this loader reads the single-file {WEIGHTS_FILE}"
                    if other else "")
            raise ValueError(f"{path} holds no {WEIGHTS_FILE} (a GPT-2 folder holds {CONFIG_FILE} and "
                             f"{WEIGHTS_FILE}, as openai-community/gpt2 ships them){hint}")
    elif path.suffix == ".safetensors":
        weights = path
    else:
        raise ValueError(f"{path} is neither a folder nor a .safetensors file")
    config = weights.parent / CONFIG_FILE
    return weights, (config if config.is_file() else None)


def read_header(path: Path) -> dict[str, tuple[str, tuple[int, ...]]]:
    """The tensors a safetensors file declares, ``{key: (dtype, shape)}``, after checking that the
    header is one and the file is exactly as long as the header says (a cut-off download is not)."""
    size = path.stat().st_size
    with path.open("rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise ValueError(f"{path} is {size} bytes long: too short to be a safetensors file (is it empty, "
                             "or did the download stop?)")
        (n,) = struct.unpack("<Q", head)
        if n > min(MAX_HEADER_BYTES, size - 8):
            raise ValueError(f"{path} is not a safetensors file: its first 8 bytes do not give the length of a "
                             "header inside the file (a different format, or damaged)")
        raw = f.read(n)
    try:
        header = json.loads(raw)
        if not isinstance(header, dict):
            raise TypeError
    except (UnicodeDecodeError, json.JSONDecodeError, TypeError):
        raise ValueError(f"{path} is not a safetensors file: its header is not a JSON table of tensors "
                         "(a different format, or damaged)") from None
    header.pop("__metadata__", None)
    tensors: dict[str, tuple[str, tuple[int, ...]]] = {}
    end = 0
    try:
        for key, info in header.items():
            tensors[key] = (str(info["dtype"]), tuple(int(d) for d in info["shape"]))
            end = max(end, int(info["data_offsets"][1]))
    except (KeyError, TypeError, ValueError, IndexError):
        raise ValueError(f"{path} is not a safetensors file: its header does not describe tensors") from None
    if size < 8 + n + end:
        raise ValueError(f"{path} is cut short: it has {size:,} bytes but its header describes {8 + n + end:,} "
                         "(the download or copy stopped early): download it again")
    if size > 8 + n + end:
        raise ValueError(f"{path} is damaged: it has {size - 8 - n - end:,} bytes more than its header describes")
    return tensors


def read_config(path: Path) -> dict:
    """A Hugging Face ``config.json`` for GPT-2 -> ``GPTModel``'s config; ``ValueError`` for anything else."""
    try:
        hf = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path} is not a readable JSON config ({e})") from None
    if not isinstance(hf, dict):
        raise ValueError(f"{path} is not a model config (a JSON object with model_type)")
    if hf.get("model_type") != "gpt2":
        raise ValueError(f"{path} describes a {hf.get('model_type')!r} model, not GPT-2 "
                         "(model_type must be 'gpt2')")
    sizes = {}
    for key in ("vocab_size", "n_positions", "n_embd", "n_layer", "n_head"):
        value = hf.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{path} gives {key} = {value!r}; a GPT-2 config needs a whole number of at least 1")
        sizes[key] = value
    # The knobs GPT2Config has that GPTModel computes one way only: refuse a config that sets another.
    fixed = {"activation_function": ("gelu_new", "gelu_pytorch_tanh"), "layer_norm_epsilon": (1e-5,),
             "n_inner": (None, 4 * sizes["n_embd"]), "scale_attn_weights": (True,),
             "scale_attn_by_inverse_layer_idx": (False,), "add_cross_attention": (False,),
             "tie_word_embeddings": (True,)}
    for key, allowed in fixed.items():
        if key in hf and hf[key] not in allowed:
            raise ValueError(f"{path} sets {key} = {hf[key]!r}; the book's GPTModel computes GPT-2 with "
                             f"{key} = {allowed[0]!r}")
    if sizes["n_embd"] % sizes["n_head"]:
        raise ValueError(f"{path}: n_embd ({sizes['n_embd']}) is not divisible by n_head ({sizes['n_head']})")
    return {"vocab_size": sizes["vocab_size"], "context_length": sizes["n_positions"],
            "emb_dim": sizes["n_embd"], "n_heads": sizes["n_head"], "n_layers": sizes["n_layer"],
            "drop_rate": 0.0, "qkv_bias": True}


def expected_shapes(cfg: dict) -> dict[str, tuple[int, ...]]:
    """Every tensor of a GPT-2 of this config, in Hugging Face's names (no ``transformer.`` prefix)."""
    e, v, p = cfg["emb_dim"], cfg["vocab_size"], cfg["context_length"]
    shapes = {"wte.weight": (v, e), "wpe.weight": (p, e), "ln_f.weight": (e,), "ln_f.bias": (e,)}
    for b in range(cfg["n_layers"]):
        shapes |= {
            f"h.{b}.ln_1.weight": (e,), f"h.{b}.ln_1.bias": (e,),
            f"h.{b}.attn.c_attn.weight": (e, 3 * e), f"h.{b}.attn.c_attn.bias": (3 * e,),
            f"h.{b}.attn.c_proj.weight": (e, e), f"h.{b}.attn.c_proj.bias": (e,),
            f"h.{b}.ln_2.weight": (e,), f"h.{b}.ln_2.bias": (e,),
            f"h.{b}.mlp.c_fc.weight": (e, 4 * e), f"h.{b}.mlp.c_fc.bias": (4 * e,),
            f"h.{b}.mlp.c_proj.weight": (4 * e, e), f"h.{b}.mlp.c_proj.bias": (e,),
        }
    return shapes


def strip_prefix(keys: list[str]) -> dict[str, str]:
    """Hugging Face name -> key in the file: ``GPT2LMHeadModel`` writes ``transformer.h.0...``,
    ``GPT2Model`` (and openai-community/gpt2's file) writes ``h.0...``; both are accepted."""
    return {k.removeprefix("transformer."): k for k in keys}


def config_from_shapes(path: Path, tensors: dict[str, tuple[str, tuple[int, ...]]]) -> dict:
    """The config of a bare ``.safetensors`` file without config.json: only the released sizes can be
    told from their shapes (the number of heads is not in any shape)."""
    names = strip_prefix(list(tensors))
    try:
        v, e = tensors[names["wte.weight"]][1]
        p = tensors[names["wpe.weight"]][1][0]
    except (KeyError, ValueError, IndexError):
        raise ValueError(f"{path} has no GPT-2 embeddings (wte.weight, wpe.weight): not a GPT-2 file") from None
    layers = {int(m.group(1)) for k in names if (m := re.match(r"h\.(\d+)\.", k))}
    n_layers = max(layers) + 1 if layers else 0
    heads = next((h for (se, sl, h) in GPT2_SIZES.values() if (se, sl) == (e, n_layers)), None)
    if heads is None:
        raise ValueError(f"{path} has no {CONFIG_FILE} beside it, and its shapes ({n_layers} layers, {e} wide) are "
                         f"not one of {', '.join(GPT2_SIZES)}: put the {CONFIG_FILE} of the same model next to it")
    return {"vocab_size": v, "context_length": p, "emb_dim": e, "n_heads": heads, "n_layers": n_layers,
            "drop_rate": 0.0, "qkv_bias": True}


def check_gpt2(source: str | os.PathLike) -> GPT2Files:
    """Check a GPT-2 folder or ``.safetensors`` file without reading its weights: the header is whole,
    the file as long as it says, the config GPT-2's, every tensor there with the shape the config needs."""
    weights, config_file = resolve_source(source)
    tensors = read_header(weights)
    cfg = read_config(config_file) if config_file else config_from_shapes(weights, tensors)
    names = strip_prefix(list(tensors))
    shapes = expected_shapes(cfg)
    where = f"{config_file} (n_embd={cfg['emb_dim']}, n_layer={cfg['n_layers']})" if config_file else "its shapes"
    missing = [k for k in shapes if k not in names]
    if missing:
        raise ValueError(f"{weights} lacks {len(missing)} of the {len(shapes)} tensors {where} needs, e.g. "
                         f"{', '.join(missing[:3])}: is it the weights of another model?")
    for k, want in shapes.items():
        dtype, got = tensors[names[k]]
        if got != want:
            raise ValueError(f"{weights}: {names[k]} has shape {got}, but {where} needs {want}: the weights and "
                             "the config come from different models")
        if dtype not in FLOAT_DTYPES:
            raise ValueError(f"{weights}: {names[k]} holds {dtype} numbers; GPT-2 weights are floats "
                             f"({', '.join(FLOAT_DTYPES)})")
    extra = [names[k] for k in names if k not in shapes and not IGNORED_KEY.fullmatch(k)]
    if extra:
        raise ValueError(f"{weights} holds {len(extra)} tensors a GPT-2 does not have, e.g. "
                         f"{', '.join(extra[:3])}: is it another model's file?")
    num_params = sum(int(torch.Size(s).numel()) for s in shapes.values())
    return GPT2Files(weights, config_file, cfg, num_params, size_name(cfg))


# --- loading ------------------------------------------------------------------------------------

def assign(left: torch.Tensor, right: torch.Tensor) -> nn.Parameter:
    """The book's ``assign``: a parameter holding a float32, contiguous copy of ``right``, shapes checked.

    Always a copy: safetensors maps the file into memory, and a parameter backed by the map would change,
    or crash the process, when the file is overwritten in place."""
    if left.shape != right.shape:
        raise ValueError(f"Shape mismatch. Left: {left.shape}, Right: {right.shape}")
    return nn.Parameter(right.to(torch.float32, memory_format=torch.contiguous_format, copy=True),
                        requires_grad=False)


def load_weights_into_gpt(gpt: GPTModel, params: dict[str, torch.Tensor]) -> None:
    """Chapter 5's ``load_weights_into_gpt``, from the safetensors names: Conv1D weights are
    (in, out), so they are transposed into ``nn.Linear``'s (out, in); ``c_attn`` holds q, k, v side by side."""
    gpt.pos_emb.weight = assign(gpt.pos_emb.weight, params["wpe.weight"])
    gpt.tok_emb.weight = assign(gpt.tok_emb.weight, params["wte.weight"])

    for b in range(len(gpt.trf_blocks)):
        block = gpt.trf_blocks[b]
        q_w, k_w, v_w = torch.chunk(params[f"h.{b}.attn.c_attn.weight"], 3, dim=-1)
        block.att.W_query.weight = assign(block.att.W_query.weight, q_w.T)
        block.att.W_key.weight = assign(block.att.W_key.weight, k_w.T)
        block.att.W_value.weight = assign(block.att.W_value.weight, v_w.T)

        q_b, k_b, v_b = torch.chunk(params[f"h.{b}.attn.c_attn.bias"], 3, dim=-1)
        block.att.W_query.bias = assign(block.att.W_query.bias, q_b)
        block.att.W_key.bias = assign(block.att.W_key.bias, k_b)
        block.att.W_value.bias = assign(block.att.W_value.bias, v_b)

        block.att.out_proj.weight = assign(block.att.out_proj.weight, params[f"h.{b}.attn.c_proj.weight"].T)
        block.att.out_proj.bias = assign(block.att.out_proj.bias, params[f"h.{b}.attn.c_proj.bias"])

        block.ff.layers[0].weight = assign(block.ff.layers[0].weight, params[f"h.{b}.mlp.c_fc.weight"].T)
        block.ff.layers[0].bias = assign(block.ff.layers[0].bias, params[f"h.{b}.mlp.c_fc.bias"])
        block.ff.layers[2].weight = assign(block.ff.layers[2].weight, params[f"h.{b}.mlp.c_proj.weight"].T)
        block.ff.layers[2].bias = assign(block.ff.layers[2].bias, params[f"h.{b}.mlp.c_proj.bias"])

        block.norm1.scale = assign(block.norm1.scale, params[f"h.{b}.ln_1.weight"])
        block.norm1.shift = assign(block.norm1.shift, params[f"h.{b}.ln_1.bias"])
        block.norm2.scale = assign(block.norm2.scale, params[f"h.{b}.ln_2.weight"])
        block.norm2.shift = assign(block.norm2.shift, params[f"h.{b}.ln_2.bias"])

    gpt.final_norm.scale = assign(gpt.final_norm.scale, params["ln_f.weight"])
    gpt.final_norm.shift = assign(gpt.final_norm.shift, params["ln_f.bias"])
    gpt.out_head.weight = gpt.tok_emb.weight  # weight tying: GPT-2 reuses the token embedding as its head


class _Params(dict):
    """The file's tensors by Hugging Face name, read on first use (one tensor in memory at a time
    beside the model, not the whole file twice)."""

    def __init__(self, f, names: dict[str, str]):
        super().__init__()
        self.f, self.names = f, names

    def __missing__(self, key: str) -> torch.Tensor:
        return self.f.get_tensor(self.names[key])


def load_gpt2(source: str | os.PathLike) -> GPTModel:
    """GPT-2 from a Hugging Face folder (``config.json`` + ``model.safetensors``) or a ``.safetensors``
    file, in the book's ``GPTModel``: eval mode, no gradients, no dropout. ``ValueError`` for bad files."""
    from safetensors import SafetensorError, safe_open

    files = check_gpt2(source)
    with torch.device("meta"):  # no random init of weights that are about to be replaced
        gpt = GPTModel(files.cfg)
    try:
        with safe_open(str(files.weights), framework="pt", device="cpu") as f:
            load_weights_into_gpt(gpt, _Params(f, strip_prefix(list(f.keys()))))
    except SafetensorError as e:
        raise ValueError(f"{files.weights} could not be read as safetensors ({e})") from None
    n = files.cfg["context_length"]
    mask = torch.triu(torch.ones(n, n), diagonal=1)  # the same causal mask for every layer: one copy
    for block in gpt.trf_blocks:
        block.att.mask = mask
    on_meta = [name for name, t in [*gpt.named_parameters(), *gpt.named_buffers()] if t.is_meta]
    if on_meta:
        raise RuntimeError(f"load_weights_into_gpt left {on_meta[:3]} unset")  # a bug here, not in the file
    return gpt.eval()


_SHARED: OrderedDict[Path, tuple[tuple, GPTModel]] = OrderedDict()
_SHARED_LOCK = threading.Lock()  # guards _SHARED, held for dictionary operations only
_LOAD_LOCK = threading.Lock()  # one load at a time: a server's memory holds one file being read, not several
MAX_SHARED = 2  # models kept per process (gpt2-xl alone is ~6 GB)


def file_stamp(path: Path | None) -> tuple:
    """What changes when a file is replaced: size and modification time (None: no file)."""
    if path is None:
        return ()
    st = path.stat()
    return (st.st_size, st.st_mtime_ns)


def _shared_hit(key: Path, stamp: tuple) -> GPTModel | None:
    with _SHARED_LOCK:
        hit = _SHARED.get(key)
        if hit is None or hit[0] != stamp:
            return None
        _SHARED.move_to_end(key)
        return hit[1]


def load_gpt2_shared(source: str | os.PathLike) -> GPTModel:
    """``load_gpt2`` once per process: every caller gets the same model for the same file (keyed by the
    resolved path, its size and mtime, so a replaced file is loaded again). Callers only read it: never
    call ``train()``, move it or change its weights. Loads run one at a time and sessions asking for the
    same file at once share one load; a model already loaded is returned without waiting for a load."""
    weights, config_file = resolve_source(source)
    key = weights.resolve()
    stamp = (file_stamp(weights), file_stamp(config_file))
    if (model := _shared_hit(key, stamp)) is not None:
        return model
    with _LOAD_LOCK:
        if (model := _shared_hit(key, stamp)) is not None:  # loaded while this call waited
            return model
        with _SHARED_LOCK:
            _SHARED.pop(key, None)  # a replaced file: let the old model go before loading the new one
        model = load_gpt2(source)
        with _SHARED_LOCK:
            _SHARED[key] = (stamp, model)
            while len(_SHARED) > MAX_SHARED:
                _SHARED.popitem(last=False)
        return model


def clear_shared() -> None:
    """Forget every shared model (tests; the models go once nobody holds them)."""
    with _SHARED_LOCK:
        _SHARED.clear()


def gpt2_input(text: str, model: GPTModel) -> torch.Tensor:
    """Token ids (1, T) of ``text`` for ``model``; a text longer than its positions is a ``ValueError``."""
    from attn_core.text.tokens import tokenize

    ids = [t.id for t in tokenize(text, max_tokens=model.cfg["context_length"])]
    return torch.tensor([ids])


# --- finding and fetching -----------------------------------------------------------------------

def _folder_name(folder: Path) -> str:
    """A found folder's size name from its config, else the folder's own name (a Hugging Face cache
    snapshot, ``models--owner--name/snapshots/<commit>``, by its repository's name)."""
    own = folder.name
    if folder.parent.name == "snapshots" and folder.parent.parent.name.startswith("models--"):
        own = folder.parent.parent.name.split("--")[-1]
    try:
        return size_name(read_config(folder / CONFIG_FILE)) or own
    except ValueError:
        return own


def _in_folder(folder: Path) -> list[tuple[str, Path]]:
    """GPT-2 folders in ``folder``: itself, or its subfolders (``gpt2/``, ``gpt2-medium/``, ...)."""
    if (folder / WEIGHTS_FILE).is_file():
        return [(_folder_name(folder), folder)]
    if not folder.is_dir():
        return []
    return [(_folder_name(sub), sub) for sub in sorted(folder.iterdir()) if (sub / WEIGHTS_FILE).is_file()]


def _in_hf_cache() -> list[tuple[str, Path]]:
    """The released sizes in the Hugging Face cache, looked up on disk only (never the network)."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return []
    found = []
    for name in GPT2_SIZES:
        for repo in (HF_REPOS[name], LEGACY_REPOS[name]):
            paths = [try_to_load_from_cache(repo, f) for f in GPT2_FILES]
            if all(isinstance(p, str) for p in paths):
                found.append((name, Path(paths[1]).parent))
                break
    return found


def find_gpt2(folder: str | os.PathLike | None = None) -> list[tuple[str, Path]]:
    """The GPT-2 folders on this machine as ``(name, path)``: in ``folder`` (e.g. typed in the app's
    sidebar), in ``$ATTENTION_LAB_GPT2_DIR``, then in the Hugging Face cache, each once. The files are not
    checked here (``load_gpt2`` says what is wrong); empty: show ``how_to_get_gpt2()``."""
    places = [Path(p).expanduser() for p in (folder, os.environ.get(ENV_VAR)) if p]
    found: list[tuple[str, Path]] = []
    seen: set[Path] = set()
    for name, path in [x for p in places for x in _in_folder(p)] + _in_hf_cache():
        real = (path / WEIGHTS_FILE).resolve()
        if real not in seen:
            seen.add(real)
            found.append((name, path))
    return found


def download(name: str = "gpt2", folder: str | os.PathLike | None = None) -> Path:
    """Fetch ``config.json`` and ``model.safetensors`` of a GPT-2 size with ``huggingface_hub`` (progress
    bar; an interrupted download resumes) into the Hugging Face cache, or into ``folder/name``; then check
    them. Without network: ``ValueError`` saying how to bring the folder here."""
    if name not in HF_REPOS:
        raise ValueError(f"unknown GPT-2 size {name!r}: choose one of {', '.join(HF_REPOS)}")
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import HfHubHTTPError
    except ImportError:
        raise ValueError("downloading needs the huggingface_hub package: pip install huggingface_hub") from None
    local_dir = Path(folder).expanduser() / name if folder is not None else None
    try:
        path = snapshot_download(HF_REPOS[name], allow_patterns=list(GPT2_FILES), local_dir=local_dir)
    except (OSError, HfHubHTTPError) as e:
        from huggingface_hub import constants

        if constants.HF_HUB_OFFLINE:
            reason = "HF_HUB_OFFLINE is set"
        elif isinstance(e, HfHubHTTPError) and e.response is not None:
            reason = f"huggingface.co answered {e.response.status_code}"
        else:
            reason = "huggingface.co cannot be reached from here"
        raise ValueError(how_to_get_gpt2(name, why=f"Could not download {HF_REPOS[name]} ({reason})")) from None
    check_gpt2(path)
    return Path(path)


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (see the module's docstring); problems are one plain line and exit status 1."""
    ap = argparse.ArgumentParser(prog="python -m attn_core.models.pretrained", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    d = sub.add_parser("download", help="fetch a GPT-2 size from Hugging Face, then check it")
    d.add_argument("name", nargs="?", default="gpt2", choices=list(HF_REPOS))
    d.add_argument("--dir", help="put the files in DIR/<name> instead of the Hugging Face cache")
    c = sub.add_parser("check", help="verify a GPT-2 folder (default: every one found here)")
    c.add_argument("folder", nargs="?")
    sub.add_parser("list", help="the GPT-2 folders found here")
    args = ap.parse_args(argv)
    if args.command == "download":
        try:
            path = download(args.name, args.dir)
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        print(f"ok: {path}: {check_gpt2(path).describe()}")
        if args.dir:
            print(f"use it with: {ENV_VAR}={Path(args.dir).expanduser().resolve()}")
        return 0
    if args.command == "check" and args.folder:
        folder = Path(args.folder).expanduser()
        # a GPT-2 folder or file itself, else a folder of gpt2/, gpt2-medium/, ... folders
        targets = _in_folder(folder) if folder.is_dir() and not (folder / WEIGHTS_FILE).exists() else []
        targets = targets or [(folder.name, folder)]
    else:
        targets = find_gpt2()
    if not targets:
        print(how_to_get_gpt2(), file=sys.stderr)
        return 1
    if args.command == "list":
        for name, path in targets:
            print(f"{name}\t{path}")
        return 0
    failed = 0
    for _, path in targets:
        try:
            print(f"ok: {path}: {check_gpt2(path).describe()}")
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0

if __name__ == "__main__":
    sys.exit(main())
