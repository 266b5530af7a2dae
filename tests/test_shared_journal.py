"""Shared mode's journal (group commit): ``add_event`` appends, the next turn writes.

An event is never lost once ``add_event`` returned, and the id returned is the id
stored, exactly once: checked with real processes killed by SIGKILL before the
journal was written to the store, and between that write's commit and the
emptying of the journal.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from child_process import expect, spawn

from nbmemory import Memory
from nbmemory.store import journal

HANG = 120

#: Streams add_event in shared mode, printing each returned id.  ``hold``: the journal
#: is never written out by add_event (only by a turn); ``cut``: the first write-out
#: kills the process right after its commit, before the journal is emptied.
STREAM = """
import os, signal, sys
from nbmemory import Memory
from nbmemory.store import journal
path, how = sys.argv[1], sys.argv[2]
if how != "idle":  # add_event never writes the journal out, nor does the idle writer
    journal.BATCH, journal.LINGER = 10**9, 10**9
if how == "cut":
    def killed(fd, size):
        os.kill(os.getpid(), signal.SIGKILL)  # the rows are committed, the journal full
    journal.os.ftruncate = killed
mem = Memory(path, embedder="hash", shared=True, background_consolidation=False)
for i in range(20):
    print("id", mem.add_event("s", "user", f"journalled {i}").id, flush=True)
print("written", flush=True)
if how == "cut":
    mem.recent("s", 1)  # a read: its turn writes the journal, then the process dies
