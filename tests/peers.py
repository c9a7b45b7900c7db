"""transformers' own loading of a real GGUF file (the peer the model tests compare with), kept on disk between runs.

Reading Gemma 3's or SmolLM2's GGUF file through transformers parses its whole vocabulary in Python and
de-quantizes every tensor in NumPy: most of a minute each time, for the same result on every run. The first run
keeps what transformers built (its config, de-quantized float32 weights and fast tokenizer) under a key of
the file's bytes and the versions of transformers and gguf; later runs load that back, which is lossless. The tests
still compare with transformers' numbers, only not recomputed. ``ATTENTION_LAB_PEER_CACHE`` moves the folder.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from importlib.metadata import version
from pathlib import Path

import torch
from gguf_fixtures import transformers_model


def peer_dir() -> Path:
    root = os.environ.get("ATTENTION_LAB_PEER_CACHE")
    return Path(root).expanduser() if root else Path.home() / ".cache" / "attention-lab" / "peers"


def peer_key(path: Path) -> str:
    """The file's name and a hash of its bytes and of the versions that read it."""
    digest = hashlib.sha256(f"{version('transformers')} {version('gguf')}".encode())
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            digest.update(chunk)
    return f"{path.name.split('.')[0]}-{digest.hexdigest()[:16]}"


def transformers_peer(path: Path):
    """transformers' model (eager attention, float32) and tokenizer of the GGUF file at ``path``."""
    from safetensors.torch import load_model, save_model
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    key = peer_key(path)
    folder = peer_dir() / key
    if (folder / "complete").is_file():
        config = AutoConfig.from_pretrained(folder)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32, attn_implementation="eager")
        load_model(model, folder / "model.safetensors")
        return model.eval(), AutoTokenizer.from_pretrained(folder)
    model, tokenizer = transformers_model(path)
    tmp = peer_dir() / f"{key}.{os.getpid()}.tmp"
    try:
        tmp.mkdir(parents=True)
        # its de-quantized weights as they are (transformers will not save a model it loaded from GGUF), its config
        # without the GGUF note, its fast tokenizer
        save_model(model, str(tmp / "model.safetensors"))
        config = model.config.to_dict()
        config.pop("quantization_config", None)
        type(model.config).from_dict(config).save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / "complete").touch()
        for old in peer_dir().glob(key.rsplit("-", 1)[0] + "-*"):  # the same file under older versions
            if old.is_dir() and not old.name.endswith(".tmp"):
                shutil.rmtree(old, ignore_errors=True)
        os.replace(tmp, folder)
    except OSError:  # another worker kept it first, or a read-only home: this run's peer is still right
        pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return model, tokenizer
