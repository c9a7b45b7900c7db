"""How big the screen is: the width of the page's main column and how much charts may grow, measured
in the browser.

Streamlit tells the server nothing about the window, and a heatmap with fixed cells does not resize
itself. A tiny `st.components.v2` component (no frame, hidden) measures the main column and the
window height, snaps them to a few layouts and reports only a change: a 1920×1080 screen then gets
charts 1.5 times as large (at 1920 they used less than half the width), and opening the
sidebar in presentation mode shrinks them back into the narrower column. At 1280×720 (the projector
the layouts are designed for) the measurement equals the default, so no extra rerun happens.
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

KEY = "screen"
# main column: 1280×720 with the sidebar open; in presentation mode; 1920×1080 sidebar open; sidebar closed
WIDTHS = (820, 1180, 1460, 1760)
BASE_HEIGHT = 720  # the projector's height the layouts are designed for
GROW_STEP = 10  # charts grow in steps of 10 % (fewer distinct chart specs, fewer reruns)

# Measures the main column (without its padding) and the window; reports [width, grow %] when they differ
# from what the server used for this run (``data.used``). A ResizeObserver catches the sidebar opening
# or closing, the page's padding changing (presentation mode) and window resizes (debounced: one rerun per
# resize). Streamlit calls the function again whenever ``data`` changes, without the last call's cleanup: the page
# keeps one measurer, this run's (an older one still measured against its old ``used`` and sent stale sizes).
# A report is never sent during a run nor just after one (SETTLE_MS): the run's widgets take the values the script
# gave them (Page Down's section) a moment after it ends, and a rerun sent before that carries their old values
# back. Nor for a second after a click or key, which may have asked for a run the page does not show yet.
SETTLE_MS = 300
# The page's style (presentation mode's or the normal one, dashboard/drawing/present.py) names its layout in this
# variable: the column is measured only once this run's style applies (a first run measured the normal padding
# under a presentation link, sent 820 px and drew the page three times).
LAYOUT_VAR = "--attention-lab-layout"
_JS = """
export default function ({ data, setStateValue }) {
  const main = document.querySelector('[data-testid="stMainBlockContainer"]');
  if (!main) return;
  if (window.__attentionLabScreen) window.__attentionLabScreen();
  const { widths, base, step, height, used, settle, layout, layoutVar } = data;
  const app = document.querySelector('[data-testid="stApp"]');
  const running = () => !!app && app.getAttribute("data-test-script-state") === "running";
  const content = () => {
    const cs = getComputedStyle(main);
    return main.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
  };
  const measure = () => {
    const w = content();
    const fits = widths.filter((s) => s <= w);
    const width = fits.length ? Math.max(...fits) : Math.max(320, Math.floor(w / 20) * 20);
    const room = Math.min(100 * width / base, 100 * window.innerHeight / height);
    const grow = Math.max(100, Math.floor(room / step) * step);
    return [width, grow];
  };
  let timer = null;
  let asked = null;
  let sent = null;
  const report = () => {
    if (running() || asked !== null) return;  // called again when the run has ended
    if (getComputedStyle(main).getPropertyValue(layoutVar).trim() !== layout) { soon(); return; }  // style to come
    const [width, grow] = measure();
    if (width === used[0] && grow === used[1]) {
      // settled: what tests wait for (written only when new: a page-speed probe counts every DOM change)
      if (document.body.dataset.screen !== `${width}x${grow}`) document.body.dataset.screen = `${width}x${grow}`;
    } else if (sent !== `${width}x${grow}`) {
      sent = `${width}x${grow}`;
      delete document.body.dataset.screen;
      setStateValue("size", [width, grow]);
    }
  };
  const soon = () => { clearTimeout(timer); timer = setTimeout(report, settle); };
  const runs = new MutationObserver(() => {
    if (running()) { clearTimeout(asked); asked = null; } else soon();
  });
  if (app) runs.observe(app, { attributes: true, attributeFilter: ["data-test-script-state"] });
  const input = () => { clearTimeout(asked); asked = setTimeout(() => { asked = null; soon(); }, 1000); };
  let seen = `${content()}x${window.innerHeight}`;
  const later = () => {  // the column grows taller with every run: only a new width or window height counts
    const now = `${content()}x${window.innerHeight}`;
    if (now === seen) return;
    seen = now;
    delete document.body.dataset.screen;
    soon();
  };
  const resizes = new ResizeObserver(later);
  resizes.observe(main);
  window.addEventListener("resize", later);
  document.addEventListener("pointerdown", input, true);
  document.addEventListener("keydown", input, true);
  soon();
  const cleanup = () => {
    runs.disconnect(); resizes.disconnect(); window.removeEventListener("resize", later);
    document.removeEventListener("pointerdown", input, true); document.removeEventListener("keydown", input, true);
    clearTimeout(timer); clearTimeout(asked);
    if (window.__attentionLabScreen === cleanup) delete window.__attentionLabScreen;
  };
  window.__attentionLabScreen = cleanup;
  return cleanup;
}
"""
_CSS = "<style>.st-key-screen {display: none;}</style>"
_component = st.components.v2.component("attention_lab.screen", js=_JS)


@dataclass(frozen=True)
class Screen:
    width: int  # px of the main column that charts are sized for
    grow: float  # how much larger than at 1280×720 charts (cells, caps, chart text) may be


def _layout(present: bool) -> str:
    return "present" if present else "normal"


def layout_css(present: bool) -> str:
    """The style rule that names the layout (for the page's ``<style>``): the measurer waits for it."""
    return f'.stApp [data-testid="stMainBlockContainer"] {{{LAYOUT_VAR}: {_layout(present)};}}\n'


def _default(present: bool) -> Screen:
    return Screen(WIDTHS[1] if present else WIDTHS[0], 1.0)


def current(present: bool) -> Screen:
    """The screen this run draws for: the browser's last report, else the 1280×720 projector's."""
    state = st.session_state.get(KEY)  # the component's result: {"size": [width, grow %]} once reported
    size = state.get("size") if isinstance(state, dict) else None
    try:
        width, grow = int(size[0]), int(size[1])
    except (TypeError, ValueError, IndexError):
        return _default(present)
    if not (200 <= width <= 4000 and 100 <= grow <= 300):  # a value only our script writes; ignore anything else
        return _default(present)
    return Screen(width, grow / 100)


def measure(container, present: bool) -> None:
    """Mount the (hidden) measuring component in ``container``; call once per run, before anything is sized."""
    used = current(present)
    base = _default(present).width
    with container:
        st.html(_CSS)
        _component(key=KEY, data={"widths": list(WIDTHS), "base": base, "step": GROW_STEP, "height": BASE_HEIGHT,
                                  "used": [used.width, round(used.grow * 100)], "settle": SETTLE_MS,
                                  "layout": _layout(present), "layoutVar": LAYOUT_VAR},
                   on_size_change=lambda: None)
