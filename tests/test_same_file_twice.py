"""Two ``Memory`` objects on one file in one process see each other's writes.

It happens more than it seems: a notebook cell that opens the store is run
again while the first object is still alive, or an agent and one of its tools
each open the memory.  DuckDB gives both the same database, so SQL sees every
row; the in-memory caches (vector and keyword indexes, working memory, salient
ids, active sessions) must not answer from before the other object's write.
"""

from __future__ import annotations

import datetime as dt
import gc
import threading

import pytest
from fakes import GatedEmbedder

from nbmemory import Memory
from nbmemory.store import peers


@pytest.fixture
def pair(tmp_path):
    path = str(tmp_path / "twice.duckdb")
    first = Memory(path, embedder="hash", background_consolidation=False)
    second = Memory(path, embedder="hash", background_consolidation=False)
    yield first, second
    second.close()
    first.close()


def contents(frame) -> set[str]:
    return set(frame["content"])


def context_texts(context) -> list[str]:
    return [item.content for item in context]


@pytest.mark.parametrize("mode", ["keyword", "vector", "hybrid"])
def test_a_search_finds_what_the_other_object_added_after_it_built_its_indexes(pair, mode):
    first, second = pair
    first.add_event("s", "user", "I adopted a parrot named Kiwi")
    first.flush()
    assert "I adopted a parrot named Kiwi" in contents(first.search("parrot Kiwi", mode=mode))

    second.add_event("s", "user", "my violin lesson moved to tuesday")
    second.flush()  # its vector is written by the second object's worker

    found = first.search("violin lesson tuesday", mode=mode, limit=5)
    assert "my violin lesson moved to tuesday" in contents(found)


def test_a_search_no_longer_finds_what_the_other_object_deleted(pair):
    first, second = pair
    event = first.add_event("s", "user", "the locker code is behind the poster")
    first.flush()
    assert len(first.search("locker code poster", mode="keyword")) == 1
    assert len(first.search("locker code poster", mode="vector", threshold=0.5)) == 1

    assert second.delete(event.id) == 1

    assert first.search("locker code poster", mode="keyword").empty
    assert first.search("locker code poster", mode="vector", threshold=0.5).empty


def test_recent_turns_and_context_include_the_other_objects_turn(pair):
    first, second = pair
    first.add_event("chat", "user", "hello there")
    assert list(first.recent("chat")["content"]) == ["hello there"]  # now cached

    second.add_event("chat", "assistant", "hi, how can I help?")

    assert list(first.recent("chat")["content"]) == ["hi, how can I help?", "hello there"]
    assert "hi, how can I help?" in context_texts(first.get_context("chat"))


def test_salient_memories_include_the_other_objects_important_one(pair):
    first, second = pair
    first.add_event("s", "user", "ok", importance=0.1)
    before = first.get_context("other", salience_threshold=0.8)
    assert "never forget: my blood type is O negative" not in context_texts(before)

    second.add_event("s", "user", "never forget: my blood type is O negative", importance=0.95)

    after = first.get_context("other", salience_threshold=0.8)
    assert "never forget: my blood type is O negative" in context_texts(after)


def test_an_object_closed_and_dropped_stops_being_told(tmp_path):
    path = str(tmp_path / "dropped.duckdb")
    first = Memory(path, embedder="hash", background_consolidation=False)
    second = Memory(path, embedder="hash", background_consolidation=False)
    second.close()
    del second
    gc.collect()
    try:
        first.add_event("s", "user", "still works after the other one went away")
        first.flush()
        assert len(first.search("still works", mode="keyword")) == 1
        store = first._core.store
        assert peers.count(store._peer_key) == 1  # the dropped one is not told
    finally:
        first.close()


def test_a_session_the_other_object_started_is_touched_by_this_ones_writes(pair):
    first, second = pair
    first.add_event("warm-up", "user", "the active sessions are now cached")
    sid = second.start_session("alice").session_id
    later = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None) + dt.timedelta(hours=1)
    first.clock = lambda: later

    first.add_event(sid, "user", "hello from the first object")

    assert second.get_session(sid).last_activity == later


