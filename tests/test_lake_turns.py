"""The writers of a lake may take turns (``NBMEMORY_LAKE_TURNS=1``; ``store/lake/fence.py``).

DuckLake commits optimistically: with several writers committing small
transactions at once, most tries lost the race for the next snapshot and were
tried again (20,807 lost races in one CI run of 4 writers x 2,000 ``add_event``),
each costing a commit's CPU.  With turns on, a write transaction waits for the
lake's turn, an advisory lock in PostgreSQL's queue, before its snapshot is taken.  Real
processes here: one writes while another waits in PostgreSQL's queue; and a
writer stopped mid-transaction (``SIGSTOP``, a host asleep) holds the others up
for :data:`~nbmemory.store.lake.fence.TURN_TIMEOUT` seconds at most.
"""

from __future__ import annotations

import os
import signal
import time

import pytest
from child_process import expect, spawn
from lake_locks import advisory_waiters

from nbmemory import Memory
from nbmemory.store.lake.fence import ENV_TURNS, TURN_CLASS

_HOLDER = """
import sys
from nbmemory import Memory
mem = Memory(sys.argv[1], embedder="hash", background_consolidation=False)
mem.add_event("holder", "user", "the holder opened the lake")
assert mem.flush(timeout=60)  # no vectors of its own left to write
print("ready", flush=True)
sys.stdin.readline()
with mem.store.transaction():
    mem.add_event("holder", "user", "written in the holder's long transaction")
    print("writing", flush=True)
    sys.stdin.readline()
print("committed", flush=True)
mem.close()
"""

_WRITER = """
import sys
from nbmemory import Memory
mem = Memory(sys.argv[1], embedder="hash", background_consolidation=False)
print("ready", flush=True)
sys.stdin.readline()
for i in range(3):
    mem.add_event("writer", "user", f"the writer's note {i}")
print("added", flush=True)
mem.close()
"""


def _say(child, line: str) -> None:
    assert child.stdin is not None
    child.stdin.write(line + "\n")
    child.stdin.flush()


def _stop(*children) -> None:
    for child in children:
        if child.poll() is None:
            child.kill()
        child.wait()


def _contents(lake_url: str) -> list[str]:
    with Memory(lake_url, embedder="hash", background_consolidation=False) as mem:
        return sorted(mem.events()["content"])


EVERYTHING = sorted(
    [
        "the holder opened the lake",
        "written in the holder's long transaction",
        *(f"the writer's note {i}" for i in range(3)),
    ]
)


def test_a_writer_waits_in_postgresqls_queue_while_another_writes(lake_url: str) -> None:
    on = {ENV_TURNS: "1"}
    holder, writer = spawn(_HOLDER, lake_url, **on), spawn(_WRITER, lake_url, **on)
    try:
        expect(holder, "ready")
        expect(writer, "ready")
        _say(holder, "go")
        expect(holder, "writing")  # its transaction is open, holding the turn
        _say(writer, "go")
        deadline = time.monotonic() + 60
        while (
            advisory_waiters(lake_url, TURN_CLASS) == 0
        ):  # the writer's request, queued in PostgreSQL
            assert writer.poll() is None, writer.stderr.read()
            assert time.monotonic() < deadline, "the writer never waited for its turn"
        _say(holder, "commit")
        expect(holder, "committed")
        expect(writer, "added")  # its turn came once the holder committed
        assert holder.wait(timeout=60) == 0 and writer.wait(timeout=60) == 0
    finally:
        _stop(holder, writer)
    assert _contents(lake_url) == EVERYTHING


@pytest.mark.parametrize("turns", ["on", "off"])
def test_a_writer_stopped_mid_transaction_holds_the_others_up_only_for_a_while(
    lake_url: str, turns: str
) -> None:
    """The holder is stopped (SIGSTOP) with its turn; the writer waits for the turn's
    timeout (``on``) or not at all (``off``, the default), then writes without a turn,
    as DuckLake allows; the holder, continued, commits; nothing is lost."""
    env = {ENV_TURNS: "1" if turns == "on" else "0"}
    holder, writer = spawn(_HOLDER, lake_url, **env), spawn(_WRITER, lake_url, **env)
    try:
        expect(holder, "ready")
        expect(writer, "ready")
        _say(holder, "go")
        expect(holder, "writing")
        os.kill(holder.pid, signal.SIGSTOP)
        try:
            _say(writer, "go")
            expect(writer, "added")  # while the holder is still stopped
            assert writer.wait(timeout=60) == 0
        finally:
            os.kill(holder.pid, signal.SIGCONT)
        _say(holder, "commit")
        expect(holder, "committed")
        assert holder.wait(timeout=60) == 0
    finally:
        _stop(holder, writer)
    assert _contents(lake_url) == EVERYTHING


def test_a_write_of_more_events_than_catalog_rows_takes_no_turn(lake_url: str, monkeypatch) -> None:
    """DuckLake writes more than ``TURN_ROWS`` new rows to a Parquet file: long enough
    that writers overlapping it beat writers waiting for it, so such a write races."""
    import threading

    from nbmemory.store.lake import fence

    turns: list[int] = []
    wait_for_turn = fence.Fence._wait_for_turn

    def counted(self, holder) -> None:
        turns.append(threading.get_ident())
        wait_for_turn(self, holder)

    monkeypatch.setattr(fence.Fence, "_wait_for_turn", counted)
    monkeypatch.setenv(ENV_TURNS, "1")
    here = threading.get_ident()

    def rows(count: int, tag: str) -> list[dict]:
        return [{"session_id": "s", "role": "user", "content": f"{tag} {i}"} for i in range(count)]

    with Memory(lake_url, embedder="hash", background_consolidation=False) as mem:
        mem.add_event("s", "user", "the first event starts the session")
        for count, turn in ((1, True), (fence.TURN_ROWS, True), (fence.TURN_ROWS + 1, False)):
            before = turns.count(here)  # (the embedding worker's own turns are not counted)
            mem.add_events(rows(count, f"{count} rows"))
            assert (turns.count(here) > before) == turn, count
        assert mem.flush(timeout=60)
        assert len(mem.events()) == 1 + 1 + 2 * fence.TURN_ROWS + 1


def test_turns_are_off_unless_asked_for(monkeypatch) -> None:
    from nbmemory.store.lake.fence import turns_wanted

    monkeypatch.delenv(ENV_TURNS, raising=False)
    assert not turns_wanted()
    for value, wanted in (("1", True), ("on", True), ("0", False), ("", False)):
        monkeypatch.setenv(ENV_TURNS, value)
        assert turns_wanted() is wanted, value
