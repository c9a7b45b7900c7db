"""The app's state: the settings' schema and sidebar controls, the link (URL) they round-trip through, cached
runs and their byte-bounded cache, steppers, the shared pretrained models and their tokens as a person reads them
(readable)."""
