"""What an AppTest page shows as text, and the English sentences left in it (for the Chinese interface's tests).

``shown_text(at)`` gathers every string a person reads: Markdown, captions, plain text, headers, alerts, widget
labels, options and help, button and popover labels, table headers and chart titles / axis and legend titles.
``english_left(at, allowed)`` returns the runs of three or more English words in it, outside code spans, LaTeX and
URLs, ignoring ``allowed`` words (the user's own sentence, tensor and model names).
"""

from __future__ import annotations

import re

from streamlit.testing.v1 import AppTest

from apptest_utils import spec_nodes, specs

# Words that stay in English in both languages: the book's names, libraries, models, units.
KEPT = {
    "attn_scores", "attn_weights", "context_vec", "dropout", "token", "tokens", "softmax", "GPT", "GPTModel",
    "SmolLM2", "Llama", "Qwen", "Gemma", "RoPE", "KV", "PyTorch", "SDPA", "FlashAttention", "BPE", "GQA", "MQA",
    "MLA", "MHA", "CSV", "PNG", "SVG", "QR", "float32", "float16", "bfloat16", "cpu", "cuda", "mps", "Attention",
    "Lab", "The", "Verdict", "Build", "Large", "Language", "Model", "From", "Scratch", "head", "heads",
}
_CODE = re.compile(r"`[^`]*`|\$[^$]*\$|https?://\S+|<[^>]+>|\*\*|__")
# ASCII word boundaries: a Chinese character is a word character to Unicode's \b, so "为normed residual stream（" was
# no run of English words at all
_RUN = re.compile(r"(?:\b[A-Za-z][A-Za-z'’-]+\b[ ,]+){2,}\b[A-Za-z][A-Za-z'’-]+\b", re.ASCII)


def _widget_texts(at: AppTest) -> list[str]:
    out: list[str] = []
    for kind in ("selectbox", "radio", "multiselect", "select_slider", "segmented_control", "pills"):
        for w in at.get(kind):
            out.append(getattr(w, "label", "") or "")
            out.extend(str(o) for o in (getattr(w, "options", None) or []))
            out.append(getattr(w, "help", "") or "")
    for kind in ("button", "checkbox", "toggle", "slider", "number_input", "text_input", "text_area",
                 "download_button", "link_button"):
        for w in at.get(kind):
            out.append(getattr(w, "label", "") or "")
            out.append(getattr(w, "help", "") or "")
    return out


def _chart_texts(at: AppTest) -> list[str]:
    out: list[str] = []
    for spec in specs(at):
        for node in spec_nodes(spec):
            for key in ("title", "text"):
                v = node.get(key)
                if isinstance(v, str):
                    out.append(v)
                elif isinstance(v, list):
                    out.extend(x for x in v if isinstance(x, str))
                elif isinstance(v, dict) and isinstance(v.get("text"), str):
                    out.append(v["text"])
    return out


def _popover_labels(node, out: list[str]) -> list[str]:
    """The labels of the popovers under ``node`` (AppTest has no popover element: they are blocks)."""
    proto = getattr(node, "proto", None)
    if proto is not None and type(proto).__name__ == "Block" and proto.WhichOneof("type") == "popover":
        out.append(proto.popover.label)
    for child in getattr(node, "children", {}).values():
        _popover_labels(child, out)
    return out


def shown_text(at: AppTest) -> list[str]:
    """Every string the page shows a person (not the data inside charts and tables)."""
    out: list[str] = _popover_labels(getattr(at, "_tree", at), [])
    for kind in ("markdown", "caption", "header", "subheader", "title", "error", "warning", "info", "success",
                 "exception", "expander", "tab", "text"):
        for el in at.get(kind):
            v = getattr(el, "value", None) if kind not in ("expander", "tab") else getattr(el, "label", None)
            if isinstance(v, str):
                out.append(v)
    for el in at.get("table") + at.get("dataframe"):
        try:
            out.extend(str(c) for c in el.value.columns)
        except Exception:  # noqa: BLE001  (an element without a frame shows no header)
            pass
    return out + _widget_texts(at) + _chart_texts(at)


def english_left(at: AppTest, allowed: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """The runs of 3+ English words left on the page, outside code, LaTeX, URLs and ``allowed`` / kept words."""
    return english_runs(shown_text(at), allowed)


def english_runs(texts: list[str], allowed: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """The runs of 3+ English words in ``texts``, outside code, LaTeX, URLs and ``allowed`` / kept words."""
    keep = {w.lower() for w in KEPT | set(allowed)}
    found: list[str] = []
    for text in texts:
        text = _CODE.sub(" ", text)
        for run in _RUN.finditer(text):
            words = [w for w in re.findall(r"[A-Za-z][A-Za-z'’-]+", run.group(0)) if w.lower() not in keep]
            if len(words) >= 3:
                found.append(run.group(0).strip())
    return found
