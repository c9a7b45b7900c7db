"""A model's pass takes every core only when it is the server's one script on a quiet machine; otherwise one thread
(two on a busy core slowed a pass several times: docs/measurements.md)."""

from __future__ import annotations

import os
import threading

import pytest
import torch

from dashboard.state import compute


def scripts_running(n: int):
    """``n`` threads named as Streamlit names a session's script thread, kept alive until the event is set."""
    stop = threading.Event()
    threads = [threading.Thread(target=stop.wait, name="ScriptRunner.scriptThread") for _ in range(n)]
    for t in threads:
        t.start()
    return stop, threads


@pytest.mark.parametrize(("scripts", "load", "want_all"), [(1, 0.0, True), (2, 0.0, False), (1, 5.0, False)])
def test_a_pass_takes_every_core_only_alone_on_a_quiet_machine(monkeypatch, scripts, load, want_all):
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
    stop, threads = scripts_running(scripts)
    try:
        assert compute.pass_threads() == (2 if want_all else 1)
    finally:
        stop.set()
        for t in threads:
            t.join()


def test_the_threads_are_given_back_after_the_pass():
    before = torch.get_num_threads()
    with compute.torch_threads(before + 1):
        assert torch.get_num_threads() == before + 1
    assert torch.get_num_threads() == before
    with pytest.raises(ValueError), compute.torch_threads(before + 1):
        raise ValueError("a failed pass")
    assert torch.get_num_threads() == before
