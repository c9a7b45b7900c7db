"""The floor (a copy of the shared probe's floor page): the least a Streamlit page can do for one
sentence — one T x T heatmap, torch imported. bench.app_response measures Explore against it in the same run.
"""
import altair as alt
import numpy as np
import pandas as pd
import streamlit as st
import torch  # noqa: F401  (the project imports torch; its GC cost is part of the floor)

st.set_page_config(layout="wide")
s = st.sidebar.text_area("Sentence", "Your journey starts with one step", key="sentence")
toks = s.split() or ["-"]
T = len(toks)
w = np.random.rand(T, T)
w = w / w.sum(-1, keepdims=True)
w = w.astype("float32")
df = pd.DataFrame({"q": np.repeat(np.arange(T), T), "k": np.tile(np.arange(T), T), "w": w.ravel()})
st.altair_chart(alt.Chart(df).mark_rect().encode(x="k:O", y="q:O", color=alt.Color("w:Q", scale=alt.Scale(domain=[0, 1]))))
