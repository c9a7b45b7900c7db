"""Text → vectors' last section: attention as a soft lookup (a query against keys and values, as a table of books),
then the same lookup in a real head on the sentence."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import streamlit as st

from attn_core.text.lookup import hard_lookup, head_lookup, table_lookup
from attn_core.tracing.views import head_matrix, num_heads
from dashboard.drawing import text_charts
from dashboard.export.slides import draw_chart
from dashboard.i18n import N_, _
from dashboard.state.controls import settings, too_long
from dashboard.state.links import code_span, error_text, md_escape
from dashboard.state.runs import load_run

BOOKS = pd.DataFrame({N_("key (author)"): ["Jane Austen", "Charles Dickens", "Edith Wharton", "Mary Shelley",
                                       "Herman Melville"],
                      N_("value (book)"): ["Pride and Prejudice", "Great Expectations", "The Verdict", "Frankenstein",
                                       "Moby-Dick"],
                      N_("year"): [1813, 1861, 1908, 1818, 1851]})
QUERY_CHARS = 200  # a query is a name or a title


# 5. Q/K/V as a lookup ------------------------------------------------------------------------------------------

def lookup_section(sent: str) -> None:
    left, right = st.columns([1, 1])
    with left:
        # the columns keep their English names (the code reads them); the header shows them translated
        table = st.data_editor(BOOKS, key="t2v_table", num_rows="dynamic", hide_index=True, width="stretch",
                               column_config={c: _(c) for c in BOOKS.columns})
        query = st.text_input(_("Query"), "Edith Warton", key="t2v_query")
        temperature = st.slider(_("temperature (the model's: √d_k)"), 0.01, 2.0, 0.2, 0.01, key="t2v_temperature")
    if problem := too_long(query, QUERY_CHARS):
        left.error(problem)
        return
    table = table.dropna(subset=["key (author)"])
    keys = [str(k) for k in table["key (author)"]]
    values = [str(v) for v in table["value (book)"]]
    years = pd.to_numeric(table["year"], errors="coerce")
    try:
        soft = table_lookup(query, keys, temperature, None if years.isna().any() else years.to_numpy(float))
    except ValueError as e:
        st.error(md_escape(error_text(e)))
        return
    hard = hard_lookup(query, keys)
    with right:
        st.markdown(_("**Hard lookup** (`books[query]`): {value}", value=code_span(values[hard])) if hard is not None
                    else _("**Hard lookup** (`books[query]`): nothing: no key equals the query (a dict raises "
                           "`KeyError`)"))
        frame = pd.DataFrame({"row": range(len(keys)), "key": keys, "value": values, "score": soft.scores.round(3),
                              "weight": soft.weights, "hard": [i == hard for i in range(len(keys))]})
        draw_chart(st, lambda: text_charts.weight_bars(frame, [f"{k} → {v}" for k, v in zip(keys, values)],
                                                       width=150, title="softmax(query·key / temperature)"),
                   key="t2v_table_weights", name="lookup_weights", title=_("Soft lookup weights"), table=lambda: frame)
        best = dict(share=f"{soft.weights[soft.best]:.0%}", value=code_span(values[soft.best]))
        st.markdown(_("**Attention** returns every value, weighted: {share} {value}.", **best) if soft.blend is None
                    else _("**Attention** returns every value, weighted: {share} {value}; blended year {year}.",
                           year=format(float(soft.blend), ",.1f"), **best))
    st.caption(_("Scores: cosine similarity of the names' letter trigrams (1 = same name). Lower the temperature: "
                 "the blend becomes a hard lookup of the best match, which, unlike a dict, also finds a misspelled "
                 "key."))
    head_section(sent)


def head_section(sent: str) -> None:
    st.subheader(_("The same lookup in a real head, on this sentence"))
    s = settings()
    run = load_run(dataclasses.replace(s, text=sent), quiet=True, note=False)
    if run is None:
        return
    trace = run.trace
    labels = [t.label for t in run.tokens]
    c = st.columns(3)
    head = c[0].selectbox(_("head"), range(num_heads(trace)), key="t2v_head",
                          format_func=lambda h: _("head {head}", head=h + 1))
    i = c[1].selectbox(_("query token"), range(len(labels)), index=len(labels) - 1, key="t2v_token",
                       format_func=labels.__getitem__)
    temp = c[2].slider(_("temperature (1 = the model's)"), 0.05, 3.0, 1.0, 0.05, key="t2v_head_temperature")
    q, k, v = (head_matrix(trace, kind, head) for kind in ("queries", "keys", "values"))
    if q is None:  # simplified attention: x plays all three roles
        q = k = v = head_matrix(trace, "input", 0)
    look = head_lookup(q, k, v, i, temp, causal=s.cfg.spec.masks)
    order = np.argsort(-look.weights)[:3]
    frame = pd.DataFrame({"row": range(len(labels)), "key": labels, "score": np.round(look.scores, 3),
                          "weight": look.weights, "hard": [j == order[0] for j in range(len(labels))]})
    left, right = st.columns([3, 2])
    with left:
        draw_chart(st, lambda: text_charts.weight_bars(frame, labels, width=260, row_px=18,
                                                       title=_("query {token}: which keys matched",
                                                               token=labels[i])),
                   key="t2v_head_weights", name="head_lookup", title=_("Which keys matched this query"),
                   table=lambda: frame)
    with right:
        top = ", ".join(f"{code_span(labels[j])} {look.weights[j]:.0%}" for j in order if look.weights[j] > 0)
        st.markdown(_("**Matched:** {top}", top=top))
        z = code_span(np.array2string(look.context[:6], precision=3) + (" …" if v.shape[1] > 6 else ""))
        st.markdown(_("**Came back:** z = Σ weight · value, a {d}-d vector: {z}", d=v.shape[1], z=z))
        st.caption(_("Scores q·k / √{d_k}; future keys masked. Weights: the sidebar's model ({variant}, {weights} "
                     "weights).", d_k=k.shape[1], variant=md_escape(run.cfg.variant),
                     weights=md_escape(run.weights)))
