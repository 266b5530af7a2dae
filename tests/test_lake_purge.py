"""``purge`` on a lake while another process writes: no acknowledged write is lost.

A purge rewrites every data file that holds deleted rows and expires every older
snapshot.  DuckLake 1.5.5 does not check a small delete against a concurrent
rewrite, and expiring snapshots removes the records a commit's conflict check
reads: without the fence (``store/lake/fence.py``) a delete that straddled a
purge came back, and an edit left the old row beside the new one.  Here a real
second process adds, edits and deletes memories, upserts facts and touches its
session all through several purges; afterwards the lake holds exactly what that
process was told it holds.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from child_process import expect, spawn
from lake_locks import advisory_waiters

from nbmemory import Memory
from nbmemory.errors import InvalidInput

#: Purges run while the writer writes.
PURGES = 4

_WRITER = """
import json, os, sys
from nbmemory import Memory
url, stop = sys.argv[1], sys.argv[2]
mem = Memory(url, embedder="hash", background_consolidation=False)
mem.start_session("writer-user", session_id="w")
print("ready", flush=True)
sys.stdin.readline()
i = 0
alive = []
while not os.path.exists(stop):
    event = mem.add_memory(f"note {i} of the writer", session_id="w")
    print("ack " + json.dumps(["add", event.id, event.content]), flush=True)
    alive.append(event.id)
    if i % 3 == 2:
        gone = alive.pop(0)
        mem.delete(gone)
        print("ack " + json.dumps(["delete", gone]), flush=True)
    if i % 4 == 1 and alive:
        edited = mem.update_memory(alive[-1], content=f"note {i} edited")
        print("ack " + json.dumps(["edit", edited.id, edited.content]), flush=True)
    key, value = f"key {i % 3}", f"value {i}"
    mem.set_fact("writer", key, value)
    print("ack " + json.dumps(["fact", key, value]), flush=True)
    i += 1
mem.close()
print("done", flush=True)
"""


def _open(url: str) -> Memory:
    return Memory(url, embedder="hash", background_consolidation=False)


class _Acks:
    """Reads the writer's acknowledgements as they come (the pipe never fills)."""

    def __init__(self, child) -> None:
        self.child = child
        self.lines: list[list[str]] = []
        self.done = False
        self._grew = threading.Condition()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        for line in self.child.stdout:
            with self._grew:
                if line.startswith("ack "):
                    self.lines.append(json.loads(line[4:]))
                elif line.startswith("done"):
                    self.done = True
                self._grew.notify_all()
        with self._grew:
            self.done = True
            self._grew.notify_all()

    def wait_for(self, count: int) -> None:
        """Until the writer acknowledged ``count`` writes (or ended)."""
        with self._grew:
            self._grew.wait_for(lambda: len(self.lines) >= count or self.done, timeout=300)
        assert len(self.lines) >= count, self.child.stderr.read()

    def finish(self) -> None:
        self._thread.join(timeout=300)
        assert self.done and self.child.wait(timeout=60) == 0, self.child.stderr.read()


def test_a_purge_while_another_process_writes_keeps_every_acknowledged_write(
    lake_url: str, tmp_path: Path
) -> None:
    with _open(lake_url) as mem:
        mem.add_events([{"session_id": "before", "role": "user", "content": f"old {i}"}
                        for i in range(30)])  # fmt: skip
        mem.delete(mem.events(session_id="before")["id"].tolist()[:10])
    stop = tmp_path / "stop"
    child = spawn(_WRITER, lake_url, str(stop))
    expect(child, "ready")
    acks = _Acks(child)
    try:
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
        purged = []
        with _open(lake_url) as mem:
            for round_ in range(PURGES):
                acks.wait_for(20 * (round_ + 1))  # the writer is well under way
                purged.append(mem.purge(expire_snapshots=True))
        stop.touch()
        acks.finish()
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
    # what the writer was told, replayed
    events: dict[str, str] = {}
    facts: dict[str, str] = {}
    for kind, *rest in acks.lines:
        if kind in ("add", "edit"):
            events[rest[0]] = rest[1]
        elif kind == "delete":
            events.pop(rest[0])
        else:
            facts[rest[0]] = rest[1]
    assert len(events) > 10 and sum(a[0] == "delete" for a in acks.lines) > 5
    assert sum(a[0] == "edit" for a in acks.lines) > 5
    assert sum(p["files_rewritten"] for p in purged) > 0  # the purges did rewrite files
    with _open(lake_url) as mem:
        stored = mem.events(session_id="w")
        assert stored["id"].is_unique, "an edit left its old row beside the new one"
        assert dict(zip(stored["id"], stored["content"], strict=True)) == events
        assert len(mem.events(session_id="before")) == 20
        kept = mem.facts(category="writer")
        assert kept["key"].is_unique
        assert dict(zip(kept["key"], kept["value"], strict=True)) == facts
        sessions = mem.store.fetchall("SELECT count(*) FROM sessions WHERE session_id = 'w'")
        assert sessions == [(1,)]
        # every purge left its audit row; only the last purge's snapshot and later remain
        assert (mem.audit_log()["action"] == "purge").sum() == PURGES
        assert mem.store.fetchall("SELECT count(*) FROM nbmemory_counters") == [(1,)]


