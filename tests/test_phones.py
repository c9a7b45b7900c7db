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
