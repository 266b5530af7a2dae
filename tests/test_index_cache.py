"""Saved indexes (``<store>.nbmemory-index/``): a new process loads them instead of
rebuilding, answers exactly as a rebuilt index would, and never uses a copy the
table no longer matches (another process, a foreign write, a deletion)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest

from nbmemory import Memory
from nbmemory.retrieval.index_cache import SUFFIX, IndexCache
from nbmemory.retrieval.keywords import KeywordIndex

#: Stores of hundreds of rows opened again and again, other processes writing to them.
pytestmark = pytest.mark.slow

WORDS = [
    "lake",
    "boat",
    "greyhound",
    "comet",
    "budget",
    "painting",
    "sunrise",
    "tram",
    "fado",
    "alfama",
    "porto",
    "sister",
]


def fill(mem: Memory, n: int, seed: int = 0, session: str = "s") -> list[str]:
    rng = np.random.default_rng(seed)
    rows = [
        {
            "session_id": f"{session}{i % 5}",
            "role": "user" if i % 2 else "assistant",
            "content": ("Caroline: " if i % 3 == 0 else "Melanie: ")
            + " ".join(rng.choice(WORDS, size=6))
            + (" last May" if i % 7 == 0 else ""),
        }
        for i in range(n)
    ]
    ids = mem.add_events(rows)
    mem.flush()
    return ids


def open_mem(path: str, **kwargs) -> Memory:
    return Memory(path, embedder="hash", index_cache_min_rows=50, **kwargs)


QUERIES = ["greyhound comet", "When did Caroline paint the sunrise?", "tram to alfama", "budget"]


def answers(mem: Memory) -> list[list[tuple[str, float]]]:
    out = []
    for query in QUERIES:
        for mode in ("keyword", "vector", "hybrid"):
            hits = mem.search(query, mode=mode, limit=10)
            out.append(list(zip(hits["id"], hits["score"].round(9), strict=True)))
    return out


def counts(mem: Memory) -> dict[str, int]:
    keywords = mem.indexes.keywords()
    vectors = mem.indexes.vectors(mem.model_name)
    return {
        "keyword loads": keywords.loads,
        "keyword rebuilds": keywords.rebuilds,
        "vector loads": vectors.loads,
        "vector rebuilds": vectors.rebuilds,
    }


@pytest.fixture
def saved(store_path: str) -> str:
    """A store of 200 events whose indexes were built and saved."""
    with open_mem(store_path) as mem:
        fill(mem, 200)
        mem.search("lake", mode="hybrid")
        mem.indexes.wait_for_saves()  # the copies are written off the query path
        assert mem.indexes.cache is not None and mem.indexes.cache.saves == 2
    return store_path


def test_a_new_memory_loads_the_saved_indexes_and_answers_as_a_rebuilt_one(saved):
    folder = Path(saved + SUFFIX)
    assert (folder / "keywords.npz").is_file() and len(list(folder.glob("vectors-*.npy"))) == 1
    with open_mem(saved) as mem:
        cached = answers(mem)
        assert counts(mem) == {
            "keyword loads": 1,
            "keyword rebuilds": 0,
            "vector loads": 1,
            "vector rebuilds": 0,
        }
    with open_mem(saved, index_cache=False) as mem:
        assert mem.indexes.cache is None
        assert answers(mem) == cached
        assert counts(mem)["keyword rebuilds"] == 1


def test_rows_added_since_are_read_from_the_table(saved, monkeypatch):
    from nbmemory.store.vectors import EventVectors

    with open_mem(saved, index_cache=False) as mem:  # another writer, keeping no copies
        added = fill(mem, 10, seed=1, session="t")
        last = mem.add_event("t0", "user", "an unmistakable zeppelin").id
        expected = answers(mem)

    def by_ids(*args, **kwargs):  # reads the block of every vector: 1.4 GB more RSS at 1M
        raise AssertionError("the new vectors were looked up by id")

    monkeypatch.setattr(EventVectors, "rows_of", by_ids)  # they are all after the saved ones
    with open_mem(saved) as mem:
        assert answers(mem) == expected
        assert mem.search("zeppelin", mode="keyword")["id"].tolist() == [last]
        assert counts(mem)["keyword loads"] == 1 and counts(mem)["vector loads"] == 1
        # and the catch-up keeps following: neighbours of a new turn are its session's
        keywords = mem.indexes.keywords()
        assert keywords.neighbours(added[5]) == (added[0], last)
        assert keywords.neighbours(last) == (added[5], None)


def _foreign(path: str, sql: str) -> None:
    """Write to the store file as another program would: a separate process, plain DuckDB."""
    code = "import duckdb, sys; con = duckdb.connect(sys.argv[1]); con.execute(sys.argv[2]); con.close()"
    subprocess.run([sys.executable, "-c", code, path, sql], check=True)


@pytest.mark.parametrize("prepared", ["saved", "checked"])
def test_a_text_changed_by_another_program_is_never_answered_from_the_copy(prepared, request):
    """Whether the copies were just saved or an open since recorded them checked."""
    saved = request.getfixturevalue(prepared)
    with open_mem(saved) as mem:
        target = mem.search("greyhound", mode="keyword", limit=1)["id"].iloc[0]
    _foreign(saved, f"UPDATE events SET content = 'a poodle now' WHERE id = '{target}'")
    with open_mem(saved) as mem:
        assert mem.search("poodle", mode="keyword")["id"].tolist() == [target]
        assert target not in mem.search("greyhound", mode="keyword", limit=500)["id"].tolist()
        assert counts(mem)["keyword loads"] == 0 and counts(mem)["keyword rebuilds"] == 1


def test_a_vector_changed_by_another_program_is_never_answered_from_the_copy(saved):
    with open_mem(saved) as mem:
        target = mem.search("budget", mode="vector", limit=1)["id"].iloc[0]
        query = mem.embedder.embed(["a question nobody stored"])[0]
        before = mem.retriever.vector_search(query, "default", limit=1)["id"].iloc[0]
    assert before != target
    vector = ", ".join(repr(float(x)) for x in query)
    _foreign(saved, f"UPDATE event_vectors SET embedding = [{vector}] WHERE id = '{target}'")
    with open_mem(saved) as mem:
        hits = mem.retriever.vector_search(query, "default", limit=1)
        assert hits["id"].iloc[0] == target  # the new vector, not the saved one
        assert counts(mem)["vector loads"] == 0 and counts(mem)["vector rebuilds"] == 1


def test_a_row_deleted_by_another_program_is_never_answered_from_the_copy(saved):
    with open_mem(saved) as mem:
        target = mem.search("tram", mode="keyword", limit=1)["id"].iloc[0]
    _foreign(saved, f"DELETE FROM event_vectors WHERE id = '{target}'")
    _foreign(saved, f"DELETE FROM events WHERE id = '{target}'")
    with open_mem(saved) as mem:
        for mode in ("keyword", "vector", "hybrid"):
            assert target not in mem.search("tram", mode=mode, limit=500)["id"].tolist()
        assert counts(mem)["keyword loads"] == 0 and counts(mem)["vector loads"] == 0


def test_deleting_through_the_api_removes_the_copies_at_once(saved):
    folder = Path(saved + SUFFIX)
    with open_mem(saved) as mem:
        target = mem.search("sister", mode="keyword", limit=1)["id"].iloc[0]
        mem.delete(target)
        # the forgotten text's terms and vector are not left on disk in a copy
        assert not list(folder.glob("*.np[yz]"))
        assert not (folder / "checked.json").exists()
    with open_mem(saved) as mem:
        assert target not in mem.search("sister", mode="hybrid", limit=500)["id"].tolist()
        assert counts(mem)["keyword rebuilds"] == 1
    assert (folder / "keywords.npz").is_file()  # saved again after the rebuild


def test_a_damaged_or_foreign_copy_is_ignored_and_left_alone(saved):
    folder = Path(saved + SUFFIX)
    (folder / "keywords.npz").write_bytes(b"not an index at all")
    with open_mem(saved) as mem:
        assert counts(mem)["keyword loads"] == 0 and counts(mem)["keyword rebuilds"] == 1
        assert len(mem.search("lake", mode="keyword")) > 0
    assert (folder / "keywords.npz").read_bytes() == b"not an index at all"  # not ours: kept


def test_a_copy_of_a_newer_format_is_neither_used_nor_overwritten(saved):
    path = Path(saved + SUFFIX) / "keywords.npz"
    with np.load(path) as saved_arrays:
        arrays = dict(saved_arrays)
    header = json.loads(arrays["header"].tobytes())
    header["format"] = 99
    arrays["header"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    np.savez(path, **arrays)
    stamp = path.stat().st_mtime_ns
    with open_mem(saved) as mem:
        assert counts(mem)["keyword loads"] == 0
    assert path.stat().st_mtime_ns == stamp


def test_a_read_only_open_uses_the_copies_and_writes_none(saved):
    folder = Path(saved + SUFFIX)
    with open_mem(saved, index_cache=False) as mem:
        fill(mem, 200, seed=2, session="u")  # more than the tail read row by row
    before = sorted(p.name for p in folder.iterdir())
    with open_mem(saved, read_only=True) as mem:
        assert len(mem.search("lake", mode="hybrid")) > 0
        assert counts(mem)["keyword rebuilds"] == 1  # the copy is too far behind: rebuilt
    assert sorted(p.name for p in folder.iterdir()) == before


def test_small_stores_and_stores_in_memory_save_nothing(store_path):
    with Memory(store_path, embedder="hash") as mem:  # default: from 20,000 rows
        fill(mem, 30)
        mem.search("lake", mode="hybrid")
    assert not Path(store_path + SUFFIX).exists()
    with Memory(":memory:", embedder="hash", index_cache_min_rows=1) as mem:
        assert mem.indexes.cache is None


def test_a_folder_in_the_way_is_not_written(tmp_path):
    store = tmp_path / "m.duckdb"
    Path(str(store) + SUFFIX).write_text("someone's file")
    cache = IndexCache(str(store), min_rows=1)
    cache.save_keywords({"x": np.zeros(1)}, np.zeros(3, dtype=np.uint64))
    assert Path(str(store) + SUFFIX).read_text() == "someone's file"


def test_the_keyword_index_saved_and_loaded_is_the_same_index():
    rng = np.random.default_rng(4)
    index = KeywordIndex()
    index.rebuild(
        [
            (f"e{i}", "ns" if i % 4 else "other", f"s{i % 6}", text, i, i)
            for i, text in enumerate(
                ("Caroline: " if i % 2 else "Mel Smith: ")
                + " ".join(rng.choice(WORDS, size=5))
                + (" yesterday" if i % 5 == 0 else "")
                for i in range(400)
            )
        ]
    )
    index.add(
        [(f"n{i}", "ns", "s1", "the greyhound at the lake", 1000 + i, 1000 + i) for i in range(9)]
    )
    index.remove([f"e{i}" for i in range(0, 400, 3)])
    loaded = KeywordIndex()
    loaded.load_arrays(index.to_arrays())
    for query in ["greyhound lake", "Caroline sunrise", "When did Mel Smith paint?", "porto"]:
        for namespace in ("ns", "other", None):
            assert loaded.scores(query, namespace) == pytest.approx(index.scores(query, namespace))
        assert loaded.speakers_named(query, "ns") == index.speakers_named(query, "ns")
    for event_id in ["e1", "e200", "n0", "n8", "e398"]:
        assert loaded.neighbours(event_id) == index.neighbours(event_id)
        assert loaded.speaker(event_id) == index.speaker(event_id)
        assert loaded.mentions_time(event_id) == index.mentions_time(event_id)
    assert len(loaded) == len(index)


def test_a_keyword_copy_saved_under_other_text_rules_is_not_loaded(tmp_path, monkeypatch):
    """What the index reads from a text (times, speakers) is saved with it: a copy
    written under older rules ("Last Fri" not a time then) is rebuilt, not trusted."""
    from nbmemory.retrieval import index_cache

    cache = IndexCache(str(tmp_path / "m.duckdb"), min_rows=1)
    index = KeywordIndex()
    index.rebuild([("e0", "ns", "s", "Last Fri we hiked", 0, 0)])
    monkeypatch.setattr(index_cache, "FACTS_VERSION", index_cache.FACTS_VERSION - 1)
    assert cache.save_keywords(index.to_arrays(), np.zeros(1, dtype=np.uint64))
    assert cache.load_keywords() is not None  # read by the rules it was written under
    monkeypatch.undo()
    assert cache.load_keywords() is None


def test_a_vector_index_over_half_the_memory_says_so_once(store_path, monkeypatch):
    from nbmemory.errors import LargeStoreWarning
    from nbmemory.retrieval import indexes

    with open_mem(store_path) as mem:
        fill(mem, 60)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            mem.search("lake", mode="vector")
        assert not [w for w in caught if w.category is LargeStoreWarning]
        # a machine with 60 vectors' worth of RAM: the same index is now too large
        monkeypatch.setattr(indexes, "physical_memory", lambda: 60 * 384 * 4)
        mem.indexes.invalidate()
        with pytest.warns(LargeStoreWarning, match="60 memories need .* split the memories"):
            mem.search("lake", mode="vector")
        mem.indexes.invalidate()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert len(mem.search("lake", mode="vector")) > 0  # still answers, warned once
        assert not [w for w in caught if w.category is LargeStoreWarning]


def test_a_damaged_copy_of_ours_is_not_used_and_is_replaced(saved):
    path = Path(saved + SUFFIX) / "keywords.npz"
    data = bytearray(path.read_bytes())
    data[len(data) // 3] ^= 0xFF  # one flipped byte inside the postings
    path.write_bytes(bytes(data))
    with open_mem(saved) as mem:
        assert counts(mem)["keyword loads"] == 0 and counts(mem)["keyword rebuilds"] == 1
        expected = answers(mem)
    with open_mem(saved) as mem:  # the rebuild saved a sound copy in its place
        assert counts(mem)["keyword loads"] == 1
        assert answers(mem) == expected


@pytest.mark.parametrize("damage", ["compressed", "cut short", "a member's shape too long"])
def test_a_copy_that_cannot_be_mapped_as_saved_is_not_used(saved, damage):
    """Saved copies are mapped from the file, not read: a member that is compressed, a
    file cut short, or a member whose header claims more than it holds is never
    mapped, and the index is built from the table instead."""
    path = Path(saved + SUFFIX) / "keywords.npz"
    with open_mem(saved, index_cache=False) as mem:
        expected = answers(mem)
    if damage == "compressed":
        with np.load(path) as saved_arrays:
            np.savez_compressed(path, **dict(saved_arrays))
    elif damage == "cut short":
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    else:  # a sound zip (right CRC) whose postings claim a billion entries
        with zipfile.ZipFile(path) as archive:
            members = {info.filename: archive.read(info) for info in archive.infolist()}
        header = io.BytesIO()
        np.lib.format.write_array_header_1_0(
            header, {"descr": "<i4", "fortran_order": False, "shape": (10**9,)}
        )
        members["post_docs.npy"] = header.getvalue() + b"\0" * 64
        with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
            for name, content in members.items():
                archive.writestr(name, content)
    with open_mem(saved) as mem:
        assert counts(mem)["keyword loads"] == 0 and counts(mem)["keyword rebuilds"] == 1
        assert answers(mem) == expected


def test_a_copy_of_an_older_format_is_rebuilt_and_replaced(saved):
    """A copy from before the stemmer changed holds other terms: never read, rewritten."""
    from nbmemory.retrieval.index_cache import FORMAT

    path = Path(saved + SUFFIX) / "keywords.npz"
    with np.load(path) as saved_arrays:
        arrays = dict(saved_arrays)
    header = json.loads(arrays["header"].tobytes())
    header["format"] = FORMAT - 1
    arrays["header"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    np.savez(path, **arrays)
    with open_mem(saved) as mem:
        assert len(mem.search("lake", mode="keyword")) > 0
        assert counts(mem)["keyword loads"] == 0 and counts(mem)["keyword rebuilds"] == 1
    with np.load(path) as rewritten:
        assert json.loads(rewritten["header"].tobytes())["format"] == FORMAT


# -- the record of a check ----------------------------------------------------------------
def _no_hashing(monkeypatch) -> None:
    """Make hashing the table's rows fail: an open that still needs it shows at once."""
    from nbmemory.store.events import EventsTable
    from nbmemory.store.vectors import EventVectors

    def refuse(*args, **kwargs):
        raise AssertionError("the rows were hashed")

    monkeypatch.setattr(EventVectors, "hashes", refuse)
    monkeypatch.setattr(EventsTable, "text_hashes", refuse)


