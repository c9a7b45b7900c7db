"""The sidebar's settings as data: every knob's schema (its default, its range, how a link spells it), the presets,
and the Settings a run reads. No widgets here (dashboard/state/controls.py draws them from this)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

from attn_core import BOOK_SENTENCE, INPUT_MODES, LABELS, MAX_POSITIONS, MAX_TEXT_CHARS, AttentionConfig
from attn_core.messages import Problem
from dashboard.i18n import N_, _
from dashboard.state import models

VARIANT_NAMES = LABELS  # id -> label, from the variant registry (attn_core/attention/variants.py)
# Labels are marked for the catalog and translated where shown (the selectbox, a warning); a link made before may
# still spell a choice by its English label.
MASK_NAMES = {"neg_inf": N_("−∞ before softmax"), "renormalize": N_("zero after softmax, renormalize")}
INPUT_NAMES = {
    "book": N_("Book's fixed 3-d inputs"),
    "learned": N_("Learned token + position embeddings"),
    "sinusoidal": N_("Token embeddings + sinusoidal positions"),
    "onehot": N_("One-hot per distinct token"),
}
# The heatmaps' colour map for values 0..top (weights, sizes): each id is also its Vega scheme's name. Signed values
# (scores, Q/K/V) keep the diverging blue-orange under both: it is already colour-blind safe.
COLOUR_MAPS = {"viridis": N_("viridis"), "cividis": N_("cividis (colour-blind safe)")}
MAX_CONTEXT = MAX_POSITIONS
MAX_DIM = 1024
DROPOUT_MAX, DROPOUT_STEP = 0.9, 0.05
MAX_LAYERS = 48  # GPT-2 XL's; a smaller model's own count is checked when its layer is run
URL_TEXT_LIMIT = 8_000  # characters of URL-encoded text a link carries (far longer links do not load: measurements)


class BadValue(Problem):
    """A URL value that cannot be used; the message (a template, translated where shown) says what it should be."""


def parse_int(raw: str, lo: int, hi: int) -> int:
    """A link's whole number from ``lo`` to ``hi``, or :class:`BadValue` saying what it should be."""
    try:
        value = int(raw.strip())
    except ValueError:
        raise BadValue(N_("expected a whole number from {lo} to {hi}"), lo=lo, hi=hi) from None
    if not lo <= value <= hi:
        raise BadValue(N_("expected a whole number from {lo} to {hi}"), lo=lo, hi=hi)
    return value


@dataclass(frozen=True)
class Setting:
    """One sidebar setting: its default, its values, how a link writes and reads it, and how a widget's value
    becomes it. The one schema for defaults, validation and the URL codec."""

    key: str
    default: object
    kind: str  # "text", "choice", "int", "float", "bool" or "device"
    labels: Mapping[str, str] | None = None  # choice: id -> label (the ids are its values, in order)
    lo: float = 0
    hi: float = 0

    def parse(self, raw: str, devices: list[str] | None = None) -> object:
        """The value a link's ``raw`` asks for, or :class:`BadValue` saying what it should be. A choice accepts
        its plain identifier and, for links made before, the label the selectbox shows."""
        if self.kind == "text":
            if len(raw) > MAX_TEXT_CHARS:
                raise BadValue(N_("a text of {n:,} characters is longer than the {limit:,} allowed"), n=len(raw),
                               limit=MAX_TEXT_CHARS)
            return raw
        raw = raw.strip()
        if self.kind == "choice":
            if raw in self.labels:
                return raw
            by_label = {label: ident for ident, label in self.labels.items()}
            if raw in by_label:
                return by_label[raw]
            raise BadValue(N_("expected one of {values}"), values=", ".join(self.labels))
        if self.kind == "int":
            return parse_int(raw, int(self.lo), int(self.hi))
        if self.kind == "float":
            try:
                value = float(raw)
            except ValueError:
                raise BadValue(N_("expected a number from 0 to {hi}"), hi=self.hi) from None
            if not self.lo <= value <= self.hi:
                raise BadValue(N_("expected a number from 0 to {hi}"), hi=self.hi)
            snapped = round(round(value / DROPOUT_STEP) * DROPOUT_STEP, 2)
            if abs(snapped - value) > 1e-9:
                raise BadValue(N_("expected a multiple of {step} from 0 to {hi}"), step=DROPOUT_STEP, hi=self.hi)
            return snapped
        if self.kind == "bool":
            low = raw.lower()
            if low in ("true", "1", "on", "yes"):
                return True
            if low in ("false", "0", "off", "no"):
                return False
            raise BadValue(N_("expected true or false"))
        if raw not in (devices or ["cpu"]):  # device
            raise BadValue(N_("it is not available on this machine (available: {devices})"),
                           devices=", ".join(devices or ["cpu"]))
        return raw

    def coerce(self, value: object) -> object:
        """A widget's value as the link holds it."""
        if self.kind == "int":
            return int(value)
        if self.kind == "float":
            return float(value)
        if self.kind == "bool":
            return bool(value)
        return "" if value is None else str(value)

    def shown(self, value: object) -> str:
        """How a warning names a value that was used instead of a bad one (in this run's language)."""
        if self.kind == "choice":
            return _(self.labels[value])
        return _("the book's sentence") if self.key == "sentence" else url_value(value)


