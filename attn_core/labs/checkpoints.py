"""Shipped trained models: train every task deterministically and keep the result in ``assets/learn/``.

    python -m attn_core.labs.checkpoints            # (re)train every task, write assets/learn/*.pt + manifest.json
    python -m attn_core.labs.checkpoints --check    # retrain and compare with the shipped files, write nothing

Each ``<task>.pt`` holds the model's weights, its config, seed, learning rate and steps, the loss of
every step, and every snapshot (the probe's attention in 8 bits, the head scores as computed). ``manifest.json``
lists each file's sha256 and final scores. Training runs on one CPU thread, so a rerun reproduces
the losses to float rounding.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from attn_core.labs.learn import TASKS, Snapshot, Trainer, get_task, probe_attention
from attn_core.labs.scores import head_scores
from attn_core.messages import Problem
from attn_core.models.gpt import GPTModel
from attn_core.paths import asset
from attn_core.tracing.trace import Trace

ASSETS = asset("learn")
MANIFEST = ASSETS / "manifest.json"
SEED = 123


def checkpoint_path(task: str) -> Path:
    return ASSETS / f"{task}.pt"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def to_payload(tr: Trainer) -> dict:
    """Everything needed to show a finished training again, as plain tensors and lists."""
    return {
        "task": tr.task.name, "config": tr.config, "seed": tr.seed, "lr": tr.lr, "steps": tr.steps,
        "snapshot_every": tr.snapshot_every, "batch_size": tr.batch_size, "torch": str(torch.__version__),
        "state_dict": {k: v.detach().cpu() for k, v in tr.model.state_dict().items()},
        "losses": torch.tensor(tr.losses, dtype=torch.float32),
        "snap_steps": [s.step for s in tr.snapshots],
        "snap_losses": [s.loss for s in tr.snapshots],
        "snap_seconds": [s.seconds for s in tr.snapshots],
        # attention weights lie in [0, 1]: 8 bits each (error <= 1/510) keep the files small
        "snap_weights": torch.from_numpy(np.round(np.stack([s.weights for s in tr.snapshots]) * 255).astype(np.uint8)),
        "snap_scores": [{k: v.tolist() for k, v in s.scores.items()} for s in tr.snapshots],
    }


def train(task: str, seed: int = SEED, steps: int | None = None) -> Trainer:
    """Train ``task`` from ``seed`` with its default recipe on one CPU thread."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        tr = Trainer(get_task(task), seed=seed, steps=steps)
        tr.run()
    finally:
        torch.set_num_threads(before)
    return tr


def load(task: str, path: Path | None = None) -> Trainer:
    """A finished :class:`Trainer` from a shipped checkpoint: weights, losses and snapshots restored."""
    path = checkpoint_path(task) if path is None else path
    if not path.exists():
        raise Problem("no trained model for task {task!r} at {path}: run python -m attn_core.labs.checkpoints",
                      task=task, path=path)
    p = torch.load(path, map_location="cpu", weights_only=True)
    base = get_task(p["task"])
    overrides = {k: v for k, v in p["config"].items() if base.model.get(k) != v}
    tr = Trainer(base, seed=p["seed"], lr=p["lr"], steps=p["steps"], snapshot_every=p["snapshot_every"],
                 model_overrides=overrides, batch_size=p["batch_size"])
    tr.model.load_state_dict(p["state_dict"])
    tr.step_count = p["steps"]
    tr.losses = p["losses"].tolist()
    weights = p["snap_weights"].numpy().astype(np.float32) / 255
    tr.snapshots = [Snapshot(step, loss, weights[i], {k: np.array(v) for k, v in sc.items()}, sec)
                    for i, (step, loss, sec, sc) in enumerate(zip(p["snap_steps"], p["snap_losses"],
                                                                  p["snap_seconds"], p["snap_scores"]))]
    tr.seconds = p["snap_seconds"][-1]
    return tr


def final_scores(tr: Trainer) -> dict[str, list]:
    """Head scores recomputed from the model's weights on the probe input."""
    weights = probe_attention(tr.model, tr.probe_idx)
    scores = head_scores(weights, tr.probe_tokens)
    return {k: [[None if not np.isfinite(x) else round(float(x), 6) for x in row] for row in v]
            for k, v in scores.items()}  # JSON has no NaN: an undefined score is null


