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
