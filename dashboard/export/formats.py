"""Slides from charts: SVG and 2x PNG of any Altair chart, CSV of any matrix, a zip of a page's charts,
and file names that say what and with which settings. Pure functions: data in, bytes out.

Charts are converted offline by vl-convert (no browser, no network): an exported chart keeps its
title, axis labels and legend, at the size it has on screen (PNG at 2x for a projector or a slide).
A matrix drawn as a PNG raster (too many cells for rect marks) is exported as that same image, framed
in an SVG with a title, axis names and a colour legend (and that SVG rendered at 2x as the PNG).

``PageChart`` is what a page drew (dashboard/export/slides.py registers one per chart; ``page_downloads``
offers them): everything is built from it only when a download is asked for.
"""

from __future__ import annotations

import base64
import html
import io
import os
import re
import threading
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import altair as alt
import numpy as np
import pandas as pd

from dashboard import languages
from dashboard.drawing.cells import axis_title_config
from dashboard.i18n import N_, _, lang, ngettext

PNG_SCALE = 2
SLIDE_PADDING = {"left": 10, "top": 10, "right": 24, "bottom": 24}
# Where a machine keeps fonts with every language's glyphs (each language's data): registered with vl-convert
# before its first picture, so a Chinese title or token label is drawn, never a row of empty boxes.
CJK_FONT_DIRS = languages.font_dirs()
SLIDE_FONTS = ", ".join([*languages.export_fonts(), "sans-serif"])
_fonts_lock = threading.Lock()
_fonts_done: list[str] = []


def register_cjk_fonts(dirs: Sequence[str] = CJK_FONT_DIRS) -> list[str]:
    """Register the first existing CJK font folders with vl-convert, once per process; the folders registered.
    Without one, Chinese text in an exported chart falls back to whatever vl-convert finds (often nothing:
    empty boxes); the app itself is unaffected (the browser draws its own text)."""
    with _fonts_lock:
        if not _fonts_done:
            import vl_convert as vlc

            for d in dirs:
                if os.path.isdir(d):
                    vlc.register_font_directory(d)
                    _fonts_done.append(d)
            _fonts_done.append("")  # tried: never again in this process
        return [d for d in _fonts_done if d]


def slide_name(what: str, variant: str, num_tokens: int | None, ext: str, head: int | None = None,
               extra: str = "") -> str:
    """``weights_head2_MultiHeadAttention_T10.svg``: what, which head (1-based), variant, tokens
    (``num_tokens`` None and an empty ``variant`` are left out)."""
    parts = [what] + ([f"head{head}"] if head is not None else []) + [
        variant, f"T{num_tokens}" if num_tokens is not None else ""]
    if extra:
        parts.append(extra)
    stem = "_".join(re.sub(r"[^A-Za-z0-9._-]+", "-", p).strip("-") for p in parts if p)
    return f"{stem}.{ext.lstrip('.')}"


def chart_svg(chart: alt.TopLevelMixin) -> bytes:
    """The chart as an SVG document (text stays text: sharp at any size, editable in a slide tool)."""
    import vl_convert as vlc

    register_cjk_fonts()
    return vlc.vegalite_to_svg(_spec(chart)).encode()


def chart_png(chart: alt.TopLevelMixin, scale: float = PNG_SCALE) -> bytes:
    """The chart as a PNG at ``scale`` x its on-screen size."""
    import vl_convert as vlc

    register_cjk_fonts()
    return vlc.vegalite_to_png(_spec(chart), scale=scale)


def _spec(chart: alt.TopLevelMixin) -> dict:
    """The chart's spec, its vertical axes' titles as the language it is exported in reads them (on the page:
    chart_cache.styled)."""
    spec = chart.to_dict()
    config = spec.setdefault("config", {})
    for part, values in axis_title_config(lang()).items():
        config[part] = {**config.get(part, {}), **values}
    return spec


def matrix_csv(matrix: np.ndarray, row_labels: Sequence[str], col_labels: Sequence[str]) -> bytes:
    """A matrix as CSV with its labels; -inf (masked) written as ``-inf``, full float precision."""
    m = np.asarray(matrix, dtype=np.float64)
    out = io.StringIO()
    quote = lambda s: '"' + str(s).replace('"', '""') + '"'  # noqa: E731
    out.write(",".join([quote("")] + [quote(c) for c in col_labels]) + "\n")
    for label, row in zip(row_labels, m):
        out.write(",".join([quote(label)] + [repr(float(v)) if np.isfinite(v) else str(v) for v in row]) + "\n")
    return out.getvalue().encode()


