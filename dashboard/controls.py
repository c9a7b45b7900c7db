"""The shared sidebar: every knob, each with a stable key and bound to the URL.

``render_sidebar()`` draws the controls and returns a :class:`Settings`; pages call
``settings()`` to read it. Invalid combinations are turned into messages here, never into
exceptions: pages show them with st.error / st.warning.
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
    VARIANTS,
    AttentionConfig,
    available_devices,
)

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


def _apply_preset(name: str) -> None:
    for key, value in PRESETS[name].items():
        st.session_state[key] = value


def _select(container, label: str, options, key: str, names: dict | None = None, **kw):
    return container.selectbox(label, options, index=list(options).index(DEFAULTS[key]) if DEFAULTS[key] in options
                               else 0, format_func=(names.get if names else str), key=key,
                               bind="query-params", **kw)


def render_sidebar() -> Settings:
    """Draw the shared controls in the sidebar and return the resulting Settings."""
    messages: list[tuple[str, str]] = []
    devices = available_devices()
    wanted = st.query_params.get("device")
    if wanted and wanted not in devices:
        messages.append(("warning", f"Device {wanted!r} is not available on this machine: using cpu instead."))
        st.query_params["device"] = "cpu"
        if "device" in st.session_state:
            st.session_state["device"] = "cpu"
    sb = st.sidebar
    sb.header("Attention Lab")
    sb.caption("Presets")
    for name in PRESETS:
        sb.button(name, key=f"preset_{name}", on_click=_apply_preset, args=(name,), width="stretch")
    text = sb.text_area("Sentence", value=DEFAULTS["sentence"], key="sentence", height=90, bind="query-params",
                        help="Your own text: it is split into GPT-2 tokens (up to 1024).")
    input_mode = _select(sb, "Input vectors", INPUT_MODES, "input_mode", INPUT_NAMES)
    variant = _select(sb, "Variant", VARIANTS, "variant", VARIANT_NAMES)
    book_mode = input_mode == "book"
    c1, c2 = sb.columns(2)
    d_in = c1.number_input("d_in", 1, MAX_DIM, value=DEFAULTS["d_in"], key="d_in", bind="query-params",
                           disabled=book_mode, help="Width of each input vector (the book's inputs are 3-d).")
    d_out = c2.number_input("d_out", 1, MAX_DIM, value=DEFAULTS["d_out"], key="d_out", bind="query-params",
                            disabled=variant == "simplified")
    if variant == "MultiHeadAttentionWrapper":
        sb.caption("d_out is **per head**: the wrapper's output is d_out × num_heads wide.")
    elif variant == "MultiHeadAttention":
        sb.caption("d_out is the **total** width: each head gets head_dim = d_out / num_heads.")
    c3, c4 = sb.columns(2)
    num_heads = c3.number_input("num_heads", 1, 64, value=DEFAULTS["num_heads"], key="num_heads",
                                bind="query-params", disabled=variant not in HAS_HEADS)
    context_length = c4.number_input("context_length", 1, MAX_CONTEXT, value=DEFAULTS["context_length"],
                                     key="context_length", bind="query-params", disabled=variant not in HAS_MASK,
                                     help="Size of the causal mask buffer (GPT-2: 1024).")
    mask_method = _select(sb, "Masking method", MASK_METHODS, "mask_method", MASK_NAMES,
                          disabled=variant not in HAS_MASK)
    t1, t2 = sb.columns(2)
    causal = t1.toggle("causal", value=DEFAULTS["causal"], key="causal", bind="query-params",
                       disabled=variant not in HAS_MASK, help="Off: plain self-attention through the same class.")
    qkv_bias = t2.toggle("qkv_bias", value=DEFAULTS["qkv_bias"], key="qkv_bias", bind="query-params",
                         disabled=variant in ("simplified", "SelfAttention_v1"))
    dropout = sb.slider("dropout", 0.0, 0.9, value=DEFAULTS["dropout"], step=0.05, key="dropout",
                        bind="query-params", disabled=variant not in HAS_MASK)
    t3, t4 = sb.columns(2)
    train_mode = t3.toggle("training",  value=DEFAULTS["train_mode"], key="train_mode", bind="query-params",
                           disabled=variant not in HAS_MASK, help="Dropout is only active in training mode.")
    seed = t4.number_input("seed", 0, 2**31 - 1, value=DEFAULTS["seed"], key="seed", bind="query-params")
    device = sb.selectbox("Device", devices, key="device", bind="query-params",
                          help="Only devices that exist on this machine are listed.")
    sb.caption(f"Running on **{device}**.")

    cfg = AttentionConfig(
        variant=variant, d_in=3 if book_mode else int(d_in), d_out=int(d_out), num_heads=int(num_heads),
        context_length=int(context_length), dropout=float(dropout), mask_method=mask_method,
        causal=bool(causal), qkv_bias=bool(qkv_bias), train_mode=bool(train_mode), seed=int(seed),
        device=device or "cpu",
    )
    settings = Settings(text or "", input_mode, cfg, messages)
    st.session_state["_settings"] = settings
    return settings


def settings() -> Settings:
    """The Settings the sidebar produced in this run."""
    return st.session_state["_settings"]
