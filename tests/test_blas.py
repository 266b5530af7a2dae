"""A search leaves no BLAS thread spinning, and gives BLAS back the threads it had.

numpy's OpenBLAS splits a matrix-vector product of a few thousand vectors over
every core, then its idle threads spin for about a tenth of a second: each search
of a 3,000-memory store kept another core busy (``nbmemory.retrieval.blas``).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from nbmemory.retrieval import blas
from nbmemory.retrieval.vector_index import VectorIndex


def blas_threads() -> list[int]:
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


needs_threaded_blas = pytest.mark.skipif(
    max(blas_threads(), default=1) < 2,
    reason="numpy's BLAS runs on one thread here (one core, or set so): nothing can spin",
)

IDLE = textwrap.dedent(
    """
    import resource, time
    from nbmemory import Memory
    memory = Memory(":memory:", embedder="hash", background_consolidation=False)
    memory.add_events(
        [{"session_id": "s", "role": "user", "content": f"note {i}: topic {i % 97}, thing {i % 13}"}
         for i in range(3000)]
    )
    memory.flush()
    for mode in ("vector", "hybrid") * 10:
        memory.search("what about topic 42", mode=mode, limit=10)

    def cpu():
        used = resource.getrusage(resource.RUSAGE_SELF)
        return used.ru_utime + used.ru_stime

    before = cpu()
    time.sleep(0.3)  # the window watched, not a wait for anything
    print(cpu() - before)
    memory.close()
    """
)


@needs_threaded_blas
def test_a_process_that_searched_uses_no_cpu_while_it_waits() -> None:
    """Idle for 0.3 s after searches, the process uses (nearly) no CPU; with BLAS's
    threads spinning after each product it used ~0.1 s of a core."""
    out = subprocess.run(
        [sys.executable, "-c", IDLE], capture_output=True, text=True, timeout=120, check=True
    )
    idle_cpu = float(out.stdout.split()[-1])
    assert idle_cpu < 0.03, f"{idle_cpu:.3f} s of CPU in 0.3 s of idling"


def _index(rows: int = 3000, dim: int = 384) -> VectorIndex:
    vectors = np.random.default_rng(0).standard_normal((rows, dim)).astype(np.float32)
    index = VectorIndex("m")
    index.rebuild([f"m{i}" for i in range(rows)], ["n"] * rows, vectors)
    return index


@needs_threaded_blas
def test_overlapping_searches_give_blas_back_its_threads() -> None:
    """Blocks that overlap set one thread once and give the count back when the
    last ends: here the first to start ends first, which a per-block save and
    restore would leave at one thread for the rest of the process; and the last
    to end is not the thread that set the count, which threadpoolctl (3.8) lets
    only the first setter do unless it is told otherwise."""
    before = blas_threads()
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, list[int]] = {}

    def first() -> None:
        with blas.one_thread(1):
            first_in.set()
            second_in.wait(10)
        first_out.set()

    def second() -> None:
        first_in.wait(10)
        with blas.one_thread(1):
            second_in.set()
            first_out.wait(10)
            seen["second, after the first ended"] = blas_threads()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert seen["second, after the first ended"] == [1] * len(before)
    assert blas_threads() == before


@needs_threaded_blas
def test_many_threads_searching_at_once_leave_the_count_as_it_was() -> None:
    index = _index()
    query = np.ones(384, dtype=np.float32)
    expected = index.search(query, 5, namespace=None)
    before = blas_threads()
    answers: list[object] = []

    def searcher() -> None:
        for _ in range(30):
            answers.append(index.search(query, 5, namespace=None))

    threads = [threading.Thread(target=searcher) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert blas_threads() == before
    assert answers == [expected] * 180


@needs_threaded_blas
def test_a_limit_the_user_set_stays_set() -> None:
    index = _index()
    with threadpool_limits(limits=1, user_api="blas"):
        index.search(np.ones(384, dtype=np.float32), 5, namespace=None)
        assert blas_threads() == [1] * len(blas_threads())
    assert max(blas_threads()) >= 2


def test_large_products_keep_blas_threads() -> None:
    """Past :data:`~nbmemory.retrieval.blas.THREADED_WORK` the block changes nothing."""
    before = blas_threads()
    with blas.one_thread(blas.THREADED_WORK + 1):
        assert blas_threads() == before
    with blas.one_thread(blas.THREADED_WORK):
        assert blas_threads() == [1] * len(before)
    assert blas_threads() == before
