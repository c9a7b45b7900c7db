"""Steppers: Previous / Next buttons (Page Up / Page Down, what a presentation clicker sends) and a slider over a
page's steps, kept in the link; and the Previous / Next row over Explore's sections."""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st

from dashboard.i18n import _
from dashboard.state.links import md_escape
from dashboard.state.url_state import warn_bad_link


def _link_step(key: str) -> None:
    """Write a stepper's step into the link (``?key=`` its number, the same in every language; none for step 1).
    Called from the buttons' and the slider's callbacks, before the run: a new link makes the browser redraw the
    whole page once more, and that redraw then comes before the run's own instead of after it. (The slider bound
    to the link wrote it after the run: that redraw and the thumb moving again were a step's last changes.)"""
    i = st.session_state.get(key, 0)
    if i:
        st.query_params[key] = str(i + 1)
    else:
        st.query_params.pop(key, None)


def step_from_link(raw: str, n: int) -> int | None:
    """The step (0-based) a link's value names: its number, or an older link's "3/20 · label" in any language;
    None if it names no step 1..n."""
    number = raw.split("/", 1)[0].strip() if "/" in raw else raw.strip()
    return int(number) - 1 if number.isdigit() and 1 <= int(number) <= n else None


def _slid(key: str, slider: str) -> None:
    st.session_state[key] = st.session_state[slider]
    _link_step(key)


def _step(key: str, delta: int, n: int) -> None:
    st.session_state[key] = min(n - 1, max(0, st.session_state.get(key, 0) + delta))
    _link_step(key)


PREV_KEY, NEXT_KEY = "PageUp", "PageDown"  # what a presentation clicker sends


def _go(key: str, value: str) -> None:
    st.session_state[key] = value


def section_steps(key: str, names: Sequence[str]) -> tuple:
    """Previous / Next buttons (and Page Up / Page Down) over sections picked by the widget ``key``, named after
    the section they lead to, at the right of the section's first row; returns that row's left part for the
    section's own controls and the middle part (for the page's download control)."""
    current = st.session_state.get(key)
    i = names.index(current) if current in names else 0
    # the middle holds "Download (N)" on one line at 1280×720 (a 2/11 column wrapped it)
    left, middle, right = st.columns([4, 3, 4], vertical_alignment="center")
    row = right.container(horizontal=True, horizontal_alignment="right", gap="small")
    row.button(_("◀ {section}", section=_(names[i - 1])) if i > 0 else _("◀ Previous"), key=f"{key}_prev",
               on_click=_go, args=(key, names[max(i - 1, 0)]), disabled=i == 0, shortcut=PREV_KEY, type="tertiary",
               help=_("Previous section (Page Up)"))
    row.button(_("{section} ▶", section=_(names[i + 1])) if i < len(names) - 1 else _("Next ▶"), key=f"{key}_next",
               on_click=_go, args=(key, names[min(i + 1, len(names) - 1)]), disabled=i == len(names) - 1,
               shortcut=NEXT_KEY, type="tertiary", help=_("Next section (Page Down)"))
    return left, middle


def stepper(key: str, labels: Sequence[str]) -> int:
    """Previous / Next buttons and a slider over ``labels``; returns the chosen index.

    Buttons and slider share one session-state value, so a projector user can click or drag. The
    step is in the link as its number (:func:`_link_step`; an older link's label is read too); a bad value is
    reported and step 1 shown."""
    n = len(labels)
    shown = [f"{i + 1}/{n} · {labels[i]}" for i in range(n)]
    if key not in st.session_state:  # a new session: the link may name a step
        raw = st.query_params.get(key)
        st.session_state[key] = 0
        if raw is not None:
            step = step_from_link(raw, n)
            if step is None:
                warn_bad_link(key, raw, _("step 1 (a step is a number from 1 to {n})", n=n))
                st.query_params.pop(key, None)
            else:
                st.session_state[key] = step
                _link_step(key)  # an older link's label becomes the number
    st.session_state[key] = min(st.session_state[key], n - 1)
    i = st.session_state[key]
    # One row that sizes each button to its label (fixed column ratios cut "◀ Previous" to "◀ Pre…" at
    # 1280 px with the sidebar open); the slider takes the rest.
    row = st.container(horizontal=True, vertical_alignment="center", gap="small")
    row.button(_("◀ Previous"), key=f"{key}_prev", on_click=_step, args=(key, -1, n), width="content",
               disabled=i == 0, shortcut=PREV_KEY)
    if n > 1:
        # The position as its own line above the track ("Step 3 of 20 · x"): the slider's value rode on its
        # thumb, which covered it.
        middle = row.container(gap=None, width="stretch")
        middle.html(f"<style>[class*='st-key-{key}_slider'] [data-testid='stSliderThumbValue'] {{display: none;}}"
                    "</style>")
        middle.markdown(_("**Step {i} of {n}** · {label}", i=i + 1, n=n, label=md_escape(labels[i])),
                        width="stretch")
        # A new slider each time the step is moved other than by the slider (the buttons, a test): a slider whose
        # value the script changes shows it only after the run (its thumb moved after the rest of the page),
        # a new one is drawn at its value. Dragging keeps the slider (and the keyboard focus).
        moves = f"{key}_moves"
        if st.session_state.get(f"{key}_slider{st.session_state.get(moves, 0)}", i) != i:
            st.session_state[moves] = st.session_state.get(moves, 0) + 1
        slider = f"{key}_slider{st.session_state.get(moves, 0)}"
        middle.select_slider(_("Step"), options=list(range(n)), value=i, key=slider, on_change=_slid,
                             args=(key, slider), format_func=shown.__getitem__,
                             label_visibility="collapsed", width="stretch")
    row.button(_("Next ▶"), key=f"{key}_next", on_click=_step, args=(key, 1, n), width="content",
               disabled=i == n - 1, shortcut=NEXT_KEY)
    return int(i)
