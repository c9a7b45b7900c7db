"""AppTest: Explore's Model view on a Chinese sentence with the sidebar's random weights starts on Gemma 3 (the
default model for the text, saying why), and "Does this head matter?" works on its 18 x 4 heads: a knock-out of a
global layer's four heads (one K/V head among them) is attn_core's, the top induction heads vs random heads show it
copying the built-in repeat, and α·‖f(x)‖ is drawn for one of its heads."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from apptest_utils import chart_with, messages, open_page, show_section
from attn_core.labs.heads import head_ablation, weights_and_moved

SENTENCE = "猫坐在垫子上，因为猫累了。"
pytestmark = pytest.mark.usefixtures("fresh_caches")  # tests/conftest.py
SLOW_S = 600  # the top-vs-random panel: five forwards of Gemma over 101 tokens on a busy machine


def no_errors(at) -> None:
    assert not messages(at)["exception"] and not messages(at)["error"], messages(at)


def test_gemma_heads_knock_out_copy_and_weigh(gemma3):
    at = open_page(sentence=SENTENCE)
    show_section(at, "Model view")
    no_errors(at)
    assert any("Gemma 3 270M" in c.value and "picked for your text's Chinese" in c.value for c in at.caption)
    ids = torch.tensor([gemma3.tokenizer.encode(SENTENCE)])
    knock = at.multiselect(key="heads_out")
    assert len(knock.options) == 18 * 4
    heads = [(5, 0), (5, 1), (5, 2), (5, 3)]  # layer 6, global: every query head of its one K/V head
    knock.set_value(heads).run()
    no_errors(at)
    after = np.array([r["loss"] for r in chart_with(at, "loss of this token (nats)")
                      if r["setting"] == "without 4 heads"])
    np.testing.assert_allclose(after, head_ablation(gemma3, ids, heads).numpy(), atol=1e-5)

    at.radio(key="heads_part").set_value("compare").run(timeout=SLOW_S)
    no_errors(at)
    assert at.selectbox(key="heads_model").value == "gemma-3-270m"  # the view's model first
    bars = chart_with(at, "loss on the repeat (nats)")
    plain, top, random = bars[0]["loss"], bars[1]["loss"], [b["loss"] for b in bars[2:]]
    assert plain < 1.0 and top >= 10 * plain and top > max(random)  # it copies, and the top heads carry it
    assert any("words of The Verdict" in c.value for c in at.caption)

    at.radio(key="heads_part").set_value("value").run()
    no_errors(at)
    at.selectbox(key="heads_vlayer").set_value(5).run()
    at.selectbox(key="heads_vhead").set_value(2).run()
    no_errors(at)
    alpha, moved = weights_and_moved(gemma3, ids, 5)
    row = alpha[2, -1]  # head 3, the last token
    j = int(row.argmax())
    shares = row * moved[2]  # through the norm after Gemma's attention (tests/test_heads_gemma.py)
    reading = next(m.value for m in at.markdown if "of the attention of token" in m.value)
    assert reading.startswith(f"Token {j + 1} (") and f"takes {float(row[j]):.0%} of the attention" in reading
    assert reading.endswith(f"{float(shares[j] / shares.sum()):.0%} of what moves.")
