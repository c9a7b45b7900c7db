"""Masking lab: the two correct causal masks, the classic mistakes, precision, dropout and scaling."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import streamlit as st
import torch

from attn_core import AttentionConfig
from attn_core.labs.lab import (
    DTYPES,
    SCALING_SAMPLES,
    guarded_softmax,
    masking_variants,
    precision_table,
    scaling_table,
    scaling_weights,
)
from attn_core.tracing.views import head_matrix
from dashboard.classroom.ui import ask_the_class
from dashboard.drawing import scales
from dashboard.drawing.chart_cache import memo
from dashboard.drawing.matrices import Look, show_matrix, show_panels
from dashboard.drawing.sizes import cap, fit, sized_columns
from dashboard.drawing.text import show_table
from dashboard.export.slides import page_downloads, slide_settings
from dashboard.i18n import N_, _
from dashboard.state.controls import settings
from dashboard.state.runs import load_run
from dashboard.state.settings_schema import Settings
from dashboard.state.steppers import section_steps
from dashboard.state.url_state import linked_choice

EPS32 = float(torch.finfo(torch.float32).eps)  # 1.19e-7: the spacing of float32 numbers near 1
# Charts are sized for the narrowest screen the page is made for (dashboard/drawing/sizes.py: the main column at
# 1280x720 with the sidebar open, 820 px; a half column 402 px); tests/test_browser_layout.py checks the fit.
PAIR_CAP_PX = 280  # each of two panels across the page, at most (more only in presentation mode)
HALF_CAP_PX = 240  # one heatmap in half the page, at most


# short names: the Previous / Next buttons that name them fit one line at 1280x720 ("◀ Two methods" and
# "Precision ▶" took two)
SECTIONS = (N_("Methods"), N_("Mistakes"), N_("Precision"), N_("Dropout"), N_("Scaling"))  # URL values: English


@dataclasses.dataclass
class Lab:
    """What every section draws from: one head's scores on the sentence and the run they came from."""

    s: Settings  # the sidebar's
    cfg: AttentionConfig  # the run's (causal, a variant with mask methods)
    labels: list[str]
    rk: tuple  # the run's cache key
    scores: torch.Tensor  # (T, T) head 1's scores before masking
    d_k: int
    pair: int  # the px of each of two panels across the page

    def variants(self) -> list:
        return memo((self.rk, "variants"), lambda: masking_variants(self.scores, self.d_k))


# The formulas of "why no future information leaks", as math (KaTeX); values, so that no brace is in a msgid.
LEAK_MATH = dict(zeroed=r"$\exp(s_{ij}) \,/\, \sum_{k=1}^{T} \exp(s_{ik})$",
                 row_sum=r"$\sum_{k \le i} \exp(s_{ik}) \,/\, \sum_{k=1}^{T} \exp(s_{ik})$",
                 left=r"$\exp(s_{ij}) \,/\, \sum_{k \le i} \exp(s_{ik})$")


