"""From text to vectors (chapter 2): tokenizers (GPT-2 BPE offline, a word tokenizer), sliding-window data,
token and position embeddings, the lookup intuition."""
