"""The GPT-2 family: OpenAI's four sizes (or any GPT-2-shaped folder) in the book's ``GPTModel`` (chapter 5,
"Loading pretrained weights"), found in a folder (``$ATTENTION_LAB_GPT2_DIR`` or the sidebar's) or the Hugging
Face cache, never over the network at run time; ``python -m attn_core.models.pretrained download`` fetches them.

``load_gpt2(source)`` reads Hugging Face's GPT-2 layout (:mod:`attn_core.models.hf_weights`) the way the book's
``load_weights_into_gpt`` does. ``load_gpt2_shared`` loads each file once per process and hands every caller the
same model (eval mode, no gradients, no dropout): callers only read it. ``find_gpt2`` lists the folders found.
``huggingface_hub`` is imported only to download or to look in its cache.
"""

from __future__ import annotations

import functools
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn as nn

from attn_core.messages import N_, Msg, Problem, fill
from attn_core.models.family import Family, Found, ModelConfig, Shared, file_stamp, resolved
from attn_core.models.family_book import gpt_config, gpt_layer_attention
from attn_core.models.gpt import GPTModel
from attn_core.models.hf_weights import (
    CONFIG_FILE,
    FLOAT_DTYPES,
    WEIGHTS_FILE,
    Params,
    expected_shapes,
    load_weights_into_gpt,
    read_header,
    resolve_source,
    strip_prefix,
)
from attn_core.models.no_init import empty_weights
from attn_core.text.tokens import bpe_tokenizer

ENV_VAR = "ATTENTION_LAB_GPT2_DIR"  # a GPT-2 folder, or a folder of gpt2/, gpt2-medium/, ... folders
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

SIZE_LABELS = {"gpt2": "GPT-2 small", "gpt2-medium": "GPT-2 medium", "gpt2-large": "GPT-2 large",
               "gpt2-xl": "GPT-2 XL"}

# Tensors some writers add that GPTModel does not need: the causal-mask buffers of old transformers
# versions, and the output head, which GPT-2 ties to wte.
IGNORED_KEY = re.compile(r"(h\.\d+\.attn\.(bias|masked_bias)|lm_head\.weight)")


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


GET_GPT2 = N_("{why}: on a computer with internet run `python -m attn_core.models.pretrained download {name} --dir "
              "gpt2-weights` (or save `config.json` and `model.safetensors` of `{repo}` from huggingface.co into a "
              "folder `{name}`), copy the folder here and name it in the environment variable `{env_var}` (it then "
              "shows in the app's Weights choice).")
NO_GPT2 = Msg("GPT-2 weights are not on this machine")  # the usual ``why``: translated where the sentence is shown


def how_to_get_gpt2(name: str = "gpt2", why: str | Msg = NO_GPT2) -> str:
    """One sentence: ``why``, then how to get a GPT-2 folder onto a machine without network and how to name it."""
    return fill(GET_GPT2, dict(why=why, name=name, repo=HF_REPOS.get(name, HF_REPOS["gpt2"]), env_var=ENV_VAR))


def read_config(path: Path) -> dict:
    """A Hugging Face ``config.json`` for GPT-2 -> ``GPTModel``'s config; ``ValueError`` for anything else."""
    try:
        hf = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise Problem("{path} is not a readable JSON config ({e})", path=path, e=e) from None
    if not isinstance(hf, dict):
        raise Problem("{path} is not a model config (a JSON object with model_type)", path=path)
    if hf.get("model_type") != "gpt2":
        raise Problem("{path} describes a {model_type} model, not GPT-2 (model_type must be 'gpt2')", path=path,
                      model_type=repr(hf.get('model_type')))
    sizes = {}
    for key in ("vocab_size", "n_positions", "n_embd", "n_layer", "n_head"):
        value = hf.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise Problem("{path} gives {key} = {value}; a GPT-2 config needs a whole number of at least 1", path=path,
                          key=key, value=repr(value))
        sizes[key] = value
    # The knobs GPT2Config has that GPTModel computes one way only: refuse a config that sets another.
    fixed = {"activation_function": ("gelu_new", "gelu_pytorch_tanh"), "layer_norm_epsilon": (1e-5,),
             "n_inner": (None, 4 * sizes["n_embd"]), "scale_attn_weights": (True,),
             "scale_attn_by_inverse_layer_idx": (False,), "add_cross_attention": (False,),
             "tie_word_embeddings": (True,)}
    for key, allowed in fixed.items():
        if key in hf and hf[key] not in allowed:
            raise Problem("{path} sets {key} = {hf}; the book's GPTModel computes GPT-2 with {key} = {allowed}",
                          path=path, key=key, hf=repr(hf[key]), allowed=repr(allowed[0]))
    if sizes["n_embd"] % sizes["n_head"]:
        raise Problem("{path}: n_embd ({n_embd}) is not divisible by n_head ({n_head})", path=path,
                      n_embd=sizes['n_embd'], n_head=sizes['n_head'])
    return {"vocab_size": sizes["vocab_size"], "context_length": sizes["n_positions"],
            "emb_dim": sizes["n_embd"], "n_heads": sizes["n_head"], "n_layers": sizes["n_layer"],
            "drop_rate": 0.0, "qkv_bias": True}


