"""Results kept on disk (dashboard/state/kept.py): found again by the same inputs and code, never by others; a
damaged file is computed again; the folder stays bounded; a page's missing runs are computed once each."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from dashboard.state import kept


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setenv(kept.ROOT_ENV, str(tmp_path))
    return tmp_path


def test_a_result_is_found_by_its_inputs_and_code_only(folder, monkeypatch):
    calls = []
    value = kept.kept(("losses", (1, 2, 3), 32), lambda: calls.append(1) or np.arange(3.0))
    again = kept.kept(("losses", (1, 2, 3), 32), lambda: calls.append(1) or np.zeros(3))
    assert calls == [1] and np.array_equal(again, value) and np.array_equal(value, [0.0, 1.0, 2.0])
    assert kept.load(("losses", (1, 2, 3), 16)) is None  # another window
    monkeypatch.setattr(kept, "code_version", lambda: "changed")
    assert kept.load(("losses", (1, 2, 3), 32)) is None  # other code: computed anew


def test_a_damaged_file_is_computed_again(folder):
    kept.save(("k",), np.ones(4))
    [path] = folder.glob("*.npy")
    path.write_bytes(b"not a numpy file")
    assert kept.load(("k",)) is None
    assert np.array_equal(kept.kept(("k",), lambda: np.full(2, 7.0)), [7.0, 7.0])


def test_the_folder_keeps_at_most_max_files_the_newest(folder, monkeypatch):
    monkeypatch.setattr(kept, "MAX_FILES", 3)
    for i in range(5):
        kept.save(("n", i), np.array([float(i)]))
    assert len(list(folder.glob("*.npy"))) == 3
    assert kept.load(("n", 4)) is not None and kept.load(("n", 0)) is None
    assert not list(folder.glob("*.tmp"))


def test_an_unwritable_folder_only_means_computing_again(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv(kept.ROOT_ENV, str(blocker / "results"))  # a folder inside a file cannot be made
    assert np.array_equal(kept.kept(("x",), lambda: np.ones(1)), [1.0])


def test_a_pages_missing_runs_are_computed_once_each_side_by_side(folder, monkeypatch):
    monkeypatch.setattr(kept.os, "cpu_count", lambda: 2)
    kept.save(("run", 0), np.array([0.0]))
    both = threading.Barrier(2, timeout=30)  # the first two runs meet: they ran at the same time
    started = []

    def run(i):
        def compute():
            started.append(i)
            if len(started) <= 2:
                both.wait()
            return np.array([float(i)])
        return compute

    kept.kept_all({("run", i): run(i) for i in range(4)})
    assert sorted(started) == [1, 2, 3]  # the kept one is not run again
    assert all(float(kept.load(("run", i))[0]) == i for i in range(4))
    calls = []
    kept.kept_all({("run", i): lambda: calls.append(1) or np.zeros(1) for i in range(4)})
    assert calls == []  # all kept: nothing runs
