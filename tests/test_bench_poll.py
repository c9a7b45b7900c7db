"""bench.poll --quick: 3 replicas behind HAProxy, 12 students over the websocket, the teacher's replica killed half
way; every answer counted exactly once, and the teacher's page gets its panel back on another replica."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from browser import require
from deploy.course import haproxy_missing_reason

ROOT = Path(__file__).resolve().parent.parent


def test_quick_poll_bench_loses_nothing():
    require(haproxy_missing_reason(), "the poll bench")
    out = subprocess.run([sys.executable, "-m", "bench.poll", "--quick"], cwd=ROOT, capture_output=True, text=True,
                         timeout=240)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "answers sent 12, counted 12, lost 0" in out.stdout, out.stdout
    assert "(the teacher's) killed after 6 answers" in out.stdout
    reclaimed = re.search(r"teacher reclaimed in ([\d.]+) s .*the poll is (\w+)", out.stdout)
    assert reclaimed and reclaimed.group(2) == "revealed", out.stdout  # Reveal works on the reclaimed panel
    assert float(reclaimed.group(1)) < 30, out.stdout  # busy cores: only that it came back