def config_from_shapes(path: Path, tensors: dict[str, tuple[str, tuple[int, ...]]]) -> dict:
    """The config of a bare ``.safetensors`` file without config.json: only the released sizes can be
    told from their shapes (the number of heads is not in any shape)."""
    names = strip_prefix(list(tensors))
    try:
        v, e = tensors[names["wte.weight"]][1]
        p = tensors[names["wpe.weight"]][1][0]
    except (KeyError, ValueError, IndexError):
        raise Problem("{path} has no GPT-2 embeddings (wte.weight, wpe.weight): not a GPT-2 file", path=path) from None
    layers = {int(m.group(1)) for k in names if (m := re.match(r"h\.(\d+)\.", k))}
    n_layers = max(layers) + 1 if layers else 0
    heads = next((h for (se, sl, h) in GPT2_SIZES.values() if (se, sl) == (e, n_layers)), None)
    if heads is None:
        raise Problem("{path} has no {config_file} beside it, and its shapes ({n_layers} layers, {e} wide) are not "
                      "one of {sizes}: put the {config_file} of the same model next to it", path=path,
                      config_file=CONFIG_FILE, n_layers=n_layers, e=e, sizes=', '.join(GPT2_SIZES))
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
        raise Problem("{weights} lacks {n_missing} of the {n_shapes} tensors {where} needs, e.g. {examples}: is it the "
                      "weights of another model?", weights=weights, n_missing=len(missing), n_shapes=len(shapes),
                      where=where, examples=', '.join(missing[:3]))
    for k, want in shapes.items():
        dtype, got = tensors[names[k]]
        if got != want:
            raise Problem("{weights}: {tensor} has shape {got}, but {where} needs {want}: the weights and the config "
                          "come from different models", weights=weights, tensor=names[k], got=got, where=where,
                          want=want)
        if dtype not in FLOAT_DTYPES:
            raise Problem("{weights}: {tensor} holds {dtype} numbers; GPT-2 weights are floats ({floats})",
                          weights=weights, tensor=names[k], dtype=dtype, floats=', '.join(FLOAT_DTYPES))
    extra = [names[k] for k in names if k not in shapes and not IGNORED_KEY.fullmatch(k)]
    if extra:
        raise Problem("{weights} holds {n_extra} tensors a GPT-2 does not have, e.g. {examples}: is it another model's "
                      "file?", weights=weights, n_extra=len(extra), examples=', '.join(extra[:3]))
    num_params = sum(int(torch.Size(s).numel()) for s in shapes.values())
    return GPT2Files(weights, config_file, cfg, num_params, size_name(cfg))



def load_gpt2(source: str | os.PathLike) -> GPTModel:
    """GPT-2 from a Hugging Face folder (``config.json`` + ``model.safetensors``) or a ``.safetensors``
    file, in the book's ``GPTModel``: eval mode, no gradients, no dropout. ``ValueError`` for bad files."""
    from safetensors import SafetensorError, safe_open

    files = check_gpt2(source)
    with empty_weights():  # no random weights drawn only to be replaced
        gpt = GPTModel(files.cfg)
    try:
        with safe_open(str(files.weights), framework="pt", device="cpu") as f:
            load_weights_into_gpt(gpt, Params(f, strip_prefix(list(f.keys()))))
    except SafetensorError as e:
        raise Problem("{weights} could not be read as safetensors ({e})", weights=files.weights, e=e) from None
    n = files.cfg["context_length"]
    mask = torch.triu(torch.ones(n, n), diagonal=1)  # the same causal mask for every layer: one copy
    for block in gpt.trf_blocks:
        block.att.mask = mask
    on_meta = [name for name, t in [*gpt.named_parameters(), *gpt.named_buffers()] if t.is_meta]
    if on_meta:
        raise RuntimeError(f"load_weights_into_gpt left {on_meta[:3]} unset")  # a bug here, not in the file
    gpt.tokenizer = bpe_tokenizer()
    return gpt.eval()


_SHARED = Shared(2)  # models kept per process: the largest GPT-2 is several GB (docs/measurements.md)
MAX_SHARED = 2


