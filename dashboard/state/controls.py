"""The shared sidebar: every knob, each with a stable key, and the URL that restores them.

``render_sidebar()`` draws the controls and makes the run's :class:`Settings`, once; a page's ``render()``
reads them with ``settings()`` and passes them down (a fragment gets them as an argument). Invalid combinations
are turned into messages here, never into exceptions: pages show them with st.error / st.warning.

The URL is kept by hand rather than with ``bind="query-params"``, so that a link carries the plain
identifiers (``?variant=MultiHeadAttention&mask_method=renormalize``), every value read from a
link is validated with a message naming what was wrong, and a text too long for a link stays
out of it (``URL_TEXT_LIMIT``) instead of making a link that cannot load.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import streamlit as st

from attn_core import AttentionConfig, available_devices, variant
from attn_core.attention.variants import KNOBS as VARIANT_KNOBS
from dashboard.i18n import N_, _, message, ngettext, sentences
from dashboard.state import models
from dashboard.state.links import error_text, link_warning, md_escape
from dashboard.state.settings_schema import (  # noqa: F401  (names pages import from here)
    _CONFIG,
    DEFAULTS,
    DROPOUT_MAX,
    DROPOUT_STEP,
    INPUT_NAMES,
    KEPT_BY_PRESETS,
    MASK_NAMES,
    MAX_CONTEXT,
    MAX_DIM,
    MAX_LAYERS,
    PRESETS,
    SCHEMA,
    URL_KEYS,
    URL_TEXT_LIMIT,
    VARIANT_NAMES,
    BadValue,
    Setting,
    Settings,
    _preset,
    parse_int,
    parse_url_value,
    url_value,
)


def too_long(text: str | None, limit: int) -> str | None:
    """The message for a box's text over ``limit`` characters (its count, the limit, how much to cut); None if it
    fits. A text box's one limit: boxes set no ``max_chars``, because the browser ignores a paste over it without a
    word, and its counter ("25000/200000" at a 10x bound) named a second limit."""
    if text is None or len(text) <= limit:
        return None
    return _("Your text is {chars:,} characters long; this box takes up to {max_chars:,}. Shorten it by {cut:,} "
             "characters.", chars=len(text), max_chars=limit, cut=len(text) - limit)


def _seed_from_url(devices: list[str]) -> list[tuple[str, str]]:
    """Until a session's first run has drawn the sidebar, take each setting the link names (widgets own them
    after: :func:`render_sidebar` sets ``_url_read`` once its widgets exist, so a first run interrupted by a
    rerun reads the link again instead of losing what it had read)."""
    messages: list[tuple[str, str]] = []
    if st.session_state.get("_url_read"):
        return messages
    for key, setting in SCHEMA.items():
        if key not in st.query_params:
            continue
        raw = st.query_params[key]
        try:
            st.session_state[key] = setting.parse(raw, devices)
        except BadValue as e:
            messages.append(("warning", link_warning(key, raw, setting.shown(setting.default), e)))
    return messages


def _write_url(values: dict[str, object]) -> bool:
    """Put the settings into the URL (only those that differ from the defaults); return whether the
    text was left out for being too long for a link."""
    from urllib.parse import quote_plus

    text_too_long = False
    for key, value in values.items():
        wanted = None if value == DEFAULTS[key] else url_value(value)
        if key == "sentence" and wanted is not None and len(quote_plus(wanted)) > URL_TEXT_LIMIT:
            wanted, text_too_long = None, True
        current = st.query_params.get(key)
        if wanted is None and current is not None:
            del st.query_params[key]
        elif wanted is not None and current != wanted:
            st.query_params[key] = wanted
    return text_too_long


def _link_values() -> dict[str, object]:
    """The settings as the link holds them, read from the sidebar widgets' state (KeyError before they exist)."""
    return {key: setting.coerce(st.session_state[key]) for key, setting in SCHEMA.items()}


