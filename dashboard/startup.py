"""Once per server process: the heavy imports, with the cyclic garbage collector paused, then frozen.

Importing torch, pandas and altair builds about a million objects that live as long as the server. While
they are being built, the collector's full passes walk all of them again and again: four or five passes of
25-120 ms each, ~0.25 s of the first page's ~2 s script run (measured, docs/engineering.md). Pausing the
collector for the imports and then freezing what they built (``gc.freeze``: those objects are never
scanned again) removes that, and keeps every later full pass small.
"""

from __future__ import annotations

import gc

gc.disable()
try:
    import altair  # noqa: F401
    import pandas  # noqa: F401
    import torch  # noqa: F401
finally:
    gc.freeze()
    gc.enable()