def load_gpt2_shared(source: str | os.PathLike) -> GPTModel:
    """``load_gpt2`` once per process: every caller gets the same model for the same file (keyed by the
    resolved path, its size and mtime, so a replaced file is loaded again). Callers only read it: never
    call ``train()``, move it or change its weights. Loads run one at a time and sessions asking for the
    same file at once share one load; a model already loaded is returned without waiting for a load."""
    weights, config_file = resolve_source(source)
    stamp = (file_stamp(weights), file_stamp(config_file))
    return _SHARED.get(resolved(str(weights)), stamp, lambda: load_gpt2(source))


def clear_shared() -> None:
    """Forget every shared model (tests; the models go once nobody holds them)."""
    _SHARED.clear()


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
    """The GPT-2 folders on this machine as ``(name, path)``: in ``folder`` (e.g. typed in the app's sidebar), in
    ``$ATTENTION_LAB_GPT2_DIR``, then in the Hugging Face cache, each once; not checked (``load_gpt2`` is)."""
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
        raise Problem("unknown GPT-2 size {name}: choose one of {sizes}", name=repr(name), sizes=', '.join(HF_REPOS))
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import HfHubHTTPError
    except ImportError:
        raise Problem("downloading needs the huggingface_hub package: pip install huggingface_hub") from None
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
        why = f"Could not download {HF_REPOS[name]} ({reason})"
        raise Problem(GET_GPT2, why=why, name=name, repo=HF_REPOS[name], env_var=ENV_VAR) from None
    check_gpt2(path)
    return Path(path)


@functools.lru_cache(maxsize=32)
def _config_at(path: Path, mtime: float) -> dict | None:
    try:
        return read_config(path)
    except ValueError:
        return None


def folder_config(folder: Path) -> dict | None:
    """The GPT-2 config in ``folder`` (None: none readable), read again when the file changes."""
    path = folder / CONFIG_FILE
    try:
        return _config_at(path, path.stat().st_mtime)
    except OSError:
        return None


def label(name: str, folder: Path | None) -> str:
    """How the sidebar names a GPT-2 folder: its size, or what its config says it holds when that is not the size
    its name says (a small stand-in in a folder named gpt2, issue 33)."""
    cfg = None if folder is None else folder_config(folder)
    if cfg is not None and size_name(cfg) != name:
        return f"GPT-2-shaped: {name} ({shape_words(cfg)})"
    return SIZE_LABELS.get(name, f"GPT-2-shaped: {name}")


class GPT2Family(Family):
    """OpenAI's GPT-2 in the book's GPTModel: learned positions, LayerNorm, multi-head attention with q/k/v biases."""

    name = "gpt2"
    order = 30
    title = "GPT-2"
    env_var = ENV_VAR
    downloads = tuple(HF_REPOS)  # what ``python -m attn_core.models.pretrained download`` fetches

    def find(self, folder: str | os.PathLike | None = None) -> list[Found]:
        order = {name: i for i, name in enumerate(GPT2_SIZES)}
        found = sorted(find_gpt2(folder), key=lambda f: order.get(f[0], len(order)))
        return [self._found(name, path) for name, path in found]

    def _found(self, name: str, path: Path) -> Found:
        return Found(name, path, label(name, path), self.name, Msg("{model} (OpenAI's weights)", model=name))

    def found_at(self, path: Path) -> Found | None:
        if (path.is_dir() and (path / WEIGHTS_FILE).is_file()) or path.suffix == ".safetensors":
            folder = path if path.is_dir() else path.parent
            return self._found(_folder_name(folder), path)
        return None

    def load(self, found: Found) -> nn.Module:
        return load_gpt2_shared(found.path)

    def stamp(self, found: Found) -> tuple:
        weights, _ = resolve_source(found.path)
        return file_stamp(weights)

    def config(self, model: nn.Module) -> ModelConfig:
        size = size_name(model.cfg)
        return gpt_config(model, SIZE_LABELS[size] if size else f"GPT-2-shaped ({shape_words(model.cfg)})",
                          self.title)

    def layer_attention(self, model: nn.Module, layer: int, **knobs: object) -> nn.Module:
        return gpt_layer_attention(model, layer, **knobs)

    def how_to_get(self, name: str = "gpt2") -> Msg:
        return Msg(GET_GPT2, why=NO_GPT2, name=name, repo=HF_REPOS.get(name, HF_REPOS["gpt2"]), env_var=ENV_VAR)

    # the command line (attn_core.models.pretrained)
    def download(self, name: str, folder: str | os.PathLike | None = None) -> Path:
        return download(name, folder)

    def describe(self, path: Path) -> str:
        return check_gpt2(path).describe()

    def folders_in(self, folder: Path) -> list[tuple[str, Path]]:
        """The model folders a folder holds: itself, or its subfolders."""
        return _in_folder(folder)


FAMILY = GPT2Family()
