"""The writes whose SQL differs between backends, each run on every backend.

A DuckDB file answers ``RETURNING`` and ``ON CONFLICT`` natively; a lake has
neither (nor keys or sequences) and runs each write by key
(``nbmemory.store.lake.keyed_writes``).  Both must give the same answers: these
tests run the same calls of ``store.statements`` on a file, a shared file and a
lake (the last under the ``lake`` marker) and check what each returns and what
is stored after.
"""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from nbmemory.store import open_store
from nbmemory.store.schema import EVENTS

NOW = dt.datetime(2026, 1, 2, 3, 4, 5)
LATER = NOW + dt.timedelta(hours=1)


@pytest.fixture(params=["file", "shared", pytest.param("lake", marks=pytest.mark.lake)])
def store(request, tmp_path):
    if request.param == "lake":
        url = request.getfixturevalue("lake_url")
        opened = open_store(url)
    else:
        opened = open_store(str(tmp_path / "s.duckdb"), shared=request.param == "shared")
    with opened.turn():
        yield opened
    opened.close()


def _fact(key: str, value: str = "v") -> dict:
    return {
        "namespace": "ns",
        "category": "c",
        "key": key,
        "value": value,
        "source": "",
        "created_at": NOW,
        "updated_at": NOW,
    }


def _event(event_id: str, content: str) -> dict:
    row = {c: None for c in EVENTS.names}
    row.update(id=event_id, session_id="s", namespace="ns", kind="message", role="user")
    row.update(content=content, importance=0.5, created_at=NOW, updated_at=NOW)
    return row


def test_insert_returns_an_id_the_backend_made(store):
    with store.transaction():
        [(first,)] = store.statements.insert("facts", _fact("a"), returning=("id",))
        [(second,)] = store.statements.insert("facts", _fact("b"), returning=("id",))
    assert isinstance(first, int) and first != second
    assert store.run("SELECT key FROM facts WHERE id = ?", [second]) == [("b",)]


def test_insert_returns_the_sequence_of_an_event_with_computed_values(store):
    row = _event("e1", "hello")
    row["created_at"] = row["updated_at"] = 1_700_000_000_000_000  # epoch microseconds
    with store.transaction():
        returned = store.statements.insert(
            "events",
            row,
            returning=("id", "seq", "created_at"),
            placeholders={"created_at": "make_timestamp(?)", "updated_at": "make_timestamp(?)"},
        )
    stored = store.run("SELECT id, seq, created_at FROM events")
    assert returned == stored
    assert stored[0][2] == dt.datetime(2023, 11, 14, 22, 13, 20)


def test_insert_if_absent_keeps_the_row_there(store):
    with store.transaction():
        added = store.statements.insert(
            "terminal_allowed_prefixes",
            {"prefix": "git ", "created_at": NOW},
            returning=("prefix",),
            if_absent=True,
        )
        again = store.statements.insert(
            "terminal_allowed_prefixes",
            {"prefix": "git ", "created_at": LATER},
            returning=("prefix",),
            if_absent=True,
        )
    assert (added, again) == ([("git ",)], [])
    assert store.run("SELECT prefix, created_at FROM terminal_allowed_prefixes") == [("git ", NOW)]


def test_insert_arrow_returns_each_rows_columns(store):
    data = EVENTS.to_arrow([_event(f"e{i}", f"text {i}") for i in range(3)])
    with store.transaction():
        returned = store.statements.insert_arrow("events", data, returning=("id", "seq"))
        nothing = store.statements.insert_arrow("events", EVENTS.to_arrow([]), returning=("id",))
    assert sorted(returned) == sorted(store.run("SELECT id, seq FROM events"))
    assert len(returned) == 3 and nothing == []


def test_update_returns_the_changed_rows_as_they_are_after(store):
    with store.transaction():
        ids = [store.statements.insert("facts", _fact(k), returning=("id",))[0][0] for k in "abc"]
        returned = store.statements.update(
            "facts",
            "value = value || ?, updated_at = ?",
            ["!", LATER],
            "namespace = ? AND key IN (SELECT unnest(?::VARCHAR[]))",
            ["ns", ["a", "c", "zz"]],
            returning=("key", "value"),
        )
        none = store.statements.update(
            "facts", "value = ?", ["x"], "key = ?", ["missing"], returning=("id",)
        )
    assert sorted(returned) == [("a", "v!"), ("c", "v!")] and none == []
    assert store.run("SELECT id, value FROM facts ORDER BY key") == [
        (ids[0], "v!"),
        (ids[1], "v"),
        (ids[2], "v!"),
    ]


def test_update_from_a_view_changes_the_rows_it_joins(store):
    with store.transaction():
        ids = [store.statements.insert("facts", _fact(k), returning=("id",))[0][0] for k in "ab"]
        data = pa.table(
            {"id": pa.array([ids[1]], pa.int32()), "value": pa.array(["joined"], pa.string())}
        )
        with store.registered("_test_values", data) as view:
            returned = store.statements.update(
                "facts",
                "value = v.value",
                where_sql="facts.id = v.id",
                from_=f"{view} v",
                returning=("id", "value"),
            )
    assert returned == [(ids[1], "joined")]
    assert store.run("SELECT value FROM facts ORDER BY key") == [("v",), ("joined",)]


def test_delete_returns_the_rows_as_they_were(store):
    with store.transaction():
        for k in "abc":
            store.statements.insert("facts", _fact(k, f"value {k}"))
        returned = store.statements.delete("facts", "key <> ?", ["b"], returning=("key", "value"))
        plain = store.statements.delete("facts", "key = ?", ["missing"])
    assert sorted(returned) == [("a", "value a"), ("c", "value c")] and plain == []
    assert store.run("SELECT key FROM facts") == [("b",)]


def test_a_composite_key_picks_exactly_its_rows(store):
    """``sessions`` is keyed by (namespace, session_id): the same session id in another
    namespace is another row, left alone."""
    with store.transaction():
        for namespace in ("ns", "other"):
            row = {
                "namespace": namespace,
                "session_id": "s1",
                "user_id": "",
                "status": "active",
                "state": "{}",
                "created_at": NOW,
                "last_activity": NOW,
                "closed_at": None,
            }
            store.statements.insert("sessions", row)
        touched = store.statements.update(
            "sessions",
            "last_activity = greatest(last_activity, ?)",
            [LATER],
            "namespace = ? AND session_id = ?",
            ["ns", "s1"],
            returning=("namespace", "session_id", "last_activity"),
        )
        gone = store.statements.delete(
            "sessions", "namespace = ?", ["other"], returning=("session_id",)
        )
    assert touched == [("ns", "s1", LATER)] and gone == [("s1",)]
    assert store.run("SELECT namespace, last_activity FROM sessions") == [("ns", LATER)]


def test_a_table_without_a_key_takes_plain_inserts_and_deletes(store):
    row = {
        "fact_id": 1,
        "namespace": "ns",
        "category": "c",
        "key": "k",
        "value": "old",
        "source": "",
        "valid_from": NOW,
        "superseded_at": LATER,
    }
    with store.transaction():
        store.statements.insert("fact_history", row)
        store.statements.insert("fact_history", {**row, "value": "older"})
        store.statements.delete("fact_history", "value = ?", ["older"])
    assert store.run("SELECT value FROM fact_history") == [("old",)]
