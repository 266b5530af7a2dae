"""``purge()`` while other ``Memory`` objects have the file open: nothing written after
it is lost, and nobody reads what it erased.

DuckDB gives every connection of a process on one file the same database, which
keeps the file open until its last connection closes.  ``purge`` used to close only
its own connection before swapping the rewritten file in: with a second ``Memory``
of the file open, both went on writing to the old file, now without a name.  Every
call returned, and every read in the process saw its rows; a fresh process opening
the file found none of them.  Each test here writes after a purge through real
objects on a real file, closes everything, and asks a new Python process what the
file holds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import duckdb
import pytest
from child_process import child_env, expect, spawn
from notebook_shell import run

from nbmemory import Memory
from nbmemory.errors import StoreError
from nbmemory.store import files

FORGOTTEN = "the safe combination is zqx-purged-4471"


def opened(path: str, *, shared: bool = False) -> Memory:
    return Memory(path, embedder="hash", background_consolidation=False, shared=shared)


def in_a_new_process(path: str) -> list[str]:
    """The contents of every event of the store, as a new Python process opens it."""
    code = (
        "import json, sys\n"
        "from nbmemory import Memory\n"
        "with Memory(sys.argv[1], embedder='hash', background_consolidation=False) as mem:\n"
        "    print(json.dumps(sorted(mem.events()['content'])))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, path],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    contents: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return contents


def forget_and_purge(mem: Memory) -> None:
    """Plant the text to erase, forget it, purge."""
    doomed = mem.add_event("s", "user", FORGOTTEN)
    mem.flush()
    assert mem.delete(doomed.id) == 1
    mem.purge()


@pytest.fixture
def path(tmp_path: Path) -> str:
    return str(tmp_path / "agent.duckdb")


def test_what_the_other_object_writes_after_a_purge_is_in_the_file(path):
    purging, other = opened(path), opened(path)
    purging.add_event("s", "user", "written before the purge")
    forget_and_purge(purging)
    other.add_event("s", "user", "written by the other object after the purge")
    other.flush()
    other.close()
    purging.close()

    assert in_a_new_process(path) == [
        "written before the purge",
        "written by the other object after the purge",
    ]
    assert not os.path.exists(path + ".wal")  # every write is in the file itself
    assert FORGOTTEN.encode() not in Path(path).read_bytes()


def test_what_the_purging_object_writes_after_the_purge_is_in_the_file(path):
    purging, other = opened(path), opened(path)
    forget_and_purge(purging)
    purging.add_event("s", "user", "written by the purging object after the purge")
    purging.flush()
    purging.close()  # the purging object closes first: the other one still has the file
    other.add_event("s", "user", "written by the other object after that")
    other.close()

    assert in_a_new_process(path) == [
        "written by the other object after that",
        "written by the purging object after the purge",
    ]


def test_the_other_object_reads_the_purged_file(path):
    purging, other = opened(path), opened(path)
    purging.add_event("chat", "user", "my cat is called Miso")
    doomed = purging.add_event("chat", "user", FORGOTTEN)
    purging.flush()
    # the other object has built its caches (indexes, working memory) before the purge
    assert FORGOTTEN in set(other.search("safe combination", mode="keyword")["content"])
    assert FORGOTTEN in set(other.recent("chat")["content"])

    purging.delete(doomed.id)
    purging.purge()
    purging.add_event("chat", "user", "the purging object wrote this after the purge")
    purging.flush()

    for mode in ("keyword", "vector", "hybrid"):
        assert FORGOTTEN not in set(other.search("safe combination", mode=mode)["content"])
    assert set(other.recent("chat")["content"]) == {
        "my cat is called Miso",
        "the purging object wrote this after the purge",
    }
    assert FORGOTTEN not in set(other.events()["content"])
    other.close()
    purging.close()
    assert FORGOTTEN.encode() not in Path(path).read_bytes()


@pytest.mark.parametrize(
    ("purger_shared", "other_shared"),
    [(True, False), (False, True), (True, True)],
    ids=["shared-purges-beside-private", "private-purges-beside-shared", "both-shared"],
)
def test_objects_of_one_process_opened_shared_or_not_keep_their_writes(
    path, purger_shared, other_shared
):
    # one process may hold a file both ways (a shared Memory and a private one)
    purging, other = opened(path, shared=purger_shared), opened(path, shared=other_shared)
    forget_and_purge(purging)
    other.add_event("s", "user", "the other object, after the purge")
    purging.add_event("s", "user", "the purging object, after the purge")
    other.flush()
    purging.flush()
    assert FORGOTTEN not in set(other.events()["content"])
    other.close()
    purging.close()

    assert in_a_new_process(path) == [
        "the other object, after the purge",
        "the purging object, after the purge",
    ]
    assert FORGOTTEN.encode() not in Path(path).read_bytes()


def test_another_shared_process_writes_to_the_purged_file_and_lets_go_of_the_old_one(path):
    opened(path, shared=True).close()  # the store exists before the child opens it
    child = spawn(
        """
        import json, os, sys
        from nbmemory import Memory

        path = sys.argv[1]
        mem = Memory(path, embedder="hash", background_consolidation=False, shared=True)
        mem.add_event("s", "user", "the other process, before the purge")
        mem.flush()
        print("ready", flush=True)
        sys.stdin.readline()  # the parent purged meanwhile
        mem.add_event("s", "user", "the other process, after the purge")
        mem.flush()
        print("events", json.dumps(sorted(mem.events()["content"])), flush=True)
        old = []  # descriptors of a store file that no longer has a name: its old bytes
        for fd in os.listdir("/proc/self/fd"):
            try:
                target = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                continue
            if target.startswith(path) and target.endswith(" (deleted)"):
                old.append(target)
        print("old", json.dumps(old), flush=True)
        mem.close()
        print("closed", flush=True)
        """,
        path,
    )
    try:
        expect(child, "ready")
        purging = opened(path, shared=True)
        forget_and_purge(purging)
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
        seen = json.loads(expect(child, "events"))
        assert FORGOTTEN not in seen
        assert "the other process, after the purge" in seen
        assert json.loads(expect(child, "old")) == []
        expect(child, "closed")
        purging.add_event("s", "user", "this process, after the purge")
        purging.close()
    finally:
        child.kill()
        child.wait(timeout=60)

    assert in_a_new_process(path) == [
        "the other process, after the purge",
        "the other process, before the purge",
        "this process, after the purge",
    ]
    assert FORGOTTEN.encode() not in Path(path).read_bytes()


def test_purge_beside_a_connection_nbmemory_did_not_make_is_refused_and_changes_nothing(path):
    mem = opened(path)
    mem.add_event("s", "user", "kept")
    mem.facts.set("user", "city", "Lisbon")
    mem.facts.delete("user", "city")
    mem.flush()
    foreign = duckdb.connect(path, config=files._config())  # joins the store's database
    inode = os.stat(path).st_ino
    audited = len(mem.audit.log())
    try:
        with pytest.raises(StoreError, match="did not make") as refused:
            mem.purge(fact_history=True)
        assert "\n" not in str(refused.value)
        assert os.stat(path).st_ino == inode  # the file was not swapped
        assert len(mem.audit.log()) == audited  # the facts' history was not erased either
    finally:
        foreign.close()
    assert mem.purge(fact_history=True)["fact_history_erased"] == 1
    mem.add_event("s", "user", "after the purge")
    mem.close()
    assert in_a_new_process(path) == ["after the purge", "kept"]


def test_purge_waits_for_the_other_object_and_refuses_when_it_stays_busy(path, monkeypatch):
    purging, other = opened(path), opened(path)
    purging.add_event("s", "user", "kept")
    purging.flush()
    inode = os.stat(path).st_ino
    holding, release = threading.Event(), threading.Event()

    def busy() -> None:  # another thread in the middle of a call of the other object
        with other.store.locked():
            holding.set()
            release.wait()

    worker = threading.Thread(target=busy)
    worker.start()
    try:
        holding.wait()
        monkeypatch.setenv("NBMEMORY_LOCK_TIMEOUT", "0.2")
        with pytest.raises(StoreError, match="stayed busy") as refused:
            purging.purge()
        assert "\n" not in str(refused.value) and "close the other Memory" in str(refused.value)
        assert os.stat(path).st_ino == inode
    finally:
        release.set()
        worker.join()
    purging.purge()  # idle now: it goes through
    assert os.stat(path).st_ino != inode
    other.add_event("s", "user", "the other object, after the purge")
    other.close()
    purging.close()
    assert in_a_new_process(path) == ["kept", "the other object, after the purge"]


def test_memory_forget_purge_in_a_notebook_beside_the_users_own_memory(ip, magics):
    mine = opened(magics.path)  # the notebook's own Memory(path) beside the magics' one
    doomed = run(ip, f"%%remember\n{FORGOTTEN}")
    run(ip, f"%memory forget {doomed.id} --purge")
    mine.add_event("notebook", "user", "the user's Memory wrote this after the purge")
    run(ip, "%%remember\nthe magics wrote this after the purge")
    run(ip, "%memory forget --purge")  # the rewrite alone, once more
    run(ip, "%%remember\nand this after the second purge")
    mine.flush()
    assert FORGOTTEN not in set(mine.events()["content"])
    mine.close()
    run(ip, "%memory close")

    assert in_a_new_process(magics.path) == [
        "and this after the second purge",
        "the magics wrote this after the purge",
        "the user's Memory wrote this after the purge",
    ]
    assert FORGOTTEN.encode() not in Path(magics.path).read_bytes()


def test_the_copy_a_purge_killed_before_its_swap_leaves_is_removed_at_the_next_open(path):
    """A purge copies the live rows beside the store, then swaps the copy in.  Killed
    between the two, it left ``<store>.nbmemory-rewrite``: a stale copy of rows that
    no later erasure reached, removed only by the next purge."""
    with opened(path) as mem:
        mem.add_event("s", "user", FORGOTTEN)
    code = (
        "import os, signal, sys, duckdb\n"
        "from nbmemory.store import files\n"
        "con = duckdb.connect(sys.argv[1])\n"
        "files.copy_live_rows(con, sys.argv[1])\n"
        "os.kill(os.getpid(), signal.SIGKILL)  # as a purge killed before its swap\n"
    )
    killed = subprocess.run(
        [sys.executable, "-c", code, path], env=child_env(), timeout=120, capture_output=True
    )
    assert killed.returncode == -9, killed.stderr
    stale = path + files.REWRITE_SUFFIX
    assert os.path.exists(stale) and FORGOTTEN.encode() in Path(stale).read_bytes()
    with opened(path) as mem:
        assert mem.events()["content"].tolist() == [FORGOTTEN]
    assert not os.path.exists(stale) and not os.path.exists(stale + ".wal")
