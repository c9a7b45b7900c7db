"""Whole models: the chapter's GPTModel and Llama-style blocks, pretrained weights and GGUF files, their
tokenizers, and decoding (generation)."""
