"""Reading an open store file never lets go of DuckDB's lock on it.

DuckDB keeps a POSIX lock on the file of a writable connection, so a second
process cannot open it for writing.  Closing *any* descriptor of a file drops
every POSIX lock the process holds on it: a plain ``open(path).read()`` of the
store (the index cache reads DuckDB's headers, a second ``Memory`` on the same
path reads the file's first bytes) would let another process in.  Each test
opens the store from a real second process to see the lock.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from nbmemory import Memory
from nbmemory.store import files

#: Each test opens the store from a real second process.
pytestmark = pytest.mark.slow

PROBE = """
import duckdb, sys
try:
    duckdb.connect(sys.argv[1]).close()
except duckdb.IOException as exc:
    print("locked" if "lock" in str(exc).lower() else f"error: {exc}")
else:
    print("opened")
"""


def another_process_opens(path: str) -> str:
    out = subprocess.run([sys.executable, "-c", PROBE, path], capture_output=True, text=True)
    return out.stdout.strip()


def open_mem(path: str) -> Memory:
    return Memory(path, embedder="hash", index_cache_min_rows=50, background_consolidation=False)


def fill(mem: Memory, n: int) -> None:
    mem.add_events([{"session_id": "s", "role": "user", "content": f"note {i}"} for i in range(n)])
    mem.flush()


def test_a_store_with_saved_indexes_stays_locked_while_they_are_checked(tmp_path):
    path = str(tmp_path / "locked.duckdb")
    with open_mem(path) as mem:
        fill(mem, 120)
        mem.search("note", mode="hybrid")  # builds and saves the copies
    with open_mem(path) as mem:  # reads the headers at open, then checks the copies
        assert another_process_opens(path) == "locked"
        mem.search("note 7", mode="hybrid")
        assert mem.indexes.cache is not None and mem.indexes.cache.store_state() is not None
        assert another_process_opens(path) == "locked"
    assert another_process_opens(path) == "opened"


def test_a_second_memory_on_the_file_keeps_the_first_ones_lock(tmp_path):
    path = str(tmp_path / "twice.duckdb")
    with open_mem(path) as first:
        fill(first, 3)
        with open_mem(path):
            assert another_process_opens(path) == "locked"
        assert another_process_opens(path) == "locked"  # the second one's close neither
    assert another_process_opens(path) == "opened"


def test_the_descriptor_kept_for_reads_is_closed_with_the_last_store(tmp_path):
    path = str(tmp_path / "kept.duckdb")
    first = open_mem(path)
    key = files._file_key(path)
    others = set(files._held) - {key}  # (stores another test of this worker left open)
    second = open_mem(path)
    assert set(files._held) - others == {key}  # one descriptor for both stores
    second.close()
    assert key in files._held
    first.close()
    assert key not in files._held
    assert files.read_span(path, 0, 4) is not None  # read and closed: nothing holds it
