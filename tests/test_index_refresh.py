"""Whoever writes the rows pays for the index: a bulk ingest leaves the saved copies
current.

``flush()`` after ``add_events`` of at least ``index_cache_min_rows`` rows starts a
rebuild and save of both indexes on a thread and returns at once; ``close()`` waits
for it.  The next process loads the copies (a clean close recorded that they hold
every row: no hashing either) and answers as a rebuilt index would.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_index_cache import _no_hashing, answers, counts, fill, hold_save, open_mem
from test_index_cache import settled as settled  # the fixture: fresh file times trusted

from nbmemory.retrieval.index_cache import SUFFIX

pytestmark = pytest.mark.slow


def test_the_next_process_after_a_bulk_ingest_loads_both_copies_without_hashing(
    store_path, settled, monkeypatch
):
    with open_mem(store_path) as mem:
        fill(mem, 200)  # add_events + flush; no search in this process
    folder = Path(store_path + SUFFIX)
    assert (folder / "keywords.npz").is_file() and len(list(folder.glob("vectors-*.npy"))) == 1
    with open_mem(store_path, index_cache=False) as mem:
        expected = answers(mem)  # what a rebuilt index answers
    _no_hashing(monkeypatch)
    with open_mem(store_path) as mem:
        assert answers(mem) == expected
        assert counts(mem) == {
            "keyword loads": 1,
            "keyword rebuilds": 0,
            "vector loads": 1,
            "vector rebuilds": 0,
        }


def test_flush_returns_while_the_copies_are_written_and_close_waits_for_them(
    store_path, monkeypatch
):
    release = hold_save(monkeypatch, "save_keywords", "flush")
    mem = open_mem(store_path)
    try:
        fill(mem, 200)  # returned: the keyword copy is held back
        assert not release.is_set() and mem.indexes.cache is not None
        assert not (Path(store_path + SUFFIX) / "keywords.npz").exists()
        release.set()
    finally:
        mem.close()  # waits for the refresh and its saves
    assert (Path(store_path + SUFFIX) / "keywords.npz").is_file()


def test_a_flush_after_every_batch_rebuilds_only_when_the_store_has_doubled(store_path):
    with open_mem(store_path) as mem:
        cache = mem.indexes.cache
        assert cache is not None
        saved = []
        for _ in range(6):  # 60 rows a batch, flushed: 60, 120, 180, 240, 300, 360 rows
            fill(mem, 60)
            mem.indexes.wait_for_saves()
            saved.append(cache.saves)
    # both copies saved at 60 (>= 50), 120 (60 added since, >= 60), 240 (>= 120); not at
    # 180 (60 < 120), 300 or 360 (< 240): three rebuilds, not six
    assert saved == [2, 4, 4, 6, 6, 6]


def test_an_index_searched_before_the_ingest_is_rebuilt_and_saved_after_it(
    store_path, settled, monkeypatch
):
    with open_mem(store_path) as mem:
        fill(mem, 100)
        answers(mem)  # live indexes: they follow the rows added next, one by one
        loaded = counts(mem)
        fill(mem, 300, seed=1, session="t")
        mem.indexes.wait_for_saves()
        # the bulk rows they followed are far more than a load would add one by one
        assert counts(mem)["keyword rebuilds"] == loaded["keyword rebuilds"] + 1
        assert counts(mem)["vector rebuilds"] == loaded["vector rebuilds"] + 1
        expected = answers(mem)
    _no_hashing(monkeypatch)
    with open_mem(store_path) as mem:
        assert answers(mem) == expected
        assert counts(mem)["keyword rebuilds"] == 0 and counts(mem)["vector rebuilds"] == 0


def test_a_shared_store_is_not_refreshed_by_one_of_its_writers(store_path):
    with open_mem(store_path, shared=True) as mem:
        fill(mem, 200)
        mem.indexes.wait_for_saves()
        assert mem.indexes.cache is None or mem.indexes.cache.saves == 0
