"""Whole models: the traced-LM base every family subclasses (``traced``), the chapter's GPTModel and Llama-style
blocks, pretrained weights and GGUF files, their tokenizers, the family registry, and decoding (generation)."""
