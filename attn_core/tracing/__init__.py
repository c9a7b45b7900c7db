"""Recording what a forward pass computed: the Trace and its steps, views that read a trace per head or cell,
and the step-by-step walkthrough."""
