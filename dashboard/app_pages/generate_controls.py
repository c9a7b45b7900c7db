"""Generate's own settings, drawn above the page: the prompt, the model (every family's, through
:mod:`dashboard.state.models`), greedy or seeded sampling, the layer shown; read as one frozen :class:`Controls`."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st
import torch.nn as nn

from dashboard.i18n import N_, _, message
from dashboard.state import models
from dashboard.state.controls import too_long
from dashboard.state.links import error_text, md_escape
from dashboard.state.url_state import linked_choice, start_from_link, url_text

DEFAULT_PROMPT = N_("Every effort moves you")  # in Chinese a Chinese prompt, which Gemma continues in Chinese
PINNED = "gen_model_pinned"  # the Weights list named by the link or picked by hand: it no longer follows the prompt
PROMPT_CHARS = 2_000  # a prompt's characters (its tokens are bounded again by generate.PROMPT_TOKENS)
HOW = {"greedy": N_("greedy"), "sample": N_("sample")}  # the link's value -> its label


@dataclass(frozen=True)
class Controls:
    """What the page's settings say: the model, the prompt, how to decode, and the layer shown."""

    name: str  # a found model's name (``models.found(pretrained=False)``)
    prompt: str
    temperature: float  # 0: greedy
    top_k: int | None  # None: every token may be drawn
    seed: int
    layer: int  # 0-based

    @property
    def key(self) -> tuple:
        """What a generation is made for (the layer shown is not: switching it keeps the text)."""
        return (self.name, self.prompt, self.temperature, self.top_k, self.seed)


def weight_options() -> dict[str, str]:
    """Every model a generation can use, name -> label: the real ones, and those of random weights (a family that is
    not ``pretrained``: the book's GPTModel), from the app's one found list."""
    return {f.name: message(f.long_label) for f in models.found(pretrained=False)}


def loading(name: str) -> str:
    """What the spinner says while ``name`` is loaded (once per server) or built."""
    built = models.found_model(name).path is None
    return _("Building the model…") if built else _("Loading {name} (once per server)…", name=name)


def loaded(name: str) -> nn.Module:
    """The shared model (``models.model``: loaded once, its memory counted); a bad one is said and the run stops."""
    try:
        with st.spinner(loading(name)):
            return models.model(name)
    except ValueError as e:
        st.error(error_text(e))
        st.stop()


def model_help(name: str) -> str:
    """The Weights list's help, from the chosen model's facts (its ModelConfig), never a family's name."""
    try:
        with st.spinner(loading(name)):
            c = models.config(name)
    except ValueError:  # said where the model is loaded
        return ""
    if c.grouped:
        return _("{model}: {n_heads} query heads share {n_kv_heads} K/V heads (grouped-query attention), so its "
                 "cache keeps {n_kv_heads} heads a layer. The book's GPTModel with random weights writes gibberish: "
                 "what to watch there is how each step works.", model=c.label, n_heads=c.n_heads,
                 n_kv_heads=c.n_kv_heads)
    return _("{model}: {n_heads} heads, each with its own keys and values (multi-head attention). The book's "
             "GPTModel with random weights writes gibberish: what to watch there is how each step works.",
             model=c.label, n_heads=c.n_heads)


def default_choice(prompt: str, names: list[str]) -> str:
    """The model the page starts on: ``models.default_model`` (Gemma for a Chinese prompt or interface, else
    SmolLM2), else the first of the list (the book's GPTModel when no real model is installed)."""
    hit = models.default_model(prompt)
    return hit if hit in names else names[0]


def model_choice(where, prompt: str) -> str:
    """The Weights list (kept in the link as ``?gen_model=``): it starts on, and follows the prompt to, the default
    model, until the link names a model or a person picks one (then that one stays)."""
    options = weight_options()
    names = list(options)
    default = default_choice(prompt, names)
    st.session_state.setdefault(PINNED, "gen_model" in st.query_params)  # a new session: did the link name one?
    if not st.session_state[PINNED] and "gen_model" in st.session_state:
        st.session_state["gen_model"] = default
    chosen = start_from_link("gen_model", names, default, options.__getitem__, str)  # the link: ?gen_model=<name>
    return linked_choice(where.selectbox, _("Weights"), names, "gen_model", default, options.__getitem__, str,
                         help=model_help(chosen if chosen in options else default),
                         on_change=lambda: st.session_state.update({PINNED: True}))


def model_lines(where, name: str, prompt: str) -> None:
    """Under the settings: why the page picked this model (when the prompt or the language did), and the model's
    licence line (Gemma's Terms of Use)."""
    why = None if st.session_state.get(PINNED) else models.why_default(name, prompt)
    if why:
        where.caption(md_escape(why))
    if licence := models.notice(name):  # Markdown already: its address and file in code spans
        where.caption(licence)


def decoding(c_how, c_temperature, c_top_k, c_seed) -> tuple[float, int | None, int]:
    """Greedy or seeded sampling: (temperature, top_k, seed); greedy is temperature 0 and no top_k."""
    how = linked_choice(c_how.segmented_control, _("Choice"), ["greedy", "sample"], "gen_how", "greedy",
                        lambda how: _(HOW[how]), str, required=True,
                        help=_("Greedy: always the most likely token (the book's generate_text_simple). "
                               "Sample: draw from the probabilities, seeded."))
    sample = how == "sample"
    temperature = c_temperature.number_input(_("temperature"), 0.1, 5.0, 1.0, 0.1, key="gen_temperature",
                                             disabled=not sample)
    top_k = c_top_k.number_input(_("top_k (0 = all)"), 0, 1000, 50, key="gen_top_k", disabled=not sample)
    seed = c_seed.number_input(_("seed"), 0, 2**31 - 1, 123, key="gen_seed", disabled=not sample)
    return (float(temperature) if sample else 0.0, (int(top_k) or None) if sample else None, int(seed))


def say_missing_weights(where) -> None:
    """Without any real model on this machine: how to add each family's (plain text, folded: it is long)."""
    if models.found():
        return
    for fam in models.missing():
        where.expander(_("{family}'s real weights are not on this machine: how to add them",
                         family=fam.title)).text(message(fam.how_to_get()))


def controls(where) -> Controls:
    """The page's own settings, drawn in ``where``: prompt, model, decoding, the layer shown (of the loaded model)."""
    c_prompt, c_model = where.columns([3, 2])
    url_text("gen_prompt", PROMPT_CHARS)
    prompt = c_prompt.text_input(_("Prompt"), _(DEFAULT_PROMPT), key="gen_prompt", bind="query-params",
                                 help=_("Kept in the link (?gen_prompt=): a prepared link opens on your prompt. "
                                        "Enter or a click outside the box applies it."))
    if problem := too_long(prompt, PROMPT_CHARS):
        c_prompt.error(problem)
        st.stop()
    name = model_choice(c_model, prompt)
    c1, c2, c3, c4, c5 = where.columns([1.2, 1, 1, 1, 1.4], vertical_alignment="bottom")
    temperature, top_k, seed = decoding(c1, c2, c3, c4)
    say_missing_weights(where)
    model_lines(where, name, prompt)
    n_layers = loaded(name).cfg["n_layers"]
    names = {i: _("layer {layer}", layer=i + 1) for i in range(n_layers)}
    layer = c5.selectbox(_("Layer shown"), range(n_layers), format_func=names.get, key="gen_layer")
    return Controls(name, prompt, temperature, top_k, seed, int(layer))
