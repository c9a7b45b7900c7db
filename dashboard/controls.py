"""The shared sidebar: every knob, each with a stable key, and the URL that restores them.

``render_sidebar()`` draws the controls and returns a :class:`Settings`; pages call
``settings()`` to read it. Invalid combinations are turned into messages here, never into
exceptions: pages show them with st.error / st.warning.

The URL is kept by hand rather than with ``bind="query-params"``, so that a link carries the plain
identifiers (``?variant=MultiHeadAttention&mask_method=renormalize``), every value read from a
link is validated with a message naming what was wrong, and a text too long for a link stays
out of it (``URL_TEXT_LIMIT``) instead of making a link that cannot load.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import streamlit as st

from attn_core import (
    BOOK_SENTENCE,
    HAS_HEADS,
    HAS_MASK,
    INPUT_MODES,
    MASK_METHODS,
    MAX_POSITIONS,
    MAX_TEXT_CHARS,
    VARIANTS,
    AttentionConfig,
    available_devices,
)

from .links import link_warning

VARIANT_NAMES = {
    "simplified": "Simplified (no weights, §3.3)",
    "SelfAttention_v1": "SelfAttention_v1 (§3.4)",
    "SelfAttention_v2": "SelfAttention_v2 (§3.4)",
    "CausalAttention": "CausalAttention (§3.5)",
    "MultiHeadAttentionWrapper": "MultiHeadAttentionWrapper (§3.6.1)",
    "MultiHeadAttention": "MultiHeadAttention (§3.6.2)",
}
MASK_NAMES = {"neg_inf": "−∞ before softmax", "renormalize": "zero after softmax, renormalize"}
INPUT_NAMES = {
    "book": "Book's fixed 3-d inputs",
    "learned": "Learned token + position embeddings",
    "sinusoidal": "Token embeddings + sinusoidal positions",
    "onehot": "One-hot per distinct token",
}

DEFAULTS: dict[str, object] = {
    "sentence": BOOK_SENTENCE,
    "input_mode": "book",
    "variant": "CausalAttention",
    "d_in": 3,
    "d_out": 2,
    "num_heads": 2,
    "context_length": 1024,
    "dropout": 0.0,
    "mask_method": "neg_inf",
    "causal": True,
    "qkv_bias": False,
    "train_mode": False,
    "seed": 123,
    "device": "cpu",
}

PRESETS: dict[str, dict[str, object]] = {
    "Book example": dict(sentence=BOOK_SENTENCE, input_mode="book", d_in=3, d_out=2, num_heads=2,
                         context_length=1024, seed=123, dropout=0.0, variant="MultiHeadAttention"),
    "GPT-2 small (ex. 3.3)": dict(input_mode="learned", d_in=768, d_out=768, num_heads=12,
                                  context_length=1024, dropout=0.0, variant="MultiHeadAttention"),
    "Original paper (512-d, 8 heads)": dict(input_mode="sinusoidal", d_in=512, d_out=512, num_heads=8,
                                            context_length=1024, dropout=0.1, variant="MultiHeadAttention"),
}
MAX_CONTEXT = MAX_POSITIONS
MAX_DIM = 1024


@dataclass
class Settings:
    """What the sidebar says: the text, the input mode, and the module config."""

    text: str
    input_mode: str  # as chosen (the page falls back from "book" for other sentences, and says so)
    cfg: AttentionConfig
    messages: list[tuple[str, str]] = field(default_factory=list)  # (level, text) to show on pages


URL_TEXT_LIMIT = 8_000  # characters of URL-encoded text a link carries (a 200 KB link does not load)

# Each URL parameter: how to read it and which values it may take. Choices accept the plain identifier
# and, for links made before, the label the selectbox shows.
CHOICES: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {
    "input_mode": (INPUT_MODES, INPUT_NAMES),
    "variant": (VARIANTS, VARIANT_NAMES),
    "mask_method": (MASK_METHODS, MASK_NAMES),
}
INTS: dict[str, tuple[int, int]] = {
    "d_in": (1, MAX_DIM), "d_out": (1, MAX_DIM), "num_heads": (1, 64), "context_length": (1, MAX_CONTEXT),
    "seed": (0, 2**31 - 1),
}
BOOLS = ("causal", "qkv_bias", "train_mode")
DROPOUT_MAX, DROPOUT_STEP = 0.9, 0.05
URL_KEYS = ("sentence", *CHOICES, *INTS, "dropout", *BOOLS, "device")


class BadValue(ValueError):
    """A URL value that cannot be used; the message says what it should be."""


def parse_int(raw: str, lo: int, hi: int) -> int:
    """A link's whole number from ``lo`` to ``hi``, or :class:`BadValue` saying what it should be."""
    try:
        value = int(raw.strip())
    except ValueError:
        raise BadValue(f"expected a whole number from {lo} to {hi}") from None
    if not lo <= value <= hi:
        raise BadValue(f"expected a whole number from {lo} to {hi}")
    return value


