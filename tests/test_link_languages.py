"""A link made in Chinese opens the same section, head, step or preset in English, and back: every translated choice
keeps its English id (a stepper its step number) in the link, and reads an older link's label in either language."""

from __future__ import annotations

import pytest
from langs import CHINESE, ENGLISH

from apptest_utils import messages, new_app
from dashboard.i18n import language

EXPLORE = None
LAB = "app_pages/masking_lab.py"
WALK = "app_pages/walkthrough.py"
TILED = "app_pages/tiled.py"
KV = "app_pages/kv_cost.py"
MHA = dict(variant="MultiHeadAttention", d_out="8", num_heads="4")
OTHER = {ENGLISH: CHINESE, CHINESE: ENGLISH}


@pytest.fixture(autouse=True)
def _fresh(fresh_caches):
    yield


def open_in(lang: str, page: str | None, **query: str):
    """The app in ``lang`` on ``page`` with ``query`` in its link; no exception."""
    at = new_app(lang=lang, **query)
    with language(lang):  # AppTest formats a selectbox's value with its format_func in the test's thread
        at.run()
        if page:
            at.switch_page(page).run()
    assert not messages(at)["exception"], messages(at)
    return at


def rerun(at, lang: str, **state):
    for k, v in state.items():
        at.session_state[k] = v
    with language(lang):
        at.run()
    assert not messages(at)["exception"], messages(at)
    return at


def click(at, lang: str, key: str, times: int):
    with language(lang):
        for _unused in range(times):
            at.button(key=key).click().run()
    assert not messages(at)["exception"], messages(at)


def link(at) -> dict[str, str]:
    """The link the page wrote, without its language."""
    return {k: str(v) for k, v in at.query_params.items() if k != "lang"}


@pytest.mark.parametrize("lang", [CHINESE, ENGLISH])
def test_explore_section_and_head_open_the_same_in_the_other_language(lang):
    at = rerun(open_in(lang, EXPLORE, **MHA), lang, section="Scores", head=2)
    made = link(at)
    assert made["section"] == "Scores" and made["head"] == "head 3", made  # English ids in either language
    there = open_in(OTHER[lang], EXPLORE, **made)
    assert there.session_state["section"] == "Scores" and there.session_state["head"] == 2
    assert not messages(there)["warning"], messages(there)["warning"]
    assert link(there) == made


def test_explore_reads_a_link_written_in_chinese_labels():
    """A link copied while the URL held the shown labels (before the ids) still opens its section and head."""
    with language(CHINESE):
        from dashboard.i18n import _

        section, head = _("Scores"), _("head {head}", head=3)
    assert section != "Scores"
    at = open_in(ENGLISH, EXPLORE, section=section, head=head, **MHA)
    assert at.session_state["section"] == "Scores" and at.session_state["head"] == 2
    assert not messages(at)["warning"]
    assert link(at)["section"] == "Scores" and link(at)["head"] == "head 3"  # rewritten as the ids


def test_a_bad_section_is_named_once_and_leaves_the_link():
    at = open_in(CHINESE, EXPLORE, section="<b>nope</b>")
    warned = messages(at)["warning"]
    assert len(warned) == 1 and "section" in warned[0] and "nope" in warned[0], warned
    assert at.session_state["section"] == "Weights" and "section" not in at.query_params
    at = rerun(at, CHINESE)
    assert not messages(at)["warning"]


@pytest.mark.parametrize("lang", [CHINESE, ENGLISH])
def test_masking_lab_section_and_mistake_open_the_same_in_the_other_language(lang):
    mistake = "mistake: renormalize raw scores"  # not the first: it is written into the link
    at = rerun(open_in(lang, LAB), lang, lab_section="Mistakes")
    at = rerun(at, lang, mistake=mistake)
    made = link(at)
    assert made == {"lab_section": "Mistakes", "mistake": mistake}, made
    there = open_in(OTHER[lang], LAB, **made)
    assert there.session_state["lab_section"] == "Mistakes" and there.session_state["mistake"] == mistake
    assert [h.value for h in there.subheader if h.value[:1].isdigit()][0].startswith("2 · ")
    assert not messages(there)["warning"], messages(there)["warning"]


