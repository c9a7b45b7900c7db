"""Tables on a phone's 340 px main column (what dashboard/drawing/screen.py reports): a grid wider than the column
scrolled sideways inside itself, so there each page draws one its cells fit, every number the same as the
projector's. Browser check of the KV cache page: tests/test_browser_kv_table.py."""

from __future__ import annotations

import math

import pytest

from apptest_utils import md_tables, open_page, phone_page


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_tiled_running_max_and_sum_one_small_table_a_query_on_a_phone(lang):
    """Tiled attention's m / α / ℓ table, six columns, scrolled sideways inside its grid on a phone."""
    wide = open_page("app_pages/tiled.py", lang=lang)
    running = next(d.value for d in wide.dataframe if "α" in d.value.columns)
    phone = phone_page("app_pages/tiled.py", lang=lang)
    assert not [d for d in phone.dataframe if "α" in d.value.columns]
    shown = {}
    for table in md_tables(phone):
        if "α" in table:  # a query's table: its rows are the projector's columns
            query = next(k for k in table["α"] if k != running.index.name)
            shown[query] = {row: cells[query] for row, cells in table.items() if row != running.index.name}
    assert list(shown) == list(running.index) and shown
    for query, row in running.iterrows():
        assert shown[query] == {c: "−∞" if v == -math.inf else f"{v:.4f}" for c, v in row.items()}, query
    assert any("−∞" in row.values() for row in shown.values())  # m before a row's first tile, as the chapter writes it


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_text_to_vectors_word_ids_one_word_a_row_on_a_phone(lang):
    """The word / id tables, words along one row on a projector, scrolled ~560 px sideways on a phone."""
    wide = open_page("app_pages/text_to_vectors.py", lang=lang)
    strips = [d.value for d in wide.dataframe if d.value.shape[0] == 2][:2]
    phone = phone_page("app_pages/text_to_vectors.py", lang=lang)
    columns = [d.value for d in phone.dataframe if d.value.shape[1] == 2][:2]
    assert len(strips) == len(columns) == 2
    for strip, column in zip(strips, columns):
        assert column.shape[0] > 2 and column.values.tolist() == strip.T.values.tolist()
