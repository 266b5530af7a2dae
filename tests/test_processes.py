"""A process killed but not yet collected by its parent (a zombie) counts as gone.

Its turn's ticket kept every other shared opener waiting until the lock timeout,
then ``StoreLocked``: ``os.kill(pid, 0)`` succeeds for a zombie.  A parent that
reaps its children late, or a container whose first process reaps none, blocked a
shared store (a probe: 6 of 8 runs of a purge beside a writer killed late)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from child_process import child_env, expect, spawn

from nbmemory import Memory
from nbmemory.errors import StoreLocked
from nbmemory.store import processes

HANG = 60


def _zombie() -> subprocess.Popen:
    """A child killed and left unreaped: its state in /proc is Z."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    os.kill(child.pid, signal.SIGKILL)
    deadline = time.monotonic() + HANG
    while _state(child.pid) != "Z":  # the kernel's doing, not ours: wait for it
        assert time.monotonic() < deadline, "the killed child never became a zombie"
    return child


def _state(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rfind(")") + 2]


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc (Linux)")
def test_a_zombie_is_not_alive_and_a_running_process_is():
    zombie = _zombie()
    try:
        assert not processes.alive(zombie.pid)
        assert processes.alive(os.getpid())
        assert processes.alive(os.getppid())
    finally:
        zombie.wait()
    assert not processes.alive(zombie.pid)


HOLD = """
import sys
from nbmemory import Memory
from nbmemory.errors import StoreLocked
mem = Memory(sys.argv[1], embedder="hash", shared=True, background_consolidation=False)
with mem.store.locked():
    print("holding", flush=True)
    sys.stdin.readline()
print("released", flush=True)
sys.stdin.readline()
"""

WAIT = """
import sys
from nbmemory import Memory
from nbmemory.errors import StoreLocked
print("asking", flush=True)
mem = Memory(sys.argv[1], embedder="hash", shared=True, background_consolidation=False)
mem.add_events([{"session_id": "s", "role": "user", "content": "never"}])
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc (Linux)")
def test_a_shared_opener_killed_while_waiting_and_not_reaped_blocks_no_one(tmp_path, monkeypatch):
    path = str(tmp_path / "zombie.duckdb")
    Memory(path, embedder="hash").close()
    tickets = Path(path + ".nbmemory-lock.tickets")
    holder = spawn(HOLD, path)
    expect(holder, "holding")
    waiter = subprocess.Popen(
        [sys.executable, "-c", WAIT, path], stdout=subprocess.PIPE, text=True, env=child_env()
    )
    assert waiter.stdout is not None and waiter.stdout.readline().strip() == "asking"
    deadline = time.monotonic() + HANG
    while not any(f"-{waiter.pid}-" in name for name in os.listdir(tickets)):
        assert time.monotonic() < deadline, "the waiter never queued for its turn"
    os.kill(waiter.pid, signal.SIGKILL)  # killed in the queue, and not reaped
    while _state(waiter.pid) != "Z":
        assert time.monotonic() < deadline
    holder.stdin.write("\n")
    holder.stdin.flush()
    expect(holder, "released")
    monkeypatch.setenv("NBMEMORY_LOCK_TIMEOUT", "5")  # before: StoreLocked after it
    try:
        with Memory(path, embedder="hash", shared=True) as mem:
            mem.add_event("s", "user", "the third process got its turn")
            assert len(mem.events()) == 1
    finally:
        holder.stdin.write("\n")
        holder.stdin.flush()
        holder.wait(timeout=HANG)
        waiter.wait()


def test_a_shared_opener_that_waits_out_its_turn_is_told_to_wait(tmp_path, monkeypatch):
    """It was told to "open every kernel with Memory(path, shared=True)", as a private
    opener is, though it was shared already."""
    path = str(tmp_path / "busy.duckdb")
    Memory(path, embedder="hash").close()
    holder = spawn(HOLD, path)
    expect(holder, "holding")
    monkeypatch.setenv("NBMEMORY_LOCK_TIMEOUT", "0.5")
    try:
        with pytest.raises(StoreLocked) as info:
            Memory(path, embedder="hash", shared=True)
        message = str(info.value)
        assert "waited for its turn" in message and "NBMEMORY_LOCK_TIMEOUT" in message
        assert "shared=True" not in message and "\n" not in message
    finally:
        holder.stdin.write("\n\n")
        holder.stdin.flush()
        holder.wait(timeout=HANG)


def test_add_event_does_not_wait_for_a_turn_another_process_holds(tmp_path, monkeypatch):
    """A shared ``add_event`` whose journal was due to be written out waited for the
    file's turn, up to twice the lock timeout, while another process held a long turn
    (a purge, an import): its row was durable in the journal all along."""
    import threading

    from nbmemory.store import journal

    path = str(tmp_path / "held.duckdb")
    Memory(path, embedder="hash").close()
    monkeypatch.setenv("NBMEMORY_LOCK_TIMEOUT", "600")
    monkeypatch.setattr(journal, "BATCH", 1)  # every add_event is due to write it out
    with Memory(path, embedder="hash", shared=True, background_consolidation=False) as mem:
        holder = spawn(HOLD, path)
        try:
            expect(holder, "holding")
            returned: list[str] = []
            call = threading.Thread(
                target=lambda: returned.append(mem.add_event("s", "user", "while held").id),
                daemon=True,
            )
            call.start()
            call.join(timeout=HANG)  # a bound, far under the 600 s it would wait
            assert returned, "add_event waited for the turn another process holds"
            rows = [e["row"]["id"] for p in Path(journal.folder_of(path)).iterdir()
                    for e in journal.decode(p.read_bytes())]  # fmt: skip
            assert returned == rows  # acknowledged: in the journal, fsync'd
        finally:
            holder.stdin.write("\n\n")
            holder.stdin.flush()
            holder.wait(timeout=HANG)
        assert list(mem.recent("s", 1)["id"]) == returned  # written at the next turn
