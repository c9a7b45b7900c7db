"""Issue 41 (phones and the projector): a hand-written ``?present=`` link, and the sizes a narrow screen gets."""

from __future__ import annotations

import pytest
from langs import CHINESE

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
    at = new_app(present="ja", lang=CHINESE)
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


# Item 10: real models on the projector --------------------------------------------------------------------------

def test_grouped_heads_get_one_k_v_group_a_row():
    """SmolLM2's 9 query heads read 3 K/V heads: rows of 3 (rows of 4 broke the groups across rows)."""
    from dashboard.drawing.sizes import heads_per_row

    assert heads_per_row(9, 3) == 3
    assert heads_per_row(8, 4) == 2
    assert heads_per_row(4, 4) == 4 and heads_per_row(12, 12) == 4 and heads_per_row(2, 2) == 2
    assert heads_per_row(14, 2) == 4  # groups of 7 do not fit a row: as many as fit


def test_the_model_grid_uses_the_width_on_the_projector(screen_px):
    """At 1280x720 SmolLM2's 30 x 9 heads were 15 px cells beside the table, half the width unused; a 12 x 12
    GPT-2 got 18 px."""
    from dashboard.app_pages.model_view import grid_layout
    from dashboard.drawing import sizes

    screen_px(sizes.CONTENT_PX)
    px, beside = grid_layout(30, 9)
    assert px >= 24 and not beside and 30 * px <= sizes.CONTENT_PX - 60  # the whole width, the table below
    px, beside = grid_layout(12, 12)
    assert px >= 30 and beside and 12 * px <= sizes.column_px([2, 1], 0)


def test_the_model_grid_tells_induction_from_previous_token_by_dash_and_reads_at_13_px():
    from apptest_utils import spec_nodes
    from dashboard.drawing import grid_charts

    spec = grid_charts.model_grid(30, 9, 25, transpose=True).to_dict()
    dash = next(n["strokeDash"] for n in spec_nodes(spec) if "strokeDash" in n)
    dashes = dict(zip(dash["scale"]["domain"], map(tuple, dash["scale"]["range"])))
    assert dashes["induction"] != dashes["previous-token"]
    assert len(set(dashes.values())) >= 4
    marks = [n["mark"] for n in spec_nodes(spec) if isinstance(n.get("mark"), dict)]
    assert any(m["type"] == "bar" for m in marks)  # a rect mark would drop the dash (Vega-Lite)
    sizes = [n[k] for n in spec_nodes(spec) for k in ("labelFontSize", "titleFontSize") if k in n]
    assert sizes and min(sizes) >= 13, sizes


def test_smollm2_q_k_v_strips_have_their_own_scales_and_labels_and_heads_come_in_k_v_rows(smollm2):
    """On the shared ±5 scale of one grid of panels the values strip was near blank and no token or dimension was
    labelled. Each strip is now a chart of its own (its own symmetric scale), with its labels."""
    import json

    from apptest_utils import show_section, spec_nodes

    at = new_app(model="SmolLM2-135M-Instruct", section="Q, K, V")
    at.run()
    assert not at.exception
    charts = at.get("vega_lite_chart")
    assert len(charts) == 5  # queries, keys, values, and the rotated queries and keys
    for chart in charts:
        spec = json.loads(chart.proto.spec)
        assert "facet" not in spec
        axes = [n["axis"] for n in spec_nodes(spec) if isinstance(n.get("axis"), dict)]
        assert axes and all(a.get("labels", True) for a in axes)
    show_section(at, "All heads")
    spec = next(json.loads(c.proto.spec) for c in at.get("vega_lite_chart") if '"facet"' in c.proto.spec)
    assert spec["columns"] == 3
