"""Slide export: SVG and PNG keep the title, labels and legend; CSV keeps every number; names say what."""

import csv
import io
import zipfile

import altair as alt
import numpy as np
from PIL import Image

from dashboard import charts
from dashboard.export import chart_png, chart_svg, matrix_csv, slide_name, zip_files

LABELS = ["1: Your", "2: journey", "3: starts", "4: with", "5: one", "6: step"]


def weights6() -> np.ndarray:
    w = np.tril(np.random.default_rng(0).random((6, 6)))
    return w / w.sum(1, keepdims=True)


def test_file_names_say_what_and_which_settings():
    assert slide_name("weights", "MultiHeadAttention", 10, "svg", head=2) == "weights_head2_MultiHeadAttention_T10.svg"
    name = slide_name("scaled scores ÷ √d_k", "CausalAttention", 6, ".png")
    assert name == "scaled-scores-d_k_CausalAttention_T6.png"


def test_svg_keeps_labels_title_and_legend():
    alt.data_transformers.disable_max_rows()
    chart = charts.heatmap(weights6(), LABELS, LABELS, scale="weights").properties(title="attention weights")
    svg = chart_svg(chart).decode()
    assert svg.startswith("<svg") and "attention weights" in svg
    for label in LABELS:
        assert label in svg
    assert "weight" in svg  # the legend's title


def test_png_is_twice_the_screen_size():
    chart = alt.Chart(alt.Data(values=[{"a": 1}])).mark_point().encode(x="a:Q").properties(width=200, height=100)
    one = Image.open(io.BytesIO(chart_png(chart, scale=1)))
    two = Image.open(io.BytesIO(chart_png(chart)))
    assert two.size[0] == 2 * one.size[0] and two.size[1] == 2 * one.size[1]


def test_csv_keeps_labels_and_full_precision():
    m = np.array([[0.123456789, -np.inf], [0.5, 0.5]])
    rows = list(csv.reader(io.StringIO(matrix_csv(m, ["1: a", '2: "b"'], ["1: a", '2: "b"']).decode())))
    assert rows[0] == ["", "1: a", '2: "b"'] and rows[1] == ["1: a", "0.123456789", "-inf"]
    assert rows[2][0] == '2: "b"'


def test_zip_holds_every_file():
    data = zip_files({"a.svg": b"<svg/>", "b.csv": b"x"})
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        assert sorted(z.namelist()) == ["a.svg", "b.csv"] and z.read("b.csv") == b"x"
