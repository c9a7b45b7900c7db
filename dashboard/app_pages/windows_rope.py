"""Windows & sinks, its RoPE section: RoPE on a real layer's queries and keys, and three ways to encode position.
Kept apart from the page so that each module stays short."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st
import torch

from attn_core.labs.positions import (
    cosine_similarity_matrix,
    rope_frequencies,
    score_by_distance,
    shift_invariance,
    sinusoidal_embeddings,
)
from dashboard.drawing import window_charts as charts
from dashboard.drawing.chart_cache import altair
from dashboard.drawing.sizes import cap, column_px
from dashboard.i18n import _, ngettext
from dashboard.state import models
from dashboard.state.links import error_text, md_escape

CURVE_CHROME_PX, SIMILARITY_CHROME_PX = 70, 140  # what a chart needs beside its plot (axis titles), on a phone


def show_rope(name: str | None, s, sample_ids: tuple[int, ...] | None, sample_name: str) -> None:
    """RoPE on a layer's real queries and keys of the model ``name`` (None: random weights, which have no RoPE): of
    the sample text's first tokens ``sample_ids`` (few: a RoPE run walks the model up to its layer), or with None of
    the sidebar's sentence, as the Text choice says; ``sample_name``: the sample text as the Text choice names it."""
    if name is None or models.config(name).positions != "rope":
        st.info(_("RoPE is how Llama-family models encode position: pick SmolLM2 above (GPT-2 and the chapter's model "
                  "add learned position embeddings instead; they are compared at the bottom)."))
    else:
        model, config = models.model(name), models.config(name)
        d = config.head_dim  # the model's own: not always emb_dim / n_heads
        c_layer, c_head = st.columns(2)
        layer = int(c_layer.number_input(_("Layer"), 1, model.cfg["n_layers"], 1, key="win_rope_layer")) - 1
        head = int(c_head.number_input(_("Head"), 1, model.cfg["n_heads"], 1, key="win_rope_head")) - 1
        try:
            text = s.text if sample_ids is None else model.tokenizer.decode(list(sample_ids))
            run = models.layer_run(text, name, layer, models.attention_config(name, s.cfg))
        except ValueError as e:
            st.error(error_text(e))
            return
        base = float(config.rope_bases[layer])  # the layer's own: local and global layers may differ
        normed = "queries.norm" in run.trace.names()  # with q_norm / k_norm, RoPE rotates the normed queries and keys
        q_step, k_step = ("queries.norm", "keys.norm") if normed else ("queries.transpose", "keys.transpose")
        queries = run.trace[q_step].tensor[0].float()  # (num_heads, T, head_dim), before RoPE
        keys = run.trace[k_step].tensor[0].float()  # (num_kv_groups, T, head_dim)
        kv = head // (queries.shape[0] // keys.shape[0])
        theta = rope_frequencies(d, base)
        T = queries.shape[1]
        shown_base = f"{base:,.0f}"
        values = dict(model=md_escape(models.label(name)), layer=layer + 1, head=head + 1, kv_head=kv + 1, pairs=d // 2,
                      base=shown_base, d=d)
        if sample_ids is not None:
            st.markdown(ngettext("**{model}, layer {layer}, head {head}** (reads K/V head {kv_head}) on the first "
                                 "{n} token of {text}. RoPE turns each of the {pairs} dimension pairs by "
                                 "position × θᵢ, θᵢ = {base}^(−2i/{d}).",
                                 "**{model}, layer {layer}, head {head}** (reads K/V head {kv_head}) on the first "
                                 "{n} tokens of {text}. RoPE turns each of the {pairs} dimension pairs by "
                                 "position × θᵢ, θᵢ = {base}^(−2i/{d}).", T, text=md_escape(sample_name), **values))
        else:
            st.markdown(ngettext("**{model}, layer {layer}, head {head}** (reads K/V head {kv_head}) on your "
                                 "sentence ({n} token). RoPE turns each of the {pairs} dimension pairs by position × "
                                 "θᵢ, θᵢ = {base}^(−2i/{d}).",
                                 "**{model}, layer {layer}, head {head}** (reads K/V head {kv_head}) on your "
                                 "sentence ({n} tokens). RoPE turns each of the {pairs} dimension pairs by position "
                                 "× θᵢ, θᵢ = {base}^(−2i/{d}).", T, **values))
        left, right = st.columns(2)
        curve_px = min(cap(330), column_px([1, 1], 0) - CURVE_CHROME_PX)
        pairs = [0, d // 8, d // 4, d // 2 - 1]
        angles = pd.DataFrame([{"position": p, "angle": (p * float(theta[i])) % (2 * np.pi), "pair": _("pair {i}", i=i)}
                               for i in pairs for p in range(64)])
        altair(left, charts.curve_chart(angles, "position", "angle", "pair", curve_px,
                                             x_title=_("token position"), y_title=_("angle (radians, mod 2π)")),
                          key="win_rope_angles", width="content")
        distances = range(0, 257)
        curve = score_by_distance(queries[head, -1], keys[kv, 0], distances, base).numpy()
        frame = pd.DataFrame({"distance": list(distances), "score": curve})
        altair(right, charts.curve_chart(frame, "distance", "score", None, curve_px,
                                              x_title=_("distance between query and key (tokens)"),
                                              y_title=_("q·k / √d after RoPE")), key="win_rope_distance",
                           width="content")
        right.caption(_("The last token's real query and token 1's real key, rotated to positions d apart: the "
                        "score depends on the distance alone."))
        shift = 100
        diff = shift_invariance(queries, keys, shift, base)
        st.metric(_("Largest score change when the whole sentence moves {shift} positions later", shift=shift),
                  f"{diff:.1e}", help=_("Rotating every query and key by {shift} more positions changes no score "
                                        "beyond float rounding: RoPE encodes relative position.", shift=shift))
    st.markdown(_("**Three ways to encode position**: how alike two positions look, for the first 64 positions."))
    cols = st.columns(3)
    side = min(cap(200), column_px([1, 1, 1], 0) - SIMILARITY_CHROME_PX)
    ones = torch.ones(64)
    rope_kernel = score_by_distance(ones, ones, range(64), 10_000.0).numpy() / 8.0
    rope_matrix = np.array([[rope_kernel[abs(i - j)] for j in range(64)] for i in range(64)])
    altair(cols[0], charts.similarity_chart(rope_matrix, _("RoPE: depends on i − j only"), side),
                         key="win_sim_rope", width="content")
    sinusoidal = cosine_similarity_matrix(sinusoidal_embeddings(64, 64)).numpy()
    altair(cols[1], charts.similarity_chart(sinusoidal, _("Sinusoidal (fixed, 2017)"), side), key="win_sim_sin",
                         width="content")
    learned = [f.name for f in models.found() if models.family_of(f.name).positions == "learned"]
    if learned:
        pos = models.model(learned[0]).pos_emb.weight[:64].detach()
        title = _("{model} (learned)", model=models.family_of(learned[0]).title)
        altair(cols[2], charts.similarity_chart(cosine_similarity_matrix(pos).numpy(), title, side),
                             key="win_sim_learned")
    else:
        cols[2].caption(_("GPT-2's learned position embeddings appear here once its weights are on this machine."))

