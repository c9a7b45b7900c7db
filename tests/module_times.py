"""Each test module's seconds in a measured run (``module_times.json``), read by conftest.py to start the longest
modules first: with xdist giving each worker a whole module, a long module started last keeps one worker busy while
the others wait. The numbers only order the run; a stale or missing one never changes what is tested.

    python -m pytest --junitxml=run.xml && python tests/module_times.py run.xml    # writes module_times.json
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

FILE = Path(__file__).with_name("module_times.json")
ROOT = FILE.parent.parent  # module paths are relative to it, as in pytest's node ids


def load() -> dict[str, float]:
    """Seconds per module path (``tests/test_x.py``); empty when the file is missing or unreadable."""
    try:
        return {str(k): float(v) for k, v in json.loads(FILE.read_text()).items()}
    except (OSError, ValueError, AttributeError):
        return {}


def from_junit(path: str) -> dict[str, float]:
    """Seconds per module path from a JUnit XML report (pytest's --junitxml)."""
    seconds: Counter[str] = Counter()
    for case in ET.parse(path).iter("testcase"):
        parts = case.get("classname", "").split(".")  # tests.test_x, or tests.test_x.TestClass
        while parts and not (ROOT / ("/".join(parts) + ".py")).is_file():
            parts.pop()
        if parts:
            seconds["/".join(parts) + ".py"] += float(case.get("time") or 0)
    return {name: round(s, 1) for name, s in sorted(seconds.items())}


if __name__ == "__main__":
    FILE.write_text(json.dumps(from_junit(sys.argv[1]), indent=0) + "\n")
