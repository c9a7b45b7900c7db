"""A lesson step drawn for the class's phones: its main chart and its one-line reading, made once per (step,
language) and shared by every follower (this process's memory, then the class store, which every replica reads;
only a replica that finds neither draws it). A poll step's question is made here too. No widgets here.
"""

from __future__ import annotations

import base64
import secrets
import threading
from collections import Counter, OrderedDict

import numpy as np

from attn_core import BOOK_SENTENCE, AttentionConfig
from attn_core.labs import questions as qs
from attn_core.labs.lab import reshape_demo
from attn_core.text.embeddings import uses_book_inputs
from attn_core.tracing.views import head_matrix, num_heads
from dashboard.classroom.lessons import PAGES, QUESTIONS, LessonStore, step_key
from dashboard.i18n import N_, _, language, message
from dashboard.state.compute import Run, cached_tokens, traced_run
from dashboard.state.settings_schema import DEFAULTS, SCHEMA

PHONE_PX = 200  # the cells' side: with its labels a 360 px phone shows the chart whole; full screen enlarges it
MAX_TOKENS = 64  # a phone shows at most this many tokens' weights (a longer text: its first 64)
MEMORY_ENTRIES = 256
FLOW_TOKENS, FLOW_HEADS, FLOW_HEAD_DIM = 6, 4, 3  # the split-into-heads picture's most tokens, heads, columns a head
FLOW_PX = 26  # its cells' side at most (smaller when there are more columns): within a phone's width
# The ready lesson's own titles (dashboard/classroom/ready/chapter3.json), marked for the catalog; a teacher's own
# title is shown as written.
READY_TITLES = (
    N_("Chapter 3 in 40 minutes"),
    N_("The book's six tokens, one step at a time"),
    N_("Causal mask: −∞ before softmax"),
    N_("Causal mask: zero after softmax, renormalize"),
    N_("Splitting into heads: view and transpose"),
    N_("Masking lab: two methods, one answer"),
    N_("A sliding window of 3 tokens"),
    N_("Tiled attention: the same weights, tile by tile"),
)

_memory: OrderedDict[str, dict] = OrderedDict()
_lock = threading.Lock()
DRAWN: Counter[str] = Counter()  # key -> how often this process drew it (tests: once, however many phones)


def title(step: dict) -> str:
    """A step's title in this run's language: its own (the ready lesson's translated), else its page's or
    question's name."""
    own = step.get("title", "")
    if own:
        return _(own) if own in READY_TITLES else own
    if step["kind"] == "poll":
        return _(QUESTIONS[step["question"]])
    return _(PAGES[step["page"]])


def lesson_title(lesson: dict) -> str:
    own = lesson.get("title", "")
    return _(own) if own in READY_TITLES else own


def step_run(params: dict[str, str]) -> tuple[Run, int]:
    """The traced run a step's link settings give (the chapter's random weights) and the head it looks at."""
    values = dict(DEFAULTS)
    for key, raw in params.items():
        if key in SCHEMA:
            values[key] = SCHEMA[key].parse(raw)
    text = str(values["sentence"] or BOOK_SENTENCE)
    mode = str(values["input_mode"])
    tokens = cached_tokens(text)
    if mode == "book" and not uses_book_inputs([t.id for t in tokens]):
        mode = "learned"
    cfg = AttentionConfig(
        variant=str(values["variant"]), d_in=3 if mode == "book" else int(values["d_in"]), d_out=int(values["d_out"]),
        num_heads=int(values["num_heads"]), context_length=int(values["context_length"]),
        dropout=float(values["dropout"]), mask_method=str(values["mask_method"]), causal=bool(values["causal"]),
        qkv_bias=bool(values["qkv_bias"]), train_mode=bool(values["train_mode"]), seed=int(values["seed"]),
        num_kv_groups=int(values["num_kv_groups"]), window=int(values["window"]),
        latent_dim=int(values["latent_dim"]))
    run = traced_run(text, mode, cfg)
    head = 0
    raw = params.get("head", "")
    if raw.startswith("head "):
        head = max(0, min(num_heads(run.trace) - 1, int(raw.split()[1]) - 1))
    return run, head


def _shape(run: Run, name: str) -> str:
    step = next((s for s in run.trace if s.name == name), None)
    return "—" if step is None else "(" + ", ".join(str(d) for d in step.tensor.shape) + ")"