sys.stdin.readline()
"""


def _run_and_kill(path: str, how: str) -> list[str]:
    child = spawn(STREAM, path, how)
    try:
        ids = [expect(child, "id") for _ in range(20)]
        expect(child, "written")
        if how == "hold":
            child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=HANG) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    return ids


@pytest.mark.slow
def test_another_kernel_reads_every_event_whose_add_event_returned(tmp_path):
    path = str(tmp_path / "seen.duckdb")
    with Memory(path, embedder="hash", shared=True) as reader:
        child = spawn(STREAM, path, "keep")  # journals 20 events and waits, alive
        try:
            returned = [expect(child, "id") for _ in range(20)]
            expect(child, "written")
            assert Path(journal.folder_of(path)).exists()
            # nothing was written to the file by the child, yet this read sees them all
            assert list(reader.recent("s", 50)["id"]) == returned[::-1]
            assert reader.flush(timeout=HANG)  # drained here: embedded here
            assert reader.search("journalled 7", limit=1)["content"].iloc[0] == "journalled 7"
        finally:
            child.stdin.write("\n")
            child.stdin.flush()
            assert child.wait(timeout=HANG) == 0
        assert len(reader.events()) == 20  # the child's close wrote nothing twice


def _stored_ids(mem: Memory) -> list[str]:
    return [row[0] for row in mem.store.fetchall("SELECT id FROM events ORDER BY seq")]


@pytest.mark.slow
@pytest.mark.parametrize("reopen_shared", [True, False])
def test_events_journalled_by_a_killed_kernel_are_written_once_at_the_next_open(
    tmp_path, reopen_shared
):
    path = str(tmp_path / "killed.duckdb")
    Memory(path, embedder="hash", shared=True).close()
    returned = _run_and_kill(path, "hold")
    folder = Path(journal.folder_of(path))
    assert sum(len(journal.decode(p.read_bytes())) for p in folder.iterdir()) == 20
    with Memory(path, embedder="hash", shared=reopen_shared) as mem:
        assert _stored_ids(mem) == returned  # every returned id, once, in order
        assert mem.flush(timeout=HANG)
        assert mem.status()["pending"] == 0
        assert mem.recent("s", 1)["content"].iloc[0] == "journalled 19"
    assert not folder.exists()  # nothing left to write, nothing left beside the store


@pytest.mark.slow
def test_a_kill_after_the_commit_and_before_the_journal_is_emptied_writes_nothing_twice(
    tmp_path,
):
    path = str(tmp_path / "cut.duckdb")
    Memory(path, embedder="hash", shared=True).close()
    returned = _run_and_kill(path, "cut")
    folder = Path(journal.folder_of(path))
    left = [e["row"]["id"] for p in folder.iterdir() for e in journal.decode(p.read_bytes())]
    assert left == returned  # killed before emptying: the journal still holds them all
    with Memory(path, embedder="hash", shared=True) as mem:
        assert _stored_ids(mem) == returned
        added = mem.audit_log(action="add")
        assert sorted(i for ids in added["target_ids"] for i in ids) == sorted(returned)
    assert not folder.exists()


def test_add_event_in_shared_mode_takes_no_turn_and_a_read_sees_it(tmp_path, monkeypatch):
    # no idle write in between: on a loaded machine the five adds took longer than
    # LINGER, and the background writer ran a statement before the check
    monkeypatch.setattr(journal, "BATCH", 10**9)
    monkeypatch.setattr(journal, "LINGER", 10**9)
    path = str(tmp_path / "own.duckdb")
    with Memory(path, embedder="hash", shared=True) as mem:
        before = mem.store.statements_run
        events = [mem.add_event("s", "user", f"note {i}") for i in range(5)]
        assert mem.store.statements_run == before  # journalled, the file untouched
        recent = mem.recent("s", 10)
        assert list(recent["id"]) == [e.id for e in reversed(events)]
        stored = mem.get_event(events[2].id)
        assert stored.content == events[2].content == "note 2"
        assert stored.created_at == events[2].created_at
        (details,) = [json.loads(d) for d in mem.audit_log(action="add")["details"]]
        assert details == {"session_id": "s", "count": 5}
    assert not os.path.exists(journal.folder_of(path))


def test_a_secret_is_redacted_before_it_reaches_the_journal(tmp_path, monkeypatch):
    monkeypatch.setattr(journal, "BATCH", 10**9)
    monkeypatch.setattr(journal, "LINGER", 10**9)
    path = str(tmp_path / "secret.duckdb")
    with Memory(path, embedder="hash", shared=True) as mem:
        event = mem.add_event("s", "user", "my password: hunter2 and key AKIAIOSFODNN7EXAMPLE")
        assert "hunter2" not in event.content
        journalled = Path(mem.store.journal.path).read_bytes()
        assert journalled and b"hunter2" not in journalled and b"AKIAIOSFODNN7" not in journalled
        assert mem.get_event(event.id).content == event.content
        (details,) = [json.loads(d) for d in mem.audit_log(action="add")["details"]]
        assert details == {"session_id": "s", "redacted": 2}


def test_a_line_cut_short_was_never_acknowledged_and_is_dropped():
    rows = [{"id": str(i), "at": None} for i in range(3)]
    data = b"".join(journal.encode(r, 0) for r in rows)
    assert [e["row"]["id"] for e in journal.decode(data[:-5])] == ["0", "1"]
    assert [e["row"]["id"] for e in journal.decode(data)] == ["0", "1", "2"]
    damaged = data.replace(b'"1"', b'"1\xff', 1).replace(b"}\n", b"\n", 2)
    assert [e["row"]["id"] for e in journal.decode(damaged)] == ["2"]


@pytest.mark.slow
def test_an_empty_journal_of_a_process_gone_is_swept_at_open(tmp_path):
    path = str(tmp_path / "swept.duckdb")
    folder = Path(journal.folder_of(path))
    folder.mkdir()
    child = spawn("import os; print(os.getpid())")
    dead = int(expect(child, ""))
    assert child.wait(timeout=HANG) == 0
    (folder / f"{dead}-0-abcdef.jsonl").touch()
    with Memory(path, embedder="hash", shared=True):
        assert [p.name.split("-")[0] for p in folder.iterdir()] == [str(os.getpid())]
    assert not folder.exists()
    # a private open sweeps them too (before, only a shared one did: they stayed)
    folder.mkdir()
    (folder / f"{dead}-0-abcdef.jsonl").touch()
    with Memory(path, embedder="hash"):
        assert not folder.exists()


HOLD = """
import sys
from nbmemory import Memory
mem = Memory(sys.argv[1], embedder="hash", shared=True, background_consolidation=False)
with mem.store.locked():  # this kernel's turn, kept until told
    print("holding", flush=True)
    sys.stdin.readline()
