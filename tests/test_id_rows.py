"""``IdRows``: an index's id -> row, from a saved sort order until a dictionary is needed,
answering exactly as a dictionary kept beside the same list would."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from nbmemory.retrieval.encoding import permutation, sort_order
from nbmemory.retrieval.id_rows import IdRows

NAMES = st.sampled_from([f"id{i}" for i in range(40)] + ["é", "Z", "a b", "ñ2", "😀"])
OPERATION = st.tuples(st.sampled_from(["add", "remove", "get", "bulk", "len"]), NAMES)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(NAMES, unique=True, max_size=30),
    st.lists(OPERATION, max_size=60),
    st.sampled_from(["no order", "order", "order and Arrow ids"]),
    st.sampled_from([0, 1, 3]),
)
def test_it_answers_as_a_dictionary_through_adds_and_removes(saved, operations, copy, step):
    """An index's life after a load: rows added at the end, rows removed (their slot set
    to None by the index), ids added again; every answer equal to a plain dict's, while
    the dictionary is being made (``step`` ids a search; 0: never) and once it is."""
    from nbmemory.retrieval import id_rows

    before, id_rows.STEP = id_rows.STEP, step
    try:
        _life(saved, operations, copy)
    finally:
        id_rows.STEP = before


def _life(saved: list[str], operations: list[tuple[str, str]], copy: str) -> None:
    ids: list[str | None] = list(saved)
    order = None if copy == "no order" else sort_order(saved)
    arrow = pa.array(saved, pa.large_string()) if copy == "order and Arrow ids" else None
    rows = IdRows(ids, order, arrow)
    model = {event_id: i for i, event_id in enumerate(saved)}
    for action, name in operations:
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


def test_searches_make_the_dictionary_a_step_at_a_time(monkeypatch):
    from nbmemory.retrieval import id_rows

    monkeypatch.setattr(id_rows, "STEP", 4)
    ids: list[str | None] = [f"e{i}" for i in range(10)]
    rows = IdRows(ids, sort_order(ids))  # type: ignore[arg-type]
    assert rows.get("e7") == 7 and rows.pop("e2") == 2 and ids[2] is None
    assert rows._dict is None  # two searches: rows 0-7 taken
    assert rows.get("e9") == 9  # the third: every row
    assert rows._dict == {f"e{i}": i for i in range(10) if i != 2}


def test_many_ids_at_once_make_the_dictionary(monkeypatch):
    from nbmemory.retrieval import id_rows

    monkeypatch.setattr(id_rows, "BULK", 3)
    monkeypatch.setattr(id_rows, "STEP", 0)
    ids: list[str | None] = [f"e{i}" for i in range(10)]
    rows = IdRows(ids, sort_order(ids))  # type: ignore[arg-type]
    assert rows.rows(["e1", "e2"]) == [1, 2] and rows._dict is None  # searched
    assert rows.rows(["e1", "e2", "e3", "x"]) == [1, 2, 3, None]
    assert rows._dict is not None  # made
