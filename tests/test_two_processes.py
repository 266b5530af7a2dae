"""Two kernels (two real processes) on one store file.

Default mode: the first process holds the file; the second gets a one-line
:class:`StoreLocked` naming the holder's PID and what to do, from the API and
from the CLI, and nothing the first one stored is lost.

Shared mode (``Memory(path, shared=True)``): both processes remember and recall
at the same time, each seeing what the other wrote, and every returned id is in
the file afterwards.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from child_process import child_env, expect, release_together, spawn

from nbmemory import Memory, StoreLocked

#: A deadlock or a hung process fails the test instead of hanging the suite.
pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]

HANG = 180


HOLDER = """
import os, sys
from nbmemory import Memory
mem = Memory(sys.argv[1], embedder="hash")
event = mem.add_event("s", "user", "written by the holder")
mem.flush()
print("ready", os.getpid(), event.id, flush=True)
sys.stdin.readline()  # hold the store until the test says so
mem.add_event("s", "user", "written by the holder after the refusal")
mem.close()
print("closed", flush=True)
"""


@pytest.fixture
def holder(tmp_path):
    """A real second process holding ``store`` open in the default (exclusive) mode."""
    path = str(tmp_path / "held.duckdb")
    child = spawn(HOLDER, path)
    pid, event_id = expect(child, "ready").split()
    yield path, int(pid), event_id, child
    if child.poll() is None:
        child.kill()
    child.wait(timeout=HANG)
    child.stdout.close()
    child.stderr.close()
    child.stdin.close()


def test_second_process_gets_one_line_storelocked_naming_the_holder(holder):
    path, pid, event_id, child = holder
    with pytest.raises(StoreLocked) as info:
        Memory(path, embedder="hash")
    message = str(info.value)
    assert "\n" not in message
    assert f"process {pid}" in message and path in message
    assert "close the other kernel" in message and "shared=True" in message
    assert info.value.pid == pid
    with pytest.raises(StoreLocked, match=f"process {pid}"):
        Memory(path, embedder="hash", read_only=True)  # DuckDB refuses readers too
    # the refusal cost the holder nothing: it keeps writing, then closes
    child.stdin.write("go\n")
    child.stdin.flush()
    expect(child, "closed")
    assert child.wait(timeout=HANG) == 0
    with Memory(path, embedder="hash") as mem:
        contents = set(mem.events()["content"])
        assert {"written by the holder", "written by the holder after the refusal"} <= contents
        assert mem.get_event(event_id).content == "written by the holder"


def test_cli_on_a_held_store_exits_non_zero_with_one_line_naming_the_pid(holder):
    path, pid, _, _ = holder
    script = Path(sys.executable).with_name("nbmemory")
    result = subprocess.run(
        [str(script), "demo", "--store", path, "--embedder", "hash"],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=HANG,
    )
    assert result.returncode == 1
    err = result.stderr.strip()
    assert "\n" not in err and "Traceback" not in err
    assert err.startswith("nbmemory: error:") and f"process {pid}" in err
    assert "IOException" not in err and "IO Error" not in err


def test_shared_opener_is_refused_at_once_naming_a_non_shared_holder(holder):
    """(It used to wait for the file; tests/test_openers.py holds the rule's other cases.)"""
    path, pid, _, _ = holder
    with pytest.raises(StoreLocked, match=f"process {pid}") as info:
        Memory(path, embedder="hash", shared=True)
    assert "\n" not in str(info.value) and "without shared=True" in str(info.value)


SHARED_KERNEL = """
import json, sys
from nbmemory import Memory
path, name, other, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
mem = Memory(path, embedder="hash", shared=True)
print("ready", flush=True)
sys.stdin.readline()  # both kernels start writing at the same moment
for i in range(count):
    event = mem.add_event("together", "user", f"{name} remembers item {i}", metadata={"by": name})
    print("id", event.id, flush=True)
    if i % 5 == 0:  # read while the other kernel writes
        mem.search(f"{other} remembers item", limit=3)
        mem.recent("together", 5)
assert mem.flush(timeout=120)
print("written", flush=True)
# wait for the other kernel's writes by reading the store (each read is one lease)
for attempt in range(100_000):
    theirs = mem.events(session_id="together", role="user")
    if (theirs["content"].str.startswith(other)).sum() == count:
        break
hits = mem.search(f"{other} remembers item 7", limit=1)
recent = mem.recent("together", 2 * count)
print("seen", json.dumps({
    "search_top": hits["content"].iloc[0] if len(hits) else None,
    "recent_from_other": int(recent["content"].str.startswith(other).sum()),
    "total": len(mem.events()),
}), flush=True)
mem.close()
"""


def test_two_shared_kernels_remember_and_recall_at_once(tmp_path):
    path = str(tmp_path / "shared.duckdb")
    count = 25
    kernels = {
        name: spawn(SHARED_KERNEL, path, name, other, str(count))
        for name, other in (("alpha", "beta"), ("beta", "alpha"))
    }
    try:
        for child in kernels.values():
            expect(child, "ready")
        for child in kernels.values():  # release both at once
            child.stdin.write("go\n")
            child.stdin.flush()
        returned: dict[str, list[str]] = {}
        seen: dict[str, dict] = {}
        for name, child in kernels.items():
            out, err = child.communicate(timeout=HANG)
            assert child.returncode == 0, err
            assert "Traceback" not in err
            lines = out.splitlines()
            returned[name] = [line.split()[1] for line in lines if line.startswith("id ")]
            seen[name] = json.loads(next(ln for ln in lines if ln.startswith("seen "))[5:])
    finally:
        for child in kernels.values():
            if child.poll() is None:
                child.kill()
                child.wait()
    for name, other in (("alpha", "beta"), ("beta", "alpha")):
        assert len(returned[name]) == count
        # each kernel recalled the other's memory by search and in its working memory
        assert seen[name]["search_top"] == f"{other} remembers item 7"
        assert seen[name]["recent_from_other"] == count
        assert seen[name]["total"] == 2 * count
    with Memory(path, embedder="hash") as mem:  # nothing lost, everything embedded
        stored = mem.events()
        assert set(returned["alpha"]) | set(returned["beta"]) == set(stored["id"])
        assert mem.flush(timeout=HANG)
        assert mem.status()["embedded"] == 2 * count


def test_shared_mode_refuses_an_in_memory_store():
    from nbmemory import StoreError

    with pytest.raises(StoreError, match="shared=True needs a store file"):
        Memory(":memory:", embedder="hash", shared=True)


WRITER = """
import sys
from nbmemory import Memory
with Memory(sys.argv[1], embedder="hash", shared=True) as mem:
    event = mem.add_event("s", "user", sys.argv[2])
    assert mem.flush(timeout=120)
    print("id", event.id, flush=True)
"""


def test_a_shared_kernel_sees_what_another_wrote_after_it_cached(tmp_path):
    path = str(tmp_path / "caches.duckdb")
    with Memory(path, embedder="hash", shared=True) as mem:
        for i in range(20):
            mem.add_event("s", "user", f"local note {i}")
        assert mem.flush(timeout=HANG)
        # fill this process's caches: the vector index and the session's working memory
        assert mem.search("local note 3", limit=1)["content"].iloc[0] == "local note 3"
        assert len(mem.recent("s", 50)) == 20
        child = spawn(WRITER, path, "the zebra crossing is on Elm street")
        out, err = child.communicate(timeout=HANG)
        assert child.returncode == 0, err
        their_id = out.split()[1]
        # while this Memory stays open, the other process wrote and embedded
        assert mem.search("zebra crossing Elm street", limit=1)["id"].iloc[0] == their_id
        assert mem.recent("s", 1)["id"].iloc[0] == their_id
        assert mem.get_event(their_id).content == "the zebra crossing is on Elm street"
        assert mem.store.external_changes >= 1


SHARED_HOLDER = """
import sys
from nbmemory import Memory

mem = Memory(sys.argv[1], embedder="hash", shared=True)
mem.add_event("demo", "user", "the kernel was here first")
assert mem.flush(timeout=120)
print("ready", flush=True)
sys.stdin.readline()  # stay open while the CLI runs
print("seen", len(mem.events(session_id="demo")), flush=True)
mem.close()
"""


def test_nbmemory_shared_env_lets_the_cli_share_with_an_open_kernel(tmp_path):
    path = str(tmp_path / "with-cli.duckdb")
    kernel = spawn(SHARED_HOLDER, path)
    try:
        expect(kernel, "ready")
        script = Path(sys.executable).with_name("nbmemory")
        run = [str(script), "demo", "--store", path, "--embedder", "hash"]
        refused = subprocess.run(
            run,
            capture_output=True,
            text=True,
            env=child_env(NBMEMORY_SHARED="maybe"),
            timeout=HANG,
        )
        assert refused.returncode == 1
        assert refused.stderr.strip() == (
            "nbmemory: error: NBMEMORY_SHARED='maybe' must be 1 or 0 (true/false)"
        )
        shared = subprocess.run(
            run, capture_output=True, text=True, env=child_env(NBMEMORY_SHARED="1"), timeout=HANG
        )
        assert shared.returncode == 0, shared.stderr
        kernel.stdin.write("go\n")
        kernel.stdin.flush()
        # the open kernel sees its own event plus the demo conversation the CLI wrote
        assert int(expect(kernel, "seen")) == 1 + 7
        assert kernel.wait(timeout=HANG) == 0
    finally:
        if kernel.poll() is None:
            kernel.kill()
            kernel.wait()


def test_nbmemory_shared_env_is_the_default_and_an_explicit_argument_wins(tmp_path, monkeypatch):
    from nbmemory.store.shared import SharedStore

    path = str(tmp_path / "env.duckdb")
    monkeypatch.setenv("NBMEMORY_SHARED", "1")
    with Memory(path, embedder="hash") as mem:
        assert isinstance(mem.store, SharedStore)
    with Memory(path, embedder="hash", shared=False) as mem:
        assert not isinstance(mem.store, SharedStore)
    with Memory(":memory:", embedder="hash") as mem:  # nothing to share: stays private
        assert not isinstance(mem.store, SharedStore)
    monkeypatch.setenv("NBMEMORY_SHARED", "0")
    with Memory(path, embedder="hash") as mem:
        assert not isinstance(mem.store, SharedStore)


def test_a_forked_child_makes_ids_of_its_own():
    """Event ids come from a buffer of random bytes: a fork must not share what is left."""
    import os

    from nbmemory.event_rows import new_id

    new_id()  # the parent's buffer is now filled
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids, then exit without running the test teardown
        os.write(write, " ".join(new_id() for _ in range(8)).encode())
        os._exit(0)
    os.close(write)
    child = set(os.read(read, 4096).decode().split())
    os.waitpid(pid, 0)
    parent = {new_id() for _ in range(8)}
    random_part = (1 << 74) - 1  # ids of one millisecond differ only in these bits
    assert len(child) == 8
    assert not {uuid.UUID(x).int & random_part for x in child} & {
        uuid.UUID(x).int & random_part for x in parent
    }


CREATOR = """
import sys
from nbmemory import Memory
print("ready", flush=True)
sys.stdin.readline()
with Memory(sys.argv[1], embedder="hash", shared=True) as mem:
    print("id " + mem.add_event("s", "user", "from " + sys.argv[2]).id, flush=True)
"""


def test_five_processes_creating_one_new_store_at_once_all_write_into_it(tmp_path):
    """Shared openers released together on a path that does not exist yet: each makes
    the file under its own name and links it into place, one link wins, and every
    process writes into the one store (no process refused, no new file left beside it)."""
    path = tmp_path / "new.duckdb"
    children = [spawn(CREATOR, str(path), str(n)) for n in range(5)]
    try:
        release_together(children)
        ids = [expect(child, "id ") for child in children]
        for child in children:
            assert child.wait(timeout=HANG) == 0
    finally:
        for child in children:
            child.kill() if child.poll() is None else None
    with Memory(str(path), embedder="hash") as mem:
        assert sorted(mem.events()["id"]) == sorted(ids)
    assert not [p.name for p in tmp_path.iterdir() if ".nbmemory-new-" in p.name]