def parse_url_value(key: str, raw: str, devices: list[str] | None = None) -> object:
    """The setting a URL parameter asks for, or :class:`BadValue` saying what it should be."""
    if key == "sentence":
        if len(raw) > MAX_TEXT_CHARS:
            raise BadValue(f"a text of {len(raw):,} characters is longer than the {MAX_TEXT_CHARS:,} allowed")
        return raw
    raw = raw.strip()
    if key in CHOICES:
        options, names = CHOICES[key]
        by_label = {label: ident for ident, label in names.items()}
        if raw in options:
            return raw
        if raw in by_label:
            return by_label[raw]
        raise BadValue("expected one of " + ", ".join(options))
    if key in INTS:
        return parse_int(raw, *INTS[key])
    if key == "dropout":
        try:
            value = float(raw)
        except ValueError:
            raise BadValue(f"expected a number from 0 to {DROPOUT_MAX}") from None
        if not 0.0 <= value <= DROPOUT_MAX:
            raise BadValue(f"expected a number from 0 to {DROPOUT_MAX}")
        snapped = round(round(value / DROPOUT_STEP) * DROPOUT_STEP, 2)
        if abs(snapped - value) > 1e-9:
            raise BadValue(f"expected a multiple of {DROPOUT_STEP} from 0 to {DROPOUT_MAX}")
        return snapped
    if key in BOOLS:
        low = raw.lower()
        if low in ("true", "1", "on", "yes"):
            return True
        if low in ("false", "0", "off", "no"):
            return False
        raise BadValue("expected true or false")
    if key == "device":
        if raw not in (devices or ["cpu"]):
            raise BadValue("it is not available on this machine (available: " + ", ".join(devices or ["cpu"]) + ")")
        return raw
    raise BadValue("unknown parameter")


def url_value(key: str, value: object) -> str:
    """How a setting is written into a link: plain identifiers, ``true``/``false``, numbers."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _seed_from_url(devices: list[str]) -> list[tuple[str, str]]:
    """Until a session's first run has drawn the sidebar, take each setting the link names (widgets own them
    after: :func:`render_sidebar` sets ``_url_read`` once its widgets exist, so a first run interrupted by a
    rerun reads the link again instead of losing what it had read)."""
    messages: list[tuple[str, str]] = []
    if st.session_state.get("_url_read"):
        return messages
    defaults = {**DEFAULTS, "device": "cpu"}
    for key in URL_KEYS:
        if key not in st.query_params:
            continue
        raw = st.query_params[key]
        try:
            st.session_state[key] = parse_url_value(key, raw, devices)
        except BadValue as e:
            used = defaults[key]
            used_text = (CHOICES[key][1][used] if key in CHOICES else
                         "the book's sentence" if key == "sentence" else url_value(key, used))
            messages.append(("warning", link_warning(key, raw, used_text, str(e))))
    return messages


def _write_url(values: dict[str, object]) -> bool:
    """Put the settings into the URL (only those that differ from the defaults); return whether the
    text was left out for being too long for a link."""
    from urllib.parse import quote_plus

    defaults = {**DEFAULTS, "device": "cpu"}
    text_too_long = False
    for key, value in values.items():
        wanted = None if value == defaults[key] else url_value(key, value)
        if key == "sentence" and wanted is not None and len(quote_plus(wanted)) > URL_TEXT_LIMIT:
            wanted, text_too_long = None, True
        current = st.query_params.get(key)
        if wanted is None and current is not None:
            del st.query_params[key]
        elif wanted is not None and current != wanted:
            st.query_params[key] = wanted
    return text_too_long


def _link_value(key: str, value: object) -> object:
    """A widget's value as :func:`_write_url` takes it (the types :func:`render_sidebar` reads them as)."""
    if key in INTS:
        return int(value)
    if key == "dropout":
        return float(value)
    if key in BOOLS:
        return bool(value)
    return "" if value is None else str(value)


def _link_values() -> dict[str, object]:
    """The settings as the link holds them, read from the sidebar widgets' state (KeyError before they exist)."""
    return {key: _link_value(key, st.session_state[key]) for key in URL_KEYS}


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


