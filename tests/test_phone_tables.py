"""Tables on a phone's 340 px main column (what dashboard/drawing/screen.py reports): a grid wider than the column
scrolled sideways inside itself, so there each page draws one its cells fit, every number the same as the
projector's. Browser check of the KV cache page: tests/test_browser_kv_table.py."""

from __future__ import annotations

import pytest
from langs import CHINESE, LANGS

from apptest_utils import md_tables, open_page, phone_page, shown_number, tile_tables


@pytest.mark.parametrize("lang", list(LANGS))
def test_tiled_tables_are_markdown_with_minus_infinity_on_a_projector_and_a_phone(lang):
    """Tiled attention's score and m / α / ℓ tables. The grid wrote "-Infinity" where the chapter writes −∞, its
    six-column running table scrolled sideways in the half column (Chinese, 1280x720) and on a phone its toolbar
    covered the score table's third column: both are Markdown tables now, the running one a column a query (one
    small table a query where that does not fit), the same numbers on both screens."""
    wide = open_page("app_pages/tiled.py", lang=lang)
    phone = phone_page("app_pages/tiled.py", lang=lang)
    for at in (wide, phone):
        assert [list(d.value.columns)[0] for d in at.dataframe] == ["d1"]  # the accumulator's grid (an expander)
        scores, running = tile_tables(at)
        assert list(scores.index) == list(running.index) == ["1: Your", "2: journey"]
        assert scores.iloc[0, 1] == "−∞" and list(running.iloc[:, 0]) == ["−∞", "−∞"]  # m before the first tile
        for query, row in running.iterrows():  # m after a row's first tile: its largest score, as shown
            assert row.iloc[1] == max(scores.loc[query], key=lambda v: shown_number(v)), (query, row)
        assert "Infinity" not in str(tile_tables(at))
    assert tile_tables(wide)[1].equals(tile_tables(phone)[1])
    for at in (wide, phone):  # three queries a tile: a column each fits the projector's half column, not a phone
        at.session_state["tile_block_q"] = 3
        at.run()
    assert len([t for t in md_tables(wide) if "α" in t]) == 1 and len([t for t in md_tables(phone) if "α" in t]) == 3
    assert tile_tables(wide)[1].equals(tile_tables(phone)[1]) and len(tile_tables(phone)[1]) == 3


@pytest.mark.parametrize("lang", list(LANGS))
def test_text_to_vectors_word_ids_one_word_a_row_on_a_phone_and_a_projector(lang):
    """The word / id tables, words along one row, scrolled ~560 px sideways on a phone and showed 7 of 16 words at
    1280x720: one word a row on both, the book's table beside the notes' (each word's two ids side by side)."""
    tables = {}
    for screen, at in (("projector", open_page("app_pages/text_to_vectors.py", lang=lang)),
                       ("phone", phone_page("app_pages/text_to_vectors.py", lang=lang))):
        tables[screen] = [d.value for d in at.dataframe if d.value.shape[1] == 2][:2]
        assert len(tables[screen]) == 2 and all(t.shape[0] > 2 for t in tables[screen]), (screen, tables[screen])
    for wide, narrow in zip(tables["projector"], tables["phone"]):
        assert wide.values.tolist() == narrow.values.tolist()


@pytest.mark.parametrize("page", ["app_pages/shape_flow.py", "app_pages/walkthrough.py"])
def test_code_blocks_wrap_on_a_phone(page):
    """Shape flow's and the walkthrough's code scrolled sideways on a phone (545 px of code in a 358 px box): every
    code block wraps its lines (the source of Shape flow's step too, once opened)."""
    at = phone_page(page, lang=CHINESE)
    if page.endswith("shape_flow.py"):
        at.session_state["flow_source"] = True  # the expander with the step's line in its whole source
        at.run()
    blocks = at.get("code")
    assert len(blocks) >= (3 if page.endswith("shape_flow.py") else 1)
    assert all(b.proto.wrap_lines for b in blocks), [b.proto.code_text[:40] for b in blocks if not b.proto.wrap_lines]


@pytest.mark.parametrize("lang", list(LANGS))
def test_bpe_side_by_side_is_one_small_table_an_example_on_a_phone(lang):
    """The counts and pieces tables of BPE side by side reached 91–179 px past a phone's screen, and the Chinese
    tokens-per-character grid scrolled sideways: on a phone each example is one two-column table (its counts, then
    its pieces) and each model one, every cell as the projector shows it."""
    query = dict(lang=lang, t2v_section="BPE side by side")
    wide = open_page("app_pages/text_to_vectors.py", **query)
    phone = phone_page("app_pages/text_to_vectors.py", **query)
    counts, pieces = [t for t in md_tables(wide) if len(next(iter(t.values()))) > 2][:2]
    shown = {}
    for table in md_tables(phone):
        header = list(next(iter(table.values())))
        assert len(header) == 2, header
        shown[header[1]] = {row: cells[header[1]] for row, cells in table.items()}
    assert len(counts) >= 3
    for example, row in counts.items():  # the phone shows the default model's columns only, beside GPT-2's
        both = {**row, **pieces[example]}
        assert shown[example].items() <= both.items() and len(shown[example]) >= 7, (example, shown[example])
    assert all(d.value.shape[1] <= 2 for d in phone.dataframe if d.value.shape[0] > 1)  # no wide grid left