def test_two_objects_writing_one_events_vectors_at_once_do_not_conflict(pair):
    """Both objects' workers embed the events the second found pending at open, so
    both write the same events' vectors.  Stores of one file share DuckDB's
    database: with a rows lock each, the second write marked rows the first had
    marked and not committed, and DuckDB failed it ("Conflict on update", its retry
    too) while the first was still open.  Now it waits for the first and finds
    nothing left to mark: no error, one set of vectors."""
    first, second = pair
    event = first.add_event("s", "user", "the staging database moved to eu-west-2")
    first.flush()
    with first.core.writer.transaction() as tx:
        tx.vectors.forget([event.id])  # the event waits for a vector again
    text = event.content
    vector = first.embedder.embed([text])

    def write(memory):
        return memory.core.writer.write_beside(
            lambda tx: tx.vectors.write_vectors([event.id], vector, memory.embedder.name, [text])
        )

    outcome: dict[str, object] = {}

    def second_writes() -> None:
        try:
            outcome["written"] = write(second)
        except Exception as exc:  # the failure this test is about
            outcome["error"] = exc

    other = threading.Thread(target=second_writes)

    def first_writes(tx):
        written = tx.vectors.write_vectors([event.id], vector, first.embedder.name, [text])
        other.start()
        # while this transaction is open the second write must wait, not fail
        other.join(timeout=2)
        outcome["finished while the first was open"] = not other.is_alive()
        return written

    assert first.core.writer.write_beside(first_writes) == [event.id]
    other.join()
    assert "error" not in outcome, outcome.get("error")
    assert outcome == {"finished while the first was open": False, "written": []}
    rows = first.store.run("SELECT count(*) FROM event_vectors WHERE id = ?", [event.id])
    assert rows[0][0] == 1
    assert event.content in contents(second.search("staging database region", mode="vector"))


class _Gated(GatedEmbedder):
    """Blocks in ``embed`` until the gate opens; counts the texts (one model name for
    both objects: a worker of another model would have to embed them anyway)."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []
        self.gate.set()

    def embed(self, texts):
        self.texts.extend(texts)
        return super().embed(texts)


def _open(path, embedder):
    return Memory(path, embedder=embedder, background_consolidation=False, config=False)


def test_a_second_object_does_not_embed_what_the_first_objects_worker_holds(tmp_path):
    """A cell that opens the store run again while the first object embeds a large
    ingest: the second object found every text still waiting at open and embedded all
    of them again (its writes then found the rows marked).  Now it leaves the first
    worker's texts to it."""
    path = str(tmp_path / "twice.duckdb")
    slow, other = _Gated(), _Gated()
    slow.gate.clear()
    first = _open(path, slow)
    try:
        first.add_event("s", "user", "the first text, taken alone")
        assert slow.entered.wait(30)  # the worker is in embed, blocked
        first.add_events(
            [{"session_id": "s", "role": "user", "content": f"note number {i}"} for i in range(40)]
        )
        second = _open(path, other)
        try:
            assert second.flush(timeout=30)
            assert other.texts == []  # before: all 41 texts, embedded a second time
            slow.gate.set()
            assert first.flush(timeout=30)
            assert len(slow.texts) == 41
            assert first.store.vectors.pending() == []
        finally:
            second.close()
    finally:
        slow.gate.set()
        first.close()


def test_what_a_closing_object_leaves_unembedded_goes_to_the_other_objects_worker(tmp_path):
    """Closing the first object leaves its queue pending in the store; with a second
    object of the file open, that one's worker embeds it, instead of nobody until the
    next open."""
    path = str(tmp_path / "twice.duckdb")
    slow, other = _Gated(), _Gated()
    slow.gate.clear()
    first = _open(path, slow)
    first.add_event("s", "user", "the first text, taken alone")
    assert slow.entered.wait(30)
    first.add_events(
        [{"session_id": "s", "role": "user", "content": f"note number {i}"} for i in range(40)]
    )
    second = _open(path, other)
    try:
        closing = threading.Thread(target=first.close)
        closing.start()
        assert first.core.worker._stopped.wait(30)  # told to stop, still in embed
        slow.gate.set()
        closing.join(30)
        assert not closing.is_alive()
        assert second.flush(timeout=30)
        assert sorted(other.texts) == sorted(f"note number {i}" for i in range(40))
        assert second.store.vectors.pending() == []
    finally:
        slow.gate.set()
        second.close()