def _most(weights: np.ndarray, labels: list[str]) -> tuple[str, str, str, list[str], str]:
    """The last query's most-attended key and its weight, printed to the decimals that tell it from the runner-up;
    the keys whose weight the chart prints the same as the largest (:data:`qs.SHOWN_DECIMALS`: the largest alone when
    the chart tells it apart) and that printed weight. A reading must not name a winner the chart shows as a tie."""
    q = len(labels) - 1
    row = np.nan_to_num(np.asarray(weights[q], dtype=np.float64), nan=-1.0)
    k = int(np.argmax(row))
    runner_up = float(np.max(np.delete(row, k))) if row.size > 1 else -1.0
    decimals = qs.decimals_to_tell(float(row[k]), runner_up) or qs.MAX_DECIMALS
    shown = qs.printed(float(row[k]), qs.SHOWN_DECIMALS)
    tied = [labels[c].split(": ", 1)[-1] for c in range(len(labels)) if qs.printed(float(row[c]), qs.SHOWN_DECIMALS)
            == shown and row[c] >= 0]
    return labels[q].split(": ", 1)[-1], labels[k].split(": ", 1)[-1], f"{row[k]:.{decimals}f}", tied, shown


def reading(page: str, run: Run, weights: np.ndarray, head: int) -> str:
    """The step's one-line reading, from its own numbers."""
    labels = run.labels[:MAX_TOKENS]
    query, key, w, tied, shown = _most(weights, labels)
    keys = _(", ").join(f"“{t}”" for t in tied)  # the keys the chart prints with the largest weight
    if page == "shape-flow" and any(s.name == "queries.view" for s in run.trace):
        return _("queries {queries} → .view {view} → .transpose(1, 2) {transposed} → attn_weights {weights} → "
                 "context_vec {context}", queries=_shape(run, "queries"), view=_shape(run, "queries.view"),
                 transposed=_shape(run, "queries.transpose"), weights=_shape(run, "attn_weights"),
                 context=_shape(run, "context_vec.view"))
    if page == "masking-lab":
        other = "renormalize" if run.cfg.mask_method == "neg_inf" else "neg_inf"
        twin = traced_run(run.text, run.input_mode, _with(run.cfg, mask_method=other))
        diff = float(np.nanmax(np.abs(head_matrix(twin.trace, "weights", head)[:MAX_TOKENS, :MAX_TOKENS]
                                      - weights)))
        return _("−∞ before softmax and zero-then-renormalize give the same weights: the largest difference is "
                 "{diff:.1e}.", diff=diff)
    values = dict(query=query, key=key, weight=w, keys=keys, shown=shown)
    if page == "windows" and run.cfg.window:
        if len(tied) > 1:
            return _("With a window of {window}, each token sees at most {window} keys; “{query}” attends about "
                     "equally to {keys} ({shown} each on the chart; the largest, “{key}”, is {weight}).",
                     window=run.cfg.window, **values)
        return _("With a window of {window}, each token sees at most {window} keys; “{query}” attends most to "
                 "“{key}” ({weight}).", window=run.cfg.window, **values)
    if page == "tiled":
        err = float(np.nanmax(np.abs(np.nansum(weights, axis=1) - 1)))
        if len(tied) > 1:
            return _("Tile by tile, each row of weights still sums to 1 (largest error {err:.1e}); “{query}” attends "
                     "about equally to {keys} ({shown} each on the chart).", err=err, **values)
        return _("Tile by tile, each row of weights still sums to 1 (largest error {err:.1e}); “{query}” attends "
                 "most to “{key}”.", err=err, **values)
    if num_heads(run.trace) > 1:
        if len(tied) > 1:
            return _("In head {head}, “{query}” attends about equally to {keys} ({shown} each on the chart; the "
                     "largest, “{key}”, is {weight}).", head=head + 1, **values)
        return _("In head {head}, “{query}” attends most to “{key}” (weight {weight}).", head=head + 1, **values)
    if len(tied) > 1:
        return _("“{query}” attends about equally to {keys} ({shown} each on the chart; the largest, “{key}”, is "
                 "{weight}).", **values)
    return _("“{query}” attends most to “{key}” (weight {weight}).", **values)


def _with(cfg: AttentionConfig, **changes) -> AttentionConfig:
    import dataclasses

    return dataclasses.replace(cfg, **changes)


def draw(step: dict) -> dict:
    """A view step's drawing in this thread's language: ``{"title", "reading", "spec"}`` (a Vega-Lite spec) or
    ``"png"`` (base64) for a long text; ``"problem"`` instead when its settings cannot run."""
    from dashboard.drawing.cells import needs_raster
    from dashboard.drawing.heatmaps import Look
    from dashboard.drawing.rasters import raster_png

    body: dict = {"title": title(step)}
    try:
        run, head = step_run(step["params"])
    except ValueError as e:
        body["problem"] = message(e)
        return body
    weights = head_matrix(run.trace, "weights", head)
    if weights is None:  # the simplified variant names them the same; a variant without weights has none
        body["problem"] = _("This view has no attention weights to show.")
        return body
    weights = np.asarray(weights, dtype=np.float64)[:MAX_TOKENS, :MAX_TOKENS]
    labels = run.labels[:MAX_TOKENS]
    body["reading"] = reading(step["page"], run, weights, head)
    if step["page"] == "shape-flow" and any(s.name == "queries.view" for s in run.trace):
        body["specs"] = view_transpose(run)  # the step is named for the split into heads, not for a head's weights
    elif needs_raster(weights.size):
        body["png"] = base64.b64encode(raster_png(weights, "weights", target_px=PHONE_PX * 2)).decode()
    else:
        body["spec"] = _for_phone(Look(scale="weights", max_px=PHONE_PX).chart(weights, labels, labels).to_dict())
    return body


