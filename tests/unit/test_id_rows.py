"""``IdRows``: an index's id -> row, from a saved sort order until a dictionary is needed,
answering exactly as a dictionary kept beside the same list would."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from nbmemory import Memory
from nbmemory.retrieval.encoding import permutation, sort_order
from nbmemory.retrieval.id_rows import IdRows

NAMES = st.sampled_from([f"id{i}" for i in range(40)] + ["é", "Z", "a b", "ñ2", "😀"])
OPERATION = st.tuples(st.sampled_from(["add", "remove", "get", "bulk", "len"]), NAMES)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(NAMES, unique=True, max_size=30),
    st.lists(OPERATION, max_size=60),
    st.sampled_from(["no order", "order", "order and Arrow ids"]),
    st.integers(min_value=-1, max_value=60),
)
def test_it_answers_as_a_dictionary_through_adds_and_removes(saved, operations, copy, start):
    """An index's life after a load: rows added at the end, rows removed (their slot set
    to None by the index), ids added again; every answer equal to a plain dict's, by
    binary search, while a thread makes the dictionary (from operation ``start``; -1:
    never), and after."""
    _answers_as_a_dictionary(saved, operations, copy, start)


#: Ids of one length in bytes (6), as the UUIDs made here are: searched as bytes.
FIXED = st.sampled_from(
    [f"id{i:04d}" for i in range(40)] + ["idé00", "id😀", "Zzzzzz", "a b cd", "idé\x00\x00"]
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(FIXED, unique=True, max_size=30),
    st.lists(st.tuples(st.sampled_from(["add", "remove", "get", "bulk", "len"]), FIXED | NAMES)),
    st.integers(min_value=-1, max_value=60),
)
def test_ids_of_one_width_answer_as_a_dictionary(saved, operations, start):
    """The same, with saved ids all of one width in bytes (searched as bytes, NULs
    included) and ids of other widths asked for."""
    _answers_as_a_dictionary(saved, operations, "order and Arrow ids", start)


def _answers_as_a_dictionary(saved, operations, copy, start) -> None:
    ids: list[str | None] = list(saved)
    order = None if copy == "no order" else sort_order(saved)
    arrow = pa.array(saved, pa.large_string()) if copy == "order and Arrow ids" else None
    rows = IdRows(ids, order, arrow)
    model = {event_id: i for i, event_id in enumerate(saved)}
    for step, (action, name) in enumerate(operations):
        if step == start:
            rows.start_making()
        if action == "add" and name not in model:
            ids.append(name)
            rows[name] = model[name] = len(ids) - 1
        elif action == "remove":
            got = rows.pop(name, None)
            assert got == model.pop(name, None)
            if got is not None:
                ids[got] = None
        elif action == "bulk":
            wanted = [name, *saved[:3], "absent"]
            assert rows.rows(wanted) == [model.get(i) for i in wanted]
        elif action == "len":
            assert len(rows) == len(model)
        assert rows.get(name) == model.get(name)
        assert (name in rows) == (name in model)
    assert len(rows) == len(model)
    assert sorted(rows) == sorted(model)


def test_a_sort_order_is_python_s_order_of_the_strings():
    strings = ["b", "a", "é", "Z", "z", "😀", "ab", "", "e\u0301"]
    assert [strings[i] for i in sort_order(strings)] == sorted(strings)


def test_only_a_whole_permutation_is_taken_for_an_order():
    assert permutation(np.array([2, 0, 1]), 3) is not None
    assert permutation(None, 3) is None
    assert permutation(np.array([0, 1]), 3) is None  # another length
    assert permutation(np.array([0, 0, 1]), 3) is None  # a row twice
    assert permutation(np.array([0, 1, 3]), 3) is None  # out of range
    assert permutation(np.array([0.0, 1.0, 2.0]), 3) is None  # not integers


def test_the_dictionary_made_on_a_thread_takes_the_changes_made_meanwhile():
    """The thread's two steps, run here in turn around the changes: a snapshot (from
    which changes are logged), then the switch, which replays them."""
    ids: list[str | None] = [f"e{i}" for i in range(1000)]
    rows = IdRows(ids, sort_order(ids))  # type: ignore[arg-type]
    assert rows.get("e5") == 5
    snapshot = rows._snapshot()
    assert snapshot is not None
    assert rows.pop("e7") == 7 and ids[7] is None
    ids.append("new")
    rows["new"] = 1000
    ids.append("e7")
    rows["e7"] = 1001  # removed, then added again
    assert rows.pop("e9") == 9
    assert rows._dict is None and rows.get("e7") == 1001  # still searching meanwhile
    rows._switch(rows._from(snapshot))
    expected = {f"e{i}": i for i in range(1000) if i not in (7, 9)} | {"new": 1000, "e7": 1001}
    assert rows._dict == expected
    assert rows.get("e7") == 1001 and "e9" not in rows and len(rows) == 1000


def test_an_answer_starts_the_dictionary_once_ids_were_searched():
    ids: list[str | None] = [f"e{i}" for i in range(100)]
    rows = IdRows(ids, sort_order(ids))  # type: ignore[arg-type]
    rows.start_making()
    assert rows._maker is None  # nothing looked up: vector search alone never needs it
    assert rows.get("e3") == 3
    rows.start_making()
    assert rows._maker is not None
    assert rows._maker.wait(timeout=60)
    assert rows._dict == {f"e{i}": i for i in range(100)}


def test_many_ids_at_once_make_the_dictionary(monkeypatch):
    from nbmemory.retrieval import id_rows

    monkeypatch.setattr(id_rows, "BULK", 3)
    ids: list[str | None] = [f"e{i}" for i in range(10)]
    rows = IdRows(ids, sort_order(ids))  # type: ignore[arg-type]
    assert rows.rows(["e1", "e2"]) == [1, 2] and rows._dict is None  # searched
    assert rows.rows(["e1", "e2", "e3", "x"]) == [1, 2, 3, None]
    assert rows._dict is not None  # made


def test_a_vector_index_loaded_from_its_saved_copy_searches_its_saved_order_first(store_path):
    """A store's saved vector index comes back with the sort order saved beside it: no
    dictionary of ids until a search needs ids looked up, then one made on a thread."""
    rows = [{"session_id": f"s{i % 5}", "role": "user", "content": f"lake {i}"} for i in range(200)]
    with Memory(store_path, embedder="hash", index_cache_min_rows=50) as mem:
        mem.add_events(rows)
        mem.flush()
        mem.search("lake", mode="vector")  # builds the index; closing saves it
    with Memory(store_path, embedder="hash", index_cache_min_rows=50) as mem:
        mem.search("lake", mode="vector")
        vectors = mem.indexes.vectors(mem.model_name)
        assert vectors.loads == 1 and vectors.rebuilds == 0
        assert vectors._pos._dict is None and vectors._pos._maker is None
        query = mem.embedder.embed(["lake"])[0]
        mem.retriever.vector_search(query, "default", limit=3, filters={"session_id": "s1"})
        # once answered, a thread makes the dictionary (a binary search costs ten look-ups)
        assert vectors._pos._maker is not None
        assert vectors._pos._maker.wait(timeout=60)
        assert vectors._pos._dict is not None
