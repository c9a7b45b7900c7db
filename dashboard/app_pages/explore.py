"""Explore: every step of the chosen attention variant on your own sentence."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import streamlit as st

from attn_core import HAS_HEADS, HAS_MASK
from attn_core.views import all_heads, cell_story, head_matrix, num_heads
from dashboard import charts
from dashboard.controls import MASK_NAMES, VARIANT_NAMES, settings
from dashboard.export import slide_name
from dashboard.head_view import MAX_LINE_TOKENS, line_view
from dashboard.links import md_escape
from dashboard.trained_view import show_trained_weights
from dashboard.widgets import (
    draw_chart,
    load_run,
    memo,
    plural,
    show_matrix,
    show_panels,
    slide_downloads,
    url_cell,
    url_choice,
)

NEAR_UNIFORM = 0.2  # a typical row's largest weight below this: the weights look alike on a 0-1 scale


def compare_methods(s, run, head: int, labels: list[str], wscale: str) -> None:
    """Both causal masking methods on the user's sentence and settings, side by side."""
    if not st.toggle("Compare both masking methods", key="compare_methods", bind="query-params",
                     help="Run the same module with −∞ before softmax and with renormalize after softmax."):
        return
    runs = {m: run if m == run.cfg.mask_method else load_run(s, dataclasses.replace(run.cfg, mask_method=m),
                                                              quiet=True)
            for m in MASK_NAMES}
    if any(r is None for r in runs.values()):
        return
    mats = [memo((r.key, "matrix", "weights", head), lambda r=r: head_matrix(r.trace, "weights", head))
            for r in runs.values()]
    diff = float(np.max(np.abs(mats[0] - mats[1])))
    c_diff, c_note = st.columns([1, 3], vertical_alignment="center")
    c_diff.metric("max |difference|", f"{diff:.1e}", help="Float rounding only (float32 epsilon ≈ 1.2e-7).")
    c_note.caption("Same module, same weights, same sentence: the two methods give the same attention weights "
                   "(up to float rounding). Switching the sidebar's method therefore changes nothing you can see.")
    show_panels(st, mats, [MASK_NAMES[m] for m in runs], labels, key="compare_methods_pair", scale=wscale,
                columns=2, max_px=280, cache_key=(run.key, "compare_methods", head))