mem.close()
"""


@pytest.mark.slow
def test_an_add_event_whose_turn_does_not_come_returns_its_stored_event(tmp_path, monkeypatch):
    """Due to write the journal out, add_event waits for a turn; if none comes it still
    returns (the row is durable in the journal): raising would invite a duplicate retry."""
    monkeypatch.setenv("NBMEMORY_LOCK_TIMEOUT", "0.3")
    monkeypatch.setattr(journal, "BATCH", 1)  # every add_event is due
    path = str(tmp_path / "busy.duckdb")
    with Memory(path, embedder="hash", shared=True, background_consolidation=False) as mem:
        holder = spawn(HOLD, path)
        try:
            expect(holder, "holding")
            event = mem.add_event("s", "user", "waits in the journal")
        finally:
            holder.stdin.write("\n")
            holder.stdin.flush()
            assert holder.wait(timeout=HANG) == 0, holder.stderr.read()
        assert mem.get_event(event.id).content == "waits in the journal"
        assert len(mem.events()) == 1


def _until_written(path: str) -> None:
    """Poll (a condition, not a pause) until no journal beside ``path`` holds a row."""
    deadline = time.monotonic() + HANG
    folder = Path(journal.folder_of(path))
    while any(p.stat().st_size for p in folder.iterdir()):
        assert time.monotonic() < deadline, "the idle journal was never written out"
        time.sleep(0.02)


def test_a_kernel_that_stops_writing_leaves_nothing_in_its_journal(tmp_path):
    path = str(tmp_path / "idle.duckdb")
    with Memory(path, embedder="hash", shared=True, background_consolidation=False) as mem:
        assert mem.recent("s", 5).empty  # the session's window is cached, empty
        events = [mem.add_event("s", "user", f"then quiet {i}") for i in range(3)]
        _until_written(path)  # no further call: the idle writer wrote them
        # the caches hear of it at the next call, on this thread
        assert list(mem.recent("s", 5)["id"]) == [e.id for e in reversed(events)]
        assert mem.flush(timeout=HANG)
        assert mem.search("then quiet 1", limit=1)["content"].iloc[0] == "then quiet 1"
        audited = [i for ids in mem.audit_log(action="add")["target_ids"] for i in ids]
        assert sorted(audited) == sorted(e.id for e in events)


@pytest.mark.slow
def test_a_read_only_kernel_sees_what_an_idle_kernel_journalled(tmp_path):
    path = str(tmp_path / "idle-other.duckdb")
    Memory(path, embedder="hash", shared=True).close()
    child = spawn(STREAM, path, "idle")  # journals 20 events, then waits without a call
    try:
        returned = [expect(child, "id") for _ in range(20)]
        expect(child, "written")
        _until_written(path)
        with Memory(path, embedder="hash", shared=True, read_only=True) as reader:
            assert list(reader.events()["id"]) == returned
    finally:
        child.stdin.write("\n")
        child.stdin.flush()
        assert child.wait(timeout=HANG) == 0


def _file_digest(path: str) -> str:
    import hashlib

    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.mark.slow
@pytest.mark.crash  # also under the oldest DuckDB allowed: the view's SQL
@pytest.mark.parametrize("shared", [False, True])
def test_a_reader_sees_what_a_killed_kernel_journalled(tmp_path, shared):
    # before: Memory(path, read_only=True), `nbmemory logs` and `state list` saw 0 of
    # the 20 acknowledged events until someone opened the store writable, and a
    # shared read-only kernel until a shared writer took a turn
    import duckdb

    path = str(tmp_path / "read-killed.duckdb")
    Memory(path, embedder="hash", shared=True).close()
    returned = _run_and_kill(path, "hold")
    with duckdb.connect(path, read_only=True) as con:  # the rows are only in the journal
        assert con.execute("SELECT count(*) FROM events").fetchall() == [(0,)]
    digest = _file_digest(path)
    with Memory(path, embedder="hash", read_only=True, shared=shared) as reader:
        assert list(reader.events()["id"]) == returned
        assert reader.recent("s", 1)["content"].iloc[0] == "journalled 19"
        hits = reader.search("journalled 7", limit=1, mode="keyword")
        assert hits["content"].iloc[0] == "journalled 7"
    assert _file_digest(path) == digest  # the reader wrote nothing
    assert (
        sum(len(journal.decode(p.read_bytes())) for p in Path(journal.folder_of(path)).iterdir())
        == 20
    )
    with Memory(path, embedder="hash") as writer:  # a writer still writes them in, once
        assert _stored_ids(writer) == returned
    with Memory(path, embedder="hash", read_only=True) as reader:
        assert list(reader.events()["id"]) == returned


@pytest.mark.slow
@pytest.mark.crash  # also under the oldest DuckDB allowed: the view's SQL
def test_a_private_reader_shows_rows_both_stored_and_journalled_once(tmp_path):
    path = str(tmp_path / "read-cut.duckdb")
    Memory(path, embedder="hash", shared=True).close()
    returned = _run_and_kill(path, "cut")  # committed, and still in the journal
    with Memory(path, embedder="hash", read_only=True) as reader:
        assert sorted(reader.events()["id"]) == sorted(returned)
