"""The package installs as a wheel that works anywhere: its own copy of the GPT-2 ranks, no repo needed."""

from __future__ import annotations

import subprocess
import sys
import tomllib
import zipfile

from apptest_utils import ROOT

EXAMPLE = """
import torch
from attn_core import BOOK_INPUTS, MultiHeadAttention, tokenize
from attn_core.paths import ASSETS_DIR
torch.manual_seed(123)
batch = torch.stack((BOOK_INPUTS, BOOK_INPUTS))
mha = MultiHeadAttention(3, 2, context_length=6, dropout=0.0, num_heads=2)
print(round(float(mha(batch)[0, 0, 0]), 4), [t.id for t in tokenize("Your journey")], ASSETS_DIR)
"""


def test_wheel_is_self_contained(tmp_path):
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-v",
                            "-w", str(tmp_path / "dist"), str(ROOT)], capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr[-2000:]
    assert "absent from the `packages` configuration" not in build.stdout + build.stderr  # a warning, not an error
    (wheel,) = (tmp_path / "dist").glob("attention_lab-*.whl")
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        z.extractall(site)
    assert "attn_core/assets/r50k_base.tiktoken" in names
    assert "attn_core/assets/learn/manifest.json" in names and "attn_core/assets/the-verdict.txt" in names
    assert not any(n.startswith(("dashboard/", "tests/")) for n in names)
    # Run the README's example from an empty folder, importing only from the unpacked wheel.
    run = subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(site)!r});" + EXAMPLE],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split()[0] == "0.319" and "[7120, 7002]" in run.stdout
    assert str(site) in run.stdout  # the ranks came from the wheel, not the checkout


def test_dependencies_are_declared_once():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "torch==2.13.0" in project["dependencies"]
    for req in ("requirements.txt", "requirements-dev.txt"):
        lines = [ln.split("#")[0].strip() for ln in (ROOT / req).read_text().splitlines()]
        assert [ln for ln in lines if ln] in (["-e .[app]"], ["-e .[app,dev]"]), req


def test_readme_set_up_copies_one_command_at_a_time():
    """Issue 20 item 11: a laptop gets the CPU-only torch; the server opens no browser; copying the start command
    does not run the tests too."""
    import re

    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", readme, flags=re.S)
    start = [b for b in blocks if "streamlit run dashboard/app.py" in b and "--server.address" not in b]
    tests = [b for b in blocks if "pytest" in b]
    assert start and tests and not any("pytest" in b for b in start), blocks
    assert "download.pytorch.org/whl/cpu" in readme  # the CPU-only wheel, not gigabytes of CUDA packages
    assert "opens at" not in readme and "open http://localhost:8501" in readme


def test_modules_run_longest_first_from_a_measured_run(tmp_path, monkeypatch):
    """module_times.py sums a JUnit report per module file (a test class's cases to its module); conftest.py orders
    the modules by it, an order xdist keeps only with --no-loadscope-reorder."""
    import module_times

    report = tmp_path / "run.xml"
    report.write_text('<testsuites><testsuite><testcase classname="tests.test_gpt" name="a" time="1.5"/>'
                      '<testcase classname="tests.test_gpt" name="b" time="2"/>'
                      '<testcase classname="tests.test_gpt.TestNested" name="c" time="0.5"/>'
                      '<testcase classname="tests.test_trace" name="d" time="9"/></testsuite></testsuites>')
    monkeypatch.chdir(tmp_path)  # paths are the project's, wherever it is run from
    assert module_times.from_junit(str(report)) == {"tests/test_gpt.py": 4.0, "tests/test_trace.py": 9.0}
    monkeypatch.setattr(module_times, "FILE", tmp_path / "missing.json")
    assert module_times.load() == {}
    assert "--no-loadscope-reorder" in (ROOT / "pyproject.toml").read_text()
