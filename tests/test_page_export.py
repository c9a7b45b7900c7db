"""Slide export of every chart a page draws (issue 9): the per-run registry behind ``page_downloads``.

Every Vega-Lite chart and every PNG a page draws is registered exactly once (a chart builder per Vega
chart; the drawn PNGs of a raster or a grid of rasters); the zip holds an SVG and a PNG per chart and a
CSV where it has numbers; the registry starts empty in every run and lets go of the previous run."""

from __future__ import annotations

import base64
import csv
import gc
import io
import json
import re
import weakref
import zipfile

import numpy as np
import pytest
from langs import CHINESE, ENGLISH
from PIL import Image

from apptest_utils import messages, new_app

SHAPE, LAB, WALK = "app_pages/shape_flow.py", "app_pages/masking_lab.py", "app_pages/walkthrough.py"
LEARN, BENCH, EXPLORE = "app_pages/learn.py", "app_pages/benchmark.py", None
LONG = " ".join(["the cat sat on the mat and looked at the dog"] * 12)  # 132 tokens: rasters

pytestmark = pytest.mark.usefixtures("fresh_caches")  # tests/conftest.py


@pytest.fixture
def registered(monkeypatch):
    """Every chart registered by the page scripts, and what page_downloads offered (per run)."""
    import dashboard.export.slides as slides

    seen: dict[str, list] = {"registered": [], "offered": []}
    register, take = slides.register_chart, slides.take_page_charts

    def spy_register(entry):
        seen["registered"].append(entry)
        return register(entry)

    def spy_take():
        out = take()
        seen["offered"].append(out)
        return out

    monkeypatch.setattr(slides, "register_chart", spy_register)
    monkeypatch.setattr(slides, "take_page_charts", spy_take)
    return seen


def run_page(page, seen, **query):
    at = new_app(**query)
    at.session_state["page_downloads_open"] = True  # the popover's contents are drawn only while it is open
    at.run()
    if page:
        at.switch_page(page)
    seen["registered"].clear()
    seen["offered"].clear()
    at.run()
    assert not messages(at)["exception"], messages(at)
    return at


def drawn(at) -> tuple[int, int]:
    """How many Vega-Lite charts and PNG images the page drew."""
    return len(at.get("vega_lite_chart")), len(at.get("image"))


def accounted(entries) -> tuple[int, int]:
    """How many Vega-Lite charts and images the registered entries stand for."""
    return sum(e.chart is not None for e in entries), sum(len(e.images) for e in entries if e.chart is None)


def offered(at) -> list[str]:
    return list(at.selectbox(key="page_downloads_pick").options)


@pytest.mark.parametrize("page", [SHAPE, LAB, WALK, EXPLORE])
def test_every_chart_of_a_page_is_registered_once(page, registered):
    at = run_page(page, registered)
    entries = registered["registered"]
    charts, images = drawn(at)
    assert charts > 0
    assert accounted(entries) == (charts, images), [e.what for e in entries]
    assert registered["offered"] and registered["offered"][-1] == entries
    assert len(offered(at)) == len(entries)
    labels = sorted(b.proto.label for b in at.get("download_button"))
    n = len(entries)  # "All 1 charts" was wrong
    assert labels == [f"All {n} chart{'s' if n != 1 else ''} on this page (zip)", "CSV", "PNG 2x", "SVG"]


def test_rasters_of_long_inputs_are_registered_with_their_png(registered):
    at = run_page(LAB, registered, sentence=LONG, input_mode="learned")
    entries = registered["registered"]
    charts, images = drawn(at)
    assert images >= 3  # the diff matrices and the panels are drawn as PNGs at 132 tokens
    assert accounted(entries) == (charts, images)
    rasters = [e for e in entries if e.images]
    for e in rasters:
        for _, png in e.images:
            assert png.startswith(b"\x89PNG\r\n\x1a\n")


def test_learn_and_benchmark_register_their_charts(registered):
    from attn_core.labs.benchmark import Result

    at = new_app()
    at.session_state["page_downloads_open"] = True
    at.run()
    at.switch_page(LEARN).run()
    at.button(key="learn_load").click().run()
    registered["registered"].clear()
    at.run()
    assert not messages(at)["exception"], messages(at)
    entries = registered["registered"]
    charts, images = drawn(at)
    assert images == 8 and accounted(entries) == (charts, images)  # 2 layers x 4 heads in one grid entry
    assert len(offered(at)) == 3  # loss, the heads grid, scores over training

    at = new_app()
    at.run()
    at.switch_page(BENCH).run()
    rows = [Result(impl, size, 1, 6, 3, 1, "cpu", "float32", "forward", ms, 1.0, None, ms * 0.9, ms * 1.1, 7).row()
            for size in ("book", "small") for impl, ms in (("raw SDPA", 0.1), ("MultiHeadAttention (explicit)", 0.3))]
    at.session_state["bench_results"] = (rows, [])
    registered["registered"].clear()
    at.run()
    assert not messages(at)["exception"], messages(at)
    assert accounted(registered["registered"]) == drawn(at) == (2, 0)
    assert [e.stem() for e in registered["registered"]] == ["benchmark_book_forward_cpu_float32",
                                                           "benchmark_small_forward_cpu_float32"]