def as_array(scores: list) -> np.ndarray:
    """Manifest scores (null = undefined) as a float array with NaN."""
    return np.array(scores, dtype=np.float64)


def manifest() -> dict:
    """The shipped manifest (task -> file, sha256, recipe, final scores)."""
    if not MANIFEST.exists():
        return {}
    return json.loads(MANIFEST.read_text())


def write_all(tasks: list[str]) -> dict:
    ASSETS.mkdir(parents=True, exist_ok=True)
    entries = manifest()
    for name in tasks:
        tr = train(name)
        path = checkpoint_path(name)
        torch.save(to_payload(tr), path)
        entries[name] = {"file": path.name, "sha256": sha256(path), "seed": tr.seed, "steps": tr.steps,
                         "lr": tr.lr, "config": tr.config, "seconds": round(tr.seconds, 1),
                         "final_loss": round(tr.snapshots[-1].loss, 4), "goals_met": tr.goals_met(),
                         "final_scores": final_scores(tr)}
        print(f"{name}: {tr.steps} steps in {tr.seconds:.1f} s, loss {tr.snapshots[-1].loss:.3f}, "
              f"goals met: {tr.goals_met()}, {path.stat().st_size / 1e3:.0f} kB")
    MANIFEST.write_text(json.dumps(entries, indent=1) + "\n")
    return entries


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--task", action="append", choices=list(TASKS))
    ap.add_argument("--check", action="store_true", help="retrain and compare with the shipped files")
    args = ap.parse_args()
    tasks = args.task or list(TASKS)
    if not args.check:
        write_all(tasks)
        return
    shipped = manifest()
    for name in tasks:
        tr = train(name)
        new, old = final_scores(tr), shipped[name]["final_scores"]
        diff = max(float(np.nan_to_num(np.abs(as_array(new[k]) - as_array(old[k]))).max()) for k in new)
        print(f"{name}: largest score difference to the shipped model {diff:.2e}")


if __name__ == "__main__":
    main()


@lru_cache(maxsize=8)
def trained_model(task: str) -> GPTModel:
    """The shipped model of ``task`` in eval mode (shared: never switch it to train mode)."""
    return load(task).model.eval()


def to_symbols(token_ids: Sequence[int], vocab_size: int) -> list[int]:
    """Map token ids to the trained model's abstract symbols, in order of first appearance.

    The task models never saw words: they know ``vocab_size`` symbols. Each distinct token of a
    sentence becomes one symbol (first seen -> 0, next new one -> 1, ...), so repeated tokens stay
    repeated, which is all the trained heads respond to."""
    mapping: dict[int, int] = {}
    for t in token_ids:
        mapping.setdefault(int(t), len(mapping))
    if len(mapping) > vocab_size:
        raise Problem("{distinct} distinct tokens, but this trained model knows only {vocab_size} symbols: "
                      "shorten the text", distinct=len(mapping), vocab_size=vocab_size)
    return [mapping[int(t)] for t in token_ids]


def run_trained(task: str, token_ids: Sequence[int]) -> tuple[Trace, list[int]]:
    """Run the shipped model of ``task`` on ``token_ids`` with a trace (every layer's attention under
    ``trf_blocks[i].att``); returns the trace and the symbols the model saw."""
    return run_task_model(trained_model(task), token_ids)


def run_task_model(model: GPTModel, token_ids: Sequence[int]) -> tuple[Trace, list[int]]:
    """Run a Learn task's model (shipped, or trained in this session) on ``token_ids`` mapped to its symbols, with a
    trace of every layer; returns the trace and the symbols. The model is only read (no train/eval switch)."""
    cfg = model.cfg
    if not token_ids:
        raise Problem("no tokens: type at least one word")
    if len(token_ids) > cfg["context_length"]:
        raise Problem("{num_tokens} tokens, but this trained model reads at most {context_length} "
                      "(its context_length): shorten the text", num_tokens=len(token_ids),
                      context_length=cfg["context_length"])
    symbols = to_symbols(token_ids, cfg["vocab_size"])
    trace = Trace()
    with torch.no_grad():
        model(torch.tensor([symbols]), trace=trace)
    return trace, symbols