@pytest.fixture
def checked(saved: str, monkeypatch) -> str:
    """A saved store opened once more: that open hashed the rows, found the copies
    matching and recorded it.  File times here are fresh, so the settling margin is
    lifted (its own test sets the record's time by hand)."""
    from nbmemory.retrieval import index_cache

    monkeypatch.setattr(index_cache, "SETTLE_NS", 0)
    with open_mem(saved) as mem:
        answers(mem)
    assert (Path(saved + SUFFIX) / "checked.json").is_file()
    return saved


def test_an_unchanged_store_loads_its_copies_without_hashing_its_rows(checked, monkeypatch):
    with open_mem(checked, index_cache=False) as mem:
        expected = answers(mem)
    _no_hashing(monkeypatch)
    with open_mem(checked) as mem:
        assert answers(mem) == expected
        assert counts(mem) == {
            "keyword loads": 1,
            "keyword rebuilds": 0,
            "vector loads": 1,
            "vector rebuilds": 0,
        }


def test_a_vector_changed_in_place_after_a_recorded_check_is_never_answered_from_the_copy(
    checked,
):
    with open_mem(checked) as mem:
        target = mem.search("budget", mode="vector", limit=1)["id"].iloc[0]
        query = mem.embedder.embed(["a question nobody stored"])[0]
    vector = ", ".join(repr(float(x)) for x in query)
    _foreign(checked, f"UPDATE event_vectors SET embedding = [{vector}] WHERE id = '{target}'")
    # even a record that looks made after the write: the file's state is not the one checked
    later = os.stat(checked).st_ctime_ns + 10**9
    os.utime(Path(checked + SUFFIX) / "checked.json", ns=(later, later))
    with open_mem(checked) as mem:
        assert mem.retriever.vector_search(query, "default", limit=1)["id"].iloc[0] == target
        assert counts(mem)["vector loads"] == 0 and counts(mem)["vector rebuilds"] == 1


