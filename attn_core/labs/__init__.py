"""What the teaching and measuring pages compute: learning runs and their jobs, head scores, checkpoints, the
book walkthrough, the masking lab, questions, windows and positions, KV cache cost, benchmarks and their verdicts."""