def test_purge_on_a_lake_needs_consent_to_expire_its_snapshots(lake_url: str) -> None:
    with _open(lake_url) as mem:
        mem.add_event("s", "user", "forget me")
        mem.delete(mem.events()["id"].tolist())
        before = mem.store.fetchall(f"SELECT count(*) FROM {mem.store.lake_name}.snapshots()")
        with pytest.raises(InvalidInput, match="expire_snapshots"):
            mem.purge()
        with pytest.raises(InvalidInput, match="expire_snapshots"):
            mem.purge(expire_snapshots="yes")  # type: ignore[arg-type]
        after = mem.store.fetchall(f"SELECT count(*) FROM {mem.store.lake_name}.snapshots()")
        assert after == before  # nothing expired, nothing audited
        assert "purge" not in set(mem.audit_log()["action"])


def test_a_read_of_a_data_file_deleted_under_it_is_a_conflict_in_one_line(
    lake_url: str, tmp_path: Path
) -> None:
    """A read that was reading a file the purge's cleanup deleted ends as WriteConflict
    (Memory runs it again); a file that stays missing says so, never a raw DuckDB error."""
    from nbmemory.errors import WriteConflict

    with _open(lake_url) as mem:
        mem.add_events([{"session_id": "s", "role": "user", "content": f"row {i}"}
                        for i in range(30)])  # fmt: skip
        (gone,) = (tmp_path / "lake").rglob("main/events/*.parquet")
        gone.unlink()
        with pytest.raises(WriteConflict, match="is missing") as raised:
            mem.events()
        assert str(gone) in str(raised.value) and "restore the file" in str(raised.value)
        assert "\n" not in str(raised.value)


_HOLDER = """
import sys
from nbmemory import Memory
url = sys.argv[1]
mem = Memory(url, embedder="hash", background_consolidation=False)
doomed = mem.add_event("s", "user", "delete me while a purge waits").id
print("ready " + doomed, flush=True)
with mem.store.transaction():
    mem.store.execute("DELETE FROM lake.main.events WHERE id = ?", [doomed])
    print("deleting", flush=True)
    sys.stdin.readline()
print("committed", flush=True)
mem.close()
"""


def _fence_waiters(lake_url: str) -> int:
    """Requests for the lake's fence that PostgreSQL has not granted yet."""
    from nbmemory.store.lake.fence import FENCE_CLASS

    return advisory_waiters(lake_url, FENCE_CLASS)


def test_a_purge_waits_for_a_write_transaction_in_flight(lake_url: str) -> None:
    """The rule, step by step: another process's transaction has deleted a row and not
    committed; a purge waits for it (PostgreSQL shows its request queued), then runs;
    the delete stays done (without the fence DuckLake lost such deletes)."""
    with _open(lake_url) as mem:
        mem.add_events([{"session_id": "s", "role": "user", "content": f"row {i}"}
                        for i in range(30)])  # fmt: skip
    child = spawn(_HOLDER, lake_url)
    try:
        doomed = expect(child, "ready ")
        expect(child, "deleting")
        done: list[dict] = []
        with _open(lake_url) as mem:
            purge = threading.Thread(target=lambda: done.append(mem.purge(expire_snapshots=True)))
            purge.start()
            deadline = time.monotonic() + 120
            while _fence_waiters(lake_url) == 0:  # the purge's request, queued in PostgreSQL
                assert purge.is_alive(), "the purge ran beside the open transaction"
                assert time.monotonic() < deadline
            assert purge.is_alive() and not done
            assert child.stdin is not None
            child.stdin.write("commit\n")
            child.stdin.flush()
            expect(child, "committed")
            purge.join(timeout=120)
            assert done and done[0]["snapshots_expired"] > 0
            assert doomed not in set(mem.events()["id"])
            assert len(mem.events()) == 30
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
