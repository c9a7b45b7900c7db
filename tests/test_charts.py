"""Chart builders: pure functions, tested without a browser."""

import io
import json
import re

import altair as alt
import numpy as np
import pandas as pd
import pytest
from langs import CHINESE, ENGLISH
from PIL import Image

from attn_core.tracing import views
from dashboard.drawing import cells, flow_charts, heatmaps, rasters, scales, window_charts
from dashboard.drawing.heatmaps import Look
from dashboard.i18n import language

LABELS = ["1: the", "2: cat", "3: saw", "4: the", "5: dog"]


def causal_scores(n: int) -> np.ndarray:
    m = np.random.default_rng(0).normal(size=(n, n))
    m[np.triu_indices(n, 1)] = -np.inf
    return m


def test_masked_cells_present_and_marked():
    df = heatmaps.matrix_frame(causal_scores(5), LABELS, LABELS)
    assert len(df) == 25  # no cell dropped
    assert df["masked"].sum() == 10
    assert df.loc[df["masked"], "value"].isna().all()  # -inf becomes NaN, never a number
    spec = heatmaps.heatmap(causal_scores(5), LABELS, LABELS).to_dict()
    text = json.dumps(spec, ensure_ascii=False)
    assert scales.MASK_GREY in text and "−∞" in text and "datum.masked" in text


def test_repeated_tokens_stay_distinct_and_axes_are_positions():
    df = heatmaps.heatmap_frame(np.eye(5), LABELS, LABELS)
    assert sorted(df["q"].unique()) == [0, 1, 2, 3, 4]
    assert set(df[df["q"] == 3]["row"]) == {"4: the"} and set(df[df["q"] == 0]["row"]) == {"1: the"}
    spec = heatmaps.heatmap(np.eye(5), LABELS, LABELS).to_dict()
    x = spec["layer"][0]["encoding"]["x"]
    # the label field, in token order by position (never sorted by a list of labels: O(T^3))
    assert x["field"] == "col" and x["sort"] == {"field": "k", "op": "min"}
    plain = heatmaps.heatmap_frame(np.eye(3), ["a", "b", "a"], ["a", "b", "a"])  # repeats stay apart
    assert list(plain["row"].unique()) == ["1: a", "2: b", "3: a"]


def spec_without_data(matrix, labels, **kw) -> str:
    spec = heatmaps.heatmap(matrix, labels, labels, Look(**kw)).to_dict()
    spec.pop("datasets", None)
    spec.pop("data", None)
    for layer in spec.get("layer", []):
        layer.pop("data", None)
    return re.sub(r"(view|param)_\w+", r"\1", json.dumps(spec, sort_keys=True))  # Altair's counters


def test_a_new_sentence_changes_the_data_not_the_spec():
    """Streamlit swaps new data into the same Vega view when only the data changed; a changed spec
    builds a new view (twice the time after a sentence change at T = 32)."""
    words = [f"{i + 1}: w{i}" for i in range(40)]
    other = [f"{i + 1}: another{i}" for i in range(40)]
    rng = np.random.default_rng(0)
    for n in (32, 33):  # a word more: cells shrink, the chart keeps its size
        a = spec_without_data(rng.random((n, n)), words[:n], scale="weights", max_px=480, selectable=True)
        b = spec_without_data(rng.random((n, n)), other[:n], scale="weights", max_px=480, selectable=True)
        assert a == b and "w1" not in a
    assert spec_without_data(np.eye(32), words[:32], max_px=480) == spec_without_data(np.eye(33), words[:33],
                                                                                        max_px=480)


def drawn_fills(chart) -> dict[tuple[str, str], tuple[int, ...]]:
    """What Vega draws (vl-convert's SVG): {("rect", value) or ("text", printed value): fill as RGB}."""
    import vl_convert as vlc

    named = {"white": (255, 255, 255), "black": (0, 0, 0)}
    svg = vlc.vegalite_to_svg(chart.to_dict())
    fills = {}
    for label, kind, fill in re.findall(r'aria-label="([^"]*)"[^>]*aria-roledescription="(rect|text) mark"[^>]*'
                                        r'fill="([^"]*)"', svg):
        value = re.search(r"(?:value|label): ([^;]*)", label).group(1).replace("−", "-")
        rgb = named.get(fill) or tuple(int(c) for c in re.findall(r"\d+", fill))
        fills[(kind, value)] = rgb
    return fills