def zip_files(files: Mapping[str, bytes]) -> bytes:
    """Several exports in one zip (for building a deck from one page)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            z.writestr(name, data)
    return buf.getvalue()


def panels_csv(matrices: Sequence[np.ndarray], titles: Sequence[str], row_labels: Sequence[str],
               col_labels: Sequence[str]) -> bytes:
    """Several same-shaped matrices (a chart's panels) as one CSV: a ``panel`` column, then each matrix's
    rows as :func:`matrix_csv` writes them (one header line)."""
    parts = []
    for i, (m, title) in enumerate(zip(matrices, titles)):
        n_rows, n_cols = np.shape(m)
        lines = matrix_csv(m, row_labels[:n_rows], col_labels[:n_cols]).decode().splitlines()
        quoted = '"' + str(title).replace('"', '""') + '"'
        if i == 0:
            parts.append('"panel",' + lines[0])
        parts.extend(f"{quoted},{line}" for line in lines[1:])
    return ("\n".join(parts) + "\n").encode()


def frame_csv(df: pd.DataFrame) -> bytes:
    """A chart's data as CSV (benchmark bars, loss curves, ...)."""
    return df.to_csv(index=False).encode()


def chart_frame(chart: object) -> pd.DataFrame | None:
    """The first DataFrame a chart (or one of its layers / facets / concatenated parts) carries."""
    data = getattr(chart, "data", None)
    if isinstance(data, pd.DataFrame):
        return data
    for part in ("spec", "layer", "hconcat", "vconcat", "concat"):
        sub = getattr(chart, part, None)
        for item in (sub if isinstance(sub, list) else [sub]):
            if item is not None and item is not alt.Undefined:
                found = chart_frame(item)
                if found is not None:
                    return found
    return None


# --- What a page drew, and its files ------------------------------------------------------------------

@dataclass(frozen=True)
class SlideSettings:
    """The settings a page's charts were drawn with: in every exported file name and chart subtitle."""

    variant: str = ""
    num_tokens: int | None = None
    extra: str = ""

    def slug(self) -> str:
        """``extra`` for a file name: ``d_out 2, 2 heads`` → ``d_out2_2heads`` (``your sentence``: slide_name
        makes it ``your-sentence``)."""
        text = re.sub(r"\s*,\s*", "_", self.extra.strip())
        return re.sub(r"(?<=\d) +| +(?=\d)", "", text)

    def words(self) -> str:
        """``MultiHeadAttention · 10 tokens · dropout 0.1`` (for a subtitle, in this run's language)."""
        tokens = "" if self.num_tokens is None else ngettext("{n} token", "{n} tokens", self.num_tokens)
        return " · ".join(p for p in (self.variant, tokens, self.extra) if p)


@dataclass(eq=False)
class PageChart:
    """One chart a page drew, as much as is needed to export it later (nothing is built here).

    Either ``chart`` (an Altair chart builder: SVG and PNG through vl-convert) or ``images`` (PNG rasters
    as drawn, each with a caption: framed in an SVG with a title and a legend). ``table`` gives the CSV
    (a matrix with its labels, or the chart's data), or None when the chart has no numbers to offer."""

    what: str  # the file name's first part, e.g. "weights_head2"
    title: str  # what it is, in words: the picker's entry and the exported chart's title
    settings: SlideSettings | None = None
    chart: Callable[[], alt.TopLevelMixin] | None = None
    images: Sequence[tuple[str, bytes]] = ()
    scale: str = "scores"  # the rasters' colour scale (scales.scale_parts), for their legend
    cmap: str | None = None  # the colour map they were drawn in (rasters.raster_index's ``cmap``; None: default)
    bound: float | None = None  # a diverging raster's colour range is -bound..bound
    x_title: str = N_("key")  # translated where drawn (a page may pass its own words, translated already)
    y_title: str = N_("query")
    note: str = ""  # a line under a raster (e.g. how it was pooled)
    table: Callable[[], bytes] | None = None
    columns: int = 4  # rasters side by side before a new row starts
    fragment: str | None = None  # the Streamlit fragment that drew it (its reruns replace it)

    @property
    def subtitle(self) -> str:
        return self.settings.words() if self.settings else ""

    def label(self) -> str:
        """The picker's line: title and, for rasters, that it is an image."""
        return _("{title} (image)", title=self.title) if self.images and self.chart is None else self.title

    def stem(self) -> str:
        s = self.settings or SlideSettings()
        return slide_name(self.what, s.variant, s.num_tokens, "x", extra=s.slug())[:-2]


# A sans CJK face first: vl-convert takes the first family of a list, a browser (SVG) the first it has.
CJK_TITLE_FONTS = ", ".join([*languages.export_fonts(cjk_only=True), "sans-serif"])


def _has_cjk(text: object) -> bool:
    """Whether ``text`` (a title: a string or a list of lines) holds a CJK character."""
    return any("\u2e80" <= ch <= "\u9fff" or "\uff00" <= ch <= "\uffef" for ch in str(text))


def titled(chart: alt.TopLevelMixin, title: str, subtitle: str = "") -> alt.TopLevelMixin:
    """The chart with a title saying what it is (kept if it has one) and the settings as subtitle."""
    current = getattr(chart, "title", alt.Undefined)
    if current is not alt.Undefined and current:
        text = current.text if isinstance(current, alt.TitleParams) else current
    else:
        text = title
    params = dict(text=text, anchor="start", fontSize=16)
    if _has_cjk(f"{text}{subtitle}"):  # vl-convert draws a CJK title in a serif face, not bold, unless named
        params.update(font=CJK_TITLE_FONTS, subtitleFont=CJK_TITLE_FONTS)
    if subtitle:
        params.update(subtitle=subtitle, subtitleFontSize=12, subtitleColor="#444")
    # Vega's bounds can miss a few pixels of a legend that reaches below a short plot, or of a title longer
    # than the plot (measured: the "0" of a 1-row heatmap's legend was cut): a margin keeps them on the slide.
    return chart.properties(title=alt.TitleParams(**params), padding=SLIDE_PADDING)


def _legend_strip(scale: str, bound: float | None, cmap: str | None = None) -> tuple[bytes, list[str], str]:
    """A vertical colour bar for a raster's scale (the same colour map as rasters.raster_rgb), the labels
    of its top, middle and bottom, and the legend's title."""
    from PIL import Image

    from dashboard.drawing import rasters, scales

    kind, top = scales.scale_parts(scale)
    if kind == "mask":
        values, ends = np.array([1.0, 0.0]), ["1", "", "0"]
    elif kind in ("weights", "relative", "magnitude"):
        values, ends = np.linspace(top, 0, 128), [f"{top:g}", f"{top / 2:g}", "0"]
    else:
        b = float(bound) if bound else 1.0
        values, ends = np.linspace(b, -b, 128), [f"{b:.3g}", "0", f"{-b:.3g}"]
    rgb = rasters.raster_rgb(values[:, None], scale, cmap=cmap or scales.DEFAULT_COLOUR_MAP)
    buf = io.BytesIO()
    Image.fromarray(np.repeat(rgb, 8, axis=1), mode="RGB").save(buf, format="PNG")
    return buf.getvalue(), ends, _(scales.LEGEND_TITLES.get(kind, N_("value")))


def _png_size(png: bytes) -> tuple[int, int]:
    from PIL import Image

    with Image.open(io.BytesIO(png)) as img:
        return img.size


def _href(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode()


def raster_svg(entry: PageChart) -> bytes:
    """A raster chart as a slide: title and settings, the image(s) as drawn (pixels kept sharp), each
    image's caption, which axis is which, and a colour legend."""
    esc = html.escape
    images = list(entry.images)
    cols = min(entry.columns, len(images)) or 1
    cap = 480 if len(images) == 1 else 220  # the longer side of each image on the slide, in pixels
    sizes = []
    for _caption, png in images:
        w, h = _png_size(png)
        f = cap / max(w, h)
        sizes.append((round(w * f), round(h * f)))
    cell_w = max(w for w, _h in sizes)
    cell_h = max(h for _w, h in sizes)
    has_caps = any(c for c, _png in images)
    pad, gap, top = 16, 14, 64 if entry.subtitle else 44
    rows = -(-len(images) // cols)
    grid_w = cols * cell_w + (cols - 1) * gap
    grid_h = rows * (cell_h + (22 if has_caps else 0)) + (rows - 1) * gap
    legend_png, ends, legend_title = _legend_strip(entry.scale, entry.bound, entry.cmap)
    bar_h = min(200, max(80, cell_h))
    width = pad + grid_w + 24 + 110 + pad
    lines = [_("rows: {rows} · columns: {columns}", rows=_(entry.y_title), columns=_(entry.x_title))] + (
        [entry.note] if entry.note else [])
    height = top + grid_h + 12 + 18 * len(lines) + pad
    font = f'font-family="{SLIDE_FONTS}"'
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" {font}>',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{pad}" y="30" font-size="16" font-weight="bold" fill="#111">{esc(entry.title)}</text>']
    if entry.subtitle:
        out.append(f'<text x="{pad}" y="50" font-size="12" fill="#444">{esc(entry.subtitle)}</text>')
    for i, ((caption, png), (w, h)) in enumerate(zip(images, sizes)):
        x = pad + (i % cols) * (cell_w + gap)
        y = top + (i // cols) * (cell_h + (22 if has_caps else 0) + gap)
        out.append(f'<image x="{x}" y="{y}" width="{w}" height="{h}" preserveAspectRatio="none" '
                   f'image-rendering="optimizeSpeed" style="image-rendering:pixelated" href="{_href(png)}"/>')
        if caption:
            out.append(f'<text x="{x}" y="{y + h + 16}" font-size="13" fill="#111">{esc(caption)}</text>')
    lx = pad + grid_w + 24
    out.append(f'<text x="{lx}" y="{top + 10}" font-size="12" font-weight="bold" fill="#111">{esc(legend_title)}'
               "</text>")
    out.append(f'<image x="{lx}" y="{top + 18}" width="16" height="{bar_h}" preserveAspectRatio="none" '
               f'image-rendering="optimizeSpeed" style="image-rendering:pixelated" href="{_href(legend_png)}"/>')
    for frac, text in zip((0.0, 0.5, 1.0), ends):
        if text:
            out.append(f'<text x="{lx + 22}" y="{top + 18 + frac * bar_h + 4:.0f}" font-size="11" '
                       f'fill="#111">{esc(text)}</text>')
    for k, line in enumerate(lines):
        out.append(f'<text x="{pad}" y="{top + grid_h + 26 + 18 * k}" font-size="12" fill="#333">{esc(line)}'
                   "</text>")
    out.append("</svg>")
    return "\n".join(out).encode()


def entry_svg(entry: PageChart) -> bytes:
    """The chart as an SVG slide: title, settings, labels and legend."""
    if entry.chart is not None:
        return chart_svg(titled(entry.chart(), entry.title, entry.subtitle))
    return raster_svg(entry)


def entry_png(entry: PageChart, scale: float = PNG_SCALE) -> bytes:
    """The chart as a PNG at ``scale`` x its on-screen size (a raster: its SVG slide rendered)."""
    if entry.chart is not None:
        return chart_png(titled(entry.chart(), entry.title, entry.subtitle), scale=scale)
    import vl_convert as vlc

    register_cjk_fonts()
    return vlc.svg_to_png(raster_svg(entry).decode(), scale=scale)


def entry_csv(entry: PageChart) -> bytes | None:
    """The chart's numbers as CSV (None: it has none to offer)."""
    return None if entry.table is None else entry.table()


def unique_stems(entries: Sequence[PageChart]) -> list[str]:
    """Each entry's file stem, with ``-2``, ``-3`` ... added where two would share a name."""
    seen: dict[str, int] = {}
    out = []
    for e in entries:
        stem = e.stem()
        seen[stem] = seen.get(stem, 0) + 1
        out.append(stem if seen[stem] == 1 else f"{stem}-{seen[stem]}")
    return out


def page_files(entries: Sequence[PageChart]) -> dict[str, bytes]:
    """Every chart of a page as files: ``stem.svg`` and ``stem.png`` each, ``stem.csv`` where it has numbers."""
    files: dict[str, bytes] = {}
    for stem, e in zip(unique_stems(entries), entries):
        files[f"{stem}.svg"] = entry_svg(e)
        files[f"{stem}.png"] = entry_png(e)
        table = entry_csv(e)
        if table is not None:
            files[f"{stem}.csv"] = table
    return files


def page_zip(entries: Sequence[PageChart]) -> bytes:
    """One zip of :func:`page_files` (for building a deck from one page)."""
    return zip_files(page_files(entries))
