"""Reading GPT-2's weights as Hugging Face stores them (``config.json`` + ``model.safetensors``) into the book's
``GPTModel``: the safetensors header checked before any tensor is read, the tensors' names and shapes, and
chapter 5's ``load_weights_into_gpt``. The GPT-2 family (sizes, config, finding, downloading) uses these.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import torch
import torch.nn as nn

from attn_core.messages import Problem
from attn_core.models.gpt import GPTModel

WEIGHTS_FILE = "model.safetensors"
CONFIG_FILE = "config.json"
FLOAT_DTYPES = ("F32", "F16", "BF16")  # read as float32
MAX_HEADER_BYTES = 100_000_000  # safetensors' own limit


def resolve_source(source: str | os.PathLike) -> tuple[Path, Path | None]:
    """(the weights file, its config.json or None) for a GPT-2 folder or a ``.safetensors`` file."""
    path = Path(source).expanduser()
    if not path.exists():
        raise Problem("{path} does not exist: give a GPT-2 folder (config.json + model.safetensors) or a "
                      ".safetensors file", path=path)
    if path.is_dir():
        weights = path / WEIGHTS_FILE
        if not weights.is_file():
            other = sorted(p.name for p in path.glob("*.safetensors")) + sorted(
                p.name for p in path.glob("pytorch_model*.bin"))
            hint = (f"; it holds {', '.join(other)}: this loader reads the single-file {WEIGHTS_FILE}"
                    if other else "")
            raise Problem("{path} holds no {weights_file} (a GPT-2 folder holds {config_file} and {weights_file}, as "
                          "Hugging Face's GPT-2 repositories ship them){hint}", path=path, weights_file=WEIGHTS_FILE,
                          config_file=CONFIG_FILE, hint=hint)
    elif path.suffix == ".safetensors":
        weights = path
    else:
        raise Problem("{path} is neither a folder nor a .safetensors file", path=path)
    config = weights.parent / CONFIG_FILE
    return weights, (config if config.is_file() else None)


def read_header(path: Path) -> dict[str, tuple[str, tuple[int, ...]]]:
    """The tensors a safetensors file declares, ``{key: (dtype, shape)}``, after checking that the
    header is one and the file is exactly as long as the header says (a cut-off download is not)."""
    size = path.stat().st_size
    with path.open("rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise Problem("{path} is {size} bytes long: too short to be a safetensors file (is it empty, or did the "
                          "download stop?)", path=path, size=size)
        (n,) = struct.unpack("<Q", head)
        if n > min(MAX_HEADER_BYTES, size - 8):
            raise Problem("{path} is not a safetensors file: its first 8 bytes do not give the length of a header "
                          "inside the file (a different format, or damaged)", path=path)
        raw = f.read(n)
    try:
        header = json.loads(raw)
        if not isinstance(header, dict):
            raise TypeError
    except (UnicodeDecodeError, json.JSONDecodeError, TypeError):
        raise Problem("{path} is not a safetensors file: its header is not a JSON table of tensors (a different "
                      "format, or damaged)", path=path) from None
    header.pop("__metadata__", None)
    tensors: dict[str, tuple[str, tuple[int, ...]]] = {}
    end = 0
    try:
        for key, info in header.items():
            tensors[key] = (str(info["dtype"]), tuple(int(d) for d in info["shape"]))
            end = max(end, int(info["data_offsets"][1]))
    except (KeyError, TypeError, ValueError, IndexError):
        raise Problem("{path} is not a safetensors file: its header does not describe tensors", path=path) from None
    if size < 8 + n + end:
        raise Problem("{path} is cut short: it has {size:,} bytes but its header describes {want:,} (the download "
                      "or copy stopped early): download it again", path=path, size=size, want=8 + n + end)
    if size > 8 + n + end:
        raise Problem("{path} is damaged: it has {extra:,} bytes more than its header describes", path=path,
                      extra=size - 8 - n - end)
    return tensors


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
    """Hugging Face name -> key in the file: the LM-head model class writes ``transformer.h.0...``, the bare model
    class (and OpenAI's own upload) writes ``h.0...``; both are accepted."""
    return {k.removeprefix("transformer."): k for k in keys}


def assign(left: torch.Tensor, right: torch.Tensor) -> nn.Parameter:
    """The book's ``assign``: a parameter holding a float32, contiguous copy of ``right``, shapes checked.

    Always a copy: safetensors maps the file into memory, and a parameter backed by the map would change,
    or crash the process, when the file is overwritten in place."""
    if left.shape != right.shape:
        raise Problem("Shape mismatch. Left: {left}, Right: {right}", left=left.shape, right=right.shape)
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


class Params(dict):
    """The file's tensors by Hugging Face name, read on first use (one tensor in memory at a time
    beside the model, not the whole file twice)."""

    def __init__(self, f, names: dict[str, str]):
        super().__init__()
        self.f, self.names = f, names

    def __missing__(self, key: str) -> torch.Tensor:
        return self.f.get_tensor(self.names[key])
