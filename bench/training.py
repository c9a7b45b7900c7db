"""Time to the head pattern each training task should grow, on this machine.

For every task, trains from its seed with its default recipe and reports the wall time (and
step) at which each goal score is first reached on the probe input, measured at snapshots.
The measurements in the issue used one thread; so does this unless ``--threads`` says otherwise.

    python -m bench.training                     # every task, cpu, 1 thread
    python -m bench.training --task induction --device cuda
    python -m bench.training --task induction --concurrent 1,2,3   # 1, 2, then 3 runs at once, as the app runs them

``--concurrent`` trains N copies of each task at once on worker threads of this one process, one intra-op thread
each, the way the Learn page's jobs share a server (attn_core/labs/jobs.py): each level in turn, so the levels are
compared side by side under the same load.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from attn_core.labs.learn import TASKS, Trainer, get_task  # noqa: E402


def time_to_goals(name: str, device: str = "cpu", steps: int | None = None) -> dict:
    """Train ``name`` and return when each goal was first met (seconds, step) plus the final loss."""
    task = get_task(name)
    tr = Trainer(task, steps=steps, device=device)
    met: dict[str, tuple[float, int, float]] = {}
    start = time.perf_counter()
    n_layers = tr.config["n_layers"]
    while not tr.done and len(met) < len(task.goals):
        tr.step()
        if tr.snapshots[-1].step == tr.step_count:
            for g in task.goals:
                key = str(g.describe(n_layers))  # the English sentence: a JSON key
                if key not in met and g.best(tr.snapshots[-1].scores) >= g.threshold:
                    met[key] = (time.perf_counter() - start, tr.step_count, g.best(tr.snapshots[-1].scores))
    return {"task": name, "met": met, "steps": tr.step_count, "seconds": time.perf_counter() - start,
            "loss": tr.snapshots[-1].loss, "goals": [str(g.describe(n_layers)) for g in task.goals]}


def concurrent_runs(name: str, n: int, device: str = "cpu", steps: int | None = None) -> list[dict]:
    """``n`` trainings of ``name`` started together on worker threads of this process (one intra-op thread each,
    as a Learn job's worker): each one's :func:`time_to_goals`."""
    results: list[dict] = [{}] * n

    def work(i: int) -> None:
        torch.set_num_threads(1)  # per calling thread, like attn_core/labs/jobs.py's workers
        results[i] = time_to_goals(name, device, steps)

    threads = [threading.Thread(target=work, args=(i,), name=f"bench-training-{i}") for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def report(r: dict, indent: str = "  ") -> None:
    for goal in r["goals"]:
        if goal in r["met"]:
            sec, step, value = r["met"][goal]
            print(f"{indent}{goal}: reached {value:.2f} at step {step}, {sec:.1f} s")
        else:
            print(f"{indent}{goal}: NOT reached")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--task", choices=list(TASKS), action="append")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=None, help="at most this many steps (default: the task's)")
    ap.add_argument("--concurrent", default=None, help="comma-separated numbers of runs at once, e.g. 1,2,3")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"torch {torch.__version__}, device {args.device}, {args.threads} thread(s), "
          f"{os.cpu_count()} cores, load average {load:.2f} at start")
    levels = [int(n) for n in args.concurrent.split(",")] if args.concurrent else []
    for name in args.task or list(TASKS):
        if levels:
            for n in levels:
                start = time.perf_counter()
                runs = concurrent_runs(name, n, args.device, args.steps)
                formed = [max((m[0] for m in r["met"].values()), default=0.0) for r in runs]
                every = all(len(r["met"]) == len(r["goals"]) for r in runs)
                head = f"every head formed by {max(formed):.1f} s" if every else "NOT every goal reached"
                print(f"\n{name}, {n} at once: {head} (wall {time.perf_counter() - start:.1f} s, load average "
                      f"{os.getloadavg()[0]:.2f})")
                for i, r in enumerate(runs):
                    print(f"  run {i + 1}: stopped after {r['steps']} steps, {r['seconds']:.1f} s, "
                          f"{r['steps'] / r['seconds']:.1f} steps/s")
                    report(r, "    ")
            continue
        r = time_to_goals(name, args.device, args.steps)
        print(f"\n{name}: stopped after {r['steps']} steps, {r['seconds']:.1f} s, loss {r['loss']:.3f}")
        report(r)
    if hasattr(os, "getloadavg"):
        print(f"\nload average at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