def _select(container, label: str, options, key: str, names: dict | None = None, **kw):
    return container.selectbox(label, options, index=list(options).index(DEFAULTS[key]) if DEFAULTS[key] in options
                               else 0, format_func=(names.get if names else str), key=key, **kw)


def render_sidebar() -> Settings:
    """Draw the shared controls in the sidebar and return the resulting Settings."""
    devices = available_devices()
    messages = _seed_from_url(devices)
    if st.session_state.get("device") not in devices:
        st.session_state["device"] = "cpu"
    sb = st.sidebar
    sb.header("Attention Lab")
    sb.caption("Presets")
    for name in PRESETS:
        sb.button(name, key=f"preset_{name}", on_click=_apply_preset, args=(name,), width="stretch")
    text = sb.text_area("Sentence", value=DEFAULTS["sentence"], key="sentence", height=90,
                        max_chars=MAX_TEXT_CHARS,
                        help=f"Your own text: it is split into GPT-2 tokens (up to {MAX_CONTEXT}).")
    input_mode = _select(sb, "Input vectors", INPUT_MODES, "input_mode", INPUT_NAMES)
    variant = _select(sb, "Variant", VARIANTS, "variant", VARIANT_NAMES)
    book_mode = input_mode == "book"
    c1, c2 = sb.columns(2)
    d_in = c1.number_input("d_in", 1, MAX_DIM, value=DEFAULTS["d_in"], key="d_in",
                           disabled=book_mode, help="Width of each input vector (the book's inputs are 3-d).")
    d_out = c2.number_input("d_out", 1, MAX_DIM, value=DEFAULTS["d_out"], key="d_out",
                            disabled=variant == "simplified")
    if variant == "MultiHeadAttentionWrapper":
        sb.caption("d_out is **per head**: the wrapper's output is d_out × num_heads wide.")
    elif variant == "MultiHeadAttention":
        sb.caption("d_out is the **total** width: each head gets head_dim = d_out / num_heads.")
    c3, c4 = sb.columns(2)
    num_heads = c3.number_input("num_heads", 1, 64, value=DEFAULTS["num_heads"], key="num_heads",
                                disabled=variant not in HAS_HEADS)
    context_length = c4.number_input("context_length", 1, MAX_CONTEXT, value=DEFAULTS["context_length"],
                                     key="context_length", disabled=variant not in HAS_MASK,
                                     help="Size of the causal mask buffer (GPT-2: 1024).")
    mask_method = _select(sb, "Masking method", MASK_METHODS, "mask_method", MASK_NAMES,
                          disabled=variant not in HAS_MASK)
    t1, t2 = sb.columns(2)
    causal = t1.toggle("causal", value=DEFAULTS["causal"], key="causal",
                       disabled=variant not in HAS_MASK, help="Off: plain self-attention through the same class.")
    qkv_bias = t2.toggle("qkv_bias", value=DEFAULTS["qkv_bias"], key="qkv_bias",
                         disabled=variant in ("simplified", "SelfAttention_v1"))
    dropout = sb.slider("dropout", 0.0, DROPOUT_MAX, value=DEFAULTS["dropout"], step=DROPOUT_STEP, key="dropout",
                        disabled=variant not in HAS_MASK)
    t3, t4 = sb.columns(2)
    train_mode = t3.toggle("training",  value=DEFAULTS["train_mode"], key="train_mode",
                           disabled=variant not in HAS_MASK, help="Dropout is only active in training mode.")
    seed = t4.number_input("seed", 0, 2**31 - 1, value=DEFAULTS["seed"], key="seed")
    device = sb.selectbox("Device", devices, key="device",
                          help="Only devices that exist on this machine are listed.")
    sb.caption(f"Running on **{device}**.")
    text = text or ""
    st.session_state["_url_read"] = True
    if _write_url(_link_values()):  # the same values write_link_early wrote at the start of the run: no change
        sb.caption(f"This text is too long to put in a link ({len(text):,} characters): a shared link keeps "
                   "every setting but opens with the book's sentence.")

    cfg = AttentionConfig(
        variant=variant, d_in=3 if book_mode else int(d_in), d_out=int(d_out), num_heads=int(num_heads),
        context_length=int(context_length), dropout=float(dropout), mask_method=mask_method,
        causal=bool(causal), qkv_bias=bool(qkv_bias), train_mode=bool(train_mode), seed=int(seed),
        device=device or "cpu",
    )
    settings = Settings(text, input_mode, cfg, messages)
    st.session_state["_settings"] = settings
    return settings


def settings() -> Settings:
    """The Settings the sidebar produced in this run."""
    return st.session_state["_settings"]