def test_a_write_cut_short_by_a_kill_is_never_answered_from_the_copy(checked):
    """Another program commits a vector and is killed before it checkpoints: the
    change is only in the write-ahead log, so the file alone is not the store."""
    from child_process import expect, spawn

    with open_mem(checked) as mem:
        target = mem.search("budget", mode="vector", limit=1)["id"].iloc[0]
        query = mem.embedder.embed(["a question nobody stored"])[0]
    vector = ", ".join(repr(float(x)) for x in query)
    child = spawn(
        """
        import sys, duckdb
        con = duckdb.connect(sys.argv[1])
        con.execute(sys.argv[2])
        print("committed", flush=True)
        sys.stdin.read()
        """,
        checked,
        f"UPDATE event_vectors SET embedding = [{vector}] WHERE id = '{target}'",
    )
    expect(child, "committed")
    child.kill()
    child.wait()
    assert IndexCache(checked).store_state() is None  # the log is there
    with open_mem(checked) as mem:
        assert mem.retriever.vector_search(query, "default", limit=1)["id"].iloc[0] == target
        assert counts(mem)["vector loads"] == 0


def test_a_check_recorded_within_the_margin_of_a_copys_change_is_done_again(saved, monkeypatch):
    """File times are coarse: a write in the same tick as the record would not show, so
    a record less than SETTLE_NS after a saved copy last changed is not trusted.  (The
    store file needs no margin: every write DuckDB makes to it rewrites a database
    header, which the record holds a digest of.)"""
    from nbmemory.retrieval.index_cache import SETTLE_NS

    with open_mem(saved) as mem:
        answers(mem)
    record = Path(saved + SUFFIX) / "checked.json"
    copies = [os.stat(p) for p in Path(saved + SUFFIX).glob("*.np[yz]")]
    # The copies may be saved in different clock ticks: within the margin of the first
    # one's change is within the margin of every one's; past the last one's, past all.
    first = min(min(st.st_mtime_ns, st.st_ctime_ns) for st in copies)
    changed = max(max(st.st_mtime_ns, st.st_ctime_ns) for st in copies)
    os.utime(record, ns=(first + SETTLE_NS - 1, first + SETTLE_NS - 1))
    # the first index checked records its check anew, and a record written now may be
    # past the margin (a slow run): the second index is held to the doctored record
    with monkeypatch.context() as patch:
        patch.setattr(IndexCache, "mark_checked", lambda *args, **kwargs: None)
        with open_mem(saved) as mem:
            counts(mem)
            assert mem.indexes.cache.trusted == 0  # the rows were hashed
    os.utime(record, ns=(changed + SETTLE_NS, changed + SETTLE_NS))
    _no_hashing(monkeypatch)
    with open_mem(saved) as mem:
        assert counts(mem)["vector loads"] == 1 and counts(mem)["keyword loads"] == 1
        assert mem.indexes.cache.trusted == 2


