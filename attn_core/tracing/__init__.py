"""Recording what a forward pass computed: the Trace and its steps, and views that read a trace per head or
cell (or pooled to a thumbnail)."""
