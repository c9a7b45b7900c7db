"""GPT-2 weights in Hugging Face's layout load into the book's GPTModel and compute what transformers
computes; bad files are plain ValueErrors; the shared loader, discovery and the command line. No network:
the models are tiny random GPT-2s made with transformers here."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import huggingface_hub.constants
import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import GPT2Config, GPT2LMHeadModel
from transformers.utils import logging as hf_logging

from attn_core import Trace, tokenize
from attn_core.models import family_gpt2 as pt
from attn_core.models.family_gpt2 import (
    ENV_VAR,
    check_gpt2,
    config_from_shapes,
    find_gpt2,
    how_to_get_gpt2,
    load_gpt2,
    load_gpt2_shared,
)
from attn_core.models.gpt import GPTModel
from attn_core.models.pretrained import main

ROOT = Path(__file__).resolve().parent.parent
hf_logging.set_verbosity_error()  # tiny vocabularies make transformers warn about bos/eos ids

# Two shapes: GPT-2's vocabulary and 1,024 positions at toy width, and an odd one (6 heads of 8).
SHAPES = {
    "vocab50257": {"n_layer": 2, "n_head": 4, "n_embd": 32},
    "odd": {"n_layer": 3, "n_head": 6, "n_embd": 48, "vocab_size": 500, "n_positions": 40},
}


def make_gpt2(folder: Path, seed: int = 0, **sizes) -> GPT2LMHeadModel:
    """A random GPT-2 saved as Hugging Face saves it (transformer.-prefixed keys, tied head not written)."""
    torch.manual_seed(seed)
    model = GPT2LMHeadModel(GPT2Config(**sizes, attn_implementation="eager")).eval()
    model.save_pretrained(folder)
    return model


def strip_and_pad(folder: Path) -> None:
    """Rewrite the weights as openai-community/gpt2's file has them: no ``transformer.`` prefix, plus the
    old causal-mask buffers (``h.N.attn.bias``) GPTModel does not need."""
    path = folder / "model.safetensors"
    tensors = {k.removeprefix("transformer."): v for k, v in load_file(path).items()}
    n_positions = tensors["wpe.weight"].shape[0]
    for k in [k for k in tensors if k.endswith("attn.c_attn.bias")]:
        tensors[k.replace("c_attn.bias", "bias")] = torch.tril(torch.ones(1, 1, n_positions, n_positions))
    save_file(tensors, path, metadata={"format": "pt"})


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict:
    """{(shape, prefixed): (folder, transformers model)} for both shapes, keys with and without the prefix."""
    out = {}
    for i, (shape, sizes) in enumerate(SHAPES.items()):
        folder = tmp_path_factory.mktemp(shape)
        hf = make_gpt2(folder, seed=i, **sizes)
        out[shape, True] = (folder, hf)
        bare = tmp_path_factory.mktemp(shape + "-bare")
        for f in folder.iterdir():
            shutil.copy(f, bare / f.name)
        strip_and_pad(bare)
        out[shape, False] = (bare, hf)
    return out


@pytest.fixture
def tiny(models, tmp_path) -> Path:
    """A private copy of the small GPT-2 folder, free to damage."""
    folder = tmp_path / "gpt2"
    shutil.copytree(models["vocab50257", True][0], folder)
    return folder


@pytest.fixture(autouse=True)
def fresh_shared():
    pt.clear_shared()
    yield
    pt.clear_shared()


@pytest.mark.parametrize("prefixed", [True, False], ids=["transformer-prefix", "no-prefix"])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_logits_and_every_attention_weight_match_transformers(models, shape, prefixed):
    folder, hf = models[shape, prefixed]
    keys = load_file(folder / "model.safetensors").keys()
    assert any(k.startswith("transformer.") for k in keys) == prefixed
    model = load_gpt2(folder)
    cfg = hf.config
    assert model.cfg == {"vocab_size": cfg.vocab_size, "context_length": cfg.n_positions, "emb_dim": cfg.n_embd,
                         "n_heads": cfg.n_head, "n_layers": cfg.n_layer, "drop_rate": 0.0, "qkv_bias": True}
    torch.manual_seed(7)
    T = min(32, cfg.n_positions)
    idx = torch.randint(0, cfg.vocab_size, (2, T))
    assert T >= 20
    trace = Trace(copy=False)
    with torch.no_grad():
        want = hf(idx, output_attentions=True)
        logits = model(idx, trace=trace)
        fused = model(idx)  # the untraced path: scaled_dot_product_attention
    assert want.logits.abs().max() > 0.1  # not a trivially zero model
    torch.testing.assert_close(logits, want.logits, atol=1e-5, rtol=0)
    torch.testing.assert_close(fused, want.logits, atol=1e-5, rtol=0)
    assert len(want.attentions) == cfg.n_layer
    for layer, weights in enumerate(want.attentions):
        ours = trace[f"trf_blocks[{layer}].att.attn_weights"].tensor
        assert ours.shape == (2, cfg.n_head, T, T)
        torch.testing.assert_close(ours, weights, atol=1e-5, rtol=0)


def test_the_loaded_model_is_read_only_and_tied(models):
    folder, hf = models["odd", False]
    model = load_gpt2(folder)
    assert not model.training and not any(m.training for m in model.modules())
    assert not any(p.requires_grad for p in model.parameters())
    assert model.out_head.weight is model.tok_emb.weight  # tied to wte: one tensor
    torch.testing.assert_close(model.tok_emb.weight, hf.transformer.wte.weight)
    # Conv1D (in, out) -> Linear (out, in), and c_attn split into q, k, v
    c_attn = hf.transformer.h[1].attn.c_attn
    e = hf.config.n_embd
    att = model.trf_blocks[1].att
    assert torch.equal(att.W_key.weight, c_attn.weight[:, e:2 * e].T)
    assert torch.equal(att.W_value.bias, c_attn.bias[2 * e:])
    assert att.W_query.weight.is_contiguous()
    masks = {id(block.att.mask) for block in model.trf_blocks}
    assert len(masks) == 1  # one causal mask shared by every layer


def test_a_safetensors_file_as_the_source(models, tmp_path):
    folder, _ = models["vocab50257", True]
    from_file = load_gpt2(folder / "model.safetensors")  # config.json beside it
    from_folder = load_gpt2(folder)
    assert all(torch.equal(a, b) for a, b in zip(from_file.state_dict().values(), from_folder.state_dict().values()))
    alone = tmp_path / "weights.safetensors"
    shutil.copy(folder / "model.safetensors", alone)
    with pytest.raises(ValueError, match=r"weights\.safetensors has no config\.json beside it.*put the config\.json"):
        load_gpt2(alone)


def test_a_released_size_is_told_from_its_shapes_alone():
    header = {"wte.weight": ("F32", (50257, 1024)), "wpe.weight": ("F32", (1024, 1024))}
    header |= {f"transformer.h.{b}.ln_1.weight": ("F32", (1024,)) for b in range(24)}
    cfg = config_from_shapes(Path("x.safetensors"), header)
    assert (cfg["n_heads"], cfg["n_layers"], cfg["emb_dim"]) == (16, 24, 1024)
    assert pt.size_name(cfg) == "gpt2-medium"


def test_check_describes_a_good_folder(models):
    folder, hf = models["vocab50257", False]
    files = check_gpt2(folder)
    assert files.num_params == sum(p.numel() for p in hf.parameters())  # the tied head counted once
    assert files.name is None  # not a released size
    assert "2 layers x 4 heads, 32 wide, 1,024 positions, 50,257 tokens" in files.describe()
    assert pt.size_name({"vocab_size": 50257, "context_length": 1024, "emb_dim": 1600, "n_layers": 48,
                         "n_heads": 25}) == "gpt2-xl"


# --- bad input: one plain ValueError naming the file -------------------------------------------

def test_a_missing_folder(tmp_path):
    with pytest.raises(ValueError, match=f"{tmp_path / 'nowhere'} does not exist: give a GPT-2 folder"):
        load_gpt2(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="empty holds no model.safetensors"):
        load_gpt2(tmp_path / "empty")


def test_a_truncated_file(tiny):
    path = tiny / "model.safetensors"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=f"{path} is cut short: it has {len(data) // 2:,} bytes but its header "
                                         f"describes {len(data):,}"):
        load_gpt2(tiny)
    path.write_bytes(b"")
    with pytest.raises(ValueError, match="0 bytes long: too short to be a safetensors file"):
        load_gpt2(tiny)
    path.write_bytes(data + b"\0" * 10)
    with pytest.raises(ValueError, match="is damaged: it has 10 bytes more than its header describes"):
        load_gpt2(tiny)


def test_garbage_bytes(tiny):
    path = tiny / "model.safetensors"
    good = path.read_bytes()
    path.write_bytes(os.urandom(4096))
    with pytest.raises(ValueError, match=f"{path} is not a safetensors file: its first 8 bytes"):
        load_gpt2(tiny)
    path.write_bytes((20).to_bytes(8, "little") + b"not json, not json!!" + b"\0" * 100)
    with pytest.raises(ValueError, match="its header is not a JSON table of tensors"):
        load_gpt2(tiny)
    path.write_bytes(good)
    (tiny / "config.json").write_text("{ not json")
    with pytest.raises(ValueError, match="config.json is not a readable JSON config"):
        check_gpt2(tiny)


def test_a_config_of_another_model(tiny):
    config = tiny / "config.json"
    hf = json.loads(config.read_text())
    config.write_text(json.dumps(hf | {"model_type": "llama"}))
    with pytest.raises(ValueError, match=f"{config} describes a 'llama' model, not GPT-2"):
        load_gpt2(tiny)
    config.write_text(json.dumps(hf | {"activation_function": "relu"}))
    with pytest.raises(ValueError, match="sets activation_function = 'relu'; the book's GPTModel computes GPT-2 "
                                         "with activation_function = 'gelu_new'"):
        load_gpt2(tiny)
    config.write_text(json.dumps(hf | {"n_head": None}))
    with pytest.raises(ValueError, match="gives n_head = None"):
        load_gpt2(tiny)


def test_shapes_that_do_not_fit(tiny, models):
    config = tiny / "config.json"
    hf = json.loads(config.read_text())
    config.write_text(json.dumps(hf | {"n_embd": 48, "n_head": 6}))
    with pytest.raises(ValueError, match=r"model.safetensors: transformer.wte.weight has shape \(50257, 32\), but "
                                         r".*config.json \(n_embd=48, n_layer=2\) needs \(50257, 48\)"):
        load_gpt2(tiny)
    config.write_text(json.dumps(hf | {"n_layer": 3}))
    with pytest.raises(ValueError, match="lacks 12 of the 40 tensors .* e.g. h.2.ln_1.weight"):
        load_gpt2(tiny)
    # the odd model's weights under the small model's config
    shutil.copy(models["odd", True][0] / "model.safetensors", tiny / "model.safetensors")
    config.write_text(json.dumps(hf))
    with pytest.raises(ValueError, match="has shape .* the weights and the config come from different models"):
        load_gpt2(tiny)


def test_other_tensors_in_the_file(tiny):
    path = tiny / "model.safetensors"
    tensors = load_file(path)
    save_file(tensors | {"transformer.h.0.attn.q_norm.weight": torch.ones(8)}, path)
    with pytest.raises(ValueError, match="holds 1 tensors a GPT-2 does not have, e.g. transformer.h.0.attn.q_norm"):
        load_gpt2(tiny)
    save_file(tensors | {"transformer.h.0.ln_1.weight": torch.ones(32, dtype=torch.int32)}, path)
    with pytest.raises(ValueError, match="transformer.h.0.ln_1.weight holds I32 numbers"):
        load_gpt2(tiny)
    half = {k: v.to(torch.bfloat16) for k, v in tensors.items()}  # half precision files load as float32
    save_file(half, path)
    model = load_gpt2(tiny)
    assert model.tok_emb.weight.dtype == torch.float32
    assert torch.equal(model.tok_emb.weight, half["transformer.wte.weight"].float())


def test_too_many_tokens(models):
    model = load_gpt2(models["vocab50257", True][0])
    def ids(text: str) -> list[int]:
        return [t.id for t in tokenize(text, max_tokens=model.cfg["context_length"])]

    assert ids("Your journey starts with one step") == [7120, 7002, 4940, 351, 530, 2239]
    with pytest.raises(ValueError, match="1025 tokens long; Attention Lab shows up to 1024 tokens"):
        ids(" the" * 1025)
    with pytest.raises(ValueError, match="1025 tokens do not fit in context_length = 1024: the model has 1024 "
                                         "positions"):
        model(torch.zeros(1, 1025, dtype=torch.long))


def test_a_file_overwritten_after_loading_does_not_change_the_model(tiny):
    model = load_gpt2(tiny)
    before = model.final_norm.scale.clone()
    path = tiny / "model.safetensors"
    with path.open("r+b") as f:  # in place, as `cp other model.safetensors` does
        f.seek(path.stat().st_size - 4 * 64)
        f.write(b"\0" * 4 * 64)
        f.truncate(100)
    assert torch.equal(model.final_norm.scale, before)  # a private copy, not the file's memory map


# --- one model per process ---------------------------------------------------------------------

def test_the_shared_loader_loads_once_per_file(models, tiny, monkeypatch):
    a = load_gpt2_shared(tiny)
    assert load_gpt2_shared(tiny / "model.safetensors") is a  # same file, other spelling
    assert load_gpt2_shared(tiny / ".." / "gpt2") is a
    assert isinstance(a, GPTModel) and not a.training
    path = tiny / "model.safetensors"
    os.utime(path, ns=(time.time_ns(), path.stat().st_mtime_ns + 10**9))  # the file was replaced
    b = load_gpt2_shared(tiny)
    assert b is not a
    c = load_gpt2_shared(models["odd", True][0])
    d = load_gpt2_shared(models["odd", False][0])
    assert len(pt._SHARED) == pt.MAX_SHARED == 2  # b was evicted, oldest first
    assert load_gpt2_shared(models["odd", True][0]) is c and load_gpt2_shared(models["odd", False][0]) is d

    calls = []
    real = pt.load_gpt2
    monkeypatch.setattr(pt, "load_gpt2", lambda source: calls.append(source) or time.sleep(0.2) or real(source))
    pt.clear_shared()
    got = []
    threads = [threading.Thread(target=lambda: got.append(load_gpt2_shared(tiny))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and len({id(m) for m in got}) == 1  # four sessions at once: one load

    slow = threading.Thread(target=load_gpt2_shared, args=(models["odd", True][0],))
    slow.start()
    time.sleep(0.05)  # the odd model is loading now (its slow load above)
    assert load_gpt2_shared(tiny) is got[0]
    assert slow.is_alive()  # a loaded model was handed out while another file was still loading
    slow.join()
    assert len(calls) == 2


# --- finding GPT-2 on this machine -------------------------------------------------------------

def fake_hf_cache(cache: Path, repo: str, source: Path) -> Path:
    """The Hugging Face cache layout: models--owner--name/refs/main + snapshots/<commit>/<files>."""
    repo_dir = cache / ("models--" + repo.replace("/", "--"))
    commit = "0123456789abcdef0123456789abcdef01234567"
    snapshot = repo_dir / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for name in ("config.json", "model.safetensors"):
        shutil.copy(source / name, snapshot / name)
    (repo_dir / "refs").mkdir()
    (repo_dir / "refs" / "main").write_text(commit)
    return snapshot


def test_find_gpt2_in_a_folder_the_env_var_and_the_hf_cache(models, tmp_path, monkeypatch):
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert find_gpt2() == []
    sentence = how_to_get_gpt2("gpt2-medium")
    assert "python -m attn_core.models.pretrained download gpt2-medium --dir gpt2-weights" in sentence
    assert ENV_VAR in sentence and "Weights choice" in sentence and sentence.count(". ") == 0  # one sentence

    weights = tmp_path / "weights"
    shutil.copytree(models["vocab50257", True][0], weights / "gpt2")
    shutil.copytree(models["odd", True][0], weights / "my-odd-gpt2")
    (weights / "notes").mkdir()
    monkeypatch.setenv(ENV_VAR, str(weights))
    assert find_gpt2() == [("gpt2", weights / "gpt2"), ("my-odd-gpt2", weights / "my-odd-gpt2")]
    monkeypatch.setenv(ENV_VAR, str(weights / "gpt2"))  # the variable may name one model folder
    assert find_gpt2() == [("gpt2", weights / "gpt2")]
    snapshot = fake_hf_cache(tmp_path / "hub", "openai-community/gpt2-large", models["odd", False][0])
    legacy = fake_hf_cache(tmp_path / "hub", "gpt2", models["odd", True][0])
    assert find_gpt2(weights / "my-odd-gpt2") == [
        ("my-odd-gpt2", weights / "my-odd-gpt2"), ("gpt2", weights / "gpt2"),
        ("gpt2", legacy), ("gpt2-large", snapshot)]  # the sidebar's folder, the variable, the cache
    monkeypatch.setenv(ENV_VAR, str(legacy))  # the same files named twice are listed once, a snapshot by its repo
    assert find_gpt2() == [("gpt2", legacy), ("gpt2-large", snapshot)]


def test_small_gpt2_names_itself_from_its_config(models, tmp_path):
    folder = tmp_path / "anything"
    shutil.copytree(models["vocab50257", True][0], folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config | {"n_embd": 768, "n_head": 12, "n_layer": 12}))
    assert find_gpt2(folder)[0] == ("gpt2", folder)  # named by its shape; the weights are not read here


# --- the command line --------------------------------------------------------------------------

def test_check_command(models, tiny, tmp_path, capsys):
    folder = models["odd", False][0]
    assert main(["check", str(folder)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"ok: {folder}: a GPT-2-shaped model: ") and "3 layers x 6 heads, 48 wide" in out
    (tiny / "model.safetensors").write_bytes(b"\1" * 50)
    assert main(["check", str(tiny)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {tiny / 'model.safetensors'} is not a safetensors file") and "Traceback" not in err
    both = tmp_path / "both"
    shutil.copytree(folder, both / "good")
    shutil.copytree(tiny, both / "bad")
    assert main(["check", str(both)]) == 1  # a folder of folders: each checked, each reported
    captured = capsys.readouterr()
    assert f"ok: {both / 'good'}" in captured.out and f"error: {both / 'bad'}" in captured.err


def run_cli(*args: str, env: dict) -> subprocess.CompletedProcess:
    env = os.environ | {"HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1"} | env
    return subprocess.run([sys.executable, "-m", "attn_core.models.pretrained", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def test_download_offline_says_how_to_bring_the_folder(tmp_path):
    start = time.monotonic()
    res = run_cli("download", "gpt2-large", "--dir", str(tmp_path / "w"),
                  env={"HF_HUB_CACHE": str(tmp_path / "hub"), ENV_VAR: ""})
    assert time.monotonic() - start < 60  # offline: no waiting on the network
    assert res.returncode == 1 and res.stdout == ""
    assert res.stderr == "error: " + how_to_get_gpt2(
        "gpt2-large", why="Could not download openai-community/gpt2-large (HF_HUB_OFFLINE is set)") + "\n"
    assert "download gpt2-large --dir" in res.stderr and ENV_VAR in res.stderr
    assert not (tmp_path / "w" / "gpt2-large" / "model.safetensors").exists()


def test_download_from_the_cache_and_list_offline(models, tmp_path):
    hub = tmp_path / "hub"
    snapshot = fake_hf_cache(hub, "openai-community/gpt2", models["vocab50257", False][0])
    env = {"HF_HUB_CACHE": str(hub), ENV_VAR: ""}
    res = run_cli("download", "gpt2", env=env)  # already cached: offline mode finds it, then checks it
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith(f"ok: {snapshot}: a GPT-2-shaped model: 1,")
    res = run_cli("list", env=env)
    assert res.returncode == 0 and res.stdout == f"gpt2\t{snapshot}\n"
    res = run_cli("check", env=env | {"HF_HUB_CACHE": str(tmp_path / "empty")})
    assert res.returncode == 1 and res.stderr.strip() == how_to_get_gpt2()


def test_readme_snippet_says_what_to_do_without_weights(tmp_path, monkeypatch):
    """Issue 33: the README's GPT-2 snippet raised IndexError on a machine without weights. It stops with the
    how-to sentence instead (run up to the model loading: nothing is loaded here)."""
    import re

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = next(b for b in re.findall(r"```python\n(.*?)```", readme, re.S) if 'family("gpt2")' in b)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "none"))
    with pytest.raises(SystemExit) as stop:
        exec(compile(block, "README.md", "exec"), {})
    assert str(stop.value) == how_to_get_gpt2()
