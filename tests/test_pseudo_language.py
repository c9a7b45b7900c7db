"""A third language added from a generated catalog alone (tests/pseudo_language.py: ``xx``, every message wrapped
in ⟦…⟧): no code names it, yet the switch offers it, the link keeps it and every page renders in it, its headings
and labels marked, no English sentence of the catalog left unmarked, no exception."""

from __future__ import annotations

import re

import pytest
from i18n_check import english_runs, shown_text
from pseudo_language import CODE, generate, pseudo, unmarked

from apptest_utils import ROOT, messages, new_app
from dashboard.languages import LOCALE_ENV

# every page of the navigation, from main.py itself
PAGES = re.findall(r'PAGES / "(\w+\.py)"', (ROOT / "dashboard" / "main.py").read_text(encoding="utf-8"))
# text that is not the catalog's: the sidebar's default sentence, the book's and the models' names
ALLOWED = {"Your", "journey", "starts", "with", "one", "step", "Edith", "Wharton", "Verdict", "SimpleTokenizerV1",
           "SimpleTokenizerV2", "MultiHeadAttention", "CausalAttention", "MultiHeadAttentionWrapper", "SelfAttention",
           "Instruct", "Random"}


@pytest.fixture(scope="module")
def pseudo_locale(tmp_path_factory):
    """The app pointed at a locale folder with ``xx`` beside the real languages, for this module."""
    folder = generate(tmp_path_factory.mktemp("pseudo") / "locale")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(LOCALE_ENV, str(folder))
        yield folder


pytestmark = pytest.mark.usefixtures("pseudo_locale", "class_app_db")  # class_app_db: the lesson page's store


def test_the_switch_offers_the_generated_language_and_the_link_keeps_it():
    at = new_app()
    at.query_params["lang"] = CODE
    at.run()
    assert not messages(at)["exception"], messages(at)
    switch = at.sidebar.get("segmented_control")[0]
    assert "⟦Pseudo⟧" in switch.options and switch.value == CODE  # its name from its data
    assert at.query_params["lang"] == CODE
    assert at.sidebar.get("text_area")[0].label == pseudo("Sentence")


@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_in_the_generated_language(page):
    at = new_app()
    at.query_params["lang"] = CODE
    at.run()
    at.switch_page(f"app_pages/{page}").run()
    assert not messages(at)["exception"], messages(at)
    texts = shown_text(at)
    assert any("⟦" in t for t in texts), texts[:20]
    for heading in [h.value for h in at.get("header") + at.get("subheader") + at.get("title")]:
        assert "⟦" in heading or not english_runs([heading], ALLOWED), heading
    left = english_runs([unmarked(t) for t in texts], ALLOWED)
    assert not left, left
