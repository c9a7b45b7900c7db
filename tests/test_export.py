"""Slide export: SVG and PNG keep the title, labels and legend; CSV keeps every number; names say what."""

import csv
import io
import zipfile

import altair as alt
import numpy as np
from PIL import Image

from dashboard.drawing import heatmaps, measure_charts, rasters
from dashboard.export.formats import chart_png, chart_svg, matrix_csv, slide_name, zip_files

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
    chart = heatmaps.heatmap(weights6(), LABELS, LABELS,
                             heatmaps.Look(scale="weights")).properties(title="attention weights")
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


def test_settings_name_files_and_subtitle_charts():
    from dashboard.export.formats import PageChart, SlideSettings, unique_stems

    s = SlideSettings("MultiHeadAttention", 10, "d_out 6, 3 heads")
    assert s.words() == "MultiHeadAttention · 10 tokens · d_out 6, 3 heads"
    assert PageChart("weights_head2", "w", s).stem() == "weights_head2_MultiHeadAttention_T10_d_out6_3heads"
    assert PageChart("scaling", "s", SlideSettings(extra="d_k 128")).stem() == "scaling_d_k128"
    assert PageChart("loss", "l").stem() == "loss"
    twice = [PageChart("a", "x", s), PageChart("a", "y", s), PageChart("b", "z", s)]
    assert unique_stems(twice) == ["a_MultiHeadAttention_T10_d_out6_3heads", "a_MultiHeadAttention_T10_d_out6_3heads-2",
                                   "b_MultiHeadAttention_T10_d_out6_3heads"]


def test_an_untitled_chart_gets_a_title_and_a_titled_one_keeps_its_own():
    from dashboard.export.formats import titled

    alt.data_transformers.disable_max_rows()
    bare = heatmaps.heatmap(weights6(), LABELS, LABELS, heatmaps.Look(scale="weights"))
    spec = titled(bare, "attention weights", "MultiHeadAttention · 6 tokens").to_dict()
    assert spec["title"]["text"] == "attention weights" and spec["title"]["subtitle"] == "MultiHeadAttention · 6 tokens"
    own = titled(bare.properties(title="Loss"), "loss", "").to_dict()
    assert own["title"]["text"] == "Loss" and "subtitle" not in own["title"]
    svg = chart_svg(titled(bare, "attention weights", "MultiHeadAttention · 6 tokens")).decode()
    assert "attention weights" in svg and "MultiHeadAttention · 6 tokens" in svg and "2: journey" in svg


def test_panels_csv_has_one_block_per_panel():
    from dashboard.export.formats import panels_csv

    a, b = np.eye(2), np.array([[0.5, -np.inf], [1.0, 2.0]])
    rows = list(csv.reader(io.StringIO(panels_csv([a, b], ["left", "right"], ["r1", "r2"], ["c1", "c2"]).decode())))
    assert rows[0] == ["panel", "", "c1", "c2"]
    assert rows[1:] == [["left", "r1", "1.0", "0.0"], ["left", "r2", "0.0", "1.0"],
                        ["right", "r1", "0.5", "-inf"], ["right", "r2", "1.0", "2.0"]]


def test_a_raster_slide_frames_the_drawn_png_with_title_captions_and_legend():
    import base64

    from dashboard.export.formats import PageChart, SlideSettings, entry_png, entry_svg

    m = np.random.default_rng(1).normal(size=(200, 200))
    png = rasters.raster_png(m, "scores", max_side=512)
    entry = PageChart("scores", "attention scores", SlideSettings("CausalAttention", 200), images=(("head 1", png),),
                      scale="scores", bound=float(np.abs(m).max()), x_title="key", y_title="query")
    svg = entry_svg(entry).decode()
    assert base64.b64encode(png).decode() in svg  # the drawn image itself, not a redraw
    for text in ("attention scores", "CausalAttention · 200 tokens", "head 1", "rows: query · columns: key", "value",
                 f"{np.abs(m).max():.3g}"):
        assert text in svg, text
    with Image.open(io.BytesIO(entry_png(entry))) as two, Image.open(io.BytesIO(entry_png(entry, scale=1))) as one:
        assert two.format == "PNG" and two.size == (2 * one.size[0], 2 * one.size[1])


def test_chart_frame_finds_the_data_of_layered_charts():
    import pandas as pd

    from dashboard.export.formats import chart_frame

    df = pd.DataFrame({"implementation": ["a", "b"], "ms": [1.0, 2.0], "ms_min": [0.9, 1.8], "ms_max": [1.1, 2.2],
                       "pass": ["forward"] * 2})
    layered = measure_charts.bar_chart(df, "ms", "implementation", "pass", spread=True)
    assert chart_frame(layered) is df
    assert chart_frame(alt.Chart(alt.Data(values=[{"a": 1}])).mark_point()) is None
