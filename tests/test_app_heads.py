"""AppTest: the Model view's "Does this head matter?" on SmolLM2: knocking heads out changes the per-token loss and
the next token as attn_core computes them; the top induction heads vs random heads on words repeated; α beside
α·‖f(x)‖ with its one-line reading; rollout beside raw attention; a one-token sentence gets a message; Chinese."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from langs import CHINESE

from apptest_utils import ROOT, chart_with, messages, open_page, show_section, table_text
from attn_core.labs.heads import head_ablation, weights_and_moved

SENTENCE = "The cat sat on the mat because the cat was tired"
pytestmark = pytest.mark.usefixtures("fresh_caches")  # tests/conftest.py


@pytest.fixture(scope="module")
def smol(smollm2):
    return smollm2  # tests/conftest.py


def no_errors(at) -> None:
    assert not messages(at)["exception"] and not messages(at)["error"], messages(at)


def model_view(**query: str):
    at = open_page(sentence=SENTENCE, **query)
    show_section(at, "Model view")
    no_errors(at)
    return at


def test_knocking_out_heads_changes_the_loss_and_the_next_token_as_attn_core_says(smol):
    at = model_view()
    assert at.radio(key="heads_part").value == "knock"
    rows = chart_with(at, "loss of this token (nats)")
    ids = torch.tensor([smol.tokenizer.encode(SENTENCE)])
    assert len(rows) == ids.shape[1] - 1 and {r["setting"] for r in rows} == {"every head"}
    heads = [(0, 0), (0, 3), (1, 2), (2, 5)]
    at.multiselect(key="heads_out").set_value(heads).run()
    no_errors(at)
    rows = chart_with(at, "loss of this token (nats)")
    after = np.array([r["loss"] for r in rows if r["setting"] == "without 4 heads"])
    np.testing.assert_allclose(after, head_ablation(smol, ids, heads).numpy(), atol=1e-5)
    table = table_text(at.table[-1])
    assert list(table.columns) == ["every head", "without 4 heads"]
    assert any("without heads 1, 4 of layer 1, head 3 of layer 2 and head 6 of layer 3." in c.value
               for c in at.caption), [c.value for c in at.caption]
    at.radio(key="heads_how").set_value("mean").run()
    no_errors(at)
    rows = chart_with(at, "loss of this token (nats)")
    mean = np.array([r["loss"] for r in rows if r["setting"] == "without 4 heads"])
    np.testing.assert_allclose(mean, head_ablation(smol, ids, heads, "mean").numpy(), atol=1e-5)


def test_top_induction_heads_against_random_heads(smol):
    at = model_view()
    at.radio(key="heads_part").set_value("compare").run()
    no_errors(at)
    assert at.selectbox(key="heads_kind").value == "induction" and at.number_input(key="heads_k").value == 6
    bars = chart_with(at, "loss on the repeat (nats)")
    assert [b["setting"] for b in bars][:2] == ["every head", "without the top 6"] and len(bars) == 5
    plain, top = bars[0]["loss"], bars[1]["loss"]
    assert top >= 3 * plain and top > np.median([b["loss"] for b in bars[2:]])
    assert any("Without the top 6 induction heads" in m.value for m in at.markdown)
    assert any(o.startswith("Random weights: small") for o in at.selectbox(key="heads_model").options)
    at.selectbox(key="heads_model").set_value("random-small").run()  # the control: random weights
    no_errors(at)
    bars = chart_with(at, "loss on the repeat (nats)")
    assert bars[0]["loss"] > 8  # random weights predict nothing, repeat or not


def test_weigh_by_value_shows_alpha_beside_what_moves_with_a_reading(smol):
    at = model_view()
    at.radio(key="heads_part").set_value("value").run()
    no_errors(at)
    at.selectbox(key="heads_vlayer").set_value(5).run()
    no_errors(at)
    reading = next(m.value for m in at.markdown if "of the attention of token" in m.value)
    ids = torch.tensor([smol.tokenizer.encode(SENTENCE)])
    alpha, moved = weights_and_moved(smol, ids, 5)
    row = alpha[0, -1]  # head 1, the last token
    j = int(row.argmax())
    shares = row * moved[0]
    assert reading.startswith(f"Token {j + 1} (")
    assert f"takes {float(row[j]):.0%} of the attention of token {ids.shape[1]}, " in reading
    assert reading.endswith(f"{float(shares[j] / shares.sum()):.0%} of what moves.")


def test_rollout_beside_raw_attention(smol):
    at = model_view()
    at.radio(key="heads_part").set_value("rollout").run()
    no_errors(at)
    rows = chart_with(at, "rollout through all 30 layers")
    views = list(dict.fromkeys(r["view"] for r in rows))
    assert views == ["layer 1, heads averaged", "layer 30, heads averaged", "rollout through all 30 layers"]
    for view in views:
        assert sum(r["share"] for r in rows if r["view"] == view) == pytest.approx(1.0, abs=1e-4)
    assert any("by rollout" in m.value for m in at.markdown)


def test_one_token_gets_a_message_not_a_traceback(smol):
    at = open_page(sentence="Hello")
    show_section(at, "Model view")
    no_errors(at)
    assert any("at least two tokens" in i for i in messages(at)["info"])


def test_the_section_speaks_chinese(smol):
    """Every part in Chinese: none of the section's English sentences (their first words) is left on the page."""
    from babel.messages.extract import extract_from_file
    from i18n_check import shown_text

    from dashboard.i18n import language

    marked = extract_from_file("python", str(ROOT / "dashboard/app_pages/heads_view.py"),
                               keywords={"_": None, "ngettext": (1, 2), "N_": None})
    ours = [m for _line, m, _comments, _context in marked if isinstance(m, str) and len(m.split()) >= 3]
    starts = {m.split("{")[0].strip() for m in ours if len(m.split("{")[0].split()) >= 3}
    at = model_view(lang=CHINESE)
    assert at.radio(key="heads_part").label == "显示"
    for part in ("knock", "compare", "value", "rollout"):
        with language(CHINESE):  # AppTest formats the options again in the test's thread: in Chinese there too
            at.radio(key="heads_part").set_value(part).run()
        no_errors(at)
        texts = shown_text(at)
        assert any("这个头重要吗" in t for t in texts)
        left = [s for s in starts for t in texts if s in t]
        assert not left, (part, left)


