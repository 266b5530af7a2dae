"""Crashes and shutdown, with real processes.

* A child process streams ``add_event`` calls and prints every id the call
  returned; the parent SIGKILLs it mid-stream.  Reopening must find every
  printed id, open cleanly, and embed what had no vector yet.
* A process that opens a Memory, queues work and exits *without* ``close()``
  must exit (the atexit hook stops the threads); the subprocess timeout is the
  failure detector, never a sleep.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import duckdb
import pytest
from fakes import TESTS_DIR

from nbmemory import Memory

#: A deadlock or a hung process fails the test instead of hanging the suite.
pytestmark = pytest.mark.timeout(600)

#: Generous bound: a child that is still running after this is hung, not slow.
HANG = 120

_SRC = str(Path(__file__).resolve().parents[1] / "src")


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=_SRC, PYTHONUNBUFFERED="1")


STREAM_CHILD = """
import sys
sys.path.insert(0, sys.argv[4])
from fakes import StuckEmbedder as Stuck  # every event is still pending when killed
from nbmemory import Memory

path, mode, start = sys.argv[1], sys.argv[2], int(sys.argv[3])
mem = Memory(path, embedder=Stuck() if mode == "stuck" else "hash", shared=mode == "shared")
i = start
while True:
    event = mem.add_event(f"s{i % 3}", "user", f"memory number {i}", metadata={"i": i})
    print(event.id, flush=True)
    i += 1
"""


def _stream_and_kill(path: str, mode: str, start: int, count: int) -> list[str]:
    """Run the streaming child, read ``count`` returned ids, SIGKILL it; return the ids."""
    child = subprocess.Popen(
        [*_python(STREAM_CHILD), path, mode, str(start), TESTS_DIR],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    ids: list[str] = []
    try:
        while len(ids) < count:
            line = child.stdout.readline()
            if not line:  # the child died on its own: show why
                raise AssertionError(f"child exited early: {child.wait()} {child.stderr.read()}")
            ids.append(line.strip())
        child.send_signal(signal.SIGKILL)  # while it is still adding events
        assert child.wait(timeout=HANG) == -signal.SIGKILL
        # lines printed between our last read and the kill were returned too
        ids += [line.strip() for line in child.stdout.read().splitlines() if line.strip()]
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stdout.close()
        child.stderr.close()
    return ids


def test_sigkill_mid_stream_loses_no_returned_event_and_embeds_the_rest(tmp_path):
    path = str(tmp_path / "killed.duckdb")
    returned = _stream_and_kill(path, "stuck", 0, 150)
    assert len(returned) >= 150

    # the killed file opens cleanly (even read-only, with no repair) ...
    con = duckdb.connect(path, read_only=True)
    try:
        stored, without_vector = con.execute(
            "SELECT count(*), count(*) FILTER (WHERE id NOT IN (SELECT id FROM event_vectors))"
            " FROM events"
        ).fetchone()
    finally:
        con.close()
    # ... and the model never answered, so every event lacks its vector
    assert stored >= len(returned) and without_vector == stored

    with Memory(path, embedder="hash") as mem:
        ids = set(mem.events()["id"])
        assert set(returned) <= ids, "an event whose add_event returned was lost"
        assert mem.flush(timeout=HANG) is True
        status = mem.status()
        assert status["pending"] == 0 and status["failed"] == 0
        assert status["embedded"] == status["events"] == len(ids)
        # and it is searchable again
        assert mem.search("memory number 7", limit=1)["content"].iloc[0] == "memory number 7"


def test_repeated_sigkills_on_one_file_keep_every_returned_event(tmp_path):
    path = str(tmp_path / "killed-again.duckdb")
    returned: list[str] = []
    for round_ in range(3):  # kill, reopen (in the next child), kill again ...
        returned += _stream_and_kill(path, "hash", round_ * 10_000, 60)
    with Memory(path, embedder="hash") as mem:
        assert set(returned) <= set(mem.events()["id"])
        assert mem.flush(timeout=HANG) is True
        assert mem.status()["pending"] == 0
        assert mem.audit_log(action="add")["target_ids"].map(len).sum() >= len(returned)


def test_a_shared_kernel_killed_mid_lease_does_not_block_the_others(tmp_path):
    path = str(tmp_path / "shared-killed.duckdb")
    with Memory(path, embedder="hash", shared=True) as mine:
        mine.add_event("mine", "user", "written before the other kernel started")
        # the child takes a lease for every statement, so the kill lands inside one
        # or between two; either way the kernel drops its locks with the process
        returned = _stream_and_kill(path, "shared", 0, 80)
        assert set(returned) <= set(mine.events()["id"])
        after = mine.add_event("mine", "user", "written after the other kernel died")
        assert mine.flush(timeout=HANG)
        assert mine.recent("mine", 1)["id"].iloc[0] == after.id
        assert mine.get_event(after.id).embedding_model == mine.model_name
    # what the dead kernel left without a vector is embedded at the next open
    with Memory(path, embedder="hash", shared=True) as again:
        assert again.flush(timeout=HANG)
        assert again.status()["pending"] == 0


EXIT_CHILD = """
import sys
sys.path.insert(0, sys.argv[3])
from fakes import StuckEmbedder as Stuck  # a model that never answers
from nbmemory import Memory


path, mode = sys.argv[1], sys.argv[2]
mem = Memory(path, embedder=Stuck() if mode == "stuck" else "hash", shared=mode == "shared")
mem.add_events([{"session_id": "s", "role": "user", "content": f"queued {i}"} for i in range(3000)])
for i in range(20):
    mem.add_event("s", "user", f"single {i}")
if mode == "stuck":
    Stuck.entered.wait()  # the worker is inside the model for sure
if mode == "consolidation":
    mem.start_consolidation(interval_hours=0.0001)  # wakes every 0.36 s
print("leaving without close()", flush=True)
"""


@pytest.mark.parametrize("mode", ["hash", "stuck", "consolidation", "shared"])
def test_exit_without_close_does_not_hang_and_loses_nothing(tmp_path, mode):
    path = str(tmp_path / f"exit-{mode}.duckdb")
    result = subprocess.run(
        [*_python(EXIT_CHILD), path, mode, TESTS_DIR],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=HANG,  # the failure detector: a hung shutdown raises TimeoutExpired
    )
    assert result.returncode == 0, result.stderr
    assert "leaving without close()" in result.stdout
    # the atexit hook closed the file: this process can open it for writing
    with Memory(path, embedder="hash") as mem:
        assert len(mem.events()) == 3020
        assert mem.flush(timeout=HANG) is True
        assert mem.status()["embedded"] == 3020


def _nbmemory_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("nbmemory-") and t.is_alive()}


def test_close_stops_the_embedding_and_consolidation_threads(store_path):
    before = _nbmemory_threads()
    mem = Memory(store_path, embedder="hash")
    mem.add_events([{"session_id": "s", "role": "user", "content": f"t {i}"} for i in range(500)])
    consolidator = mem.start_consolidation(interval_hours=1)
    run = consolidator.trigger()
    started = _nbmemory_threads() - before
    assert {t.name for t in started} >= {"nbmemory-embedder", "nbmemory-consolidation"}
    assert consolidator.wait_for_run(run, timeout=HANG)
    mem.close()
    for thread in started:
        thread.join(timeout=HANG)  # the failure detector: a thread that never ends
        assert not thread.is_alive(), thread.name
    assert not consolidator.alive and mem.consolidator is None
    with Memory(store_path, embedder="hash") as again:  # queued texts were not lost
        assert again.flush(timeout=HANG)
        assert again.status()["embedded"] == len(again.events()) >= 500