def test_the_closed_control_draws_only_its_button(registered):
    at = new_app()
    at.run()
    at.switch_page(LAB).run()
    assert not messages(at)["exception"], messages(at)
    assert registered["offered"][-1] and not at.get("download_button")
    assert not [s for s in at.selectbox if s.key == "page_downloads_pick"]
    at.session_state["page_downloads_open"] = True  # the teacher opens it
    at.run()
    assert len(at.get("download_button")) == 4 and len(offered(at)) == len(registered["offered"][-1])


def test_the_zip_holds_svg_png_and_csv_of_every_chart_named_by_what_and_settings(registered):
    from dashboard.export import formats as export

    every = []
    for section in ("Methods", "Mistakes", "Dropout", "Scaling"):  # the lab draws one section at a time
        run_page(LAB, registered, variant="CausalAttention", lab_section=section)
        entries = registered["offered"][-1]
        every += entries
        with zipfile.ZipFile(io.BytesIO(export.page_zip(entries))) as z:
            names = set(z.namelist())
            assert len(names) == 3 * len(entries)  # every chart of this page has numbers
            for stem in export.unique_stems(entries):
                assert re.search(r"_CausalAttention_T6$|_d_k128$", stem), stem  # which settings
                svg, png = z.read(f"{stem}.svg").decode(), z.read(f"{stem}.png")
                assert svg.startswith("<svg") and ("CausalAttention · 6 tokens" in svg or "d_k 128" in svg)
                with Image.open(io.BytesIO(png)) as img:
                    assert img.format == "PNG" and min(img.size) > 100
                rows = list(csv.reader(io.StringIO(z.read(f"{stem}.csv").decode())))
                assert len(rows) > 6 and all(len(r) == len(rows[0]) for r in rows)
    stems = export.unique_stems(every)
    assert "two_correct_masks_CausalAttention_T6" in stems  # what it is, then which settings
    assert "right_vs_mistake-zeros-in-the-scores_CausalAttention_T6" in stems
    # A chart drawn without a title on screen gets one in its export: what it is and the settings.
    grid = next(e for e in every if e.what == "two_correct_masks")
    svg = export.entry_svg(grid).decode()
    assert "Two correct causal masks" in svg and "CausalAttention · 6 tokens" in svg


def test_a_raster_exports_its_own_png_framed_with_title_and_legend_and_its_csv(registered):
    from dashboard.export import formats as export

    run_page(LAB, registered, sentence=LONG, input_mode="learned")
    entry = next(e for e in registered["offered"][-1] if e.what == "masks_difference_in_eps")
    assert entry.chart is None and len(entry.images) == 1
    svg = export.entry_svg(entry).decode()
    assert svg.count("data:image/png;base64,") == 2  # the drawn PNG and the legend's colour bar
    # the title, the settings, the legend's title
    assert "units of float32 epsilon" in svg and "132 tokens" in svg and "|difference|" in svg
    assert base64.b64encode(entry.images[0][1]).decode() in svg  # the very PNG the page drew
    png = export.entry_png(entry)
    with Image.open(io.BytesIO(png)) as img:
        img.load()
        assert img.format == "PNG" and img.size[0] >= 2 * 480  # 2x: the image is 480 px wide on the slide
    rows = list(csv.reader(io.StringIO(export.entry_csv(entry).decode())))
    assert len(rows) == 133 and len(rows[1]) == 133  # header + 132 rows; label + 132 columns
    assert float(rows[1][1]) == pytest.approx(0.0, abs=2)  # |(a) - (b)| in epsilons


def test_the_registry_starts_empty_every_run_and_lets_the_previous_run_go(registered):
    import dashboard.export.slides as slides

    at = run_page(LAB, registered)
    first = registered["offered"][-1]
    refs = [weakref.ref(e) for e in first]
    n = len(first)
    del first
    registered["registered"].clear()
    registered["offered"].clear()
    for _ in range(2):
        at.run()
        assert len(registered["offered"][-1]) == n  # not 2n: nothing carried over from the run before
        registered["offered"].clear()
    gc.collect()
    assert not [r() for r in refs if r() is not None], "a previous run's charts are still reachable"
    # Another page in the same session: only its own charts.
    at.switch_page(WALK).run()
    assert {e.what for e in registered["offered"][-1]} == {"3.3.1_scores_2"}
    assert len(slides._RUNS) <= 64  # one record per live session's latest run, not one per run ever


def test_a_stopped_run_leaves_nothing_for_the_next(registered):
    """A run that stops before page_downloads (an error) must not hand its charts to the next run."""
    at = run_page(LAB, registered)
    n = len(registered["offered"][-1])
    at.session_state["d_out"] = 3  # with 2 heads: an error, the page stops before any chart
    at.session_state["variant"] = "MultiHeadAttention"
    at.session_state["num_heads"] = 2
    registered["offered"].clear()
    at.run()
    assert messages(at)["error"] and not registered["offered"]
    at.session_state["d_out"] = 2
    at.run()
    assert len(registered["offered"][-1]) == n


