"""Sample sentences in Chinese beside the book's English ones: a class reading the chapter in Chinese sees its own
script go through the tokenizers (GPT-2 splits most Chinese characters into UTF-8 bytes) and the model view."""

from __future__ import annotations

TEA_ZH = "你好，你喜欢喝茶吗？"  # chapter 2's "Hello, do you like tea?"
CAT_ZH = "猫坐在垫子上，因为它累了。"  # a pronoun whose antecedent a head can find
