"""Building the vector index from the table holds the vectors about once.

The vectors are read from DuckDB a batch at a time into one matrix, and the counts a
clean close checks are scanned the same lean way.  A column kept
from an imported Arrow batch keeps the whole batch alive (its vectors included), and
DuckDB's buffer pool keeps what the scan read: either one doubles the peak.  A fresh
process builds the index of a store and reports how far its peak rose over the
matrix it holds."""

from __future__ import annotations

import sys

import pytest
from child_process import spawn

from nbmemory import Memory

pytestmark = pytest.mark.slow

DIM = 384

BUILD = """
import re, sys
from nbmemory import Memory

def status(name):
    text = open("/proc/self/status").read()
    return int(re.search(name + r":\\s+(\\d+) kB", text).group(1)) * 1024

mem = Memory(sys.argv[1], embedder="hash")
mem.status()  # everything the first call loads, loaded
open("/proc/self/clear_refs", "w").write("5")  # the peak starts again from here
before = status("VmRSS")
index = mem.indexes.vectors(mem.model_name)
mem.indexes.wait_for_saves()
print("rows", len(index))
print("rise", status("VmHWM") - before)
mem.close()  # a clean close checks the table still holds what the saved copy lacks
print("closed", status("VmHWM") - before)
"""


def _store(path: str, rows: int) -> None:
    with Memory(path, embedder="hash") as mem:
        for lo in range(0, rows, 20_000):
            mem.add_events(
                [
                    {"session_id": f"s{i % 50}", "role": "user", "content": f"note {i}"}
                    for i in range(lo, lo + 20_000)
                ]
            )
        assert mem.flush(timeout=300) is True


def _measure(path: str, rows: int) -> tuple[int, int]:
    """(peak rise of the build, peak rise once closed) of a fresh process, in bytes."""
    child = spawn(BUILD, path)
    out, err = child.communicate(timeout=300)
    assert child.returncode == 0, err
    lines = dict(line.split(" ", 1) for line in out.splitlines())
    assert int(lines["rows"]) == rows
    return int(lines["rise"]), int(lines["closed"])


@pytest.mark.skipif(sys.platform != "linux", reason="reads the peak from /proc")
def test_a_fresh_process_builds_the_vector_index_holding_the_vectors_about_once(tmp_path):
    """Measured as a slope, over two stores: the rise of the peak from the small store's
    build to the large one's, over the rise of the matrix.  What does not grow with the
    store (DuckDB's lowered limit, a batch or two in flight, the allocator's slack: 75
    to 100 MiB, by the run) cancels out, and holding the vectors twice reads 2."""
    small, large = 40_000, 160_000
    _store(str(tmp_path / "small.duckdb"), small)
    _store(str(tmp_path / "large.duckdb"), large)
    rise_small, closed_small = _measure(str(tmp_path / "small.duckdb"), small)
    rise_large, closed_large = _measure(str(tmp_path / "large.duckdb"), large)
    matrix = (large - small) * DIM * 4  # 176 MiB more
    # about once: 1.09 to 1.26 in five runs (the ids as Python strings and DuckDB's pool
    # filling add a little); keeping the batches' columns alive read 2.19
    slope = (rise_large - rise_small) / matrix
    assert slope < 1.6, (slope, rise_small >> 20, rise_large >> 20)
    # nor does the check a clean close makes, reading every vector's length, hold them
    # again (whether it fills DuckDB's pool is benchmarks/cold_first_search.py's to see:
    # here the blocks the build left in the pool already cover it)
    closed = (closed_large - closed_small) / matrix
    assert closed < 1.6, (closed, closed_small >> 20, closed_large >> 20)
