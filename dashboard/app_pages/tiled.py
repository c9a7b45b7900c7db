"""Tiled attention: the FlashAttention loop over tiles of queries and keys, with its real numbers."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import streamlit as st
import torch

from attn_core.attention.flash import TilePlan, flash_attention, tile_plan
from attn_core.attention.masks import causal_mask
from attn_core.tracing.steps import scope_name
from attn_core.tracing.trace import Trace
from attn_core.tracing.views import head_matrix, kv_head, num_heads
from dashboard.drawing.chart_cache import altair
from dashboard.drawing.present import presenting
from dashboard.drawing.sizes import cap, column_px, fit
from dashboard.drawing.text import formatted, markdown_px, markdown_table, row_tables, show_table
from dashboard.drawing.tile_charts import label_every, tile_frame, tile_grid_chart
from dashboard.i18n import _, ngettext
from dashboard.state import models
from dashboard.state.controls import settings
from dashboard.state.links import md_escape
from dashboard.state.runs import load_run
from dashboard.state.steppers import stepper

MAX_TILES = 400  # a stepper longer than this is no lesson: the page asks for larger tiles
MAX_GRID_TOKENS = 64  # cells drawn as rects (GUIDE: ~16k cells a chart); more tokens: counters only
NUMBERS = "%.4f"  # S, m, α and ℓ alike: m after is then a shown score, digit for digit
# a tile this size or smaller is shown as Markdown tables: their cells wrap in a half column, −∞ reads as the chapter
# writes it, and no grid toolbar covers a column on a phone; a larger one keeps the data grid (it scrolls)
SMALL_TILE = 8


def _row_table(labels: list[str], rows: range, trace: Trace, tile: str) -> pd.DataFrame:
    """m, l before and after this tile, and alpha, one row per query of the tile."""
    def col(name: str) -> list[float]:
        return [float(v) for v in trace[f"{tile}.{name}"].tensor[0, 0]]
    return pd.DataFrame({_("m before"): col("m_old"), _("m after"): col("m"), "α": col("alpha"),
                         _("ℓ before"): col("l_old"), _("ℓ after"): col("l")},
                        index=pd.Index([labels[q] for q in rows], name=_("query")))


def _grew(trace: Trace, tile: str) -> torch.Tensor:
    """Which rows of ``tile`` had their max corrected: a max already set (not −∞) that grew (α < 1)."""
    return (trace[f"{tile}.alpha"].tensor < 1) & (trace[f"{tile}.m_old"].tensor > -torch.inf)


def _corrections(trace: Trace, labels: list[str], plan: TilePlan) -> list[tuple[str, list[str]]]:
    """Each tile (the loop's computed ones, in its order) where some row's max grew, with those rows' query labels:
    one correction a row, so the count is the rows listed."""
    found = []
    for tile in trace.scopes_of_kind("tile"):
        grew = _grew(trace, tile.name)[0, 0]
        if bool(grew.any()):
            rows = plan.rows(tile.index[0])
            found.append((_("tile ({i},{j})", i=tile.index[0] + 1, j=tile.index[1] + 1),
                          [labels[q] for q, g in zip(rows, grew.tolist()) if g]))
    return found


def _block(labels: list[str], rows: range, cols: list[str], tensor: torch.Tensor) -> pd.DataFrame:
    return pd.DataFrame(tensor[0, 0].numpy(), index=pd.Index([labels[q] for q in rows], name=_("query")), columns=cols)


def _numbers_table(container, df: pd.DataFrame, width_px: int, *, transpose: bool = False) -> None:
    """A table of the loop's numbers (a row a query), each to ``NUMBERS`` and −∞ as the chapter writes it. A small
    tile's is Markdown: one table (``transpose``: a column a query) when it fits ``width_px``, else one small table a
    query; a larger tile's a data grid of the same text."""
    text = df.map(lambda v: formatted(NUMBERS, float(v)))
    if len(df) > SMALL_TILE or len(df.columns) > SMALL_TILE:  # the grid would write −∞ as "-Infinity"
        show_table(container, text)
        return
    whole = text.T.rename_axis(df.index.name).rename_axis(None, axis=1) if transpose else text
    if markdown_px(whole.reset_index()) <= width_px:  # a format right-aligns the column: decimal points in line
        markdown_table(container, whole.reset_index(), formats=dict.fromkeys(whole.columns, "%s"))
    else:
        row_tables(container, text.reset_index())


def render() -> None:
    """Draw the page. Everything it computes stays local, so nothing outlives the run."""
    s = settings()
    st.title(_("Tiled attention (FlashAttention)"))
    st.caption(_("A fused kernel never holds the num_tokens × num_tokens matrix: it walks tiles of queries × keys, "
                 "keeps each query row's running max **m** and sum **ℓ**, rescales what it summed by "
                 "**α = exp(m before − m after)** when the max grows, and divides by ℓ once at the end: here on "
                 "your sentence's real queries, keys and values."))
    cfg = s.cfg
    if not (cfg.spec.uses("context_length") or s.pretrained):  # no mask, no weights: take the chapter's module
        cfg = dataclasses.replace(cfg, variant="CausalAttention")
    run = load_run(s, cfg)
    if run is None:
        st.stop()
    labels, trace = run.labels, run.trace
    T = len(labels)
    H = num_heads(trace)

    c_bq, c_bk, c_head = st.columns(3, vertical_alignment="bottom")
    head = c_head.selectbox(_("Head"), range(H), format_func=lambda h: _("head {head}", head=h + 1),
                            key="tile_head") if H > 1 else 0
    block_q = int(c_bq.number_input(_("block_q (queries per tile)"), 1, 1024, 2, key="tile_block_q"))
    block_k = int(c_bk.number_input(_("block_k (keys per tile)"), 1, 1024, 2, key="tile_block_k"))

    rotated = bool(trace.of_kind("queries_rotated"))  # RoPE (the Llama family): the loop reads rotated q and k
    q, k, v = (head_matrix(trace, kind, head) for kind in (("queries_rotated", "keys_rotated", "values") if rotated
                                                            else ("queries", "keys", "values")))
    weights_explicit = head_matrix(trace, "weights", head)
    if q is None or k is None or v is None or weights_explicit is None:
        st.info(_("{variant} records no per-head queries, keys, values and weights to tile: pick "
                  "CausalAttention or MultiHeadAttention in the sidebar.", variant=cfg.variant))
        st.stop()
    window = cfg.window if cfg.spec.uses("window") and cfg.window else None
    causal = cfg.causal if cfg.spec.uses("causal") else True
    masked = causal or window is not None
    mask_np = causal_mask(T, window=window, causal=causal).numpy() if masked else None
    plan = tile_plan(torch.from_numpy(mask_np) if masked else None, T, T, block_q, block_k)
    if plan.num_tiles > MAX_TILES:
        st.warning(_("{n} tokens in tiles of {block_q} × {block_k} make {tiles} tiles: too many to step through. "
                     "Raise block_q and block_k (to {least} or more) or shorten the sentence.", n=T, block_q=block_q,
                     block_k=block_k, tiles=plan.num_tiles, least=-(-T // 16)))
        st.stop()
    as_4d = [torch.from_numpy(np.array(m, dtype=np.float32))[None, None] for m in (q, k, v)]
    tiles = Trace()
    out = flash_attention(*as_4d, block_q=block_q, block_k=block_k, causal=causal, window=window, trace=tiles)
    explicit = torch.from_numpy(weights_explicit @ v)  # the chapter's path: the whole weights matrix @ values
    kv_heads = [kv_head(trace, h) for h in range(H)]  # which K/V head each query head reads
    module = cfg.variant
    if s.pretrained:
        module = _("{model}, layer {layer}", model=models.label(s.weights), layer=s.layer + 1)
    st.caption(md_escape(_describe(module, head, kv_heads, rotated, T, causal, window, block_q, block_k)))

    order = plan.order()
    names = [_("tile ({i},{j})", i=i + 1, j=j + 1) if c else _("tile ({i},{j}) skipped", i=i + 1, j=j + 1)
             for i, j, c in order]
    n = stepper("tile_step", names)
    i, j, computed = order[n]
    rows, cols = plan.rows(i), plan.cols(j)

    left, right = st.columns([1, 1])
    if T <= MAX_GRID_TOKENS:
        # the half column at 1280x720, larger on a larger screen; on a phone (columns stacked) the screen's width
        size = fit(cap(290 if not presenting() else 360), labels, legend=False)
        frame = tile_frame(plan, mask_np, n, weights_explicit)
        numbers = T <= 12
        # the numbers are the loop's result, not this step's: the scores of this step are in the table beside
        title = (_("The loop at step {step} of {steps}", step=n + 1, steps=len(order)),
                 _("numbers: final weights (after the loop)") if numbers
                 else _("hover a cell: its final weight (after the loop)"))
        altair(left, tile_grid_chart(frame, labels, size, numbers=numbers, title=title), key="tile_grid",
                          width="content")
        every = label_every(T, size)
        if every > 1:
            left.caption(_("One label every {every} tokens (tokens 1, {second}, {third}, …): the cells are too small "
                           "for one each; hover a cell for its query and key.", every=every, second=every + 1,
                           third=2 * every + 1))
    else:
        left.caption(_("The grid is drawn for up to {most} tokens; your text has {n}.", most=MAX_GRID_TOKENS, n=T))
    tile = scope_name("tile", i, j)
    col_names = [labels[c] for c in cols]
    if not computed:
        if causal and cols.start > rows.stop - 1:
            right.markdown(_("**Tile ({i},{j}) is skipped.** Every key in it is hidden from every query in it "
                             "(in their future): the loop never computes it. −∞ masking makes this free.",
                             i=i + 1, j=j + 1))
        else:
            right.markdown(_("**Tile ({i},{j}) is skipped.** Every key in it is hidden from every query in it "
                             "(outside the window): the loop never computes it. −∞ masking makes this free.",
                             i=i + 1, j=j + 1))
    else:
        right = right.container(key="tile_numbers")  # the step's tables (tests/test_browser_tiled_tables.py)
        right.markdown(_("**Tile ({i},{j}), step {step} of {steps}**: queries {q_first}–{q_last} × keys "
                         "{k_first}–{k_last}. The scores of this tile, S = q·k / √d_k (−∞ where masked):", i=i + 1,
                         j=j + 1, step=n + 1, steps=len(order), q_first=rows.start + 1, q_last=rows.stop,
                         k_first=cols.start + 1, k_last=cols.stop))
        # the precision of m and ℓ below: m after is one of these scores, and ℓ is summed from them by hand
        beside = column_px([1, 1], 1)  # the right column; on a phone the screen's
        _numbers_table(right, _block(labels, rows, col_names, tiles[f"{tile}.S"].tensor), beside)
        if bool((tiles[f"{tile}.m_old"].tensor == -torch.inf).all()):
            right.markdown(_("Running max and sum of each query row — the row's first tile: m starts at −∞ and ℓ at "
                             "0, so α = 0 (nothing summed yet):"))
        elif bool(_grew(tiles, tile).any()):
            right.markdown(_("Running max and sum of each query row — **the max grew**: α < 1 shrinks the old sum and "
                             "accumulator to the new max:"))
        else:
            right.markdown(_("Running max and sum of each query row — the max did not grow: α = 1, the sums simply "
                             "add:"))
        # a column a query: its six columns scrolled sideways in the grid, in Chinese even at 1280×720
        _numbers_table(right, _row_table(labels, rows, tiles, tile), beside, transpose=True)
        right.caption(_("Every number here is rounded to 4 decimals: m after is one of the scores shown (or m "
                        "before), and α and ℓ worked out by hand from these numbers agree with the table within "
                        "their rounding (a few units in the 4th decimal)."))
    if computed:
        with st.expander(_("The accumulator acc = α · acc + exp(S − m) @ v (unnormalized output rows)")):
            acc = tiles[f"{tile}.acc"].tensor
            show_table(st, _block(labels, rows, [f"d{c + 1}" for c in range(acc.shape[-1])], acc))

    diff = float((out[0, 0] - explicit).abs().max())
    corrections = _corrections(tiles, labels, plan)
    n_corrected = sum(len(rows) for __, rows in corrections)
    if not corrections:
        st.caption(_("In this head no row's max grows after its first tile (each row's largest score sits in its "
                     "first key tile), so α stays 1: try another head, smaller tiles or another sentence to see a "
                     "correction."))
    else:
        where = _("; ").join(_("{tile}: {queries}", tile=tile, queries=_(", ").join(f"“{md_escape(q)}”" for q in rows))
                             for tile, rows in corrections)
        st.caption(ngettext(
            "The running max was corrected {n} time in this walk (a query row's max grew in a later tile, α < 1), "
            "in {tiles}: {where}.",
            "The running max was corrected {n} times in this walk (a query row's max grew in a later tile, α < 1), "
            "in {tiles}: {where}.", n_corrected,
            tiles=ngettext("{n} tile", "{n} tiles", len(corrections)), where=where))
    c1, c2, c3 = st.columns(3)
    c1.metric(_("Tiles computed"), _("{computed} of {tiles}", computed=plan.num_computed, tiles=plan.num_tiles),
              help=_("A tile whose every cell is masked is skipped: causal masking skips about half."))
    explicit_bytes = T * T * 4
    tiled_bytes = (block_q * block_k + block_q * (q.shape[-1] + 2)) * 4
    c2.metric(_("Memory for scores (float32)"), _("{explicit} B vs {tiled} B", explicit=format(explicit_bytes, ","),
                                                   tiled=format(tiled_bytes, ",")),
              help=_("The chapter's path holds the whole T × T matrix; the tiled loop one S tile plus each row's m, "
                     "ℓ and accumulator (by formula; bench/flash.py measures it over T)."))
    c3.metric(_("max |tiled − chapter's output|"), f"{diff:.1e}",
              help=_("The tiled loop's output against the chapter's weights @ values: float rounding only."))

    st.subheader(_("Why renormalize can't tile"))
    values = dict(visits=2 * plan.num_tiles, tiles=plan.num_tiles, computed=plan.num_computed)
    if cfg.mask_method == "renormalize":
        st.markdown(_(
            "The chapter's other method, *softmax first, then zero the future and renormalize*, takes its first "
            "softmax over **every** key, future ones included. No tile can be skipped, and the kept weights can be "
            "divided by their sum only after the whole row is known: a second pass. Here that is **{visits} tile "
            "visits** (all {tiles} tiles, twice) instead of **{computed}** in one pass with −∞ masking. Your sidebar "
            "picks renormalize: the tiled loop above is the −∞ method, which gives the same weights.", **values))
    else:
        st.markdown(_(
            "The chapter's other method, *softmax first, then zero the future and renormalize*, takes its first "
            "softmax over **every** key, future ones included. No tile can be skipped, and the kept weights can be "
            "divided by their sum only after the whole row is known: a second pass. Here that is **{visits} tile "
            "visits** (all {tiles} tiles, twice) instead of **{computed}** in one pass with −∞ masking.", **values))


def _describe(module: str, head: int, kv_heads: list[int], rotated: bool, n: int, causal: bool, window: int | None,
              block_q: int, block_k: int) -> str:
    """The caption under the controls: which head on which tokens, the mask and the tile size."""
    if causal:
        mask = _("causal, window {window}", window=window) if window else _("causal")
    else:
        mask = _("no causal mask, window {window}", window=window) if window else _("no causal mask")
    values = dict(module=module, head=head + 1, kv_head=kv_heads[head] + 1, kv_heads=len(set(kv_heads)),
                  mask=mask, block_q=block_q, block_k=block_k)
    grouped = kv_heads != list(range(len(kv_heads)))
    if grouped and rotated:
        return ngettext("{module}, head {head} (it reads K/V head {kv_head} of {kv_heads}), queries and keys after "
                        "RoPE · {n} token · mask: {mask} · tiles of {block_q} queries × {block_k} keys",
                        "{module}, head {head} (it reads K/V head {kv_head} of {kv_heads}), queries and keys after "
                        "RoPE · {n} tokens · mask: {mask} · tiles of {block_q} queries × {block_k} keys", n, **values)
    if grouped:
        return ngettext("{module}, head {head} (it reads K/V head {kv_head} of {kv_heads}) · {n} token · mask: "
                        "{mask} · tiles of {block_q} queries × {block_k} keys",
                        "{module}, head {head} (it reads K/V head {kv_head} of {kv_heads}) · {n} tokens · mask: "
                        "{mask} · tiles of {block_q} queries × {block_k} keys", n, **values)
    if rotated:
        return ngettext("{module}, head {head}, queries and keys after RoPE · {n} token · mask: {mask} · tiles of "
                        "{block_q} queries × {block_k} keys",
                        "{module}, head {head}, queries and keys after RoPE · {n} tokens · mask: {mask} · tiles of "
                        "{block_q} queries × {block_k} keys", n, **values)
    return ngettext("{module}, head {head} · {n} token · mask: {mask} · tiles of {block_q} queries × {block_k} keys",
                    "{module}, head {head} · {n} tokens · mask: {mask} · tiles of {block_q} queries × {block_k} keys",
                    n, **values)

render()
