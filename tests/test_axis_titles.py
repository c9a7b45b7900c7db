"""Vertical axes' titles in Chinese: turned 90° (查询, 头) they were read sideways. In a language
read upright only, every chart the app draws, and every chart it exports, writes them level above the axis's labels
(dashboard/drawing/cells.axis_title_config); English keeps the usual turned title; horizontal axes are untouched."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from langs import CHINESE, ENGLISH

from apptest_utils import open_page
from dashboard.drawing.heatmaps import Look
from dashboard.export import formats
from dashboard.i18n import language

LABELS = ["1: Your", "2: journey", "3: starts"]


def _title_transforms(svg: str, title: str) -> list[str]:
    """The transform of each SVG text element that reads ``title``."""
    return re.findall(r'<text[^>]*transform="([^"]*)"[^>]*>' + re.escape(title) + "</text>", svg)


def test_an_exported_heatmap_writes_its_vertical_title_level_in_chinese_only():
    for code, query, key in ((CHINESE, "查询", "键"), (ENGLISH, "query", "key")):
        with language(code):
            svg = formats.chart_svg(Look(scale="weights").chart(np.eye(3), LABELS, LABELS)).decode()
        turned = [t for t in _title_transforms(svg, query) if "rotate(-90)" in t or "rotate(270)" in t]
        assert _title_transforms(svg, query) and bool(turned) == (code == ENGLISH), \
            (code, _title_transforms(svg, query))
        assert _title_transforms(svg, key) and not any("rotate" in t for t in _title_transforms(svg, key))


@pytest.mark.parametrize("page", [None, "app_pages/tiled.py", "app_pages/masking_lab.py", "app_pages/shape_flow.py"])
def test_every_chart_on_the_page_has_level_vertical_titles_in_chinese(page):
    """The heatmaps (through the chart cache) and the charts a page draws itself (the tile grid) alike."""
    for code in (CHINESE, ENGLISH):
        configs = [json.loads(el.proto.spec).get("config", {}) for el in open_page(page, lang=code).get(
            "vega_lite_chart")]
        assert configs
        for config in configs:
            if code == CHINESE:
                assert config["axisLeft"]["titleAngle"] == 0 and config["axisYQuantitative"]["titleAngle"] == 0
                assert "axisBottom" not in config and "axisTop" not in config and "axisX" not in config
            else:
                assert not {"axisLeft", "axisRight", "axisYQuantitative"} & set(config), config