_CONFIG = asdict(AttentionConfig())  # the defaults live once, in AttentionConfig
SCHEMA: dict[str, Setting] = {s.key: s for s in (
    Setting("sentence", BOOK_SENTENCE, "text"),
    Setting("model", models.RANDOM, "choice", models.CHOICES),  # the weights: random, or a real model found here
    Setting("layer", 1, "int", lo=1, hi=MAX_LAYERS),  # a pretrained model's layer, 1-based as its verdicts say
    Setting("input_mode", "book", "choice", dict(zip(INPUT_MODES, (INPUT_NAMES[m] for m in INPUT_MODES)))),
    Setting("variant", _CONFIG["variant"], "choice", VARIANT_NAMES),
    Setting("mask_method", _CONFIG["mask_method"], "choice", MASK_NAMES),
    Setting("d_in", _CONFIG["d_in"], "int", lo=1, hi=MAX_DIM),
    Setting("d_out", _CONFIG["d_out"], "int", lo=1, hi=MAX_DIM),
    Setting("num_heads", _CONFIG["num_heads"], "int", lo=1, hi=64),
    Setting("context_length", _CONFIG["context_length"], "int", lo=1, hi=MAX_CONTEXT),
    Setting("seed", _CONFIG["seed"], "int", lo=0, hi=2**31 - 1),
    Setting("num_kv_groups", _CONFIG["num_kv_groups"], "int", lo=1, hi=64),
    Setting("window", _CONFIG["window"], "int", lo=0, hi=MAX_CONTEXT),
    Setting("latent_dim", _CONFIG["latent_dim"], "int", lo=1, hi=MAX_DIM),
    Setting("dropout", _CONFIG["dropout"], "float", lo=0.0, hi=DROPOUT_MAX),
    Setting("causal", _CONFIG["causal"], "bool"),
    Setting("qkv_bias", _CONFIG["qkv_bias"], "bool"),
    Setting("train_mode", _CONFIG["train_mode"], "bool"),
    Setting("device", "cpu", "device"),
    Setting("cmap", "viridis", "choice", COLOUR_MAPS),
)}
DEFAULTS: dict[str, object] = {key: s.default for key, s in SCHEMA.items()}
URL_KEYS = tuple(SCHEMA)

# What a preset leaves alone: the class's own sentence (except the book's example), where it runs and how it looks.
KEPT_BY_PRESETS = ("sentence", "device", "cmap")


def _preset(**values: object) -> dict[str, object]:
    """Every setting at its default (one place: the schema's, from AttentionConfig) except what the preset names and
    :data:`KEPT_BY_PRESETS`: a preset gives the same numbers whatever the link set before (a window, causal off,
    q/k/v biases, the masking method, training; issue 33)."""
    unknown = set(values) - set(SCHEMA)
    if unknown:
        raise ValueError(f"a preset names settings that do not exist: {sorted(unknown)}")  # a programming error
    return {key: default for key, default in DEFAULTS.items() if key not in KEPT_BY_PRESETS} | values


# Preset names are marked for the catalog and translated on their buttons (the buttons' keys use the English).
PRESETS: dict[str, dict[str, object]] = {
    N_("Book example"): _preset(sentence=BOOK_SENTENCE, input_mode="book", d_in=3, d_out=2, num_heads=2, seed=123,
                            variant="MultiHeadAttention"),
    N_("GPT-2 small (ex. 3.3)"): _preset(input_mode="learned", d_in=768, d_out=768, num_heads=12,
                                     variant="MultiHeadAttention"),
    N_("Original paper (512-d, 8 heads)"): _preset(input_mode="sinusoidal", d_in=512, d_out=512, num_heads=8,
                                                   dropout=0.1, variant="MultiHeadAttention"),
}


@dataclass
class Settings:
    """What the sidebar says: the text, the input mode, and the module config."""

    text: str
    input_mode: str  # as chosen (the page falls back from "book" for other sentences, and says so)
    cfg: AttentionConfig
    messages: list[tuple[str, str]] = field(default_factory=list)  # (level, text) to show on pages
    weights: str = models.RANDOM  # "random" or a found model's name: then cfg has the model's sizes
    layer: int = 0  # the pretrained model's layer looked at (0-based)

    @property
    def pretrained(self) -> bool:
        return self.weights != models.RANDOM


def parse_url_value(key: str, raw: str, devices: list[str] | None = None) -> object:
    """The setting a URL parameter asks for, or :class:`BadValue` saying what it should be."""
    if key not in SCHEMA:
        raise BadValue(N_("unknown parameter"))
    return SCHEMA[key].parse(raw, devices)


def url_value(value: object) -> str:
    """How a setting is written into a link: plain identifiers, ``true``/``false``, numbers."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)
