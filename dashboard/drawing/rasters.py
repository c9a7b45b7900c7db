"""Colour-mapped PNGs of matrices: the same colour maps as the Altair heatmaps (dashboard/drawing/scales.py), drawn as
pixels for matrices too large for rect marks. NumPy in, PNG bytes out; no Streamlit, no Altair."""

from __future__ import annotations

import functools
import io

import numpy as np
from PIL import Image

from attn_core.tracing.views import pool
from dashboard.drawing.scales import (
    ABOVE_RANGE,
    BELOW_RANGE,
    DEFAULT_COLOUR_MAP,
    MASK_GREY,
    OUT_OF_RANGE_TOL,
    mask_range,
    scale_parts,
)

# Anchor colours for the PNG raster (viridis, cividis: Vega's schemes sampled at 10 points; and a blue-white-orange
# diverging map).
_VIRIDIS = np.array([[68, 1, 84], [72, 40, 120], [62, 74, 137], [49, 104, 142], [38, 130, 142],
                     [31, 158, 137], [53, 183, 121], [109, 205, 89], [180, 222, 44], [253, 231, 37]],
                    dtype=np.float64)
_CIVIDIS = np.array([[0, 32, 81], [13, 52, 107], [49, 71, 110], [85, 91, 110], [114, 112, 113], [137, 133, 119],
                     [161, 155, 120], [192, 178, 111], [226, 203, 92], [252, 230, 71]], dtype=np.float64)
_DIVERGING = np.array([[5, 48, 97], [67, 147, 195], [209, 229, 240], [247, 247, 247],
                       [254, 224, 182], [224, 130, 20], [127, 59, 8]], dtype=np.float64)

LEVELS = 253  # colours a colour map is sampled at (matplotlib's viridis has 256); then below 0, above the top, grey
BELOW, ABOVE, GREY = 253, 254, 255


def _rgb(hex_color: str) -> tuple[int, int, int]:
    return tuple(int(hex_color[i:i + 2], 16) for i in (1, 3, 5))


@functools.cache
def _palette(name: str) -> np.ndarray:
    """A 256 x 3 uint8 palette: ``LEVELS`` colours linearly interpolated between the anchors of the colour map
    ``name`` ("viridis", "cividis" or "diverging"), then the masked grey. Built once per map."""
    anchors = {"viridis": _VIRIDIS, "cividis": _CIVIDIS, "diverging": _DIVERGING}[name]
    pos = np.linspace(0.0, 1.0, LEVELS) * (len(anchors) - 1)
    lo = np.floor(pos).astype(int)
    hi = np.minimum(lo + 1, len(anchors) - 1)
    frac = (pos - lo)[:, None]
    colours = (anchors[lo] * (1 - frac) + anchors[hi] * frac).round()
    return np.vstack([colours, [_rgb(BELOW_RANGE), _rgb(ABOVE_RANGE), _rgb(MASK_GREY)]]).astype(np.uint8)


@functools.cache
def _mask_palette(dark: bool) -> np.ndarray:
    """0 and 1 in :func:`mask_range`'s colours, then the masked grey."""
    return np.array([_rgb(c) for c in mask_range(dark)] + [_rgb(MASK_GREY)] * 254, dtype=np.uint8)


def _levels(t: np.ndarray) -> np.ndarray:
    """Positions t in [0, 1] as palette indices 0 .. LEVELS - 1."""
    return (np.clip(t, 0.0, 1.0) * (LEVELS - 1) + 0.5).astype(np.uint8)


def raster_index(matrix: np.ndarray, scale: str = "scores", dark: bool = False,
                 cmap: str = DEFAULT_COLOUR_MAP) -> tuple[np.ndarray, np.ndarray]:
    """Colour-map a matrix to (palette indices (n_rows, n_cols) uint8, palette 256 x 3 uint8), masked (-inf/NaN)
    cells grey (a mask in :func:`mask_range`'s colours for the light or ``dark`` page; values 0..top in ``cmap``).
    One byte a pixel: a palette PNG encodes faster than RGB and is smaller (docs/measurements.md)."""
    m = np.asarray(matrix, dtype=np.float32)
    finite = np.isfinite(m)
    kind, top = scale_parts(scale)
    if kind in ("weights", "magnitude"):
        index, palette = _levels(np.where(finite, m / top, 0)), _palette(cmap)
        index[finite & (m < -OUT_OF_RANGE_TOL)] = BELOW
        index[finite & (m > top + OUT_OF_RANGE_TOL * top)] = ABOVE
    elif kind == "relative":
        shade = np.where(finite, m, 0)
        row_max = shade.max(axis=1, keepdims=True)
        index = _levels(np.divide(shade, row_max, out=np.zeros_like(shade), where=row_max > 0))
        palette = _palette(cmap)
    elif kind == "mask":
        index, palette = (m > 0.5).astype(np.uint8), _mask_palette(dark)
    else:
        bound = float(np.max(np.abs(m[finite]))) if finite.any() else 1.0
        index, palette = _levels(np.where(finite, 0.5 + 0.5 * m / (bound or 1.0), 0.5)), _palette("diverging")
    index[~finite] = GREY
    return index, palette


def raster_rgb(matrix: np.ndarray, scale: str = "scores", dark: bool = False,
               cmap: str = DEFAULT_COLOUR_MAP) -> np.ndarray:
    """Colour-map a matrix to an (n_rows, n_cols, 3) uint8 image, masked (-inf/NaN) cells grey."""
    index, palette = raster_index(matrix, scale, dark, cmap)
    return np.take(palette, index, axis=0)


def raster_png(matrix: np.ndarray, scale: str = "scores", target_px: int = 512, min_side: int = 160,
               max_side: int | None = None, dark: bool = False, cmap: str = DEFAULT_COLOUR_MAP) -> bytes:
    """A PNG of the colour-mapped matrix: nearest-neighbour upscaled so the longer side reaches
    about ``target_px`` and a thin side is stretched to ``min_side``. With ``max_side`` a larger
    matrix is first pooled (max for weights and masks, mean for scores) to at most that many pixels."""
    if max_side is not None:
        matrix, _ = pool(matrix, max_side, "mean" if scale_parts(scale)[0] == "scores" else "max")
    index, palette = raster_index(matrix, scale, dark, cmap)
    img = Image.fromarray(index, mode="P")  # one byte a pixel and a palette (raster_index)
    img.putpalette(palette.tobytes())
    rows, cols = index.shape
    factor = max(1, target_px // max(rows, cols))
    width, height = max(cols * factor, min(min_side, target_px)), max(rows * factor, min(min_side, target_px))
    if (width, height) != (cols, rows):
        img = img.resize((width, height), Image.NEAREST)
    buf = io.BytesIO()
    img.save(buf, format="PNG", compress_level=1)
    return buf.getvalue()
