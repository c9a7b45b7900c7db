"""The languages the tests speak, named once: the source language and the translated one whose words (Chinese)
the tests assert. No other test writes a language's code."""

from dashboard.languages import SOURCE

ENGLISH = SOURCE
CHINESE = "zh"  # Simplified Chinese: the catalog in dashboard/locale/zh_CN
LANGS = (ENGLISH, CHINESE)