def write_link_early() -> None:
    """Put the settings into the address bar before the run draws anything (the sidebar writes it again, a no-op).

    Each change of the link makes the browser redraw the whole page once more. Sent at the end of the sidebar,
    that redraw fell in the middle of the run's own redraws (~25 ms more to a sentence change, measured in
    Chromium); sent first, it falls in the gap before the page's new elements arrive. The widgets' values are in
    the session state when a run starts, except in a session's first run, which takes them from the link.
    """
    if not st.session_state.get("_url_read"):
        return
    try:
        values = _link_values()
    except (KeyError, TypeError, ValueError):  # a widget not drawn yet: the sidebar writes the link
        return
    _write_url(values)


def _apply_preset(name: str) -> None:
    for key, value in PRESETS[name].items():
        st.session_state[key] = value


def _now(key: str) -> object:
    """A setting's value in this session (its default before it has one), to give its widget as the ``value``.

    A widget the browser has not mounted yet (the sidebar of a phone-sized screen, or of presentation mode, starts
    collapsed) starts from the ``value`` its last message carried, and sends that back with the next click. Given
    the default, a prepared link's ``d_out=8`` came back as 2 with the first PageDown (issue 33). The value is not
    part of a keyed widget's identity, so passing the current one changes nothing else."""
    return st.session_state.get(key, DEFAULTS[key])


def _select(container, label: str, key: str, **kw):
    """A selectbox over a choice setting's ids, showing their labels."""
    setting = SCHEMA[key]
    options = list(setting.labels)
    current = _now(key)
    shown = {ident: _(text) for ident, text in setting.labels.items()}  # in this run's language, once
    return container.selectbox(label, options, index=options.index(current) if current in options else 0,
                               format_func=shown.get, key=key, **kw)


def _number(container, label: str, key: str, **kw):
    """A number input over an int setting's range."""
    setting = SCHEMA[key]
    return container.number_input(label, int(setting.lo), int(setting.hi), value=_now(key), key=key, **kw)


def _toggle(container, label: str, key: str, **kw):
    """A toggle for a bool setting."""
    return container.toggle(label, value=bool(_now(key)), key=key, **kw)


def _colour_map(sb) -> None:
    """The heatmaps' colour map, on every page's sidebar (it is how charts look, not an attention knob)."""
    _select(sb, _("Colour map"), "cmap",
            help=_("The colours of weights (0 to 1) in every heatmap: cividis reads the same with any colour vision. "
                   "Scores and Q/K/V stay blue-orange, which is colour-blind safe already."))


def colour_map() -> str:
    """The colour map this session's heatmaps are drawn in (scales.color_scale's ``cmap``)."""
    return str(st.session_state.get("cmap", DEFAULTS["cmap"]))


def _finish_link(sb, text: str) -> None:
    """The widgets exist: from now on they own the settings; put them into the link."""
    st.session_state["_url_read"] = True
    if _write_url(_link_values()):  # the same values write_link_early wrote at the start of the run: no change
        sb.caption(_("This text is too long to put in a link ({n:,} characters): a shared link keeps every setting "
                     "but opens with the book's sentence.", n=len(text)))


def _keep_state(*keys: str) -> None:
    """Keep settings whose widgets this run does not draw (Streamlit forgets an undrawn widget's value): the link
    still holds them, and they are back when their widgets are."""
    kept = st.session_state.setdefault("_kept", set())
    for key in keys:
        st.session_state[key] = st.session_state.get(key, DEFAULTS[key])
        kept.add(key)


def _hand_back_kept() -> None:
    """Before a run draws widgets kept undrawn last run: set each value again in this run. A value set in an earlier
    run is the widget's value on the server but not sent to the browser, which drew the default (the sentence a
    visit to Learn had kept came back as the book's, in Chromium; AppTest did not show it)."""
    for key in st.session_state.pop("_kept", ()):
        if key in st.session_state:
            st.session_state[key] = st.session_state[key]


