"""The sidebar's colour map (issue 41 item 6): viridis or the colour-blind-safe cividis for weights in every heatmap
(rect charts, PNG rasters, their exported legends), kept in the link as ``?cmap=``; signed values stay blue-orange."""

from __future__ import annotations

import json

import numpy as np
import pytest

from apptest_utils import messages, new_app, spec_nodes, specs
from dashboard.drawing import heatmaps, rasters, scales
from dashboard.state.settings_schema import DEFAULTS, PRESETS, SCHEMA, BadValue, parse_url_value

# Vega's cividis ends (vega-scale's scheme data): the raster's palette must start and end on them.
CIVIDIS_ENDS = ((0x00, 0x20, 0x51), (0xfc, 0xe6, 0x47))


def schemes(spec: dict) -> set[str]:
    return {n["scheme"] for n in spec_nodes(spec) if isinstance(n.get("scheme"), str)}


def test_the_setting_defaults_to_viridis_and_a_link_may_ask_for_cividis():
    assert DEFAULTS["cmap"] == scales.DEFAULT_COLOUR_MAP == "viridis"
    assert parse_url_value("cmap", "cividis") == "cividis"
    with pytest.raises(BadValue) as e:
        parse_url_value("cmap", "jet")
    assert "viridis, cividis" in str(e.value)
    assert all("cmap" not in preset for preset in PRESETS.values())  # a preset keeps how charts look


def test_weights_take_the_colour_map_and_signed_values_stay_blue_orange():
    for cmap in SCHEMA["cmap"].labels:
        assert scales.color_scale("weights", cmap=cmap).scheme == cmap
        assert scales.color_scale("magnitude:2", cmap=cmap).scheme == cmap
        assert scales.color_scale("scores", cmap=cmap).scheme == "blueorange"
    m = np.array([[0.2, 0.8], [0.5, 0.5]])
    spec = heatmaps.heatmap(m, ["a", "b"], ["a", "b"], heatmaps.Look(scale="weights", cmap="cividis")).to_dict()
    assert schemes(spec) == {"cividis"}
    grid = heatmaps.facet_grid([m, m], ["h1", "h2"], ["a", "b"],
                               look=heatmaps.Look(scale="weights", cmap="cividis")).to_dict()
    assert schemes(grid) == {"cividis"}
    # a chart in another colour map is another spec template (the chart cache keys on the Look)
    assert (heatmaps.Look(cmap="cividis").structure("heatmap", 2, 2, ["a", "b"])
            != heatmaps.Look().structure("heatmap", 2, 2, ["a", "b"]))
    assert heatmaps.Look(cmap="cividis").data_key("k") != heatmaps.Look().data_key("k")


def test_rasters_draw_cividis_from_its_dark_blue_to_its_yellow_getting_lighter():
    ramp = np.linspace(0, 1, 64)[None, :]
    rgb = rasters.raster_rgb(ramp, "weights", cmap="cividis")[0].astype(float)
    assert tuple(rgb[0]) == CIVIDIS_ENDS[0] and tuple(rgb[-1]) == CIVIDIS_ENDS[1]
    lightness = rgb @ np.array([0.2126, 0.7152, 0.0722])
    assert np.all(np.diff(lightness) > 0)  # cividis rises in lightness all the way: order readable without hue
    assert not np.array_equal(rgb, rasters.raster_rgb(ramp, "weights")[0])  # not viridis
    # signed values: the same diverging map whatever the colour map
    signed = np.linspace(-1, 1, 9)[None, :]
    assert np.array_equal(rasters.raster_rgb(signed, "scores", cmap="cividis"), rasters.raster_rgb(signed, "scores"))


def test_exported_raster_legend_is_drawn_in_the_raster_colour_map():
    from dashboard.export.formats import _legend_strip

    viridis, *_rest = _legend_strip("weights", None)
    cividis, *_rest = _legend_strip("weights", None, "cividis")
    assert viridis != cividis


@pytest.mark.usefixtures("fresh_caches")
def test_a_cividis_link_draws_explores_weights_in_cividis_and_keeps_it():
    at = new_app(cmap="cividis")
    at.run()
    assert not messages(at)["exception"], messages(at)
    assert at.selectbox(key="cmap").value == "cividis"
    drawn = set().union(*(schemes(s) for s in specs(at)))
    assert "cividis" in drawn and "viridis" not in drawn
    assert at.query_params["cmap"] == ["cividis"] or at.query_params["cmap"] == "cividis"
    assert "cividis" in " ".join(c.value for c in at.caption)  # the weights' caption names the map shown


@pytest.mark.usefixtures("fresh_caches")
def test_a_bad_colour_map_in_a_link_is_named_and_viridis_is_used():
    at = new_app(cmap="jet")
    at.run()
    msgs = messages(at)
    assert not msgs["exception"], msgs
    assert any("**cmap**" in w.replace("\\", "") and "viridis" in w for w in msgs["warning"]), msgs["warning"]
    drawn = set().union(*(schemes(s) for s in specs(at)))
    assert "viridis" in drawn and "cividis" not in drawn


@pytest.mark.usefixtures("fresh_caches")
def test_a_page_with_its_own_controls_keeps_the_colour_map_in_the_sidebar():
    at = new_app(cmap="cividis")
    at.run()
    at.switch_page("app_pages/kv_cost.py").run()
    assert not messages(at)["exception"], messages(at)
    assert at.selectbox(key="cmap").value == "cividis"
    at.switch_page("app_pages/explore.py").run()
    assert "cividis" in json.dumps(specs(at))


def test_the_model_views_grid_of_heads_takes_the_colour_map():
    from dashboard.drawing.grid_charts import model_grid_png

    thumbs = np.tile(np.linspace(0, 1, 16).reshape(4, 4), (2, 3, 1, 1))  # 2 layers x 3 heads
    assert model_grid_png(thumbs, cmap="cividis") != model_grid_png(thumbs)


@pytest.mark.parametrize("transpose", [False, True])
def test_the_grid_png_holds_each_heads_thumbnail_in_its_cell_and_clear_margins(transpose):
    import io

    from PIL import Image

    from dashboard.drawing.grid_charts import GRID_MARGIN, GRID_TILE_PX, model_grid_png
    from dashboard.drawing.rasters import raster_rgb

    thumbs = np.random.default_rng(0).random((3, 2, 5, 5)).astype(np.float32)  # 3 layers x 2 heads
    png = np.asarray(Image.open(io.BytesIO(model_grid_png(thumbs, transpose=transpose))).convert("RGBA"))
    tile, pad = GRID_TILE_PX, round(GRID_TILE_PX * GRID_MARGIN)
    inner = tile - 2 * pad
    rows, cols = (2, 3) if transpose else (3, 2)
    assert png.shape[:2] == (rows * tile, cols * tile)
    nearest = ((np.arange(inner) + 0.5) * 5 / inner).astype(int)
    for layer in range(3):
        for head in range(2):
            row, col = (head, layer) if transpose else (layer, head)
            cell = png[row * tile:(row + 1) * tile, col * tile:(col + 1) * tile]
            assert np.array_equal(cell[pad:pad + inner, pad:pad + inner, :3],
                                  raster_rgb(thumbs[layer, head], "weights")[nearest][:, nearest])
            assert (cell[pad:pad + inner, pad:pad + inner, 3] == 255).all()
            assert (cell[:pad, :, 3] == 0).all() and (cell[:, -pad:, 3] == 0).all()
