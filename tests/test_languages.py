"""A language is its catalog folder: the catalogs extract without a warning, and everything the app knows about a
language (its name, browser locales, export fonts, sample text, punctuation) is read from the data beside its
catalog."""

from __future__ import annotations

import io
import logging
import os
from contextlib import redirect_stderr

import pytest
from pseudo_language import CODE, DATA_TEXT, generate

from dashboard import i18n, i18n_tools, languages
from dashboard.languages import DATA, LOCALE_ENV


def test_extraction_prints_no_warning():
    """Babel skips a marked call with an f-string among its arguments (its string is then never translated):
    every value is formatted before the call or with ``format()``."""
    err = io.StringIO()
    with redirect_stderr(err):
        cat = i18n_tools.extracted()
    warned = [line for line in err.getvalue().splitlines()
              if "warning" in line]
    assert len(cat) > 100 and warned == [], "\n".join(warned)


@pytest.fixture
def pseudo_dir(tmp_path, monkeypatch):
    """A copy of the locale folder with the generated language ``xx`` in it, the app pointed at it."""
    folder = generate(tmp_path / "locale")
    monkeypatch.setenv(LOCALE_ENV, str(folder))
    return folder


def test_a_language_is_a_folder_with_a_catalog_and_its_data(pseudo_dir):
    (pseudo_dir / "yy").mkdir()
    (pseudo_dir / "yy" / DATA).write_text(DATA_TEXT.replace(CODE, "yy"), encoding="utf-8")  # no catalog yet
    assert list(languages.languages()) == [languages.SOURCE, *sorted({"xx", "zh"})]
    assert "yy" in languages.declared()  # the catalog tools make its .po
    assert dict(i18n.LANGS)["xx"] == "⟦Pseudo⟧"
    assert i18n.from_locale("XX-yy") == "xx" and i18n.from_locale("zh_TW") == "zh" and i18n.from_locale("de") == "en"
    with i18n.language("xx"):
        assert i18n._("{n} values in the link could not be used:", n=3) == "⟦3 values in the link could not be used:⟧"
        assert i18n.sentences("A.", "B.") == "A. B." and not i18n.writes_cjk()  # the data's defaults


def test_a_data_file_with_an_unknown_key_is_an_error(tmp_path):
    (tmp_path / DATA).write_text(DATA_TEXT + 'fonts = ["x"]\n', encoding="utf-8")
    with pytest.raises(TypeError):
        languages._read(tmp_path / DATA)


def test_a_missing_or_older_mo_is_compiled_once_and_written(pseudo_dir, caplog):
    xx = languages.declared()["xx"]
    assert not xx.mo.exists()
    with caplog.at_level(logging.WARNING, logger="dashboard.i18n"):
        assert i18n.catalog("xx").gettext("Masking method") == "⟦Masking method⟧"
    assert xx.mo.exists() and i18n.fresh(xx) and [r for r in caplog.records if "compiled" in r.getMessage()]
    os.utime(xx.mo, ns=(xx.po.stat().st_mtime_ns - 10**9,) * 2)  # the .po edited after it was compiled
    assert not i18n.fresh(xx)
    assert i18n_tools.main(["compile"]) == 0 and i18n.fresh(xx)  # what the README's set-up commands run