def luminance(rgb) -> float:
    """WCAG relative luminance of an sRGB colour (0 black, 1 white)."""
    c = np.asarray(rgb, dtype=float) / 255
    c = np.where(c <= 0.03928, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    return float(c @ [0.2126, 0.7152, 0.0722])


def test_diverging_scale_is_symmetric_around_zero_and_dark_cells_get_white_text():
    """Issue 9: the diverging scale was stretched separately on each side of 0 (``domainMid`` on the data's
    extent), so +0.16 was drawn as dark as -0.80; the value text was black on every cell, also the darkest."""
    m = np.array([[-0.8, 0.16], [0.8, 0.0]])
    one_sided = np.array([[-0.8, 0.16], [0.05, 0.0]])  # the mistake difference's shape: big below 0, small above
    for chart in (heatmaps.heatmap(one_sided, LABELS[:2], LABELS[:2], Look(scale="scores")),
                  heatmaps.facet_grid([one_sided, one_sided / 2], ["a", "b"], LABELS[:2],
                                      look=Look(scale="scores", max_px=200))):
        fills = drawn_fills(chart)
        assert luminance(fills[("rect", "0.16")]) > 0.6, "+0.16 of a ±0.8 scale is a light orange"
        assert luminance(fills[("rect", "-0.8")]) < 0.1
        assert fills[("text", "-0.80")] == (255, 255, 255) and fills[("text", "0.16")] == (0, 0, 0)
    fills = drawn_fills(heatmaps.heatmap(m, LABELS[:2], LABELS[:2], Look(scale="scores")))
    low, high = luminance(fills[("rect", "-0.8")]), luminance(fills[("rect", "0.8")])
    assert max(low, high) < 0.15, "both ends of the scale are dark"  # the scheme's ends: 0.07 blue, 0.12 orange
    assert fills[("text", "-0.80")] == fills[("text", "0.80")] == (255, 255, 255)  # light text on both dark ends
    assert fills[("text", "0")] == (0, 0, 0)
    # the same rule for the sequential weights (viridis: dark at 0, light at 1)
    fills = drawn_fills(heatmaps.heatmap(np.array([[0.1, 0.9]]), LABELS[:1], LABELS[:2], Look(scale="weights")))
    assert fills[("text", "0.10")] == (255, 255, 255) and fills[("text", "0.90")] == (0, 0, 0)
    # still one colour bar, not a list of symbols (the invisible layer's unfilled points turned it into one)
    import vl_convert as vlc

    for chart in (heatmaps.heatmap(m, LABELS[:2], LABELS[:2]),
                  heatmaps.facet_grid([m, m], ["a", "b"], LABELS[:2], look=Look(scale="scores", max_px=200))):
        svg = vlc.vegalite_to_svg(chart.to_dict())
        assert "legend-gradient" in svg and "legend-symbol" not in svg
        assert '"format": ".2~f"' in json.dumps(chart.to_dict())  # its ends ±0.87 were labelled "1" and "−1"
    # no value in the spec: one spec serves every sentence (docs/measurements.md)
    assert "0.8" not in json.dumps(heatmaps.heatmap(m, LABELS[:2], LABELS[:2]).to_dict().get("layer"))


def test_scales_weights_fixed_scores_diverging():
    w = heatmaps.heatmap(np.full((3, 3), 1 / 3), LABELS[:3], LABELS[:3], Look(scale="weights")).to_dict()
    enc = json.dumps(w["layer"][0]["encoding"]["color"])
    assert '"domain": [0, 1]' in enc and "viridis" in enc
    s = heatmaps.heatmap(np.array([[-2.0, 1.0], [0.5, 3.0]]), LABELS[:2], LABELS[:2], Look(scale="scores")).to_dict()
    enc = json.dumps(s["layer"][0]["encoding"]["color"])
    assert '"domainMid": 0' in enc and "blueorange" in enc


def test_fixed_square_cells_and_text_only_when_readable():
    small = heatmaps.heatmap(np.eye(6), LABELS + ["6: x"], LABELS + ["6: x"], Look(scale="weights")).to_dict()
    assert small["width"] == 6 * cells.cell_px(6, 6) == small["height"]
    assert any(layer["mark"]["type"] == "text" and "format" in json.dumps(layer) for layer in small["layer"])
    labels = [f"{i + 1}: t" for i in range(40)]
    big = heatmaps.heatmap(np.eye(40), labels, labels, Look(scale="weights")).to_dict()
    assert not any("format" in json.dumps(layer.get("encoding", {}).get("text", {})) for layer in big["layer"])


def test_raster_switch_above_threshold():
    assert not cells.needs_raster(128 * 128)
    assert cells.needs_raster(129 * 129)
    labels = [f"{i}" for i in range(200)]
    with pytest.raises(ValueError, match="raster_png"):
        heatmaps.heatmap(np.zeros((200, 200)), labels, labels)
    png = rasters.raster_png(causal_scores(200), "scores")
    img = Image.open(io.BytesIO(png))
    assert img.size == (400, 400)  # upscaled x2 towards 512 px
    assert img.mode == "P"  # one byte a pixel and a palette: faster to encode and smaller than RGB
    rgb = np.asarray(img.convert("RGB"))
    assert tuple(rgb[0, -1]) == (208, 208, 208)  # masked corner is grey
    assert (rgb[::2, ::2] == rasters.raster_rgb(causal_scores(200), "scores")).all()  # the raster's own colours


def test_pooling_keeps_peaks_and_masks():
    m = np.zeros((1024, 1024), dtype=np.float32)
    m[500, 10] = 1.0
    m[np.triu_indices(1024, 1)] = -np.inf
    pooled, k = views.pool(m, 256)
    assert k == 4 and pooled.shape == (256, 256)
    assert pooled[125, 2] == 1.0  # max pooling keeps a single sharp weight
    assert np.isnan(pooled[0, 200])  # a fully masked block stays masked


def test_max_pooling_equals_the_block_max_with_or_without_masked_cells_and_padding():
    """pool's shortcuts (no copy for an all-finite matrix whose side k divides) give the plain block max."""
    rng = np.random.default_rng(0)
    for n in (1024, 1000):  # k = 16 divides 1024, not 1000 (padded)
        m = rng.random((n, n), dtype=np.float32)
        original = m.copy()
        pooled, k = views.pool(m, 64)
        pad = (-n) % k
        blocks = np.pad(m, ((0, pad), (0, pad)), constant_values=-np.inf).reshape(-1, k, (n + pad) // k, k)
        assert np.array_equal(pooled, blocks.max(axis=(1, 3)))
        assert np.array_equal(m, original)  # the caller's matrix is left as it was
        m[np.triu_indices(n, 1)] = -np.inf
        masked, _ = views.pool(m, 64)
        assert np.isnan(masked[0, -1]) and masked[-1, 0] == pooled[-1, 0]


def test_heads_grid_is_one_faceted_chart():
    chart = heatmaps.heads_grid(np.random.rand(4, 5, 5), LABELS)
    assert isinstance(chart, alt.FacetChart)
    spec = chart.to_dict()
    data = next(iter(spec["datasets"].values()))
    assert {row["panel"] for row in data} == {"head 1", "head 2", "head 3", "head 4"}
    with pytest.raises(ValueError):
        heatmaps.heads_grid(np.random.rand(12, 32, 32), [str(i) for i in range(32)])  # 12k cells: rasters


def test_cell_text_never_prints_zero_for_a_small_nonzero_weight():
    m = np.array([[1.0, 0.0], [0.003, 0.997]])
    spec = json.dumps(heatmaps.heatmap(m, LABELS[:2], LABELS[:2], Look(scale="weights")).to_dict())
    # exact zeros print "0"; |v| < 0.005 prints in scientific notation, not "0.00"
    assert "datum.value === 0 ? '0' : abs(datum.value) < 0.005 ? format(datum.value, '.0e')" in spec
    assert '"field": "label"' in spec


def test_dropout_scale_reaches_the_scaled_survivors():
    spec = heatmaps.facet_grid([np.eye(3), 2 * np.eye(3)], ["a", "b"], LABELS[:3],
                               look=Look(scale=scales.weights_scale(2.0), max_px=200))
    enc = json.dumps(spec.to_dict())
    assert '"domain": [0, 2.0]' in enc
    assert scales.weights_scale(1.0) == "weights"
    rgb = rasters.raster_rgb(np.array([[2.0, 1.0]]), scales.weights_scale(2.0))
    assert tuple(rgb[0, 0]) != tuple(rgb[0, 1])  # 2.0 and 1.0 no longer clip to the same colour


def test_a_mask_has_a_two_entry_legend_saying_what_0_and_1_mean():
    """Issue 9: a 0/1 mask drew a 0-1 gradient legend (truncated to "1.", "0." when small)."""
    mask = np.triu(np.ones((5, 5)), 1)
    for labels in (scales.MASK_LABELS, scales.DROPOUT_MASK_LABELS):
        spec = heatmaps.heatmap(mask, LABELS, LABELS, Look(scale="mask", mask_labels=labels)).to_dict()
        cells = spec["layer"][0]
        color = cells["encoding"]["color"]
        assert color["type"] == "nominal" and color["scale"]["domain"] == list(labels)
        assert color["legend"]["labelLimit"] == 0  # never cut to "1."
        calc = next(t for t in cells["transform"] if "calculate" in t)
        assert json.dumps(labels[0]) in calc["calculate"] and json.dumps(labels[1]) in calc["calculate"]
    weights = heatmaps.heatmap(np.eye(5), LABELS, LABELS, Look(scale="weights")).to_dict()
    assert weights["layer"][0]["encoding"]["color"]["condition"][0]["test"] == "datum.masked"  # other scales unchanged


def test_cells_outside_a_sequential_scale_get_their_own_named_colours():
    """Issue 33 item 10: a mistaken mask's negative or > 1 'weights' took viridis's end colours (as 0 or 1) and no
    legend named them. Now red below 0, pink above the top, in the Vega chart, the raster and a caption's line."""
    m = np.array([[-0.5, 0.5], [1.0 + 1e-7, 1.5]])  # 1 + 1e-7: float rounding, still in range
    for spec in (heatmaps.heatmap(m, ["a", "b"], ["a", "b"], Look(scale="weights")).to_dict(),
                 heatmaps.facet_grid([m], ["p"], ["a", "b"]).to_dict()["spec"]):
        conditions = spec["layer"][0]["encoding"]["color"]["condition"]
        assert [c["value"] for c in conditions] == [scales.MASK_GREY, scales.BELOW_RANGE, scales.ABOVE_RANGE]
        below, above = (c["test"].split(" ", 1)[1] for c in conditions[1:])  # "< -1e-06", "> 1.000001"
        hits = {(v, op): eval(f"{v} {t}") for v in m.ravel() for op, t in (("below", below), ("above", above))}
        assert [v for (v, op), hit in hits.items() if hit] == [-0.5, 1.5]
    rgb = rasters.raster_rgb(m, "weights")
    assert tuple(rgb[0, 0]) == rasters._rgb(scales.BELOW_RANGE) and tuple(rgb[1, 1]) == rasters._rgb(scales.ABOVE_RANGE)
    assert tuple(rgb[1, 0]) == tuple(rasters.raster_rgb(np.array([[1.0]]), "weights")[0, 0])  # in range: the top
    assert scales.out_of_range_note(m, "weights") == ("Outside the colour scale (0 to 1): red = below 0 (1 cell); "
                                                      "pink = above 1 (1 cell).")
    assert scales.out_of_range_note(np.eye(3), "weights") == ""
    assert scales.out_of_range_note(np.full((2, 2), 3.0), "magnitude:2").endswith("pink = above 2 (4 cells).")
    scores = heatmaps.heatmap(m, ["a", "b"], ["a", "b"], Look(scale="scores")).to_dict()
    assert len(scores["layer"][0]["encoding"]["color"]["condition"]) == 1  # a diverging scale has no "outside"
    assert scales.out_of_range_note(m, "scores") == ""
    assert scales.LEGEND_TITLES["magnitude"] == "|difference|"


def contrast(a, b) -> float:
    """WCAG contrast ratio of two sRGB colours (1 to 21)."""
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_a_mask_on_the_dark_page_has_light_ones_and_dark_zeros():
    """Issue 9, dark mode: the dropout mask's kept cells (0) were a near-white block on the dark page and the
    "1 = zeroed" swatch dark on dark. On the dark page 1 is light and 0 dark (ink and paper, as in light mode)."""
    mask = np.triu(np.ones((5, 5)), 1)
    for dark, page in ((False, (255, 255, 255)), (True, (14, 17, 23))):  # Streamlit's light and dark backgrounds
        spec = heatmaps.heatmap(mask, LABELS, LABELS, Look(scale="mask", mask_labels=scales.DROPOUT_MASK_LABELS,
                                                           dark=dark)).to_dict()
        zero, one = spec["layer"][0]["encoding"]["color"]["scale"]["range"]  # also the legend's two swatches
        rgb = [tuple(int(c[i:i + 2], 16) for i in (1, 3, 5)) for c in (zero, one)]
        where = "dark" if dark else "light"
        assert contrast(rgb[1], page) >= 7, f"the 1 swatch stands out from the {where} page"
        assert contrast(rgb[0], page) < 2, f"0 stays close to the {where} page's colour (no white block on dark)"
        png = np.asarray(Image.open(io.BytesIO(rasters.raster_png(np.triu(np.ones((200, 200)), 1), "mask",
                                                                 dark=dark))).convert("RGB"))
        assert tuple(png[-1, 0]) == rgb[0] and tuple(png[0, -1]) == rgb[1]  # a large mask's image agrees


@pytest.mark.parametrize("max_px", [220, 300, 480, 520])
def test_book_key_labels_tilt_when_wider_than_a_cell(max_px):
    """Issue 9: with 6 tokens the key labels on top ran together ("1: You2: journey"), on screen and in the
    exported PNG. Horizontal labels only when the widest fits in its cell (~8 px a character)."""
    book = ["1: Your", "2: journey", "3: starts", "4: with", "5: one", "6: step"]
    px = cells.cell_px(6, 6, max_px)
    x = heatmaps.heatmap(np.eye(6), book, book,
                         Look(scale="weights", max_px=max_px)).to_dict()["layer"][0]["encoding"]["x"]
    assert x["axis"]["labelAngle"] != 0 or max(map(len, book)) * 8 <= px
    short = ["1: a", "2: b", "3: c"]
    x = heatmaps.heatmap(np.eye(3), short, short, Look(max_px=max_px)).to_dict()["layer"][0]["encoding"]["x"]
    assert x["axis"]["labelAngle"] == 0  # short labels fit their cells: no need to tilt


def drops_fit(spec: dict) -> bool:
    """Whether Vega-Lite logs `Dropping "fit" because spec has discrete size` for ``spec``: a step (discrete) width or
    height under Streamlit's theme's default autosize "fit" (pad or none given in the spec does not warn)."""
    stepped = any(isinstance(spec.get(side), dict) and "step" in spec[side] for side in ("width", "height"))
    inner = spec.get("spec")  # a facet's panel
    autosize = spec.get("autosize", {})
    kind = autosize if isinstance(autosize, str) else autosize.get("type", "fit")
    panel_stepped = isinstance(inner, dict) and drops_fit(dict(inner, autosize=kind))
    return kind not in ("pad", "none") and (stepped or panel_stepped)


@pytest.mark.parametrize("panels", [None, ["head 1", "head 2"]])
def test_numbered_cells_keep_their_step_size_without_vegas_fit_warning(panels):
    """Issue 52: every shape flow logged Vega's warning; the cells' step size needs autosize pad."""
    nums = np.arange(8).reshape(2, 4, 1) if panels else np.arange(4).reshape(4, 1)
    spec = flow_charts.numbered_cells(nums, np.zeros_like(nums), LABELS[:4], ["0"], panels=panels).to_dict()
    assert not drops_fit(spec), spec.get("autosize")
    assert drops_fit({"width": {"step": 30}}) and not drops_fit({"width": 300})  # the check itself


def test_numbered_panels_leave_room_for_their_titles():
    """One head_dim column per panel is narrower than its x title: neighbours' titles ran together."""
    nums = np.arange(8).reshape(2, 4, 1)
    spec = flow_charts.numbered_cells(nums, np.zeros_like(nums), LABELS[:4], ["0"], panels=["head 1", "head 2"],
                                 x_title="head_dim", px=30).to_dict()
    assert spec["spacing"] >= 7 * len("head_dim") - 30


def test_key_labels_stand_upright_in_narrow_cells():
    """At -45° labels lie ~0.7 cell apart: 20 tokens in 14 px cells ran together ("1: one2: two3: three")."""
    words = [f"{i + 1}: word{i}" for i in range(20)]
    m = np.eye(20)
    x = heatmaps.heatmap(m, words, words, Look(max_px=200)).to_dict()["layer"][0]["encoding"]["x"]["axis"]
    assert x["labelAngle"] == -90 and x["labelOverlap"] is True  # 10 px: Vega drops only labels that would clash
    facet = heatmaps.facet_grid([m, m], ["a", "b"], words, look=Look(max_px=280, scale="weights")).to_dict()
    x = facet["spec"]["layer"][0]["encoding"]["x"]["axis"]
    assert x["labelAngle"] == -90 and x["labelOverlap"] is True
    x = heatmaps.heatmap(np.eye(10), words[:10], words[:10],
                         Look(max_px=280)).to_dict()["layer"][0]["encoding"]["x"]["axis"]
    assert x["labelAngle"] == -45  # 28 px cells: tilted labels have room


@pytest.mark.parametrize("n", [20, 44])
def test_every_token_labelled_while_rows_hold_their_labels(n):
    """Issue 33: from 24 tokens Vega was told to drop labels whatever the cell size (a 44-token chart showed every
    4th). Cells at least as high as the 13 px labels keep every label on both axes; smaller ones let Vega drop
    clashing labels, so they never draw over each other."""
    words = [f"{i + 1}: w{i}" for i in range(n)]
    enc = heatmaps.heatmap(np.eye(n), words, words, Look(max_px=cells.LABEL_PX * n)).to_dict()["layer"][0]["encoding"]
    assert enc["x"]["axis"]["labelOverlap"] is False and enc["y"]["axis"]["labelOverlap"] is False
    enc = heatmaps.heatmap(np.eye(n), words, words,
                           Look(max_px=(cells.LABEL_PX - 1) * n)).to_dict()["layer"][0]["encoding"]
    assert enc["x"]["axis"]["labelOverlap"] is True and enc["y"]["axis"]["labelOverlap"] is True


def test_values_shown_up_to_text_max_tokens_when_cells_hold_them():
    """Issue 33: a 20-token chart on the whole column has 30 px cells: its values are printed (the limit was 16
    tokens whatever the cell size); in 20 px cells they are not."""
    words = [str(i) for i in range(20)]
    m = np.full((20, 20), 0.25)
    shown = heatmaps.heatmap(m, words, words, Look(scale="weights", max_px=600)).to_dict()
    assert any(layer["mark"]["type"] == "text" and "label" in json.dumps(layer["encoding"]["text"])
               for layer in shown["layer"])
    hidden = heatmaps.heatmap(m, words, words, Look(scale="weights", max_px=400)).to_dict()
    assert not any("label" in json.dumps(layer.get("encoding", {}).get("text", {})) for layer in hidden["layer"])


def marks(spec: dict) -> list[dict]:
    """Every mark definition in a (layered or faceted) spec."""
    inner = spec.get("spec", spec)
    return [layer["mark"] for layer in inner.get("layer", [])]


@pytest.mark.parametrize("build", [
    lambda m, labels: heatmaps.heatmap(m, labels, labels, Look(scale="weights", selectable=True)),
    lambda m, labels: heatmaps.facet_grid([m, m], ["a", "b"], labels, look=Look(scale="scores", max_px=200)),
])
def test_many_cells_are_drawn_on_a_canvas_without_a_label_per_cell(build):
    """Issue 11: from 256 cells a chart is a canvas (Vega's SVG renderer rewrote ~9,000 attributes for a new
    32-token sentence) and its marks carry no ARIA label each; the book's 6 x 6 stays SVG with its labels."""
    def drawn(n):
        labels = [f"{i + 1}: w" for i in range(n)]
        spec = build(causal_scores(n), labels).to_dict()
        renderer = spec.get("usermeta", {}).get("embedOptions", {}).get("renderer")
        return renderer, {m.get("aria", True) for m in marks(spec) if m["type"] != "point"}

    assert drawn(6) == (None, {True})
    assert drawn(16) == ("canvas", {False})
    assert drawn(32) == ("canvas", {False})
    big = heatmaps.heatmap(causal_scores(16), [str(i) for i in range(16)], [str(i) for i in range(16)]).to_dict()
    assert cells.many_cells(16 * 16) and not cells.many_cells(15 * 15)
    assert big["layer"][0]["encoding"]["tooltip"], "tooltips stay"
    # the renderer is part of the spec template's key: a 15 x 15 and a 16 x 16 chart never share a template
    labels = [str(i) for i in range(16)]
    assert [cells.spec_signature(n, n, labels, 480, False)[-1] for n in (15, 16)] == [False, True]


def test_a_growing_chart_keeps_its_spec_while_its_cells_keep_their_size():
    """Generate's new row, a column longer each step: one cell a column (a Vega step), full-size cells until the
    columns no longer fit, then halved, so most steps swap only the data in the browser (a new spec is a new Vega
    view); drawn on a canvas, its cells' values printed while they fit."""
    def spec(T: int, max_px: int = 560) -> dict:
        row = np.random.default_rng(T).dirichlet(np.ones(T), size=9)
        labels = [f"{i + 1}: word" for i in range(T)]  # drawn at -45° from the first step
        s = heatmaps.heatmap(row, [f"head {h + 1}" for h in range(9)], labels,
                             Look(scale="weights", max_px=max_px, growing=True)).to_dict()
        return {k: v for k, v in s.items() if k not in ("data", "datasets")}

    full = cells.full_cell_px()
    fit = 560 // full  # 12 columns of 44 px
    first = spec(5)
    assert first["width"] == {"step": full} and first["height"] == 9 * full
    assert first["usermeta"]["embedOptions"]["renderer"] == "canvas"
    assert any(layer["mark"]["type"] == "text" for layer in first["layer"])  # values printed in 44 px cells
    assert all(spec(T) == first for T in range(6, fit + 1))  # one spec from 5 to 12 columns
    shrunk = spec(fit + 1)  # room for 15 columns: cells a fifth smaller, values still printed
    assert shrunk["width"] == {"step": 560 // 15} and any(layer["mark"]["type"] == "text" for layer in shrunk["layer"])
    assert all(spec(T) == shrunk for T in range(fit + 2, 16)) and spec(16) != shrunk
    news = sum(spec(T) != spec(T - 1) for T in range(6, 101))
    assert news <= 13, news  # 95 steps, a dozen new Vega views
    rows_first = spec(5, max_px=300)  # 9 rows in 300 px: 33 px cells, 9 columns of them before they shrink
    assert rows_first["width"] == {"step": 33} and spec(9, max_px=300) == rows_first != spec(10, max_px=300)

    def values(T: int, max_px: int, growing: bool) -> bool:
        row = np.full((9, T), 1 / T)
        chart = heatmaps.heatmap(row, [f"head {h + 1}" for h in range(9)], [f"{i}: word" for i in range(T)],
                                 Look(scale="weights", max_px=max_px, growing=growing)).to_dict()
        return any(layer["mark"]["type"] == "text" and {"filter": "!datum.masked"} in layer.get("transform", [])
                   for layer in chart["layer"])  # the values' text (the masked cells' "−∞" is another)

    for max_px in (300, 560):  # its cells print their values for exactly as many steps as a chart sized each step
        assert [values(T, max_px, True) for T in range(5, 31)] == [values(T, max_px, False) for T in range(5, 31)]
    plain = heatmaps.heatmap(causal_scores(5), LABELS, LABELS).to_dict()
    assert isinstance(plain["width"], int)  # other heatmaps keep a width in pixels
    assert cells.spec_signature(9, 7, ["a"] * 7, 560, False, growing=True) == \
        cells.spec_signature(9, 12, ["a"] * 12, 560, False, growing=True)


def chart_text(spec: dict) -> str:
    """A spec's text without its data (axis, legend and tooltip titles, mask labels)."""
    return json.dumps({k: v for k, v in spec.items() if k not in ("data", "datasets")}, ensure_ascii=False)


def test_charts_speak_the_session_language():
    mask = np.triu(np.ones((3, 3)), 1)
    with language(CHINESE):
        scores = chart_text(heatmaps.heatmap(causal_scores(3), LABELS[:3], LABELS[:3]).to_dict())
        masks = chart_text(heatmaps.heatmap(mask, LABELS[:3], LABELS[:3], Look(scale="mask")).to_dict())
        panels = chart_text(heatmaps.heads_grid(np.random.rand(2, 3, 3), LABELS[:3]).to_dict())
        titles = list(heatmaps.heads_grid(np.random.rand(2, 3, 3), LABELS[:3]).data["panel"].unique())
        note = scales.out_of_range_note(np.array([[-0.5, 2.0]]), "weights")
        window = window_charts.masks_chart(window_charts.masks_frame({"causal": mask.astype(bool)}), 20).to_dict()
    assert '"title": "键"' in scores and '"title": "查询"' in scores and '"title": "值"' in scores  # axes, legend
    assert '"key"' not in scores and '"query"' not in scores
    assert "0 = 可见" in masks and "1 = 被遮掩" in masks and "掩码" in masks  # the mask's legend, both entries
    assert "面板" in panels and '"title": "权重"' in panels and titles == ["头 1", "头 2"]
    assert note == "超出颜色刻度（0 到 1）：红色 = 小于 0（1 个单元格）；粉色 = 大于 1（1 个单元格）。"
    # a legend of categories: the data keeps its English values (one cached frame), the labels are translated
    assert set(window_charts.masks_frame({"causal": mask.astype(bool)})["seen"]) == {"visible", "hidden"}
    legend = window["spec"]["encoding"]["color"]["legend"]["labelExpr"]
    assert legend.startswith('{"visible": "可见", "hidden": "被遮掩"}[datum.label]')
    english = chart_text(heatmaps.heatmap(causal_scores(3), LABELS[:3], LABELS[:3]).to_dict())
    assert '"title": "key"' in english and "键" not in english  # outside the block: English again


def test_look_builds_in_its_own_language_on_any_thread():
    """A chart prepared ahead (state/ahead.py) is built on a worker thread, where the session's language is not
    set: the Look read in the script carries it."""
    from concurrent.futures import ThreadPoolExecutor

    look = Look(scale="weights", lang=CHINESE)
    with ThreadPoolExecutor(1) as pool:
        text = pool.submit(lambda: chart_text(look.chart(np.eye(3), LABELS[:3], LABELS[:3]).to_dict())).result()
    assert '"title": "键"' in text and '"title": "权重"' in text


def shown_titles(spec: dict) -> list[str]:
    """A sent chart's titles: in its spec (a chart drawn as it was built) or in its lifted texts' dataset."""
    from dashboard.drawing.chart_cache import TEXTS

    if TEXTS not in spec.get("datasets", {}):
        return re.findall(r'"title": "([^"]*)"', chart_text(spec))
    import pyarrow as pa

    row = pa.ipc.open_stream(spec["datasets"][TEXTS]).read_all().to_pylist()[0]
    return [row[f"t{i}"] for i in range(len(row))]


def sent_spec(spec: dict) -> str:
    """What the browser compares to decide between swapping a chart's data and building a new Vega view: the spec
    without its datasets and their names, as Streamlit sends it (its view names made stable)."""
    from streamlit.elements.vega_charts import _stabilize_vega_json_spec

    bare = {k: v for k, v in spec.items() if k not in ("data", "datasets")}
    return _stabilize_vega_json_spec(json.dumps(bare, ensure_ascii=False, sort_keys=True))


def test_a_language_switch_keeps_a_heatmaps_spec_and_sends_its_words_as_data():
    """Lifted titles: axes, legend, tooltip and the cells' ARIA description read signals from a one-row dataset."""
    from dashboard.drawing.chart_cache import TEXTS, _to_spec, lift_texts

    look = Look(scale="weights", selectable=True)
    with language(CHINESE):
        zh, zh_texts = lift_texts(_to_spec(look.chart(np.eye(3), LABELS[:3], LABELS[:3])))
    en, en_texts = lift_texts(_to_spec(look.chart(np.eye(3), LABELS[:3], LABELS[:3])))
    assert sent_spec(zh) == sent_spec(en)
    assert dict(zip(en_texts, zh_texts)) == {"key": "键", "query": "查询", "weight": "权重", "value": "值",
                                             "masked": "已遮掩"}
    cells = en["layer"][0]
    signal = {text: f"lang_t{i}" for i, text in enumerate(en_texts)}
    assert cells["encoding"]["x"]["title"] == {"signal": signal["key"]} and "tooltip" not in cells["encoding"]
    assert cells["encoding"]["color"]["title"] == {"signal": signal["weight"]}
    assert cells["mark"]["tooltip"] == cells["mark"]["description"]  # what a screen reader reads is the tooltip
    assert signal["query"] + " + ' ' + datum[\"row\"]" in cells["mark"]["tooltip"]["expr"]
    assert {"name": "lang_t0", "expr": f'data("{TEXTS}")[0].t0'} in en["params"]
    assert en["layer"][-1]["data"] == {"name": TEXTS}  # the dataset is compiled into the view by a layer reading it
    # every other layer a screen reader reads describes its marks with the signals (Vega-Lite's own description
    # printed a signal title as "[object Object]")
    described = [layer["mark"]["description"]["expr"] for layer in en["layer"][:-1]
                 if layer["mark"].get("aria", True) is not False]
    assert len(described) == 3 and all(signal["key"] in d for d in described)
    grids = {}
    for code in (CHINESE, ENGLISH):
        with language(code):
            grids[code] = lift_texts(_to_spec(heatmaps.heads_grid(np.random.rand(2, 3, 3), LABELS[:3])))
    # the panels' too
    assert sent_spec(grids[CHINESE][0]) == sent_spec(grids[ENGLISH][0]) and "面板" in grids[CHINESE][1]
    assert grids[ENGLISH][0]["spec"]["layer"][-1]["data"] == {"name": TEXTS}
    bar = _to_spec(alt.Chart(pd.DataFrame({"ms": [1.0]})).mark_bar().encode(x=alt.X("ms:Q", title="time (ms)")))
    assert lift_texts(bar) == (bar, ())  # a chart that is not layered keeps its words


def test_chart_cache_never_serves_one_language_to_another():
    from dashboard.drawing import matrices

    class Box:  # what a Streamlit container is to show_matrix: the specs it was sent
        def __init__(self):
            self.specs = []

        def vega_lite_chart(self, spec, **kw):
            self.specs.append(spec)

        def markdown(self, *args, **kw):
            pass

    box, m = Box(), np.random.default_rng(1).random((4, 4))
    for code in (CHINESE, ENGLISH, CHINESE):  # the same chart, cached under the same page key, in turn
        with language(code):
            matrices.show_matrix(box, m, LABELS[:4], LABELS[:4], Look(scale="weights"), key="lang_test",
                                 cache_key=("lang_test",))
    zh, en, zh_again = (shown_titles(s) for s in box.specs)
    assert {"键", "查询", "权重", "值"} <= set(zh) and "key" not in zh
    assert {"key", "query", "weight", "value"} <= set(en) and "键" not in en and "权重" not in en
    assert zh_again == zh  # and each language's titles are still cached
    # the words travel as data: the spec the browser gets is one in every language but for its vertical axes' titles
    # (level in Chinese: cells.axis_title_config), the one thing a switch's new Vega view is for
    level = cells.axis_title_config(CHINESE)
    assert all(s["config"][k] | v == s["config"][k] for s in box.specs[::2] for k, v in level.items())
    assert not set(level) & set(box.specs[1]["config"])
    assert len({sent_spec({**s, "config": {k: v for k, v in s["config"].items() if k not in level}})
                for s in box.specs}) == 1
    assert "键" not in sent_spec(box.specs[0]) and '"key"' not in sent_spec(box.specs[0])
    # any cached chart (a page's own structure key names no language): the template is kept per language
    from dashboard.drawing import chart_cache, learn_charts

    for code in (CHINESE, ENGLISH):
        with language(code):
            chart_cache.vega(box, lambda: learn_charts.loss_chart([2.0, 1.5, 1.0], max_steps=10),
                             lambda: learn_charts.loss_frame([2.0, 1.5, 1.0]), ("lang_test_loss",), ("lang_loss",),
                             "lang_loss", False)
    loss_zh, loss_en = (chart_text(s) for s in box.specs[-2:])
    assert "训练步数" in loss_zh and "training step" in loss_en and "训练步数" not in loss_en


def test_sized_columns_know_their_widths():
    """A page states its column weights once: ``sized_columns`` makes the columns and each knows its width."""
    from dashboard.drawing import sizes

    left, right = sizes.sized_columns([2, 3])
    usable = sizes.content_px() - sizes.GAP_PX
    assert (left.px, right.px) == (int(usable * 2 / 5), int(usable * 3 / 5))
    labels = [f"{i + 1}: word" for i in range(8)]
    assert right.fit(10_000, labels) == sizes.cell_area(right.px, labels) < sizes.fit(10_000, labels)
    assert right.fit(100, labels) == 100  # the cap holds
    assert left.fit(10_000, labels, legend=False) > left.fit(10_000, labels)  # a legend takes room
    inner = sizes.sized_columns(2, right)  # columns inside a column share its width
    assert [c.px for c in inner] == [(right.px - sizes.GAP_PX) // 2] * 2
    assert callable(left.markdown) and left.box is not None  # used as the Streamlit column itself


def test_values_with_three_decimals_are_printed_only_where_they_fit_their_cells():
    """Explore's context vectors print ".3f" values: "-0.452" in a 33 px cell (the book's 6 x 2 at 1280x720) ran over
    both neighbours (text_px is sized for "-0.25"). The font shrinks to fit, or the values keep 2 fixed decimals."""
    def text_layers(px: int, m: np.ndarray, scale: str = "scores") -> list[dict]:
        chart = heatmaps.heatmap(m, LABELS[:2], LABELS[:2], Look(scale=scale, max_px=2 * px, text_format=".3f"))
        return [layer for layer in chart.to_dict()["layer"]
                if layer["encoding"].get("text", {}).get("field") == "value"]

    signed = np.array([[-0.123, 0.5], [0.25, -0.75]])
    (two,) = text_layers(33, signed)  # "-0.750" at 12 px needs 38 px; "-0.75" fits
    assert two["encoding"]["text"]["format"] == ".2f" and two["mark"]["fontSize"] == 12
    assert text_layers(33, signed / 1000)[0]["encoding"]["text"]["format"] == ".2f"  # "-0.00", never "-8e-4"
    # decided by the scale, not the values: the spec is shared by every sentence of that shape, negative or not
    assert text_layers(33, np.abs(signed) / 2)[0]["encoding"]["text"]["format"] == ".2f"
    assert text_layers(33, np.abs(signed) / 2, "weights")[0]["encoding"]["text"]["format"] == ".3f"  # "0.375" fits
    for px in (40, 44):
        (layer,) = text_layers(px, signed)
        font = layer["mark"]["fontSize"]
        assert layer["encoding"]["text"]["format"] == ".3f" and 12 <= font and font * (5 * 0.52 + 0.28) <= px - 3


def test_chinese_labels_count_double_for_the_key_labels_angle_and_the_label_room():
    """A Chinese character is drawn about twice as wide as a Latin one: "第一个词" levelled in a 40 px cell ran into
    its neighbours (the walkthrough's step 12 on a phone, in Chinese)."""
    from dashboard.drawing.cells import key_label_angle, label_chars

    assert label_chars(["你好", "one"]) == 4 and label_chars(["ab"]) == 2 and label_chars([]) == 1
    assert key_label_angle(40, ["word"]) == 0  # 4 Latin characters fit
    assert key_label_angle(40, ["第一个词"]) != 0  # the same count of Chinese characters does not
