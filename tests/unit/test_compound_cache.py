"""The compound lexicon's derived sets come from a per-user cache file when it matches, are recomputed when it
is missing, corrupt or cannot be written, and are always what the packaged data derives
(:func:`ki.adapters.search.compounds._derived`)."""

from __future__ import annotations

import platformdirs
import pytest

from ki.adapters.search import compounds


@pytest.fixture
def cache_home(tmp_path, monkeypatch):
    monkeypatch.setattr(platformdirs, "user_cache_dir", lambda *a, **k: str(tmp_path / "cache"))
    compounds._derived.cache_clear()
    yield tmp_path / "cache" / "lexicon"
    compounds._derived.cache_clear()


def test_the_cache_holds_what_the_data_derives_and_a_bad_file_is_recomputed(cache_home):
    expected = compounds._derive("de")
    assert compounds._derived("de") == expected  # computed, and written
    (written,) = cache_home.glob("de-*.marshal")
    compounds._derived.cache_clear()
    assert compounds._derived("de") == expected  # read back
    written.write_bytes(b"\x00not marshal")
    compounds._derived.cache_clear()
    assert compounds._derived("de") == expected  # corrupt: recomputed and rewritten
    assert compounds._derived.cache_info().currsize == 1 and written.read_bytes() != b"\x00not marshal"
    assert compounds.split_compound.__wrapped__("untermietvertrag") == ("unter", "miet", "vertrag")


def test_an_unwritable_cache_is_no_error(cache_home):
    cache_home.parent.mkdir(parents=True)
    cache_home.write_text("a file where the directory should be")
    assert compounds._derived("nl")[0] == compounds._derive("nl")[0]
    with pytest.raises(KeyError):
        compounds._derived("fr")