def test_the_class_can_be_asked_which_head_hurts_the_repeat_most(smol, tmp_path, monkeypatch):
    from dashboard.classroom import store as ps
    from dashboard.classroom.ui import _stores

    monkeypatch.setenv(ps.DB_ENV, str(tmp_path / "class.sqlite3"))
    try:
        at = model_view()
        at.radio(key="heads_part").set_value("compare").run()
        at.button(key="poll_ask_heads").click().run()
        no_errors(at)
        asked = at.session_state["poll_current"]
        assert asked["page"] == "heads" and asked["question"]["kind"] == "harmful_head"
        assert len(asked["question"]["choices"]) == 4
        assert any("Which head, knocked out alone, hurts" in m.value for m in at.markdown)
    finally:
        _stores.clear()


def test_the_knockout_sentence_names_all_heads_or_their_runs_by_layer():
    """Issue 52 item 13: "Select all" wrote all 72 head ids in one sentence ("去掉 1.1, 1.2, … 18.4 后为 24.26")."""
    from dashboard.app_pages.heads_view import heads_named
    from dashboard.i18n import language

    every = [(layer, head) for layer in range(18) for head in range(4)]
    assert heads_named(every, 18, 4) == "all 72 heads"
    some = [(2, 0), (2, 1), (2, 2), (2, 3), (4, 1), (6, 0), (6, 2), (6, 3)]
    assert heads_named(some, 18, 4) == "heads 1–4 of layer 3, head 2 of layer 5 and heads 1, 3–4 of layer 7"
    assert heads_named([(0, 1)], 18, 4) == "head 2 of layer 1"
    with language(CHINESE):
        assert heads_named(every, 18, 4) == "全部 72 个头"
        assert heads_named(some, 18, 4) == "第 3 层的 1–4 号头、第 5 层的 2 号头和第 7 层的 1、3–4 号头"


def test_pick_all_heads_is_our_translated_button_not_streamlits_english_select_all(smol):
    from dashboard.i18n import language

    at = model_view(lang=CHINESE, model="SmolLM2-135M-Instruct")  # named: the Chinese interface alone starts on Gemma
    assert not at.multiselect(key="heads_out").proto.select_all  # Streamlit's "Select all" cannot be translated
    with language(CHINESE):  # AppTest formats the options again in the test's thread
        at.button(key="heads_out_all").click().run()
    no_errors(at)
    n = smol.cfg["n_layers"] * smol.cfg["n_heads"]
    assert len(at.multiselect(key="heads_out").value) == n
    assert any(f"去掉全部 {n} 个头后为" in c.value for c in at.caption), [c.value for c in at.caption]
