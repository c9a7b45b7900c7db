"""Drawing: pure chart builders split by what they draw (data in, Altair or PNG out, no Streamlit), and the
few helpers that put charts on the page (chart cache, matrices, screen and presentation sizes)."""
