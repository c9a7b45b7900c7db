"""Export: the registry of charts a page drew and their slides (SVG, PNG, CSV, and the zip of them all)."""
