"""Slides from charts: SVG and 2x PNG of any Altair chart, CSV of any matrix, a zip of a page's charts,
and file names that say what and with which settings. Pure functions: data in, bytes out.

Charts are converted offline by vl-convert (no browser, no network): an exported chart keeps its
title, axis labels and legend, at the size it has on screen (PNG at 2x for a projector or a slide).
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Mapping, Sequence

import altair as alt
import numpy as np

PNG_SCALE = 2


def slide_name(what: str, variant: str, num_tokens: int, ext: str, head: int | None = None,
               extra: str = "") -> str:
    """``weights_head2_MultiHeadAttention_T10.svg``: what, which head (1-based), variant, tokens."""
    parts = [what] + ([f"head{head}"] if head is not None else []) + [variant, f"T{num_tokens}"]
    if extra:
        parts.append(extra)
    stem = "_".join(re.sub(r"[^A-Za-z0-9._-]+", "-", p).strip("-") for p in parts if p)
    return f"{stem}.{ext.lstrip('.')}"


def chart_svg(chart: alt.TopLevelMixin) -> bytes:
    """The chart as an SVG document (text stays text: sharp at any size, editable in a slide tool)."""
    import vl_convert as vlc

    return vlc.vegalite_to_svg(chart.to_dict()).encode()


def chart_png(chart: alt.TopLevelMixin, scale: float = PNG_SCALE) -> bytes:
    """The chart as a PNG at ``scale`` x its on-screen size."""
    import vl_convert as vlc

    return vlc.vegalite_to_png(chart.to_dict(), scale=scale)


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