def test_every_checkpoint_changes_the_store_state_and_a_read_does_not(saved):
    cache = IndexCache(saved)
    before = cache.store_state()
    with open_mem(saved, read_only=True) as mem:
        answers(mem)
    assert cache.store_state() == before
    _foreign(saved, "UPDATE events SET importance = importance / 2")  # checkpointed at close
    after = cache.store_state()
    assert after is not None and before is not None
    assert after[5] != before[5]  # the database headers


# -- the record of a clean close ----------------------------------------------------------
@pytest.fixture
def settled(monkeypatch):
    """File times here are fresh: the settling margin of the saved copies is lifted."""
    from nbmemory.retrieval import index_cache

    monkeypatch.setattr(index_cache, "SETTLE_NS", 0)


def test_rows_added_then_closed_cleanly_are_read_after_the_copies_without_hashing(
    saved, settled, monkeypatch
):
    with open_mem(saved) as mem:
        answers(mem)  # both copies loaded: this process writes on top of them
        added = fill(mem, 10, seed=1, session="t")
        last = mem.add_event("t0", "user", "an unmistakable zeppelin").id
        mem.flush()
        expected = answers(mem)
    record = json.loads((Path(saved + SUFFIX) / "checked.json").read_text())
    assert record["tails"]["keywords"] == {"rows": 211}
    assert record["tails"][f"vectors/{mem.model_name}"]["rows"] == 211
    with open_mem(saved, index_cache=False) as mem:
        assert answers(mem) == expected  # what a rebuilt index answers
    _no_hashing(monkeypatch)
    with open_mem(saved) as mem:
        assert answers(mem) == expected
        assert mem.search("zeppelin", mode="keyword")["id"].tolist() == [last]
        assert counts(mem) == {
            "keyword loads": 1,
            "keyword rebuilds": 0,
            "vector loads": 1,
            "vector rebuilds": 0,
        }
        keywords = mem.indexes.keywords()
        assert keywords.neighbours(added[5]) == (added[0], last)
        more = mem.add_event("t0", "user", "and a second zeppelin").id
        mem.flush()
        expected = answers(mem)
    with open_mem(saved) as mem:  # again, from this process's close
        assert answers(mem) == expected
        assert set(mem.search("zeppelin", mode="keyword")["id"]) == {last, more}


