"""Issue 41 (phones and the projector): a hand-written ``?present=`` link, and the sizes a narrow screen gets."""

from __future__ import annotations

import pytest

from apptest_utils import new_app
from dashboard.drawing.present import parse


@pytest.mark.parametrize(("raw", "want"), [("1", True), ("true", True), ("TRUE", True), (" Yes ", True), ("on", True),
                                           ("0", False), ("false", False), ("No", False), ("OFF", False), ("", False),
                                           ("ja", None), ("2", None), ("present", None)])
def test_present_values_a_link_may_hold(raw, want):
    assert parse(raw) is want


@pytest.mark.parametrize("raw", ["1", "Yes", "on", "TRUE"])
def test_a_prepared_link_with_present_1_opens_presentation_mode(raw):
    """``?present=1`` was silently ignored (Streamlit's toggle binding reads only true/false)."""
    at = new_app(present=raw)
    at.run()
    assert not at.exception
    assert at.toggle(key="present").value is True
    assert at.button(key="present_exit")  # the page is drawn in presentation mode
    assert not at.warning
    at.run()  # and stays so
    assert at.toggle(key="present").value is True


def test_an_unreadable_present_value_is_named_with_the_accepted_ones():
    at = new_app(present="ja")
    at.run()
    assert at.toggle(key="present").value is False
    text = " ".join(w.value for w in at.warning)
    assert "present" in text and "ja" in text and "1, true, yes or on" in text
    at.run()  # said once, not on every run
    assert not at.warning


def test_the_present_warning_is_chinese_in_a_chinese_session():
    at = new_app(present="ja", lang="zh")
    at.run()
    text = " ".join(w.value for w in at.warning)
    assert "ja" in text and "演示模式" in text, text


# Item 5: a phone's column (320-340 px) gets one panel a row and legends below the cells ---------------------------

@pytest.fixture
def screen_px():
    """Pretend the browser measured a main column ``px`` wide (what dashboard/drawing/screen.py reports)."""
    import streamlit as st

    from dashboard.drawing import screen

    def report(px: int) -> None:
        st.session_state[screen.KEY] = {"size": [px, 100]}

    yield report
    st.session_state.pop(screen.KEY, None)


def test_a_phone_column_is_narrow_and_gets_one_panel_a_row(screen_px):
    from dashboard.drawing import sizes

    screen_px(340)
    assert sizes.narrow() and sizes.panel_columns(4) == 1 and sizes.panel_columns(1) == 1
    screen_px(sizes.CONTENT_PX)  # the 1280x720 projector with the sidebar open
    assert not sizes.narrow() and sizes.panel_columns(4) == 4


def test_on_a_phone_the_legend_leaves_the_cells_the_width(screen_px):
    """Beside the cells the legend took 80 of 340 px: the book's 6 tokens got 23 px cells."""
    from dashboard.drawing import sizes

    labels = ["1: Your", "2: journey", "3: starts", "4: with", "5: one", "6: step"]
    screen_px(340)
    phone = sizes.fit(10_000, labels)
    assert phone == sizes.fit(10_000, labels, legend=False)
    assert phone // len(labels) >= 24
    screen_px(sizes.CONTENT_PX)
    assert sizes.fit(10_000, labels, width_px=340) < sizes.fit(10_000, labels, width_px=340, legend=False)


def _legends(spec) -> list[dict]:
    from apptest_utils import spec_nodes

    return [n["legend"] for n in spec_nodes(spec) if isinstance(n.get("legend"), dict)]


def test_a_narrow_look_puts_the_legend_below_and_gives_each_stacked_panel_its_key_labels():
    import numpy as np

    from dashboard.drawing import heatmaps
    from dashboard.drawing.heatmaps import Look

    labels = ["1: the", "2: cat", "3: sat"]
    m = np.tril(np.full((3, 3), 1 / 3))
    wide = heatmaps.heatmap(m, labels, labels, Look(scale="weights")).to_dict()
    phone = heatmaps.heatmap(m, labels, labels, Look(scale="weights", narrow=True)).to_dict()
    assert [leg["orient"] for leg in _legends(wide)] == ["right"]
    assert [leg["orient"] for leg in _legends(phone)] == ["bottom"]
    grid = heatmaps.heads_grid(np.stack([m, m]), labels, Look(scale="weights", columns=1, narrow=True)).to_dict()
    assert [leg["orient"] for leg in _legends(grid)] == ["bottom"]
    assert grid["resolve"]["axis"]["x"] == "independent"
    assert Look(narrow=True).slide.narrow is False  # the exported slide is the projector's
