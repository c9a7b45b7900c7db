"""Book walkthrough: sections 3.3 to 3.6.2 with the book's own numbers, then with your sentence. Each
step's tensor is drawn as a heatmap beside its printed numbers."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

import numpy as np
import pandas as pd
import streamlit as st

from attn_core import BOOK_TOKENS, embed
from attn_core.labs.walkthrough import book_walkthrough, dropout_ok
from attn_core.text.embeddings import uses_book_inputs
from dashboard.drawing.chart_cache import memo
from dashboard.drawing.matrices import Look, on_screen, prepare_matrix, show_matrix
from dashboard.drawing.present import presenting
from dashboard.drawing.sizes import cap, column_px, content_px, fit, narrow
from dashboard.drawing.text import NUMBERS_KEY, show_table
from dashboard.export.slides import page_downloads, slide_settings
from dashboard.i18n import _, lang, language, ngettext
from dashboard.state.ahead import prefetch
from dashboard.state.compute import EMBEDDING_SEED, cached_tokens
from dashboard.state.controls import Settings, settings
from dashboard.state.links import error_text, md_escape
from dashboard.state.steppers import stepper

# Steps whose values are attention weights (fixed 0-1 scale); dropout's survivors are scaled to 2.
WEIGHT_STEPS = {"sum_2", "naive_2", "softmax_2", "weights", "v1_weights_2", "masked"}
CHART_PX = 180  # a 6-token chart: 30 px cells; with its labels and legend ~350 px, beside the numbers at 1280 px
PRESENT_CHART_PX = 270  # presentation mode: 45 px cells hold 16 px values and 16 px labels (30 px rows crowded them)
TABLE_ROWS = 12  # a longer table scrolls inside TABLE_HEIGHT_PX (the book's 6 rows never do)
TABLE_COLUMNS = 6  # the book's widest (6 x 6: 424 px at 1280 px with the sidebar open); a wider one scrolls
TABLE_HEIGHT_PX = 420
AHEAD = "walk_ahead"  # the next step's charts, being prepared (dashboard/state/ahead.py)
COLUMNS = [5, 6]  # chart | numbers: at 1280 px with the sidebar open, ~365 px and ~440 px (measured)


def agrees(step) -> bool | None:
    return dropout_ok(step) if step.key == "dropout" else step.agrees


def step_scale(key: str) -> str:
    """Weights on the fixed 0-1 scale (dropout's scaled survivors up to 2); everything else diverging."""
    return "weights" if key in WEIGHT_STEPS else "weights:2" if key == "dropout" else "scores"


def variable(step) -> str:
    """The name the step's code gives its result (``attn_scores_2``), else the step's key."""
    names = re.findall(r"^(\w+)\s*\+?=", step.code, flags=re.MULTILINE)
    return names[-1] if names else step.key


def as_matrix(step, labels: list[str]) -> tuple[np.ndarray, list[str], list[str], str, str] | None:
    """The step's value as a 2-d matrix with row and column labels and axis titles (a vector is one row)."""
    v = step.value.detach().float().numpy()
    if v.ndim == 0:
        return None
    n = len(labels)
    if step.key == "overflow":  # two softmaxes of the same two large scores
        return (v.reshape(2, -1), ["softmax_naive", "torch.softmax"], ["x = 1000", "x = 1001"], _("input"),
                _("function"))
    if step.key == "dropout":  # a 6 x 6 matrix of ones, not tokens
        rows, cols = [str(i + 1) for i in range(v.shape[0])], [str(j + 1) for j in range(v.shape[1])]
        return v, rows, cols, _("column"), _("row")
    if v.ndim == 1:
        cols = labels if len(v) == n else [_("dim {j}", j=j + 1) for j in range(len(v))]
        return v.reshape(1, -1), [variable(step)], cols, _("key") if len(v) == n else _("dimension"), ""
    rows = labels if v.shape[0] == n else [str(i + 1) for i in range(v.shape[0])]
    square = v.shape[1] == n and v.shape[0] == n
    cols = labels if v.shape[1] == n else [_("dim {j}", j=j + 1) for j in range(v.shape[1])]
    return v, rows, cols, _("key") if square else _("dimension"), _("query") if square else _("token")


def number_table(value, labels: list[str]) -> pd.DataFrame | None:
    """A tensor's numbers as the page prints them: every value to 4 decimals as the book prints it (``nan`` too),
    rows labelled with the tokens (Markdown-escaped: st.table renders Markdown), columns by their number (the chart
    beside it spells the tokens out). A vector is one row, as the book prints it; a scalar gives None."""
    v = value.detach().float().numpy()
    if v.ndim == 0:
        return None
    if v.ndim == 1 and len(v) > TABLE_COLUMNS:  # a long vector stands up: one row per entry, every value seen
        v2 = v.reshape(-1, 1)
        rows = labels if len(v) == len(labels) else [str(i + 1) for i in range(len(v))]
        return pd.DataFrame(np.char.mod("%.4f", v2), index=[md_escape(r) for r in rows], columns=[_("value")])
    v2 = v.reshape(1, -1) if v.ndim == 1 else v
    rows = labels if v.ndim > 1 and v2.shape[0] == len(labels) else [str(i + 1) for i in range(v2.shape[0])]
    return pd.DataFrame(np.char.mod("%.4f", v2), index=[md_escape(r) for r in rows],
                        columns=[str(j + 1) for j in range(v2.shape[1])])


def show(container, value, labels: list[str], key: str, width_px: int | None = None) -> None:
    """A tensor's numbers as a static table (``st.table``: plain HTML, right-aligned in a ``NUMBERS_KEY``
    container, ≥ 16 px in presentation mode). ``st.dataframe``'s canvas grid was slow in the browser
    and its ~12 px text could not be enlarged. A long input scrolls inside the table, its header held in place."""
    table = number_table(value, labels)
    if table is None:
        container.markdown(f"`{float(value):.4f}`")
        return
    box = container.container(key=NUMBERS_KEY + key)
    # wider than the column: a fixed width, so the table scrolls sideways with its token labels held in place
    box.table(table, hide_index=value.ndim == 1 and table.shape[0] == 1, border="horizontal",
              width=(width_px or column_px(COLUMNS, 1)) if table.shape[1] > TABLE_COLUMNS else "content",
              height=TABLE_HEIGHT_PX if len(table) > TABLE_ROWS else "content")


def chart_px(labels: list[str] | None = None) -> int:
    """The longer side of a step's heatmap on this screen and in this mode (on a phone: within its width, beside
    ``labels``, default the book's)."""
    px = cap(PRESENT_CHART_PX if presenting() else CHART_PX)
    return fit(px, BOOK_LABELS if labels is None else labels) if narrow() else px


def chart_args(step, labels: list[str], max_px: int) -> tuple[np.ndarray, list[str], list[str], dict] | None:
    """What the step's heatmap is drawn from: (matrix, row labels, column labels, show_matrix's options)."""
    matrix = as_matrix(step, labels)
    if matrix is None:
        return None
    m, rows, cols, x_title, y_title = matrix
    return m, rows, cols, dict(scale=step_scale(step.key), x_title=x_title, y_title=y_title, max_px=max_px)


def draw_step(step, labels: list[str], key: str, name: str, whose: str = "book", cache_key=None) -> None:
    """The step's tensor as a heatmap (left) beside its numbers (right), on the book's inputs or ``whose="yours"``;
    ``cache_key`` names its data (a step
    visited again, or prepared by :func:`prepare_step`, sends the remembered data)."""
    args = chart_args(step, labels, chart_px(labels))
    if args is not None:
        m, rows, cols, options = args
        show_matrix(st, m, rows, cols, Look(**options), key=key, title=title(step, whose), name=name,
                    cache_key=cache_key)


def title(step, whose: str) -> str:
    """The step's chart title: its section and name, and whose input it ran on."""
    if whose == "yours":
        return _("§{section} {title} (your sentence)", section=step.section, title=_(step.title))
    return _("§{section} {title}", section=step.section, title=_(step.title))


def prepare_step(step, labels: list[str], cache_key, look: Look, max_px: int) -> None:
    """Build the step's heatmap spec and data before it is shown (state.ahead.prefetch); ``look``: presentation
    mode, the screen's growth and the theme, and ``max_px``, read in the script."""
    args = chart_args(step, labels, max_px)
    if args is not None:
        m, rows, cols, options = args
        prepare_matrix(m, rows, cols, dataclasses.replace(look, **options), cache_key)


BOOK_LABELS = [f"{i + 1}: {w}" for i, w in enumerate(BOOK_TOKENS)]


@st.fragment
def step_view(s: Settings) -> None:
    """The stepper, the step it points at, and the same step on the user's sentence. A fragment:
    Previous / Next rerun only this part of the page (with the settings of the page's last full run)."""
    if (ahead := st.session_state.pop(AHEAD, None)) is not None:
        ahead.take()  # the next step's charts, if they are being prepared: waited for, not built twice
    steps = memo(("walkthrough",), book_walkthrough)
    i = stepper("walk_step", [_("§{section} {title}", section=x.section, title=_(x.title)) for x in steps])
    step = steps[i]
    # anchor=False: an anchor id was re-written every step
    st.header(_("§{section} · {title}", section=step.section, title=_(step.title)), anchor=False)
    st.markdown(_(step.explanation))
    st.code(step.code, language="python", wrap_lines=True)  # a phone's column: wrapped, never scrolled sideways

    ok = agrees(step)
    slide_settings(_("book inputs"), len(BOOK_LABELS))
    c_chart, c_nums = st.columns(COLUMNS, gap="small")
    with c_chart:
        draw_step(step, BOOK_LABELS, "walk_chart", f"{step.section}_{step.key}", cache_key=("walk", step.key, lang()))
    with c_nums:
        st.markdown(_("**Our code computes**"))
        show(st, step.value, BOOK_LABELS, "walk_ours")
        st.markdown(_("**The book prints**"))
        if step.printed is not None:
            show(st, step.printed, BOOK_LABELS, "walk_book")
        else:
            st.markdown(_("_(no fixed print: {check})_", check=_(step.check)))
    if ok:
        diff = step.max_abs_diff
        if diff is not None:
            agreed = _("Agrees with the book ({check}): max |difference| {diff}.", check=_(step.check),
                       diff=format(diff, ".1e"))
        else:
            agreed = _("Agrees with the book ({check}).", check=_(step.check))
        st.success(agreed, icon=":material/check_circle:")
    else:
        st.error(_("Does not agree with the book ({check}).", check=_(step.check)), icon=":material/cancel:")

    # Now with your sentence ---------------------------------------------------------------------------------
    st.subheader(_("Now with your sentence"))
    yours_next = your_sentence(s.text, s.input_mode, i, step.key)
    if i + 1 < len(steps):  # the next step's charts, while the reader reads this one
        after, look, px = steps[i + 1], on_screen(), chart_px()
        code = lang()

        def prepare_next() -> None:
            with language(code):  # a worker thread: this session's language for the labels and the cache key
                prepare_step(after, BOOK_LABELS, ("walk", after.key, lang()), look, px)
                if yours_next is not None:
                    yours_next(look, px)

        st.session_state[AHEAD] = prefetch(prepare_next)
    page_downloads(page="walkthrough")


def your_sentence(text: str, input_mode: str, i: int, key: str) -> Callable[[dict, int], None] | None:
    """Step ``i`` run on the user's sentence; returns what prepares its next step's chart (None: nothing to draw)."""
    try:
        tokens = cached_tokens(text)
    except ValueError as e:
        st.warning(error_text(e))
        return None
    if len(tokens) > 64:
        st.info(_("Your sentence has {n} tokens; the walkthrough uses its first 64.", n=len(tokens)))
        tokens = tokens[:64]
    ids = tuple(t.id for t in tokens)
    listed = ", ".join(md_escape(t.label) for t in tokens[:12]) + (" …" if len(tokens) > 12 else "")
    # The book's fixed inputs are its vectors for its own sentence; any other text gets 3-d learned embeddings.
    if input_mode == "book" and uses_book_inputs(ids):
        # Drawn again, they were a second copy of the chart and table, and a third of each step's time in the
        # browser: the same code gives exactly the numbers above (tests/test_truthful_pages.py checks every step).
        st.caption(_("Your tokens ({tokens}) are the book's sentence with its fixed 3-d inputs, so the same code "
                     "gives exactly the numbers above. Type a sentence of your own, or pick learned inputs in the "
                     "sidebar, to run it on vectors of your own.", tokens=listed))
        return None
    mode = "learned"
    x = memo(("walk_inputs", ids, mode), lambda: embed(list(ids), 3, mode, seed=EMBEDDING_SEED)[0])
    mine_steps = memo(("walk_mine", ids, mode), lambda: book_walkthrough(x))
    mine = mine_steps[i]
    st.caption(_("Your tokens get 3-d learned token + position embeddings (seed 123), then the same code runs: "
                 "{tokens}", tokens=listed))
    value = mine.value.detach().float().numpy()
    my_labels = [t.label for t in tokens]
    slide_settings(_("learned inputs"), len(tokens), _("your sentence"))
    # A table wider than the book's 6 columns is wider than its half of the page (9 x 9 weights: 612 px in 440):
    # the table goes under the chart, in the whole width, where ~11 columns fit.
    table = number_table(mine.value, my_labels)
    wide = table is not None and table.shape[1] > TABLE_COLUMNS
    c_chart, c_nums = (st.container(), st.container()) if wide else st.columns(COLUMNS, gap="small")
    with c_chart:
        draw_step(mine, my_labels, "walk_mine_chart", f"{mine.section}_{mine.key}", "yours",
                  cache_key=("walk_mine", ids, mode, mine.key, lang()))
    with c_nums:
        st.markdown(_("**Our code computes**"))
        show(st, mine.value, my_labels, "walk_mine", width_px=content_px() if wide else None)
    if np.isnan(value).any() and key != "overflow":
        st.warning(_("Some values are NaN: check the step's explanation."))
    if i + 1 >= len(mine_steps):
        return None
    after = mine_steps[i + 1]
    return lambda look, px: prepare_step(after, my_labels, ("walk_mine", ids, mode, after.key, lang()), look, px)


def render() -> None:
    """Draw the page. Everything it computes stays local, so nothing outlives the run."""
    if not presenting():  # the top navigation names the page: at 720 px every line above the chart counts
        st.title(_("Book walkthrough: chapter 3, step by step"))
        st.caption(_("The book's fixed inputs for “Your journey starts with one step” (6 tokens × 3 numbers), the "
                     "book's seeds, and the values it prints. A ✓ means our code reproduces the print to 4 "
                     "decimals."))
    steps = memo(("walkthrough",), book_walkthrough)
    summary = pd.DataFrame({_("section"): [x.section for x in steps], _("step"): [_(x.title) for x in steps],
                            _("matches the book"): [_("✓ yes") if agrees(x) else _("✗ no") for x in steps]})
    agreeing = sum(bool(agrees(x)) for x in steps)
    with st.expander(ngettext("All {n} checks: {agreeing} of {n} agree", "All {n} checks: {agreeing} of {n} agree",
                              len(steps), agreeing=agreeing), expanded=False):
        show_table(st, summary, hide_index=True, width="stretch")

    step_view(settings())

render()