@pytest.mark.parametrize(
    "tail",
    [
        {"rows": "211"},
        {"rows": 10**9, "from": 0},
        {"rows": 211},
        {"rows": 5},
        "all",
        {"rows": None},
    ],
)
def test_a_record_whose_tails_are_damaged_is_not_trusted_for_them(saved, settled, tail):
    with open_mem(saved) as mem:
        answers(mem)
        fill(mem, 10, seed=1, session="t")
        expected = answers(mem)
    path = Path(saved + SUFFIX) / "checked.json"
    record = json.loads(path.read_text())
    record["tails"] = {key: tail for key in record["tails"]}
    path.write_text(json.dumps(record))
    with open_mem(saved) as mem:
        assert answers(mem) == expected
        assert counts(mem)["vector loads"] + counts(mem)["vector rebuilds"] == 1


def test_a_row_dated_before_the_copys_last_is_not_left_out(saved, settled):
    with open_mem(saved) as mem:
        answers(mem)
        mem.add_event("old", "user", "an unmistakable zeppelin", created_at="2001-01-01")
        expected = answers(mem)
    record = json.loads((Path(saved + SUFFIX) / "checked.json").read_text())
    assert "keywords" not in record.get("tails", {})  # it sorts among the copy's rows
    with open_mem(saved) as mem:
        assert answers(mem) == expected
        assert len(mem.search("zeppelin", mode="keyword")) == 1