def _weights(sb, messages: list[tuple[str, str]]) -> tuple[str, AttentionConfig | None]:
    """The Weights choice (random, or each real model found here), and with a real model its config (sizes fixed
    by the model). A family with nothing on this machine says how to get it, as plain text; with none, the choice
    is greyed."""
    choices = models.CHOICES
    if st.session_state.get("model", models.RANDOM) not in choices:  # a folder taken away while the server ran
        st.session_state["model"] = models.RANDOM
    absent = len(choices) == 1
    name = _select(sb, _("Weights"), "model", disabled=absent,
                   help=_("The chapter's random weights, or a pretrained model's (SmolLM2, GPT-2): its real heads on "
                          "your sentence."))
    for family in models.missing():
        # folded: the how-to is long, and the sidebar's attention knobs come after it on every page
        sb.expander(_("{family} is not on this machine: how to add it", family=family.title)).text(
            message(family.how_to_get()))
    if name == models.RANDOM:
        return models.RANDOM, None
    with sb, st.spinner(_("Loading {model} (once per server)…", model=md_escape(models.label(name)))):
        try:
            models.model(name)
        except ValueError as e:
            messages.append(("error", _("{model} cannot be used: {reason} Showing random weights.",
                                        model=md_escape(models.label(name)), reason=md_escape(error_text(e)))))
            return models.RANDOM, None
    return name, models.attention_config(name, AttentionConfig())


FIXED_BY_MODEL = ("input_mode", "variant", "d_in", "d_out", "num_heads", "context_length", "num_kv_groups", "window",
                  "latent_dim", "causal", "qkv_bias")


def _pretrained_sidebar(sb, text: str, weights: str, model_cfg: AttentionConfig,
                        messages: list[tuple[str, str]]) -> Settings:
    """The sidebar with a pretrained model: which layer, the model's sizes shown fixed, and the chapter's knobs that
    still apply (masking method, dropout, training, seed)."""
    _keep_state(*FIXED_BY_MODEL, "device")
    n_layers = models.model(weights).cfg["n_layers"]
    if st.session_state.get("layer", 1) > n_layers:
        messages.append(("warning", _("{model} has {n} layers: showing layer {n}.",
                                      model=md_escape(models.label(weights)), n=n_layers)))
        st.session_state["layer"] = n_layers
    layer = sb.number_input(_("Layer"), 1, n_layers, value=_now("layer"), key="layer",
                            help=_("The layer whose attention every page shows (its heads: pick one on Explore)."))
    c1, c2 = sb.columns(2)
    fixed = _("Fixed by the model's weights.")
    c1.number_input("d_in", value=model_cfg.d_in, disabled=True, help=fixed)
    c2.number_input("d_out", value=model_cfg.d_out, disabled=True, help=fixed)
    c3, c4 = sb.columns(2)
    c3.number_input("num_heads", value=model_cfg.num_heads, disabled=True, help=fixed)
    c4.number_input("context_length", value=model_cfg.context_length, disabled=True, help=fixed)
    sb.caption(model_caption(models.config(weights), md_escape(models.label(weights)), int(layer)))
    if licence := models.notice(weights):
        sb.caption(licence)
    mask_method = _select(sb, _("Masking method"), "mask_method")
    dropout = sb.slider("dropout", 0.0, DROPOUT_MAX, value=_now("dropout"), step=DROPOUT_STEP, key="dropout")
    t3, t4 = sb.columns(2)
    train_mode = _toggle(t3, _("training"), "train_mode", help=_("Dropout is only active in training mode."))
    seed = _number(t4, _("seed"), "seed")
    sb.caption(_("Running on **{device}**, where the shared model is.", device="cpu"))
    _colour_map(sb)
    _finish_link(sb, text)
    cfg = dataclasses.replace(model_cfg, mask_method=mask_method, dropout=float(dropout), train_mode=bool(train_mode),
                              seed=int(seed))
    settings = Settings(text, models.INPUT_NAME, cfg, messages, weights=weights, layer=int(layer) - 1)
    st.session_state["_settings"] = settings
    return settings


