"""Issue 12 item 1: a page script keeps no tensors or traces alive once the bounded caches let go.

Page bodies run inside ``render()``; module-level names are imports and small helpers only, so
the functions a page hands to widgets (``format_func`` lambdas) cannot pin a run via the page's
globals for as long as the session lives."""

import gc

import pytest
import torch

from apptest_utils import clear_caches, messages, new_app

PAGES = ["app_pages/explore.py", "app_pages/shape_flow.py", "app_pages/masking_lab.py",
         "app_pages/walkthrough.py"]


def live_traces() -> int:
    from attn_core import Trace

    gc.collect()
    return sum(type(o) is Trace for o in gc.get_objects())


def big_tensors(min_numel: int = 2048) -> set[int]:
    """The ids of the large tensors alive now (other tests' models may be alive too: compare sets)."""
    gc.collect()
    return {id(o) for o in gc.get_objects()
            if type(o) in (torch.Tensor, torch.nn.Parameter) and o.numel() >= min_numel}


pytestmark = pytest.mark.usefixtures("fresh_caches")  # tests/conftest.py


@pytest.mark.parametrize("page", PAGES)
def test_page_keeps_no_trace_alive_after_the_caches_let_go(page):
    import attn_core.text.embeddings as embeddings
    import dashboard.drawing.chart_cache as chart_cache

    # A long sentence with many heads: a trace that would be worth finding.
    before, traces_before = big_tensors(), live_traces()  # other tests' objects may be alive
    text = " ".join(["the cat sat on the mat and looked at the dog"] * 6)
    at = new_app(sentence=text, input_mode="learned", variant="MultiHeadAttention", d_in="64", d_out="64",
                 num_heads="4", dropout="0.2", train_mode="true")
    at.run()
    at.switch_page(page).run()
    assert not messages(at)["exception"], messages(at)
    assert live_traces() > traces_before  # the run cache holds it while the session looks at it
    # The bounded caches let go (as they do once more runs come in): nothing else may keep a trace.
    clear_caches()
    chart_cache._DRAWN.clear()
    embeddings.clear_embedding_cache()  # its own bound: EMBEDDING_CACHE_BYTES of embedding tables
    assert at.session_state["_settings"] is not None  # the session is still alive
    assert live_traces() <= traces_before, "the page's globals or widgets keep a Trace reachable from the session"
    assert not big_tensors() - before, "the session keeps tensors of its run alive"
