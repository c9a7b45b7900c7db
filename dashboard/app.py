"""Attention Lab's server: `streamlit run dashboard/app.py` (options as usual, e.g. --server.port 8502).

Streamlit finds ``app`` below and serves ``main.py``, the script every visit runs. The ``lifespan`` starts
the heavy imports (torch, pandas, altair, the GPT-2 vocabulary) as the server starts, while the first
browser is still loading the page, instead of in the first visitor's script run (dashboard/startup.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

import streamlit as st

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from dashboard.startup import lifespan  # noqa: E402

app = st.App(Path(__file__).resolve().parent / "main.py", lifespan=lifespan)