def model_caption(c: models.ModelConfig, model: str, layer: int) -> str:
    """What a pretrained model fixes, said from its config's fields (never a family's name): its heads, positions,
    biases and the norm its layer's input went through. ``model``: its label, escaped."""
    if c.n_kv_heads < c.n_heads:
        heads = _("{model}'s own sizes: {attention}, {n_heads} query heads sharing {n_kv_heads} K/V heads, causal.",
                  model=model, attention=c.attention, n_heads=c.n_heads, n_kv_heads=c.n_kv_heads)
    else:
        heads = ngettext("{model}'s own sizes: {attention}, {n} head, causal.",
                         "{model}'s own sizes: {attention}, {n} heads, causal.", c.n_heads, model=model,
                         attention=c.attention)
    positions = (_("RoPE rotates its queries and keys.") if c.positions == "rope"
                 else _("Its tokens carry learned position embeddings."))
    bias = _("Its q/k/v projections have biases.") if c.qkv_bias else _("Its q/k/v projections have no biases.")
    inputs = _("Its input vectors are layer {layer}'s input: the residual stream after {norm}.", layer=layer,
               norm=c.norm)
    ours = _("The chapter's masking method and dropout below act on this layer's copy only.")
    return sentences(heads, positions, bias, inputs, ours)


APPLY_HINT = N_("Ctrl+Enter (⌘+Enter on a Mac) or a click outside the box applies it.")


