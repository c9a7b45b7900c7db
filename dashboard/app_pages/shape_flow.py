"""Shape flow: MultiHeadAttention one operation at a time, the view/transpose picture, the wrapper
vs the efficient class, and the batched matmul vs a loop over heads."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import streamlit as st
import torch

from attn_core import AttentionConfig, MultiHeadAttentionWrapper, build_module
from attn_core.labs.lab import batched_vs_loop, kv_sharing, reshape_demo, wrapper_as_multihead
from attn_core.tracing.steps import kind_scale
from attn_core.tracing.trace import function_at
from attn_core.tracing.views import previous_form
from dashboard.classroom.ui import ask_the_class
from dashboard.drawing import flow_charts, scales
from dashboard.drawing.matrices import Look, show_matrix, tensor_slice
from dashboard.drawing.present import presenting
from dashboard.drawing.sizes import cap, content_px, sized_columns
from dashboard.drawing.text import show_table
from dashboard.export.slides import draw_chart, page_downloads, slide_settings
from dashboard.i18n import _, message, ngettext, sentences
from dashboard.state import models
from dashboard.state.controls import Settings, settings
from dashboard.state.links import md_escape
from dashboard.state.models import INPUT_NAME
from dashboard.state.runs import _set_state, load_run
from dashboard.state.steppers import stepper

DEMO_HEADS = 4  # the view/transpose picture shows at most this many heads ...
DEMO_HEAD_DIM = 6  # ... and this many columns of each head, so its numbers stay readable
# Charts are sized for the narrowest screen the page is made for (dashboard/drawing/sizes.py: the main column at
# 1280x720 with the sidebar open, 820 px; a half column 402 px); tests/test_browser_layout.py checks the fit.
HALF_CAP_PX = 260  # a heatmap's cells in half the page, at most (more only in presentation mode's wider page)
NUMBERED_CHROME_PX = 220  # the reshape picture's token labels, axis title and head legend beside its cells
# The first step's code line, by the input vectors actually used (the trace records the learned one).
X_CODE = {
    "book": "x = inputs  # the book's fixed 6 x 3 tensor for \"Your journey starts with one step\"",
    "learned": "x = token_embeddings + pos_embeddings",
    "sinusoidal": "x = token_embeddings + sinusoidal_pos_embeddings",
    "onehot": "x = one_hot(token_ids)  # one column per distinct token",
    INPUT_NAME: "x = self.norm1(x)  # a pretrained block: its input, the residual stream, normed",
}

def show_numbers(container, m: torch.Tensor) -> None:
    """A (num_tokens, num_tokens) score matrix as a table, to 4 decimals as the book prints it: rows are queries and
    columns keys, both counted from 1 as tokens are everywhere else in the app (rows started at 0, issue 33)."""
    df = pd.DataFrame(m.numpy(), columns=[_("key {j}", j=j + 1) for j in range(m.shape[1])],
                      index=pd.Index([_("query {i}", i=i + 1) for i in range(m.shape[0])]))
    show_table(container, df, formats=dict.fromkeys(df.columns, "%.4f"), hide_index=False)


def source_with_marker(origin: tuple[str, int] | None) -> tuple[str, str]:
    """(the name of the function whose source holds the line at ``origin``, that source with the line marked)."""
    found = function_at(origin) if origin is not None else None
    if found is None:
        return "", ""
    name, start, lines = found
    lines = list(lines)
    lines[origin[1] - start] += "   # ◀◀◀ " + _("this step")
    return name, "\n".join(lines)


def flow_config(cfg: AttentionConfig) -> AttentionConfig:
    """The config Shape flow steps through: the sidebar's variant if its heads are split by ``.view`` (its registry
    entry's ``shape_flow``), else MultiHeadAttention with the sidebar's sizes."""
    return cfg if cfg.spec.shape_flow else dataclasses.replace(cfg, variant="MultiHeadAttention")


def shape_text(step) -> str:
    """``(b=1, num_heads=4, num_tokens=9, head_dim=2)``; two token axes are told apart: ``num_tokens=9 (queries),
    num_tokens=9 (keys)``."""
    if step.axes and len(step.axes) == len(step.shape):
        parts = [f"{a}={n}" for a, n in zip(step.axes, step.shape)]
        if step.axes[-2:] == ("num_tokens", "num_tokens"):
            parts[-2] = _("{axis} (queries)", axis=parts[-2])
            parts[-1] = _("{axis} (keys)", axis=parts[-1])
        return "(" + ", ".join(parts) + ")"
    return str(tuple(step.shape))


@st.fragment
def step_view(s: Settings) -> None:
    """The stepper and the step it points at. A fragment: Previous / Next rerun only this part (with the settings
    of the page's last full run, kept with the fragment's arguments)."""
    run = load_run(s, flow_config(s.cfg), quiet=True)
    if run is None:
        return
    steps, labels = list(run.trace), run.labels
    i = stepper("flow_step", [s.name for s in steps])
    step = steps[i]
    prev = previous_form(steps, i)
    code = X_CODE.get(run.input_mode, step.code) if step.kind == "input" else step.code

    left, right = sized_columns(2)
    with left:
        st.subheader(f"{i + 1}. `{step.name}`", anchor=False)  # an anchor id re-written every step
        st.code(code, language="python", wrap_lines=True)
        st.markdown(_("**Shape** {shape}", shape=shape_text(step)))
        if prev is not None:
            var, before = prev
            values = dict(var=var, step=before.name, before=shape_text(before), after=shape_text(step))
            if before.shape == step.shape:
                st.markdown(_("**Before this step** `{var}`: same shape", **values) if var == before.name else
                            _("**Before this step** `{var}` (step `{step}`): same shape", **values))
            else:
                st.markdown(_("**Before this step** `{var}`: {before} → {after}", **values) if var == before.name
                            else _("**Before this step** `{var}` (step `{step}`): {before} → {after}", **values))
        st.markdown(_("**Why:** {note}", note=_(step.note)))
        st.markdown(_("**Contiguous:** yes · **strides** {stride}", stride=step.stride) if step.contiguous else
                    _("**Contiguous:** no · **strides** {stride}", stride=step.stride))
        if not step.contiguous:
            st.caption(_("Not contiguous: the elements are not in row-major order for this shape, so `.view` "
                         "cannot regroup them without a copy (`.contiguous()` makes one)."))
        where, src = source_with_marker(step.origin)
        if where:
            # its code is drawn only while it is open: closed, the highlighted lines with the marker moved were
            # hundreds of changes to the page on every step
            source = st.expander(_("This line in the full source of `{where}`", where=where), expanded=False,
                                 key="flow_source",
                                 on_change="rerun")
            if source.open:
                source.code(src, language="python", line_numbers=True, wrap_lines=True)  # a phone: no sideways scroll
    with right:
        scale = kind_scale(step.kind)
        tensor_slice(st, step.tensor, step.axes, labels, Look(
                         scale=scale, max_px=right.fit(cap(HALF_CAP_PX), labels, legend=scale != "mask"),
                         mask_labels=scales.DROPOUT_MASK_LABELS if step.kind == "dropout_mask" else scales.MASK_LABELS),
                     key=f"flow_tensor_{i}", cache_key=(run.key, "flow", step.name), name=f"step{i + 1}_{step.name}")


def kv_sharing_section(cfg: AttentionConfig) -> None:
    """Grouped K/V heads: how each query head gets its group's keys, three ways, and which of them copy."""
    groups, heads = cfg.spec.num_kv_heads(cfg), cfg.spec.heads(cfg)
    st.header(ngettext("How {heads} query heads share {n} K/V head", "How {heads} query heads share {n} K/V heads",
                       groups, heads=heads))
    ways = kv_sharing(groups, heads // groups, head_dim=cfg.head_dim)
    table = pd.DataFrame({_("code"): [w.code for w in ways], _("shape"): [str(w.shape) for w in ways],
                          _("strides"): [str(w.stride) for w in ways],
                          _("copies the keys"): [_("yes") if w.copies else _("no (a view)") for w in ways]})
    show_table(st, table, hide_index=True)
    st.caption(_("All three hold the same numbers, K1 K1 … K2 K2 in head order. `.expand` only sets a stride of 0 "
                 "on the group axis, so it costs no memory, but merging that axis into num_heads needs a copy; "
                 "`repeat_interleave` copies straight away. The efficient path skips both: "
                 "`scaled_dot_product_attention(..., enable_gqa=True)` reads each K/V head for its whole group."))


def head_dim_one(num_heads: int) -> None:
    """One line saying that head_dim is 1 (the book's d_out 2 with 2 heads, the sidebar's default) and a button
    that widens each head to 2 columns: with one column a head's view, transpose and matmul pictures are trivial.
    The shared defaults stay the book's: its numbers elsewhere depend on them."""
    d_out = 2 * num_heads
    note, fix = st.columns([3, 1], vertical_alignment="center")
    note.info(_("head_dim = d_out ÷ num_heads = {n} ÷ {n} = 1: one column per head, trivial pictures.",
                n=num_heads), icon=":material/info:")
    fix.button(_("Set d_out to {d_out} (head_dim 2)", d_out=d_out), key="widen_heads", on_click=_set_state,
               args=("d_out", d_out), type="primary",
               help=_("Sets the sidebar's d_out to {d_out} = 2 × num_heads.", d_out=d_out))


def render() -> None:
    """Draw the page. Everything it computes stays local, so nothing outlives the run."""
    s = settings()
    if not presenting():  # the top navigation names the page: at 720 px every line above the chart counts
        st.title(_("Shape flow: multi-head attention step by step"))
    cfg = flow_config(s.cfg)
    if s.pretrained:
        c = models.config(s.weights)
        values = dict(model=md_escape(models.label(s.weights)), layer=s.layer + 1, attention=message(c.attention))
        st.caption(_("{model}, layer {layer}: its own {attention} with RoPE on queries and keys (steps queries.rope, "
                     "keys.rope) and weights, on that layer's input for your sentence (change the layer in the "
                     "sidebar).", **values) if c.positions == "rope" else
                   _("{model}, layer {layer}: its own {attention} and weights, on that layer's input for your "
                     "sentence (change the layer in the sidebar).", **values))
    elif cfg is not s.cfg:
        st.caption(_("This page steps through a multi-head variant: `{variant}`, with the sidebar's sizes and "
                     "settings.", variant=cfg.variant))
    run = load_run(s, cfg)
    if run is None:
        st.stop()
    labels = run.labels
    T = len(labels)
    slide_settings(cfg.variant, T, f"d_out {cfg.d_out}, {cfg.num_heads} heads")

    st.markdown(ngettext("**{n} token · d_in {d_in} · d_out {d_out} · num_heads {heads} · head_dim {head_dim}** — "
                         "input x: {shape} (b, num_tokens, d_in)",
                         "**{n} tokens · d_in {d_in} · d_out {d_out} · num_heads {heads} · head_dim {head_dim}** — "
                         "input x: {shape} (b, num_tokens, d_in)", T, d_in=cfg.d_in, d_out=cfg.d_out,
                         heads=cfg.num_heads, head_dim=cfg.d_out // cfg.num_heads, shape=tuple(run.x.shape)))
    if cfg.d_out // cfg.num_heads == 1 and not s.pretrained:
        head_dim_one(cfg.num_heads)
    ask_the_class(st, "shape_flow", run.trace, labels, kinds=("view_shape", "attends_most"))
    step_view(s)

    spec = cfg.spec
    if spec.kv_heads is not None and spec.num_kv_heads(cfg) < spec.heads(cfg):
        kv_sharing_section(cfg)

    # --- the reshape itself --------------------------------------------------------------------------
    st.header(_("How `.view` and `.transpose(1, 2)` regroup the numbers"))
    H, head_dim = cfg.num_heads, cfg.d_out // cfg.num_heads
    demo = reshape_demo(min(T, 4), cfg.d_out, H)  # the real sizes: (num_tokens, d_out) -> (num_heads, T, head_dim)
    demo_T, demo_h, demo_hd = min(T, 4), min(H, DEMO_HEADS), min(head_dim, DEMO_HEAD_DIM)
    columns = [h * head_dim + c for h in range(demo_h) for c in range(demo_hd)]  # real d_out columns shown
    tok = labels[:demo_T]
    values = dict(d_out=cfg.d_out, H=H, head_dim=head_dim, shown=demo_h, columns=demo_hd)
    if demo_h < H and demo_hd < head_dim:
        drawn = ngettext("Your sizes (d_out = {d_out}, num_heads = {H}, head_dim = {head_dim}), drawn for {n} token, "
                         "the first {shown} of {H} heads and the first {columns} of each head's {head_dim} columns.",
                         "Your sizes (d_out = {d_out}, num_heads = {H}, head_dim = {head_dim}), drawn for {n} tokens, "
                         "the first {shown} of {H} heads and the first {columns} of each head's {head_dim} columns.",
                         demo_T, **values)
    elif demo_h < H:
        drawn = ngettext("Your sizes (d_out = {d_out}, num_heads = {H}, head_dim = {head_dim}), drawn for {n} token "
                         "and the first {shown} of {H} heads.",
                         "Your sizes (d_out = {d_out}, num_heads = {H}, head_dim = {head_dim}), drawn for {n} tokens "
                         "and the first {shown} of {H} heads.", demo_T, **values)
    elif demo_hd < head_dim:
        drawn = ngettext("Your sizes (d_out = {d_out}, num_heads = {H}, head_dim = {head_dim}), drawn for {n} token, "
                         "all {H} heads and the first {columns} of each head's {head_dim} columns.",
                         "Your sizes (d_out = {d_out}, num_heads = {H}, head_dim = {head_dim}), drawn for {n} tokens, "
                         "all {H} heads and the first {columns} of each head's {head_dim} columns.", demo_T, **values)
    else:
        drawn = ngettext("Your sizes (d_out = {d_out}, num_heads = {H}, head_dim = {head_dim}), drawn for {n} token "
                         "and all {H} heads.",
                         "Your sizes (d_out = {d_out}, num_heads = {H}, head_dim = {head_dim}), drawn for {n} tokens "
                         "and all {H} heads.", demo_T, **values)
    st.caption(sentences(drawn, _("Each number is one entry of the projected queries, numbered in memory order; the "
                                  "colour says which head gets it.")))
    # One above the other: a slice of up to 24 numbered columns needs the page's whole width.
    st.markdown(_("**Before**: `queries` (num_tokens, d_out)"))
    before = demo.flat.numpy()[:demo_T, columns]  # (demo_T, demo_h * demo_hd)
    groups = np.tile(demo.head_of_column.numpy()[columns], (demo_T, 1))
    draw_chart(st, lambda: flow_charts.numbered_cells(before, groups, tok, [str(c + 1) for c in columns],
                                                  x_title=_("d_out column"),
                                                  px=min(cap(30),
                                                         (content_px() - cap(NUMBERED_CHROME_PX)) // len(columns))),
               key="reshape_before", name="reshape_before_view",
               title=_("Before .view: queries (num_tokens, d_out), numbered in memory order, coloured by head"))
    st.markdown(_("**After** `.view(b, num_tokens, num_heads, head_dim).transpose(1, 2)`: one (num_tokens, "
                  "head_dim) matrix per head"))
    per_head = demo.transposed.numpy()[:demo_h, :demo_T, :demo_hd]  # (num_heads, num_tokens, head_dim)
    draw_chart(st, lambda: flow_charts.numbered_cells(per_head, np.repeat(np.arange(demo_h)[:, None, None], demo_T, 1)
                                                  .repeat(demo_hd, 2), tok, [str(c + 1) for c in range(demo_hd)],
                                                  panels=[_("head {head}", head=h + 1) for h in range(demo_h)],
                                                  x_title="head_dim", columns=4 if demo_hd <= 3 else 2),
               key="reshape_after", name="reshape_after_view_transpose",
               title=_("After .view(b, num_tokens, num_heads, head_dim).transpose(1, 2): one matrix per head"))
    st.markdown(_("`.view` only re-reads the same memory with a new shape: column *c* of d_out lands in head "
                  "*c // {hd}*. `.transpose(1, 2)` swaps the token and head axes by changing strides, without moving "
                  "data: strides are now {after} (batch, head, token, column) instead of the row-major {before}.",
                  hd=head_dim, after=demo.transposed_stride, before=demo.fixed_stride))
    st.markdown(_("**Merging the heads back with `.view` directly after a transpose fails:**"))
    st.code(f"context_vec.transpose(1, 2).view(b, num_tokens, d_out)\n# RuntimeError: {demo.view_error}",
            wrap_lines=True, language="python")
    st.markdown(_("The transposed tensor is not contiguous, so no single stride pattern describes the merged shape. "
                  "`.contiguous()` copies it into row-major order first: "
                  "`context_vec.contiguous().view(b, num_tokens, self.d_out)` (or use `.reshape`, which copies when "
                  "needed)."))

    # --- wrapper vs efficient class ---------------------------------------------------------------------
    st.header(_("{wrapper} vs {mha}", wrapper="`MultiHeadAttentionWrapper`", mha="`MultiHeadAttention`"))
    head_width = max(1, cfg.d_out // cfg.num_heads)
    wcfg = dataclasses.replace(cfg, variant="MultiHeadAttentionWrapper", d_out=head_width, dropout=0.0,
                               train_mode=False)
    wrapper: MultiHeadAttentionWrapper = build_module(wcfg)  # type: ignore[assignment]
    mha = wrapper_as_multihead(wrapper)
    x = run.x
    with torch.no_grad():
        out_w = wrapper(x.to(next(wrapper.parameters()).device)).cpu()
        out_m = mha(x.to(next(mha.parameters()).device)).cpu()
    diff = float((out_w - out_m).abs().max())
    c1, c2, c3 = st.columns(3)
    c1.markdown(_("**Wrapper**: {heads} × `CausalAttention(d_out={width})`, concatenated  \noutput {shape} = d_out × "
                  "num_heads", heads=cfg.num_heads, width=head_width, shape=tuple(out_w.shape)))
    c2.markdown(_("**MultiHeadAttention(d_out={d_out}, num_heads={heads})** with the heads' W stacked and out_proj = "
                  "identity  \noutput {shape}", d_out=head_width * cfg.num_heads, heads=cfg.num_heads,
                  shape=tuple(out_m.shape)))
    c3.metric(_("max |difference|"), f"{diff:.2e}", help=_("Float rounding only: the two compute the same thing."))
    st.caption(_("The wrapper's d_out is the width of *each* head; MultiHeadAttention's d_out is the *total* width, "
                 "split into num_heads × head_dim. With the same weights they agree; MultiHeadAttention does one big "
                 "matmul per projection instead of one per head."))
    lab = [str(c + 1) for c in range(out_w.shape[-1])]
    c1, c2 = sized_columns(2)
    half = c1.fit(cap(HALF_CAP_PX), labels)
    show_matrix(c1, out_w[0].numpy(), labels, lab, Look(x_title=_("column"), y_title=_("token"), max_px=half),
                key="wrapper_out", title=_("wrapper output"), cache_key=(run.key, "wrapper_out"))
    show_matrix(c2, out_m[0].numpy(), labels, lab, Look(x_title=_("column"), y_title=_("token"), max_px=half),
                key="mha_out", title=_("MultiHeadAttention output"), cache_key=(run.key, "mha_out"))

    # --- batched matmul vs loop -------------------------------------------------------------------------
    st.header(_("One batched matmul = a loop over heads"))
    batched, per_head_scores, loop_diff = batched_vs_loop()
    st.code("# (b=1, num_heads=2, num_tokens=3, head_dim=4)\n"
            "a = torch.tensor([[[[0.2745, 0.6584, 0.2775, 0.8573], ...]]])\n"
            "print(a @ a.transpose(2, 3))\n\nfirst_head = a[0, 0, :, :]\nfirst_res = first_head @ first_head.T\n"
            "second_head = a[0, 1, :, :]\nsecond_res = second_head @ second_head.T", language="python", wrap_lines=True)
    c1, c2, c3 = st.columns(3)
    c1.markdown("**`a @ a.transpose(2, 3)`**")
    for m in batched[0]:
        show_numbers(c1, m)
    c2.markdown(_("**per head: `first_head @ first_head.T`, `second_head @ second_head.T`**"))
    for m in per_head_scores:
        show_numbers(c2, m)
    c3.metric(_("max |difference|"), f"{loop_diff:.1e}" if loop_diff else "0")
    if loop_diff:
        c3.caption(_("Not exactly 0: this PyTorch build sums the products in another order, a float32 rounding "
                     "difference in the last digit."))
    c3.caption(_("PyTorch multiplies the last two dimensions and treats the leading ones (batch, heads) as a "
                 "batch."))
    page_downloads(page="shape-flow")


render()
