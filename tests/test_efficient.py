"""The efficient path computes what the explicit class computes; the benchmark harness is sound."""

import os
import subprocess
import sys

import pytest
import torch

from attn_core import MultiHeadAttention, Trace
from attn_core.attention.efficient import MultiHeadAttentionCombinedQKV
from attn_core.labs.benchmark import IMPLEMENTATIONS, SIZES, Size, build, format_table, run

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
ROOT = __import__("pathlib").Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("bias", [False, True])
def test_efficient_equals_explicit(device, causal, bias):
    torch.manual_seed(0)
    mha = MultiHeadAttention(48, 48, 128, 0.0, 6, qkv_bias=bias, causal=causal).to(device)
    x = torch.randn(3, 100, 48, device=device)
    explicit = mha(x, trace=Trace())  # a trace forces the explicit path
    efficient = mha(x)
    assert (explicit - efficient).abs().max() < 1e-5
    combined = MultiHeadAttentionCombinedQKV.from_multihead(mha)
    assert (combined(x) - explicit).abs().max() < 1e-5
    mha.efficient = False
    assert torch.equal(mha(x), mha(x, trace=Trace()))


def test_efficient_path_dropout_only_in_training():
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 16, 64, 0.5, 4)
    x = torch.randn(2, 64, 16)
    mha.eval()
    torch.testing.assert_close(mha(x), mha(x, trace=Trace()), atol=1e-5, rtol=0)
    mha.train()
    torch.manual_seed(1)
    a = mha(x)
    torch.manual_seed(2)
    b = mha(x)
    assert not torch.allclose(a, b)  # dropout active on the fused path too


def test_combined_qkv_checks_inputs():
    m = MultiHeadAttentionCombinedQKV(8, 8, 4, 0.0, 2)
    with pytest.raises(ValueError, match="context_length"):
        m(torch.randn(1, 5, 8))


def test_every_implementation_computes_the_same_output():
    size = Size("t", 2, 12, 24, 3)
    x = torch.randn(2, 12, 24)
    ref = build("raw SDPA", size, torch.device("cpu"), torch.float32)(x)
    for name in IMPLEMENTATIONS:
        out = build(name, size, torch.device("cpu"), torch.float32)(x)
        assert out.shape == ref.shape, name
        if name != "MultiHeadAttentionWrapper":  # the wrapper has its own heads and no out_proj
            assert (out - ref).abs().max() < 1e-5, name


def test_run_reports_ratios_to_sdpa():
    results = run([SIZES["book"]], passes=("forward", "forward+backward"), reps=1, warmup=1)
    assert len(results) == 2 * len(IMPLEMENTATIONS)
    for r in results:
        assert r.ms > 0 and r.ratio_to_sdpa > 0
        if r.implementation == "raw SDPA":
            assert r.ratio_to_sdpa == 1.0
    table = format_table(results)
    assert "x raw SDPA" in table and "forward+backward" in table
    with pytest.raises(ValueError, match="unknown dtype"):
        run([SIZES["book"]], dtype="float8")


@pytest.mark.parametrize("cmd, expected", [
    (["-m", "bench.implementations", "--smoke", "--device", "cpu"], "x raw SDPA"),
    (["-m", "bench.scaling", "--smoke", "--device", "cpu"], "|"),
    (["-m", "bench.app_response", "--sizes", "6", "--reps", "1", "--profiles", "default", "--no-first-page"], "|"),
    (["-m", "bench.generation", "--small", "--tokens", "5"], "same tokens: True"),
    (["-m", "bench.variants", "--sizes", "16", "--reps", "1"], "ratios to MHA 1.00 / 1.00 / 1.00"),
    (["-m", "bench.flash", "--smoke"], "explicit/tiled MB"),
    (["-m", "bench.model_view", "--tokens", "16", "--reps", "1"], "view/forward"),  # the installed real models
])
def test_bench_scripts_smoke(cmd, expected):
    from browser import bench_env, browser_missing_reason

    if "bench.app_response" in cmd and browser_missing_reason() and os.environ.get("CI") != "true":
        pytest.skip(browser_missing_reason())  # it measures in Chromium (CI has it: a failure there)
    out = subprocess.run([sys.executable, *cmd], cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env=bench_env())
    assert out.returncode == 0, out.stderr[-2000:]
    assert expected in out.stdout, out.stdout[-2000:]