def test_a_foreign_write_after_a_clean_close_is_never_answered_from_the_copy(saved, settled):
    with open_mem(saved) as mem:
        answers(mem)
        event = mem.add_event("t", "user", "an unmistakable zeppelin").id
    _foreign(saved, f"UPDATE events SET content = 'a quiet harbour' WHERE id = '{event}'")
    record = Path(saved + SUFFIX) / "checked.json"
    later = os.stat(saved).st_ctime_ns + 10**9  # even a record that looks made after it
    os.utime(record, ns=(later, later))
    with open_mem(saved) as mem:
        assert mem.search("zeppelin", mode="keyword").empty
        assert mem.search("harbour", mode="keyword")["id"].tolist() == [event]


def test_a_close_while_another_memory_has_the_file_open_records_nothing(saved, settled):
    record = Path(saved + SUFFIX) / "checked.json"
    first, second = open_mem(saved), open_mem(saved)
    try:
        answers(first)
        first.add_event("t", "user", "an unmistakable zeppelin")
        record.unlink(missing_ok=True)
        first.close()
        assert not record.exists()  # the second one may still write
        second.add_event("t", "user", "a second zeppelin")
        answers(second)
    finally:
        first.close()
        second.close()
    assert json.loads(record.read_text())["tails"]  # the last one out records
    with open_mem(saved) as mem:
        assert len(mem.search("zeppelin", mode="keyword")) == 2