def render_sidebar(uses: str = "all", knob_pages: Sequence[str] = ()) -> Settings | None:
    """Draw the shared controls in the sidebar and return the resulting Settings. A knob the chosen variant does
    not use (its registry entry's ``knobs``) is greyed out.

    ``uses``: what the page reads (main.py's ``uses_knobs`` flag beside each page). "all": every knob; "none" (a page
    with its own controls): no knob at all, each setting kept for the link and the way back, and no Settings; the
    sidebar names ``knob_pages`` (the titles of the pages that do read them). The Sentence comes first, so it is
    above the fold of a 1280x720 screen."""
    devices = available_devices()
    messages = _seed_from_url(devices)
    _hand_back_kept()
    if st.session_state.get("device") not in devices:
        st.session_state["device"] = "cpu"
    sb = st.sidebar  # no "Attention Lab" header: the language switch took its 60 px, the Sentence stays in view
    if uses == "none":
        return _no_knobs(sb, knob_pages)
    text = sb.text_area(_("Sentence"), value=_now("sentence"), key="sentence", height=90,  # too long: tokenize() says
                        help=sentences(_("Your own text: it is split into GPT-2 tokens (up to {n}).", n=MAX_CONTEXT),
                                       _(APPLY_HINT)))
    sb.caption(_(APPLY_HINT))
    sb.caption(_("Presets"))
    for name in PRESETS:
        sb.button(_(name), key=f"preset_{name}", on_click=_apply_preset, args=(name,), width="stretch")
    weights, model_cfg = _weights(sb, messages)
    if model_cfg is not None:
        return _pretrained_sidebar(sb, text or "", weights, model_cfg, messages)
    _keep_state("layer")
    input_mode = _select(sb, _("Input vectors"), "input_mode")
    spec = variant(_select(sb, _("Variant"), "variant", help=_("The variants of the chapter, in its order.")))
    unused = {knob: not spec.uses(knob) for knob in VARIANT_KNOBS}
    book_mode = input_mode == "book"
    c1, c2 = sb.columns(2)
    d_in = _number(c1, "d_in", "d_in", disabled=book_mode,
                   help=_("Width of each input vector (the book's inputs are 3-d)."))
    d_out = _number(c2, "d_out", "d_out", disabled=unused["d_out"])
    if spec.d_out_note:
        sb.caption(_(spec.d_out_note))
    c3, c4 = sb.columns(2)
    num_heads = _number(c3, "num_heads", "num_heads", disabled=unused["num_heads"])
    context_length = _number(c4, "context_length", "context_length", disabled=unused["context_length"],
                             help=_("Size of the causal mask buffer (GPT-2: {n}).", n=1024))
    g1, g2, g3 = sb.columns(3)
    num_kv_groups = _number(g1, _("groups"), "num_kv_groups", disabled=unused["num_kv_groups"],
                            help=_("num_kv_groups of grouped-query attention: how many K/V heads the query heads "
                                   "share (must divide num_heads; 1 = multi-query)."))
    window = _number(g2, _("window"), "window", disabled=unused["window"],
                     help=_("Sliding window: each token sees only the last W tokens, itself included "
                            "(0 = no window)."))
    latent_dim = _number(g3, _("latent"), "latent_dim", disabled=unused["latent_dim"],
                         help=_("Multi-head latent attention: the width of the latent the keys and values come from "
                                "(1 to d_out)."))
    mask_method = _select(sb, _("Masking method"), "mask_method", disabled=unused["mask_method"])
    t1, t2 = sb.columns(2)
    causal = _toggle(t1, _("causal"), "causal", disabled=unused["causal"],
                     help=_("Off: plain self-attention through the same class."))
    qkv_bias = _toggle(t2, "qkv_bias", "qkv_bias", disabled=unused["qkv_bias"])
    dropout = sb.slider("dropout", 0.0, DROPOUT_MAX, value=_now("dropout"), step=DROPOUT_STEP, key="dropout",
                        disabled=unused["dropout"])
    t3, t4 = sb.columns(2)
    train_mode = _toggle(t3, _("training"), "train_mode", disabled=unused["train_mode"],
                         help=_("Dropout is only active in training mode."))
    seed = _number(t4, _("seed"), "seed")
    device = sb.selectbox(_("Device"), devices, index=devices.index(_now("device")), key="device",
                          help=_("Only devices that exist on this machine are listed."))
    sb.caption(_("Running on **{device}**.", device=device))
    _colour_map(sb)
    text = text or ""
    _finish_link(sb, text)

    cfg = AttentionConfig(
        variant=spec.id, d_in=3 if book_mode else int(d_in), d_out=int(d_out), num_heads=int(num_heads),
        context_length=int(context_length), dropout=float(dropout), mask_method=mask_method,
        causal=bool(causal), qkv_bias=bool(qkv_bias), train_mode=bool(train_mode), seed=int(seed),
        device=device or "cpu", num_kv_groups=int(num_kv_groups), window=int(window), latent_dim=int(latent_dim),
    )
    settings = Settings(text, input_mode, cfg, messages)
    st.session_state["_settings"] = settings
    return settings


def _no_knobs(sb, knob_pages: Sequence[str]) -> None:
    """A page with its own controls: the sidebar says where the knobs are; every setting stays for the link. The
    page reads no Settings, so none are made (nor an earlier page's left to be read)."""
    _keep_state(*(key for key in SCHEMA if key != "cmap"))  # the colour map is drawn: its widget keeps it
    titles = list(knob_pages)
    if len(titles) > 1:
        sb.caption(_("This page has its own controls. The sentence and the attention knobs are on {pages} and "
                     "{last}: they keep their values meanwhile.", pages=_(", ").join(titles[:-1]), last=titles[-1]))
    else:
        sb.caption(_("This page has its own controls. The sentence and the attention knobs keep their values "
                     "meanwhile."))
    _colour_map(sb)
    _finish_link(sb, str(st.session_state["sentence"] or ""))
    st.session_state.pop("_settings", None)


def settings() -> Settings:
    """The Settings the sidebar made in this run (a fragment's rerun: in the page's last full run). A page's
    ``render()`` reads them once and passes them to what it draws."""
    try:
        return st.session_state["_settings"]
    except KeyError:
        raise LookupError("this page's sidebar draws no knobs (render_sidebar(\"none\")): it has no Settings") from None  # noqa: E501  (for a developer)