def render() -> None:
    """Draw the page: one section at a time, picked in a row of buttons kept in the link (``?lab_section=``), so
    each fits about a screen at 1280x720. Everything it computes stays local, so nothing outlives the run."""
    s = settings()
    st.title(_("Masking lab"))
    cfg = s.cfg if s.cfg.spec.uses("mask_method") else dataclasses.replace(s.cfg, variant="CausalAttention")
    cfg = dataclasses.replace(cfg, causal=True)
    st.caption(_("All comparisons use the same attention scores: {variant} (head 1) on your sentence, d_k = {d_k}.",
                 variant=cfg.variant,
                 d_k=cfg.d_out if cfg.variant != "MultiHeadAttention" else cfg.d_out // cfg.num_heads))
    run = load_run(s, cfg)
    if run is None:
        st.stop()
    labels, trace = run.labels, run.trace
    slide_settings(cfg.variant, len(labels))
    ask_the_class(st, "masking_lab", trace, labels, kinds=("masking", "attends_most"))
    scores = torch.from_numpy(np.array(head_matrix(trace, "scores", 0)))
    lab = Lab(s, cfg, labels, run.key, scores, int(head_matrix(trace, "keys", 0).shape[-1]),
              fit(cap(PAIR_CAP_PX), labels, panels=2))
    del run, trace
    # an older link that names a mistake opens the mistakes
    first = SECTIONS[1] if "mistake" in st.query_params and "lab_section" not in st.query_params else SECTIONS[0]
    name = linked_choice(st.segmented_control, _("Section"), SECTIONS, "lab_section", first, required=True,
                         label_visibility="collapsed", width="stretch")
    if name != SECTIONS[1]:  # a link copied here must not reopen the mistakes (the older links' rule above)
        st.query_params.pop("mistake", None)
    _unused, downloads = section_steps("lab_section", SECTIONS)
    PARTS[name](lab)
    page_downloads(downloads, page="masking-lab")


def _methods(lab: Lab) -> None:
    """1. The two correct methods give the same weights."""
    labels, rk = lab.labels, lab.rk
    right_a, right_b = lab.variants()[:2]
    st.subheader(_("1 · Two correct ways, the same weights"))
    diff = (right_a.weights - right_b.weights).abs()
    show_panels(st, [right_a.weights.numpy(), right_b.weights.numpy()], [_("(a) −∞ before softmax"),
                _("(b) softmax → zero → renormalize")], labels, look=Look(scale="weights", columns=2, max_px=lab.pair),
                key="two_methods", cache_key=(rk, "two_methods"), name="two_correct_masks",
                title=_("Two correct causal masks, the same weights"))
    c1, c2 = sized_columns([2, 3])
    c1.metric("max |(a) − (b)|", f"{float(diff.max()):.1e}", help=_("Float rounding only (float32 epsilon ≈ 1.2e-7)."))
    with c2:
        # In units of float32 epsilon: the true sizes (~1e-8) would all print as "0.00".
        show_matrix(st, diff.numpy() / EPS32, labels, labels,
                    Look(scale="magnitude:1", max_px=c2.fit(cap(260), labels)), key="method_diff",
                    title=_("|(a) − (b)| in units of float32 epsilon ({eps})", eps=format(EPS32, ".2e")),
                    cache_key=(rk, "method_diff"), name="masks_difference_in_eps")
        st.caption(" ".join(filter(None, [
            _("0 = identical (dark); 1 = one float32 rounding step at 1.0 (bright). The two methods agree up to float "
              "rounding."), scales.out_of_range_note(diff.numpy() / EPS32, "magnitude:1")])))
    # beside the difference, under the metric: one row, not two (the lab fits fewer screens)
    c1.markdown(_(
        "**Why no future information leaks with (b):** after zeroing, row $i$ is {zeroed} for the past keys "
        "$j \\le i$. Dividing by the row sum {row_sum} cancels the common denominator — the only place the future "
        "keys appeared — leaving {left}: exactly softmax over the past keys, which is what (a) computes.",
        **LEAK_MATH))


def _mistakes(lab: Lab) -> None:
    """2. The classic mistakes beside the right answer."""
    labels, rk, variants = lab.labels, lab.rk, lab.variants()
    right_a = variants[0]
    st.subheader(_("2 · Classic mistakes, beside the right answer"))
    names = [v.name for v in variants[2:]]
    pick = linked_choice(st.segmented_control, _("Mistake"), names, "mistake", names[0], label_visibility="collapsed")
    wrong = next(v for v in variants if v.name == pick)
    if wrong.correct:
        st.markdown(_(":green[**✓**] **{verdict}**", verdict=_(wrong.verdict)))
    else:
        st.markdown(_(":red[**✗**] **{verdict}**", verdict=_(wrong.verdict)))
    show_panels(st, [right_a.weights.numpy(), wrong.weights.numpy()],
                [_("right: {method}", method=_(right_a.name)), _(pick)], labels,
                look=Look(scale="weights", columns=2, max_px=lab.pair), key="mistake_pair",
                cache_key=(rk, "mistake", pick), name=f"right_vs_{pick}",
                title=_("The right answer beside the {mistake}", mistake=_(pick)))
    if note := scales.out_of_range_note(wrong.weights.numpy(), "weights"):
        st.caption(note)  # the legend's gradient cannot show these colours
    # the code and its three numbers beside the cell-by-cell difference: one row, not two (fewer screens)
    c_code, c_diff = sized_columns([1, 1])
    c_code.code(wrong.code, language="python", wrap_lines=True)  # a half column: long lines wrap, not cut
    m1, m2, m3 = c_code.columns(3)
    m1.metric(_("future weight"), f"{wrong.future_weight:.3f}", help=_("Should be 0: no attention to the future."))
    m2.metric(_("|row sum − 1|"), f"{wrong.row_sum_error:.3f}", help=_("Should be 0: weights sum to 1."))
    m3.metric(_("min weight"), f"{wrong.min_weight:.3f}", help=_("Should be ≥ 0."))
    what_wrong = (wrong.weights - right_a.weights).numpy()
    show_matrix(c_diff, what_wrong, labels, labels, Look(scale="scores", max_px=c_diff.fit(cap(300), labels)),
                key="mistake_diff", title=_("{mistake} − right answer (what is wrong, cell by cell)", mistake=_(pick)),
                cache_key=(rk, "mistake_diff", pick),
                name=f"{pick}_minus_right")

def _precision(lab: Lab) -> None:
    """3. float32, float16, bfloat16; −∞ against finfo.min; the fully masked row."""
    cfg, rk, scores = lab.cfg, lab.rk, lab.scores
    st.subheader(_("3 · Precision: float32, float16, bfloat16"))
    rows = memo((rk, "precision", cfg.device), lambda: precision_table(scores, lab.d_k, cfg.device))
    device, mask_value, max_diff = _("device"), _("mask value"), _("max |Δ| vs float32 −∞")
    last, finite = _("a fully masked row becomes"), _("finite (all rows)")
    table = pd.DataFrame([dataclasses.asdict(r) for r in rows]).drop(columns=["said", "error"]).rename(columns={
        "dtype": "dtype", "device": device, "method": mask_value, "max_diff_vs_fp32": max_diff,
        "fully_masked_row": last, "finite": finite})
    table = table[[c for c in table.columns if c != last] + [last]]
    # PyTorch's error messages are longer than the page is wide: the table says "error", the text follows it.
    errors = [(r.dtype, r.method, r.error) for r in rows if r.error is not None]
    table[last] = [_(r.said) if r.error is None else _("PyTorch error (below the table)") for r in rows]
    show_table(st, table, formats={max_diff: "%.2e"}, hide_index=True, width="stretch",
               column_config={device: st.column_config.TextColumn(width="small"),
                              last: st.column_config.TextColumn(width="large")})
    for dtype, method, error in errors:
        st.caption(_("PyTorch error for {dtype} with {method}: `{error}`", dtype=dtype, method=method, error=error))
    st.markdown(_(
        "Computed on **{device}** in {dtypes}. −∞ and `torch.finfo(dtype).min` give the same weights for ordinary "
        "rows; they differ when *every* key of a row is masked (e.g. a padding query): with −∞ the row is 0/0 = NaN, "
        "with finfo.min it silently becomes uniform. A guard keeps such rows at zero:",
        device=cfg.device, dtypes=", ".join(DTYPES)))
    st.code("all_masked = torch.isneginf(masked).all(dim=-1, keepdim=True)\n"
            "weights = torch.softmax(masked.masked_fill(all_masked, 0.0), dim=-1).masked_fill(all_masked, 0.0)",
            language="python", wrap_lines=True)
    demo = scores[:3, :3].clone()
    demo[0, :] = -torch.inf
    st.caption(_("guarded_softmax on a row of all −∞ → {guarded} (plain softmax: {plain})",
                 guarded=guarded_softmax(demo)[0].tolist(), plain=torch.softmax(demo, -1)[0].tolist()))


def _dropout(lab: Lab) -> None:
    """4. Dropout after masking, on the same sentence in training mode."""
    cfg, labels = lab.cfg, lab.labels
    st.subheader(_("4 · Dropout after masking"))
    p = cfg.dropout if cfg.dropout > 0 else 0.5
    dcfg = dataclasses.replace(cfg, dropout=p, train_mode=True)
    drun = load_run(lab.s, dcfg, quiet=True)
    if drun is not None:
        dmask = head_matrix(drun.trace, "dropout_mask", 0)
        dropped = head_matrix(drun.trace, "dropped_weights", 0)
        before = head_matrix(drun.trace, "weights", 0)
        top = 1 / (1 - p)
        # The mask beside its explanation, then the two weight panels across the page: mask and panels in one
        # row do not fit a 1280 px projector with the sidebar open (the third panel was cut off).
        c_mask, c_note = sized_columns(2)
        mask_px = c_mask.fit(cap(HALF_CAP_PX), labels, legend=False)  # its legend is below
        show_matrix(c_mask, dmask, labels, labels, Look(scale="mask", max_px=mask_px,
                                                         mask_labels=scales.DROPOUT_MASK_LABELS),
                    key="dropout_lab_mask", title=_("dropped (1 = zeroed)"), cache_key=(drun.key, "dropout_lab_mask"),
                    name=f"dropout_mask_p{p:g}")
        sums = dropped.sum(axis=1)
        c_note.markdown(_("**Survivors × 1/(1−p) = {top}**: the two weight panels below share a colour scale "
                          "from 0 to {top}, so the scaled survivors are the brightest cells.", top=format(top, ".3g")))
        values = dict(p=f"{p:g}", top=f"{top:.3g}", low=f"{sums.min():.3f}", high=f"{sums.max():.3f}")
        if cfg.dropout == 0:
            c_note.markdown(_("p = {p} (the sidebar has dropout 0, so the lab uses 0.5): survivors are multiplied by "
                              "1/(1−p) = {top} so the *expected* row sum stays 1, but each actual row sum now ranges "
                              "{low} … {high}. In eval mode (`model.eval()`) dropout does nothing.", **values))
        else:
            c_note.markdown(_("p = {p}: survivors are multiplied by 1/(1−p) = {top} so the *expected* row sum stays 1, "
                              "but each actual row sum now ranges {low} … {high}. In eval mode (`model.eval()`) "
                              "dropout does nothing.", **values))
        show_panels(st, [before, dropped], [_("weights (eval mode: used as is)"), _("after dropout (training)")],
                    labels, look=Look(scale=scales.weights_scale(top), columns=2, max_px=lab.pair), key="dropout_lab",
                    cache_key=(drun.key, "dropout_lab"), name=f"dropout_p{p:g}",
                    title=_("Weights before and after dropout (p = {p}, survivors × {top})", p=format(p, "g"),
                            top=format(top, ".3g")))


def _scaling(lab: Lab) -> None:
    """5. Why divide by √d_k: random unit-variance q and k, the same for every sentence."""
    st.subheader(_("5 · Why divide by √d_k"))
    # the reason and the d_k knob beside the table: one row, not three (fewer screens)
    c_why, c_table = st.columns([2, 3])
    c_why.markdown(_("If the components of q and k have variance 1, q·k is a sum of d_k such products and has "
                     "variance d_k: scores spread out as √d_k, softmax saturates onto one key and its gradients "
                     "vanish. Dividing by √d_k brings the variance back to 1."))
    srows = memo(("scaling_table", SCALING_SAMPLES), scaling_table)  # the same numbers for every sentence
    std, unscaled_max, scaled_max = _("std of q·k"), _("mean max weight, no scaling"), _("mean max weight, ÷√d_k")
    show_table(c_table, pd.DataFrame([dataclasses.asdict(r) for r in srows]).rename(columns={
        "d_k": "d_k", "score_std": std, "max_weight_unscaled": unscaled_max,
        "max_weight_scaled": scaled_max}), hide_index=True, width="stretch",
        formats={std: "%.2f", unscaled_max: "%.3f", scaled_max: "%.3f"})
    c_table.caption(_("Each row: random unit-variance q and k for 8 tokens, averaged over {samples} seeded samples "
                      "(one sample jumped about from row to row). The panels below show one of them.",
                      samples=SCALING_SAMPLES))
    dk = c_why.select_slider(_("d_k (the panels below)"), [2, 8, 32, 128, 512], value=128, key="scaling_dk")
    unscaled, scaled = scaling_weights(dk)
    toks = [f"{i + 1}" for i in range(unscaled.shape[0])]
    slide_settings(extra=f"d_k {dk}")  # random q and k: not the sentence's
    show_panels(st, [unscaled.numpy(), scaled.numpy()], ["softmax(q·k)", "softmax(q·k / √d_k)"], toks,
                look=Look(scale="weights", columns=2, max_px=lab.pair), key="scaling", cache_key=("scaling", dk),
                name="scaling", title=_("Why divide by √d_k: softmax of random scores, d_k = {d_k}", d_k=dk))


PARTS = dict(zip(SECTIONS, (_methods, _mistakes, _precision, _dropout, _scaling), strict=True))

render()
