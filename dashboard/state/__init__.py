"""The app's state: the settings' schema and sidebar controls, the link (URL) they round-trip through, cached
runs and their byte-bounded cache, steppers, the shared pretrained models (and the batcher that lets sessions
waiting for the same model share one pass) and their tokens as a person reads them (readable)."""