def test_large_matrices_are_held_by_the_bounded_cache_not_the_session(registered, monkeypatch):
    import dashboard.drawing.chart_cache as chart_cache
    import dashboard.export.slides as slides

    monkeypatch.setattr(slides, "KEEP_MATRIX_BYTES", 4096)  # 132 x 132 floats count as large here
    run_page(LAB, registered, sentence=LONG, input_mode="learned")
    entry = next(e for e in registered["offered"][-1] if e.what == "masks_difference_in_eps")
    assert entry.table().startswith(b'"",')  # the shared cache holds the matrix while it is wanted
    chart_cache._DRAWN.clear()  # a busy server's cache lets it go: the session does not keep it alive ...
    gc.collect()
    assert entry.table() == slides.GONE_CSV  # ... and the CSV says so instead of failing
    run_page(LAB, registered, sentence=LONG, input_mode="learned", lab_section="Scaling")
    small = next(e for e in registered["offered"][-1] if e.what == "scaling")  # 8 x 8: kept by the session
    assert small.table().startswith(b'"panel"')


def test_matrices_a_page_already_caches_are_not_cached_twice_for_export(registered, monkeypatch):
    import dashboard.drawing.chart_cache as chart_cache
    import dashboard.export.slides as slides

    monkeypatch.setattr(slides, "KEEP_MATRIX_BYTES", 4096)
    rasters = []
    for section in ("Scores", "All heads", "Weights", "Output"):  # Explore draws only the open section
        run_page(EXPLORE, registered, sentence=LONG, input_mode="learned", variant="MultiHeadAttention", d_in="8",
                 d_out="8", num_heads="2", section=section)
        rasters += [e for e in registered["registered"] if e.images]
    assert len(rasters) >= 4  # scores, heads grid, weights, context ... drawn as images at 132 tokens
    exported = [repr(k) for k in chart_cache._DRAWN._entries if k[0] == "export_matrix"]
    # Explore memoizes the matrices it draws (heads, scores, weights ...): the export only refers to them. Only
    # its output matrix, computed afresh on every run, is handed to the cache by the export.
    assert len(exported) <= 1 and all("'output'" in k for k in exported), exported
    assert all(e.table().startswith(b'"') for e in rasters)  # and their CSVs are there


def test_the_walkthrough_draws_every_step_as_a_chart_beside_its_numbers(registered):
    from attn_core.labs.walkthrough import book_walkthrough

    at = run_page(WALK, registered, input_mode="learned")  # learned inputs: "your sentence" is drawn too
    steps = book_walkthrough()
    for i, step in enumerate(steps):
        if i:
            at.button(key="walk_step_next").click().run()
        assert at.session_state["walk_step"] == i
        book = [e for e in registered["registered"] if e.what == f"{step.section}_{step.key}"]
        assert len(book) == 2, step.key  # the book's inputs, and the same code on your sentence's
        specs = [json.loads(el.proto.spec) for el in at.get("vega_lite_chart")]
        assert len(specs) == 2
        scale = specs[0]["layer"][0]["encoding"]["color"].get("scale", {})
        if step.key in ("weights", "softmax_2", "masked"):
            assert scale.get("domain") == [0, 1], step.key
        elif step.key in ("scores_2", "v2"):
            assert scale.get("domainMid") == 0, step.key
        value = np.asarray(step.value, dtype=np.float64).reshape(len(book[0].table().splitlines()) - 1, -1)
        rows = list(csv.reader(io.StringIO(book[0].table().decode())))[1:]
        got = np.array([[float(v) for v in r[1:]] for r in rows])
        assert np.allclose(got, value, equal_nan=True), step.key  # the chart shows the step's own numbers
        assert f"§{step.section} {step.title}" in [m.value.split("**")[1] for m in at.markdown
                                                   if m.value.startswith("**§")]
        registered["registered"].clear()
    rows = list(csv.reader(io.StringIO(book[0].table().decode())))  # the last step: (6, 2), tokens as rows
    assert [r[0] for r in rows[1:]] == ["1: Your", "2: journey", "3: starts", "4: with", "5: one", "6: step"]


def test_explore_offers_the_open_sections_charts_named_by_head(registered):
    run_page(None, registered, variant="MultiHeadAttention", num_heads="2", section="Scores")
    stems = [e.stem() for e in registered["registered"]]
    assert stems and all("head1" in s or s.startswith("mask") for s in stems), stems
    assert any(s.startswith("scores_head1_MultiHeadAttention_T6") for s in stems), stems


@pytest.mark.parametrize(("lang", "title"), [(ENGLISH, "attention weights, head 1"), (CHINESE, "注意力权重，头 1")])
def test_the_weights_slide_is_titled_in_the_pages_language(registered, lang, title):
    """The weights heatmap's slide says what it is in the page's language (it was titled "weights" in English)."""
    run_page(EXPLORE, registered, lang=lang, variant="MultiHeadAttention", num_heads="2", d_out="4")
    titles = {e.what: e.title for e in registered["registered"]}
    assert titles.get("weights_head1") == title, titles
