"""The shape flow's numbered cells: the same numbers before and after a reshape, coloured by the head they belong
to, so a learner can follow each one. Data in, Altair out; no Streamlit."""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd

from dashboard.drawing.cells import label_expr, layered
from dashboard.drawing.scales import distinct_colors
from dashboard.i18n import N_, _


def numbered_cells(
    numbers: np.ndarray,
    groups: np.ndarray,
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    *,
    panels: Sequence[str] | None = None,
    group_title: str = N_("head"),
    x_title: str = N_("column"),
    y_title: str = N_("token"),
    px: int = 30,
    columns: int | None = None,
) -> alt.Chart | alt.FacetChart:
    """Cells that show their number, coloured by group (e.g. which head a column belongs to). The titles are shown
    through ``_()``.

    ``numbers``/``groups`` are (rows, cols), or (panels, rows, cols) with ``panels`` titles: the
    same numbers before and after a reshape, so learners can follow each one."""
    field, group_title, x_title, y_title = group_title, _(group_title), _(x_title), _(y_title)  # field: English
    nums = np.asarray(numbers)
    grps = np.asarray(groups)
    if nums.ndim == 2:
        nums, grps, panels = nums[None], grps[None], [""]
    frames = []
    for p, title in enumerate(panels):
        n_rows, n_cols = nums[p].shape
        q, k = np.meshgrid(np.arange(n_rows), np.arange(n_cols), indexing="ij")
        frames.append(pd.DataFrame({"q": q.ravel(), "k": k.ravel(), "number": nums[p].ravel(),
                                    field: [f"{group_title} {g + 1}" for g in grps[p].ravel()],
                                    "panel": title, "order": p}))
    df = pd.concat(frames, ignore_index=True)
    ids = sorted({int(g) for g in grps.ravel()})
    names = [f"{group_title} {g + 1}" for g in ids]  # numeric order: head 2 before head 10
    base = alt.Chart().encode(  # the data goes on the layer (see layered)
        x=alt.X("k:O", title=x_title, axis=alt.Axis(labelExpr=label_expr(col_labels), labelAngle=0)),
        y=alt.Y("q:O", title=y_title, axis=alt.Axis(labelExpr=label_expr(row_labels))),
    )
    cells = base.mark_rect(stroke="white", strokeWidth=1).encode(
        color=alt.Color(f"{field}:N", scale=alt.Scale(domain=names, range=distinct_colors(len(names))),
                        sort=names, title=group_title),
        tooltip=[alt.Tooltip("number:Q", title=_("number")), alt.Tooltip(f"{field}:N", title=group_title)])
    text = base.mark_text(fontSize=11, color="white").encode(text=alt.Text("number:Q", format=".0f"))
    # "pad": a step size under Streamlit's default autosize "fit" made Vega warn (fit dropped) on every shape flow
    pad = alt.AutoSizeParams(type="pad")
    chart = layered(df, cells, text).properties(width=alt.Step(px), height=alt.Step(px))
    if len(panels) == 1:
        return chart.properties(autosize=pad)
    # Panels narrower than their x title (one head_dim column) need the room between them, or the titles of
    # neighbours run together ("head_dimhead_dim"); ~7 px a character.
    spacing = max(16, 7 * len(x_title) - px * nums.shape[-1] + 12)
    return chart.facet(facet=alt.Facet("panel:N", title=None, sort=alt.SortField("order")),
                       columns=columns or len(panels), spacing=spacing).properties(autosize=pad)