def view_transpose(run: Run) -> list[dict]:
    """The shape flow's picture of the split into heads at the run's sizes, phone-sized: the queries' columns
    numbered in memory order and coloured by head, then one (num_tokens, head_dim) matrix per head after
    ``.view(...).transpose(1, 2)`` (the first tokens, heads and columns). ``{"caption", "spec"}`` each."""
    from dashboard.drawing.flow_charts import numbered_cells

    cfg = run.cfg
    H, head_dim = cfg.num_heads, cfg.d_out // cfg.num_heads
    T, h, hd = min(len(run.labels), FLOW_TOKENS), min(H, FLOW_HEADS), min(head_dim, FLOW_HEAD_DIM)
    demo = reshape_demo(T, cfg.d_out, H)
    columns = [k * head_dim + c for k in range(h) for c in range(hd)]
    tokens = run.labels[:T]
    before = numbered_cells(demo.flat.numpy()[:, columns], np.tile(demo.head_of_column.numpy()[columns], (T, 1)),
                            tokens, [str(c + 1) for c in columns], x_title=N_("d_out column"),
                            px=min(FLOW_PX, PHONE_PX // len(columns)))
    after = numbered_cells(demo.transposed.numpy()[:h, :, :hd],
                           np.repeat(np.arange(h)[:, None, None], T, 1).repeat(hd, 2), tokens,
                           [str(c + 1) for c in range(hd)], panels=[_("head {head}", head=k + 1) for k in range(h)],
                           x_title="head_dim", px=min(FLOW_PX, PHONE_PX // (h * hd)), columns=2)
    return [{"caption": _("**Before**: `queries` (num_tokens, d_out)"), "spec": _legend_below(before.to_dict())},
            {"caption": _("**After** `.view(b, num_tokens, num_heads, head_dim).transpose(1, 2)`: one (num_tokens, "
                          "head_dim) matrix per head"), "spec": _legend_below(after.to_dict())}]


def _legend_below(spec: dict) -> dict:
    """The head legend under the cells: beside them it would push the chart past a phone's width."""
    spec.setdefault("config", {}).setdefault("legend", {}).update(orient="bottom", direction="horizontal")
    return spec


def _for_phone(spec: dict) -> dict:
    """The cells in a square of :data:`PHONE_PX` and the colour legend under them, not beside: the chart stays within
    a phone's width (the page's own heatmap keeps a readable cell size and grows sideways)."""
    spec["width"] = spec["height"] = PHONE_PX
    for layer in spec.get("layer", []):
        legend = layer.get("encoding", {}).get("color", {}).get("legend")
        if isinstance(legend, dict):
            legend.update(orient="bottom", direction="horizontal", gradientLength=PHONE_PX)
    return spec


def rendered(step: dict, lang: str, store: LessonStore | None) -> dict:
    """The step's drawing for ``lang``: from this process's memory, else the class store, else drawn here once
    (and put in the store for the other replicas). A poll step has no drawing (its question is the store's)."""
    if step["kind"] == "poll":
        with language(lang):
            return {"title": title(step)}
    key = step_key(step, lang)
    with _lock:
        if key in _memory:
            _memory.move_to_end(key)
            return _memory[key]
        body = None
        if store is not None:
            try:
                body = store.render(key)
            except Exception:  # noqa: BLE001 - a store down: draw it here, the phones still see it
                body = None
        if body is None:
            with language(lang):
                body = draw(step)
            DRAWN[key] += 1
            if store is not None:
                try:
                    store.put_render(key, body)
                except Exception:  # noqa: BLE001, S110 - shared next time the store answers
                    pass
        _memory[key] = body
        while len(_memory) > MEMORY_ENTRIES:
            _memory.popitem(last=False)
        return body


def question(step: dict) -> dict:
    """A poll step's question (``Question.to_dict()``), read from the trace of its settings."""
    run, head = step_run(step["params"])
    kind = step["question"]
    if kind == "view_shape" and any(s.name == "keys.view" for s in run.trace.steps):
        return qs.view_shape(run.trace, "keys").to_dict()
    if kind == "masking":
        return qs.masking(run.trace, run.labels, head, seed=secrets.randbelow(1000)).to_dict()
    return qs.attends_most(run.trace, run.labels, head).to_dict()


def clear() -> None:
    with _lock:
        _memory.clear()
        DRAWN.clear()