def test_a_read_only_open_records_no_check_and_a_foreign_record_is_left_alone(saved):
    record = Path(saved + SUFFIX) / "checked.json"
    record.unlink()  # the one the writer's clean close made
    with open_mem(saved, read_only=True) as mem:
        answers(mem)
    assert not record.exists()
    record.write_text('{"store": "someone else\'s"}')
    with open_mem(saved) as mem:
        answers(mem)
        assert counts(mem)["vector loads"] == 1
    assert record.read_text() == '{"store": "someone else\'s"}'
    # ours by its header, but damaged: neither trusted nor a reason to fail
    state = list(IndexCache(saved).store_state() or ())
    record.write_text(json.dumps({"magic": "nbmemory-index", "format": 2, "kind": "checked",
                                  "store": state, "files": "?"}))  # fmt: skip
    with open_mem(saved) as mem:
        answers(mem)
        assert mem.indexes.cache is not None and mem.indexes.cache.trusted == 0


def test_a_session_in_vector_mode_keeps_the_record_of_the_keyword_copy(
    checked, settled, monkeypatch
):
    """A clean close records only the indexes its process loaded; what the record said
    of the others still holds when nothing they hold changed, and is kept."""
    with open_mem(checked) as mem:
        mem.search("greyhound comet", mode="vector")  # the keyword copy is never loaded
        mem.start_session("t-later")  # a write, but not to what the indexes hold
    record = json.loads((Path(checked + SUFFIX) / "checked.json").read_text())
    assert "keywords.npz" in record["files"]
    with open_mem(checked, index_cache=False) as mem:
        expected = answers(mem)
    _no_hashing(monkeypatch)
    with open_mem(checked) as mem:
        assert answers(mem) == expected
        assert counts(mem)["keyword loads"] == 1 and counts(mem)["vector loads"] == 1


