import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from attn_core import BOOK_INPUTS  # noqa: E402


@pytest.fixture
def inputs() -> torch.Tensor:
    return BOOK_INPUTS.clone()


@pytest.fixture
def batch() -> torch.Tensor:
    return torch.stack((BOOK_INPUTS, BOOK_INPUTS), dim=0)  # (2, 6, 3)


@pytest.fixture(scope="module")
def server():
    """The real app (`streamlit run dashboard/app.py`) on 127.0.0.1, for one test module's browser tests."""
    from browser import require_browser, streamlit_server

    require_browser()
    with streamlit_server() as url:
        yield url


@pytest.fixture
def fresh_caches():
    """Empty every cache before and after an AppTest test (AppTest shares one process's caches)."""
    from apptest_utils import clear_caches

    clear_caches()
    yield
    clear_caches()
