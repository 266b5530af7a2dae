"""Searches on one BLAS thread (nbmemory's choice) against BLAS's own threads.

    python benchmarks/blas_threads.py [--quick]

numpy's OpenBLAS splits a matrix-vector product of more than a few thousand
elements over every core, then its idle threads spin for about a tenth of a
second.  nbmemory runs a search's products on one thread up to
``blas.THREADED_WORK`` multiply-adds (43,690 vectors of 384 dimensions) and on
BLAS's threads past it (``nbmemory.retrieval.blas``); this prints what that costs
and saves against BLAS's threads always:

* **an agent's turns**: one process searches a store of N vectors (random unit
  vectors of 384 dimensions, the index a store keeps in memory), then waits 0.2 s,
  as an agent does while its model writes: the search's time (p50) and the
  process's CPU per turn, waiting included, under each policy (turns alternate);
* **a busy machine**: as many processes as cores, each making back-to-back
  searches of a 30,000-vector store at once: each process's wall and CPU time.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import children_at_once, machine, p50, print_table  # noqa: E402

from nbmemory.retrieval import blas  # noqa: E402
from nbmemory.retrieval.vector_index import VectorIndex  # noqa: E402

NBMEMORY = "nbmemory's"
POLICIES = {NBMEMORY: blas.THREADED_WORK, "BLAS's threads always": -1}
DIM = 384


def cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def index_of(rows: int) -> VectorIndex:
    vectors = np.random.default_rng(rows).standard_normal((rows, DIM)).astype(np.float32)
    index = VectorIndex("random")
    index.rebuild([f"m{i}" for i in range(rows)], ["n"] * rows, vectors)
    return index


def turns(rows: int, count: int, pause: float) -> list[list[str]]:
    """Table rows of the agent's-turns part for a store of ``rows`` vectors."""
    index = index_of(rows)
    queries = np.random.default_rng(1).standard_normal((count + 1, DIM)).astype(np.float32)
    times: dict[str, list[float]] = {name: [] for name in POLICIES}
    cpus: dict[str, list[float]] = {name: [] for name in POLICIES}
    for i in range(count + 1):
        for name, work in POLICIES.items():  # alternating, to spread the machine's noise
            blas.THREADED_WORK = work
            start_cpu, start = cpu(), time.perf_counter()
            index.search(queries[i], 10, namespace=None)
            took = time.perf_counter() - start
            time.sleep(pause)  # the agent's model writing its answer
            if i:  # the first turn warms up
                times[name].append(took)
                cpus[name].append(cpu() - start_cpu)
    blas.THREADED_WORK = POLICIES[NBMEMORY]
    floor = sum(cpus[NBMEMORY])
    mine = "one thread" if rows * DIM <= blas.THREADED_WORK else "BLAS's threads"
    return [
        [
            f"{rows:,}",
            f"{name} ({mine})" if name == NBMEMORY else name,
            f"{p50(times[name]) * 1000:.2f}",
            f"{sum(cpus[name]) / len(cpus[name]) * 1000:.1f}",
            f"{sum(cpus[name]) / floor:.1f}x",
        ]
        for name in POLICIES
    ]


CHILD = """
import resource, sys, time
import numpy as np
sys.path.insert(0, {here!r})
import blas_threads as bench
from nbmemory.retrieval import blas
blas.THREADED_WORK = int(sys.argv[1])
index = bench.index_of(30_000)
queries = np.random.default_rng(2).standard_normal((int(sys.argv[2]), bench.DIM)).astype(np.float32)
index.search(queries[0], 10, namespace=None)
start_cpu, start = bench.cpu(), time.perf_counter()
for q in queries:
    index.search(q, 10, namespace=None)
print(time.perf_counter() - start, bench.cpu() - start_cpu)
"""


def busy(processes: int, searches: int) -> list[list[str]]:
    """Table rows of the busy-machine part: ``processes`` children searching at once."""
    code = CHILD.format(here=str(Path(__file__).parent))
    measured = {}
    for name, work in POLICIES.items():
        results = children_at_once(["-c", code, str(work), str(searches)], processes)
        measured[name] = (
            sum(w for w, _ in results) / processes,
            sum(c for _, c in results) / processes,
        )
    floor_wall, floor_cpu = measured[NBMEMORY]
    return [
        [
            name,
            str(processes),
            f"{searches:,}",
            f"{wall:.2f} s",
            f"{used:.2f} s",
            f"{wall / floor_wall:.2f}x",
            f"{used / floor_cpu:.2f}x",
        ]
        for name, (wall, used) in measured.items()
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one small store, few turns")
    args = parser.parse_args(argv)
    print(machine())
    sizes = (3_000,) if args.quick else (3_000, 30_000, 100_000)
    count, pause = (3, 0.05) if args.quick else (20, 0.2)
    rows = [row for size in sizes for row in turns(size, count, pause)]
    print(f"\nAn agent's turns: one search, then {pause:g} s of waiting ({count} turns)")
    print_table(["vectors", "BLAS", "search p50 ms", "CPU per turn ms", "CPU vs nbmemory's"], rows)
    processes = os.cpu_count() or 2
    searches = 20 if args.quick else 400
    print(f"\nA busy machine: {processes} processes searching 30,000 vectors at once")
    print_table(
        ["BLAS", "processes", "searches each", "wall", "CPU", "wall vs ours", "CPU vs ours"],
        busy(processes, searches),
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
