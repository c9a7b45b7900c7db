"""Server start-up: the heavy imports, done once per process, as the server starts.

``streamlit run dashboard/app.py`` serves ``main.py`` through ``st.App``, whose ``lifespan`` calls
:func:`begin`: the imports below run on a background thread while the browser is still loading the page
(about a second between the server answering and the page's websocket, measured). The first visitor's
script run calls :func:`prepare`, which waits for that work or does it itself (``AppTest``, or
``streamlit run dashboard/main.py``).

The imports run with the cyclic garbage collector paused, and what they built is then frozen
(``gc.freeze``: never scanned again). torch, pandas and altair build about a million objects that live as
long as the server; while they were being built, four or five full collections walked all of them
(~0.25 s of the first page's ~2 s script run, measured with ``gc.callbacks``), and every later full
collection would walk them again.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

_LOCK = threading.Lock()
_DONE = threading.Event()


def _import_all() -> None:
    """What the first page needs: the libraries, the dashboard's modules, the GPT-2 vocabulary."""
    import altair  # noqa: F401
    import pandas  # noqa: F401
    import torch  # noqa: F401

    import dashboard.app_pages.trained_view  # noqa: F401
    import dashboard.drawing.head_view  # noqa: F401
    import dashboard.drawing.heatmaps  # noqa: F401
    import dashboard.drawing.matrices  # noqa: F401
    import dashboard.drawing.present  # noqa: F401
    import dashboard.drawing.screen  # noqa: F401
    import dashboard.state.controls  # noqa: F401
    from attn_core.text.tokens import bpe_encoding
    from dashboard.i18n import LANGS, catalog

    bpe_encoding()  # 50,257 ranks parsed and the BPE tables built, before the first visitor
    for code in LANGS:  # a catalog without a fresh .mo is compiled here, not in the first visitor's run in it
        catalog(code)


def prepare() -> None:
    """Block until the start-up imports are done: the first caller does them (collector paused, then
    frozen), later callers return at once. Never two imports of one module on two threads at once."""
    if _DONE.is_set():
        return
    with _LOCK:
        if _DONE.is_set():
            return
        gc.disable()
        try:
            _import_all()
        finally:
            gc.freeze()
            gc.enable()
            _DONE.set()


def begin() -> None:
    """Start :func:`prepare` on a background thread (a failure there is raised again by the script's own
    :func:`prepare` or imports, where the page reports it)."""
    def run() -> None:
        try:
            prepare()
        except Exception:  # noqa: BLE001 - the script's own imports raise it again, where the page shows it
            pass

    threading.Thread(target=run, name="attention-lab-startup", daemon=True).start()


@asynccontextmanager
async def lifespan(_app: object) -> AsyncIterator[None]:
    """``st.App``'s lifespan: the imports start as the server starts; the server answers meanwhile."""
    begin()
    yield