def test_a_session_that_added_rows_carries_nothing_for_the_copies_it_did_not_load(
    checked, settled, monkeypatch
):
    with open_mem(checked) as mem:
        mem.search("greyhound comet", mode="vector")
        last = mem.add_event("t0", "user", "an unmistakable zeppelin").id
        mem.flush()
    record = json.loads((Path(checked + SUFFIX) / "checked.json").read_text())
    assert "keywords" not in record["tails"] and "keywords.npz" not in record["files"]
    with open_mem(checked) as mem:  # the keyword copy is checked again, not trusted
        assert mem.search("zeppelin", mode="keyword")["id"].tolist() == [last]


def test_a_foreign_write_before_a_vector_mode_session_is_not_carried_past_it(checked, settled):
    with open_mem(checked) as mem:
        target = mem.search("greyhound", mode="keyword", limit=1)["id"].iloc[0]
    _foreign(checked, f"UPDATE events SET content = 'a poodle now' WHERE id = '{target}'")
    with open_mem(checked) as mem:  # the record no longer holds: nothing to carry
        mem.search("greyhound comet", mode="vector")
    record = json.loads((Path(checked + SUFFIX) / "checked.json").read_text())
    assert "keywords.npz" not in record.get("files", {})
    with open_mem(checked) as mem:
        assert mem.search("poodle", mode="keyword")["id"].tolist() == [target]
        assert counts(mem)["keyword loads"] == 0 and counts(mem)["keyword rebuilds"] == 1


def hold_save(monkeypatch, name: str, waiter: str) -> threading.Event:
    """Hold ``IndexCache.<name>`` back until the event returned is set (a save that
    waits 30 s fails: ``waiter`` waited for it)."""
    release, saving = threading.Event(), getattr(IndexCache, name)

    def held_save(self, *args, **kwargs):
        assert release.wait(30), f"{waiter} waited for the save"
        return saving(self, *args, **kwargs)

    monkeypatch.setattr(IndexCache, name, held_save)
    return release


def test_a_first_search_returns_while_its_vector_copy_is_still_being_saved(store_path, monkeypatch):
    """The reader that builds the vector index saves its copy off the query path: the
    search answers while the save is held back, and the copy written afterwards is
    loaded by the next open with the same answers."""
    with open_mem(store_path, index_cache=False) as mem:  # no copy saved after the ingest
        fill(mem, 200)
    saving = IndexCache.save_vectors
    release = hold_save(monkeypatch, "save_vectors", "the search")
    mem = open_mem(store_path)
    try:
        first = list(mem.search("boat lake", mode="vector", limit=5)["id"])
        assert not release.is_set() and first
        release.set()
        mem.indexes.wait_for_saves()
        assert mem.indexes.cache is not None and mem.indexes.cache.saves == 1
    finally:
        mem.close()
    monkeypatch.setattr(IndexCache, "save_vectors", saving)
    with open_mem(store_path) as again:
        assert list(again.search("boat lake", mode="vector", limit=5)["id"]) == first
        assert again.indexes.vectors(again.model_name).rebuilds == 0
