"""What the teaching and measuring pages compute: learning runs and their jobs, head scores, whether a head matters
(heads: ablation, patching, value-weighted attention, rollout; knockout), checkpoints, the book walkthrough, the
masking lab, questions, windows and positions, KV cache cost, benchmarks and their verdicts."""
