"""Server start-up (dashboard/startup.py): `streamlit run dashboard/app.py` serves main.py through st.App, whose
lifespan begins the heavy imports as the server starts; they run once, with the garbage collector paused,
and leave it running with what they built frozen. Each check runs in a fresh interpreter: this test process
has long imported torch."""

from __future__ import annotations

import json
import subprocess
import sys

from apptest_utils import ROOT

HEAVY = ("torch", "pandas", "altair", "dashboard.drawing.matrices")

# The server's side of the ASGI lifespan protocol, as uvicorn speaks it to `app` in dashboard/app.py.
LIFESPAN = """
import asyncio, gc, importlib, json, sys, threading
sys.path.insert(0, {dashboard!r})  # as `streamlit run` does for the script's folder
app = importlib.import_module("app").app
from dashboard import startup
heavy = {heavy!r}
before = [m for m in heavy if m in sys.modules]

async def serve():
    inbox = asyncio.Queue()
    started, stopped = asyncio.Event(), asyncio.Event()
    async def send(message):
        (started if message["type"] == "lifespan.startup.complete" else stopped).set()
    await inbox.put({{"type": "lifespan.startup"}})
    scope = {{"type": "lifespan", "asgi": {{"version": "3.0"}}, "state": {{}}}}
    task = asyncio.create_task(app(scope, inbox.get, send))
    await asyncio.wait_for(started.wait(), 120)
    threads = [t.name for t in threading.enumerate()]  # the server answers now, the imports still running
    await asyncio.to_thread(startup.prepare)  # the first visitor's script waits for them
    await inbox.put({{"type": "lifespan.shutdown"}})
    await asyncio.wait_for(stopped.wait(), 120)
    await task
    return threads

threads = asyncio.run(serve())
from attn_core.text.tokens import bpe_encoding
print(json.dumps(dict(before=before, threads=threads, script=str(app.script_path), gc_enabled=gc.isenabled(),
                      frozen=gc.get_freeze_count(), vocab=bpe_encoding.cache_info().currsize,
                      loaded=[m for m in heavy if m in sys.modules])))
"""

# AppTest, or `streamlit run dashboard/main.py`: no lifespan, the script's own prepare() does the work.
PLAIN = """
import gc, json, sys, threading
sys.path.insert(0, {root!r})
from dashboard import startup
startup.prepare()
startup.prepare()  # once only
print(json.dumps(dict(threads=[t.name for t in threading.enumerate()], gc_enabled=gc.isenabled(),
                      frozen=gc.get_freeze_count(), loaded=[m for m in {heavy!r} if m in sys.modules])))
"""


def _run(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_servers_lifespan_begins_the_imports_and_the_script_waits_for_them():
    r = _run(LIFESPAN.format(dashboard=str(ROOT / "dashboard"), heavy=HEAVY))
    assert r["script"] == str(ROOT / "dashboard" / "main.py")  # app.py serves main.py
    assert r["before"] == []  # loading the server's module imports none of them: it answers at once
    assert "attention-lab-startup" in r["threads"]  # the lifespan returned while they were still running
    assert r["loaded"] == list(HEAVY)
    assert r["vocab"] == 1  # the GPT-2 vocabulary is parsed before the first visitor asks for it
    assert r["gc_enabled"] and r["frozen"] > 100_000  # torch's objects are out of the collector's way


def test_without_a_lifespan_the_script_does_the_imports_itself():
    r = _run(PLAIN.format(root=str(ROOT), heavy=HEAVY))
    assert "attention-lab-startup" not in r["threads"]
    assert r["loaded"] == list(HEAVY)
    assert r["gc_enabled"] and r["frozen"] > 100_000
