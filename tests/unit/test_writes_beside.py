"""The embedding worker writes vectors beside the caller's appends (``Store.beside``).

Its transaction runs on a cursor of its own without the store's lock, so adding
events does not wait for it; every other write waits for it (the rows lock),
so a delete or an edit never races a vector write, and what the caches hold
stays what the file holds.  Each test holds the worker inside its transaction
(after it appended the vectors, before it commits) and looks at what the
caller's thread can and cannot do meanwhile.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest

from nbmemory import Memory
from nbmemory.store.connection import Store
from nbmemory.store.vectors import EventVectors

#: Bound on a wait that only ends if the code under test is wrong (a deadlock).
DEADLOCK = 30.0


class HeldWorker:
    """Holds the embedding worker inside its next vector-writing transaction."""

    def __init__(self) -> None:
        self.inside = threading.Event()
        self.release = threading.Event()
        self._append = EventVectors.append

    def append(self, table: EventVectors, group: Any) -> None:
        self._append(table, group)
        if threading.current_thread().name == "nbmemory-embedder":
            self.inside.set()
            assert self.release.wait(DEADLOCK), "the test never released the worker"


@pytest.fixture
def held(tmp_path) -> Iterator[tuple[Memory, HeldWorker]]:
    holder = HeldWorker()
    mem = Memory(tmp_path / "m.duckdb", embedder="hash", background_consolidation=False)
    with mock.patch.object(EventVectors, "append", lambda t, g: holder.append(t, g)):
        try:
            yield mem, holder
        finally:
            holder.release.set()
            mem.close()


def _in_thread(fn: Any) -> tuple[threading.Thread, dict[str, Any]]:
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = fn()
        except BaseException as exc:  # reported by the test
            out["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    return thread, out


def test_adding_events_does_not_wait_for_the_workers_vector_write(held):
    mem, holder = held
    mem.add_event(session_id="s", role="user", content="the first memory")
    assert holder.inside.wait(DEADLOCK)
    # the worker is inside its transaction: an append goes ahead and commits
    thread, out = _in_thread(
        lambda: mem.add_events([{"session_id": "s", "role": "user", "content": "the second"}])
    )
    thread.join(DEADLOCK)
    assert not thread.is_alive(), "add_events waited for the worker's transaction"
    assert "error" not in out
    assert mem.store.fetchone("SELECT count(*) FROM event_vectors")[0] == 0  # not committed
    holder.release.set()
    assert mem.flush(timeout=DEADLOCK)
    assert mem.store.fetchone("SELECT count(*) FROM event_vectors")[0] == 2
    assert mem.worker.last_error is None


def test_a_delete_waits_for_the_vector_write_and_leaves_no_vector(held):
    mem, holder = held
    event = mem.add_event(session_id="s", role="user", content="forget me later")
    assert holder.inside.wait(DEADLOCK)
    thread, out = _in_thread(lambda: mem.delete(event.id))
    thread.join(0.2)
    assert thread.is_alive(), "the delete ran while the worker's transaction was open"
    holder.release.set()
    thread.join(DEADLOCK)
    assert out == {"value": 1}
    assert mem.flush(timeout=DEADLOCK)
    assert mem.store.fetchone("SELECT count(*) FROM events")[0] == 0
    assert mem.store.fetchone("SELECT count(*) FROM event_vectors")[0] == 0
    assert mem.worker.last_error is None
    assert mem.search("forget me later", mode="vector").empty


def test_a_search_meanwhile_sees_no_uncommitted_vector_and_the_index_holds_each_once(held):
    mem, holder = held
    mem.add_events(
        [{"session_id": "s", "role": "user", "content": f"memory number {i}"} for i in range(5)]
    )
    assert holder.inside.wait(DEADLOCK)
    thread, out = _in_thread(lambda: mem.search("memory number 3", mode="vector", limit=10))
    thread.join(DEADLOCK)
    assert not thread.is_alive(), "a search waited for the worker's transaction"
    assert out["value"].empty  # the index was built from what is committed: nothing yet
    holder.release.set()
    assert mem.flush(timeout=DEADLOCK)
    found = mem.search("memory number 3", mode="vector", limit=10)
    assert sorted(found["content"]) == sorted(f"memory number {i}" for i in range(5))
    assert found["id"].is_unique


def test_plain_sql_waits_for_the_vector_write(held):
    mem, holder = held
    mem.add_event(session_id="s", role="user", content="edited by hand")
    assert holder.inside.wait(DEADLOCK)
    thread, out = _in_thread(lambda: mem.store.execute("UPDATE events SET importance = 0.9"))
    thread.join(0.2)
    assert thread.is_alive(), "plain SQL ran while the worker's transaction was open"
    holder.release.set()
    thread.join(DEADLOCK)
    assert "error" not in out
    assert mem.flush(timeout=DEADLOCK)
    row = mem.store.fetchone("SELECT importance, embedding_model FROM events")
    assert row == (0.9, mem.model_name)


def test_a_failing_block_beside_is_rolled_back_and_announces_nothing(tmp_path):
    store = Store(tmp_path / "s.duckdb")
    seen: list[Any] = []
    store.listen(seen.append)
    try:

        def block(change: Any) -> None:
            store.run("INSERT INTO nbmemory_meta VALUES ('k', 'v')")
            raise ValueError("no")

        with pytest.raises(ValueError):
            store.beside(block)
        assert seen == []
        assert store.fetchone("SELECT count(*) FROM nbmemory_meta WHERE key = 'k'")[0] == 0
        assert store.beside(lambda change: store.run("SELECT 41 + 1")[0][0]) == 42
        assert not store.in_transaction
    finally:
        store.close()


def test_adds_edits_deletes_and_searches_from_threads_leave_every_vector_right(tmp_path):
    """Appends, edits, deletes and searches on three threads while the worker writes:
    afterwards each live text has exactly the vector of its text, nothing else has
    one, nothing failed, and the vector index holds what the file holds."""
    mem = Memory(tmp_path / "m.duckdb", embedder="hash", background_consolidation=False)
    errors: list[BaseException] = []
    ids: list[str] = []
    added = threading.Event()

    def guarded(fn: Any) -> Any:
        def run() -> None:
            try:
                fn()
            except BaseException as exc:
                errors.append(exc)

        return threading.Thread(target=run)

    def add() -> None:
        for round_ in range(40):
            batch = [
                {"session_id": f"s{round_ % 3}", "role": "user", "content": f"note {round_} {i}"}
                for i in range(25)
            ]
            ids.extend(mem.add_events(batch))
            ids.append(mem.add_memory(f"memory {round_}").id)
        added.set()

    def edit_and_delete() -> None:
        done = 0
        while not added.is_set() or done < len(ids):
            if done >= len(ids):
                added.wait(0.005)  # (not a synchronisation: a pause in polling the list)
                continue
            target = ids[done]
            if done % 7 == 0:
                mem.delete(target)
            elif done % 26 == 25:  # a memory: its text changes
                mem.update_memory(target, content=f"edited {done}")
            done += 13

    def search() -> None:
        while not added.is_set():
            mem.search("note memory", limit=5)

    try:
        threads = [guarded(add), guarded(edit_and_delete), guarded(search)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
            assert not thread.is_alive()
        assert errors == []
        assert mem.flush(timeout=60)
        assert mem.worker.last_error is None
        store = mem.store
        orphans = store.fetchone(
            "SELECT count(*) FROM event_vectors v ANTI JOIN events e ON e.id = v.id"
        )[0]
        assert orphans == 0
        rows = store.fetchall(
            "SELECT e.id, e.embedding_model, count(v.id) FROM events e"
            " LEFT JOIN event_vectors v ON v.id = e.id GROUP BY ALL"
        )
        assert rows and all(r[1] == mem.model_name and r[2] == 1 for r in rows)
        # each stored vector is the vector of the text its event holds now
        for content, vector in store.fetchall(
            "SELECT e.content, v.embedding FROM events e JOIN event_vectors v USING (id)"
        ):
            assert vector == pytest.approx(mem.embedder.embed([content])[0].tolist(), abs=1e-6)
        found = mem.search("note", mode="vector", limit=len(rows))
        assert set(found["id"]) == {r[0] for r in rows}
    finally:
        mem.close()


def test_a_conflict_beside_is_written_again_as_an_ordinary_transaction(tmp_path, caplog):
    import duckdb

    store = Store(tmp_path / "s.duckdb")
    seen: list[Any] = []
    store.listen(seen.append)
    calls: list[bool] = []

    def block(change: Any) -> str:
        calls.append(store._on_side())
        store.run("INSERT INTO nbmemory_meta VALUES (?, 'v')", [f"k{len(calls)}"])
        change.unknown = True
        if len(calls) == 1:
            raise duckdb.TransactionException("TransactionContext Error: Conflict on update!")
        return "written"

    try:
        assert store.beside(block) == "written"
        assert calls == [True, False]  # first beside, then in an ordinary transaction
        keys = [r[0] for r in store.fetchall("SELECT key FROM nbmemory_meta WHERE key LIKE 'k%'")]
        assert keys == ["k2"]  # the first attempt was rolled back
        assert len(seen) == 1 and seen[0].unknown
        assert "conflicted" in caplog.text
        assert not store.in_transaction
    finally:
        store.close()


def test_a_store_that_writes_nothing_beside_never_waits_on_the_rows_lock(tmp_path):
    """A shared store holds its lock for a whole call (``turn``): plain SQL inside one
    must not then wait for the rows lock, which another thread could hold while it
    waits for the store's lock.  Nothing is written beside there, so it is never taken."""
    from nbmemory.store.shared import SharedStore

    store = SharedStore(tmp_path / "s.duckdb")
    taken, done = threading.Event(), threading.Event()

    def hold_rows_lock() -> None:
        with store._rows_lock:
            taken.set()
            done.wait(DEADLOCK)

    holder = threading.Thread(target=hold_rows_lock)
    holder.start()
    try:
        assert taken.wait(DEADLOCK)
        thread, out = _in_thread(
            lambda: store.execute("INSERT INTO nbmemory_meta VALUES ('k', 'v')")
        )
        thread.join(DEADLOCK)
        assert not thread.is_alive(), "plain SQL on a shared store waited for the rows lock"
        assert "error" not in out
    finally:
        done.set()
        holder.join()
        store.close()