@pytest.mark.parametrize("lang", [CHINESE, ENGLISH])
def test_walkthrough_step_opens_the_same_in_the_other_language(lang):
    at = open_in(lang, WALK)
    click(at, lang, "walk_step_next", 3)
    assert at.session_state["walk_step"] == 3 and link(at) == {"walk_step": "4"}  # the number, not a label
    there = open_in(OTHER[lang], WALK, **link(at))
    assert there.session_state["walk_step"] == 3
    assert not messages(there)["warning"], messages(there)["warning"]


def test_an_older_walkthrough_link_with_a_chinese_label_opens_its_step():
    at = open_in(CHINESE, WALK)
    click(at, CHINESE, "walk_step_next", 5)
    with language(CHINESE):
        label = next(s for s in at.select_slider if s.key.startswith("walk_step_slider")).format_func(5)
    assert label.startswith("6/") and any("\u4e00" <= c <= "\u9fff" for c in label), label
    there = open_in(ENGLISH, WALK, walk_step=label)  # what the slider bound to the link wrote before
    assert there.session_state["walk_step"] == 5 and not messages(there)["warning"]
    assert link(there) == {"walk_step": "6"}


@pytest.mark.parametrize("lang", [CHINESE, ENGLISH])
def test_tiled_step_opens_the_same_in_the_other_language(lang):
    at = open_in(lang, TILED)
    click(at, lang, "tile_step_next", 2)
    assert at.session_state["tile_step"] == 2 and link(at)["tile_step"] == "3"
    there = open_in(OTHER[lang], TILED, **link(at))
    assert there.session_state["tile_step"] == 2
    assert not messages(there)["warning"], messages(there)["warning"]


@pytest.mark.parametrize("lang", [CHINESE, ENGLISH])
def test_kv_cost_preset_opens_the_same_in_the_other_language(lang):
    from attn_core.labs.kv_cost import PRESETS

    preset = list(PRESETS)[2]
    at = rerun(open_in(lang, KV), lang, kv_preset=preset)
    made = link(at)
    assert made["kv_preset"] == preset, made
    there = open_in(OTHER[lang], KV, **made)
    assert there.session_state["kv_preset"] == preset
    assert not messages(there)["warning"], messages(there)["warning"]


def test_kv_cost_reads_the_chinese_label_of_your_own_numbers():
    with language(CHINESE):
        from dashboard.i18n import _

        label = _("Your own numbers")
    at = open_in(ENGLISH, KV, kv_preset=label, kv_layers="16")
    assert at.session_state["kv_preset"] == "Your own numbers" and at.number_input(key="kv_layers").value == 16
    assert link(at)["kv_preset"] == "Your own numbers"


def test_a_head_kept_from_more_heads_falls_back_to_head_1():
    at = rerun(open_in(CHINESE, EXPLORE, **MHA), CHINESE, head=3)
    assert link(at)["head"] == "head 4"
    at = rerun(at, CHINESE, num_heads=2)
    assert at.session_state["head"] == 0 and "head" not in at.query_params


def test_no_widget_bound_to_the_link_shows_formatted_labels():
    """Streamlit's ``bind="query-params"`` writes the label a widget shows: one with a ``format_func`` would put a
    translated label into the link (``url_state.linked_choice`` keeps the id instead)."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "dashboard"
    bound = []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                kw = {k.arg: k.value for k in node.keywords}
                if isinstance(kw.get("bind"), ast.Constant) and kw["bind"].value == "query-params":
                    bound.append((path.name, node.lineno, "format_func" in kw))
    assert len(bound) >= 10, bound  # the toggles, the zoom window, the prompt, KV cost's sizes
    assert [b for b in bound if b[2]] == []