def render() -> None:
    """Draw the page. Everything it computes stays local, so nothing outlives the run."""
    s = settings()
    cfg = s.cfg
    st.title("Explore attention")
    run = load_run(s)
    if run is None:
        st.stop()

    trace, labels, rk = run.trace, run.labels, run.key

    def mat(kind: str, h: int = 0) -> np.ndarray | None:
        """One head's 2-d matrix of a step kind (remembered: T=1024 traces are large)."""
        return memo((rk, "matrix", kind, h), lambda: head_matrix(trace, kind, h))


    T = len(run.tokens)
    H = num_heads(trace)
    out_shape = tuple(run.output.shape)
    head_note = ""
    if cfg.variant == "MultiHeadAttention":
        head_note = f" · {H} heads × head_dim {cfg.d_out // H} = d_out {cfg.d_out}"
    elif cfg.variant == "MultiHeadAttentionWrapper":
        head_note = f" · {H} heads × d_out {cfg.d_out} each, concatenated"
    st.markdown(
        f"**{VARIANT_NAMES[cfg.variant]}** · {plural(T, 'token')} · d_in {cfg.d_in}{head_note}"
        + (f" · mask: {MASK_NAMES[cfg.mask_method]}" if cfg.variant in HAS_HEADS or cfg.variant == "CausalAttention"
           else "")
        + f" · output shape **{out_shape}** on {cfg.device}"
    )

    # 1. Tokens and inputs ---------------------------------------------------------------------------
    st.header("1 · Tokens and input vectors")
    left, right = st.columns([2, 3])
    token_df = pd.DataFrame({"label": labels, "id": [t.id for t in run.tokens],
                             "piece": [repr(t.text) for t in run.tokens]})
    left.dataframe(token_df, hide_index=True, height=min(420, 38 + 35 * T), width="stretch")
    x = mat("input")
    dims = [f"dim {i + 1}" for i in range(x.shape[1])]
    show_matrix(right, x, labels, dims, key="input", scale="scores", title=f"Input x ({run.input_mode} inputs)",
                x_title="dimension", y_title="token", max_px=420, cache_key=(rk, "input"))

    # Head picker ------------------------------------------------------------------------------------
    head = 0
    row_max = memo((rk, "row_max"), lambda: np.nanmax(all_heads(trace, "weights"), axis=-1))  # (H, T)
    typical = float(np.median(row_max))
    if typical < NEAR_UNIFORM and not st.session_state.get("row_scale", st.query_params.get("row_scale") == "true"):
        st.info(f"**Why the weights look alike:** the module's weights are random (untrained), so each query "
                f"spreads its attention almost evenly over the keys it can see: about 1/{T} = {1 / T:.4f} each "
                f"in the last row (a typical row's largest weight is {typical:.3f}). On the fixed 0–1 scale "
                "that is uniformly dark. Turn on **per-row relative colours** to see which keys each row still "
                "prefers; a trained model's attention is much sharper.")
    # Drawn before any weights chart, so the first run (e.g. from a link) already uses its value.
    relative = st.toggle("Per-row relative colours (each row divided by its largest weight)", key="row_scale",
                         bind="query-params", help="For long inputs with near-uniform weights. Tooltips keep the "
                         "true values; colours then compare keys within a row, not across rows or charts.")
    wscale = "relative" if relative else "weights"
    if H > 1:
        st.header("All heads: attention weights")
        show_panels(st, memo((rk, "all_heads"), lambda: list(all_heads(trace, "weights"))),
                    [f"head {h + 1}" for h in range(H)], labels, key="heads_grid", scale=wscale,
                    columns=min(H, 6), max_px=200 if T <= 32 else 160, cache_key=(rk, "heads_grid"))
        head_names = [f"head {h + 1}" for h in range(H)]
        url_choice("head", head_names, "head 1")
        head = st.segmented_control("Look at one head", list(range(H)), default=0, key="head",
                                    format_func=head_names.__getitem__, bind="query-params") or 0

    # 2. Queries, keys, values -----------------------------------------------------------------------
    qkv = [mat(k, head) for k in ("queries", "keys", "values")]
    if qkv[0] is not None:
        st.header("2 · Queries, keys, values" + (f" (head {head + 1})" if H > 1 else ""))
        width = qkv[0].shape[1]
        show_panels(st, qkv, ["queries", "keys", "values"], labels, [f"{i + 1}" for i in range(width)],
                    key="qkv", scale="scores", columns=3, max_px=240, x_title="dim", y_title="token",
                    cache_key=(rk, "qkv", head))

    # 3. Scores to weights ---------------------------------------------------------------------------
    st.header("3 · Scores → weights" + (f" (head {head + 1})" if H > 1 else ""))
    score_kinds = [("scores", "attention scores  q·k"), ("masked_scores", "masked scores (−∞ above diagonal)"),
                   ("scaled_scores", "scaled scores  ÷ √d_k")]
    score_mats = [(title, m) for kind, title in score_kinds if (m := mat(kind, head)) is not None]
    show_panels(st, [m for _, m in score_mats], [t for t, _ in score_mats], labels, key="scores",
                scale="scores", columns=3, max_px=260, cache_key=(rk, "scores", head))
    st.caption("Diverging colours centred on 0: blue is negative, orange positive. Grey cells marked −∞ are masked.")
    mask = mat("mask", head)
    weight_kinds = [("unmasked_weights", "softmax over all keys"), ("zeroed_weights", "future zeroed"),
                    ("weights", "attention weights")]
    weight_mats = [(t, m) for kind, t in weight_kinds if (m := mat(kind, head)) is not None]
    if mask is not None:
        c_mask, c_rest = st.columns([1, 3])
        show_matrix(c_mask, mask, labels, labels, key="mask", scale="mask", title="causal mask (1 = hidden)",
                    max_px=220, cache_key=(rk, "mask"))
        if len(weight_mats) > 1:
            show_panels(c_rest, [m for _, m in weight_mats[:-1]], [t for t, _ in weight_mats[:-1]], labels,
                        key="renorm_steps", scale="weights", columns=2, max_px=220, cache_key=(rk, "renorm", head))
            c_rest.caption("Renormalize method: softmax first, zero the future, then divide each row by its sum.")

    weights = mat("weights", head)
    st.subheader("Attention weights — every row sums to 1")
    c_w, c_story = st.columns([3, 2])
    clicked = show_matrix(c_w, weights, labels, labels, key="weights", scale=wscale, selectable=True, zoom=True,
                          max_px=520, cache_key=(rk, "weights", head))
    if wscale == "relative":
        c_w.caption("Per-row relative colours: each row divided by its largest weight (1 = the key this query "
                    "attends to most). Hover for the true weights. Click a cell to see its story.")
    else:
        c_w.caption("Fixed 0–1 colour scale (viridis), comparable across charts. Click a cell to see its story.")
    if clicked is not None:  # the clicked cell goes into the link (1-based, validated when read back)
        st.session_state["cell_pick"] = clicked
        st.query_params["cell"] = f"{clicked[0] + 1},{clicked[1] + 1}"
    elif "cell_pick" not in st.session_state:  # a new session: the link may name a cell
        st.session_state["cell_pick"] = url_cell("cell", T, T)
    pick = st.session_state.get("cell_pick")
    if pick is not None and max(pick) >= T:  # from another sentence
        pick = None
    row_sums = weights.sum(axis=1)
    c_w.caption(f"Row sums: min {row_sums.min():.6f}, max {row_sums.max():.6f}.")
    n_slide = min(T, 64)  # a slide holds at most 64 tokens readably
    head_part = head + 1 if H > 1 else None
    slide_downloads(
        c_w, lambda: charts.heatmap(weights[:n_slide, :n_slide], labels, labels, scale=wscale,
                                    title=f"attention weights · {cfg.variant}" + (f" · head {head + 1}" if H > 1
                                                                                 else "")),
        weights, labels, labels, key="weights_export",
        name=lambda ext: slide_name("weights", cfg.variant, T, ext, head=head_part))

    with c_story:
        if st.toggle("Line view of this head", key="line_view", bind="query-params",
                     help="Queries on the left, keys on the right; a line's opacity is the weight. "
                          "Point at a token to keep only its lines."):
            n_lines = min(T, MAX_LINE_TOKENS)
            draw_chart(st, lambda: line_view(weights[:n_lines, :n_lines], labels, width=300),
                       key="line_view_chart")
            if n_lines < T:
                st.caption(f"Tokens 1–{n_lines} of {T}: more lines than that are a grey fog.")
        i, j = pick if pick is not None else (T - 1, 0)
        story = cell_story(trace, i, j, head)
        st.markdown(f"#### Cell story: query **{md_escape(labels[i])}** → key **{md_escape(labels[j])}**"
                    + ("" if pick else "  \n_(click a weight cell to pick another)_"))
        vec = lambda v: "[" + ", ".join(f"{a:.3f}" for a in v[:8]) + (", …]" if len(v) > 8 else "]")  # noqa: E731
        st.markdown(
            f"1. **Score** q{i + 1} · k{j + 1} = {vec(story.query)} · {vec(story.key)} = **{story.dot:.4f}**\n"
            + (f"2. **Scaled** by √d_k = √{story.d_k} = {story.d_k ** 0.5:.3f} → **{story.scaled:.4f}**\n"
               if story.scaled is not None else "2. No scaling in simplified attention.\n")
            + (f"3. **Masked**: key {j + 1} comes after query {i + 1}, so it is hidden (−∞ → weight 0).\n"
               if story.masked else
               f"3. **Softmax share** of this key in row {i + 1}: **{story.weight:.4f}** "
               f"({story.weight * 100:.1f}% of the attention of token {i + 1})\n")
            + (f"4. **Dropout**: weight used = {story.weight_used:.4f}\n" if story.weight_used != story.weight else "")
            + f"5. **Contribution** to context z{i + 1} = {story.weight_used:.4f} × v{j + 1} = "
            f"{vec(story.contribution)}\n"
            + f"6. z{i + 1} (sum over all keys) = {vec(story.context)}"
        )
        finite = story.row_scaled[np.isfinite(story.row_scaled)]
        if finite.size:
            st.caption(f"Row {i + 1} of what softmax sees: {finite.size} visible keys, "
                       f"range {finite.min():.3f} … {finite.max():.3f}.")

    if cfg.variant in HAS_MASK and cfg.causal:
        compare_methods(s, run, head, labels, wscale)

    # 4. Dropout ------------------------------------------------------------------------------------
    dmask = mat("dropout_mask", head)
    if dmask is not None:
        st.header("4 · Dropout on the weights")
        dropped = mat("dropped_weights", head)
        p = cfg.dropout
        top = 1 / (1 - p)
        st.markdown(f"**p = {p:g}: every surviving weight is multiplied by 1/(1−p) = {top:.3g}**, so the colour "
                    f"scale of these two panels runs from 0 to {top:.3g} (brightest = scaled survivors).")
        c_dm, c_dw = st.columns([1, 2])
        show_matrix(c_dm, dmask, labels, labels, key="dropout_mask", scale="mask",
                    title="dropped cells (1 = zeroed)", max_px=200, cache_key=(rk, "dropout_mask", head))
        show_panels(c_dw, [weights, dropped], ["attention weights", f"after dropout (survivors × {top:.3g})"],
                    labels, key="dropout", scale=charts.weights_scale(top), columns=2, max_px=210,
                    cache_key=(rk, "dropout", head))
        st.caption(f"{dmask.sum():.0f} of {(weights != 0).sum()} non-zero weights zeroed. Row sums now range "
                   f"{dropped.sum(1).min():.3f} … {dropped.sum(1).max():.3f} (1 on average).")
    elif cfg.variant in ("CausalAttention", *HAS_HEADS):
        st.header("4 · Dropout")
        st.info("Dropout is off: " + ("train_mode is off (eval mode)." if not cfg.train_mode else "p = 0.")
                + " Turn on train_mode and set dropout > 0 in the sidebar to see it.")

    # 5. Context vectors and output -----------------------------------------------------------------
    st.header("5 · Context vectors and output")
    ctx = mat("context", head)
    out = run.output[0].numpy().astype(np.float64)
    c1, c2 = st.columns(2)
    show_matrix(c1, ctx, labels, [f"{i + 1}" for i in range(ctx.shape[1])], key="context", scale="scores",
                title="context vectors" + (f" (head {head + 1})" if H > 1 else ""), x_title="dimension",
                y_title="token", max_px=380, cache_key=(rk, "context", head))
    show_matrix(c2, out, labels, [f"{i + 1}" for i in range(out.shape[1])], key="output", scale="scores",
                title=f"output {out_shape}", x_title="dimension", y_title="token", max_px=380, cache_key=(rk, "output"))
    if cfg.variant == "MultiHeadAttentionWrapper":
        st.caption(f"The wrapper concatenates its heads: output width = d_out × num_heads = {cfg.d_out} × {H}.")
    elif cfg.variant == "MultiHeadAttention":
        st.caption("MultiHeadAttention merges the heads back to d_out and mixes them with out_proj.")

    # 6. Trained weights (a separate module: the Learn page's shipped models on this sentence) ----------
    show_trained_weights(run.tokens, labels)


render()
