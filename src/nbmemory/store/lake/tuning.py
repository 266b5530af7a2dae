"""The DuckDB settings a lake's connection runs with: its threads, DuckLake's retries.

**Threads.** A lake's statements are small: a commit, a row of the change feed, a
catalog lookup.  DuckDB's default of a thread per core only costs CPU on them:
measured with 4 writers x 300 ``add_event`` on 2 cores, 55 ms of CPU and 131 ms
per call with a thread per core, 30 ms and 77 ms with one; one writer alone 21 ->
16 ms.  A scan read into the vector index is the exception: it gets every thread
back (:func:`every_thread`), as one thread built an index of 20k memories 25% slower.

**Retries.** Two commits racing for the next snapshot: DuckLake retries the loser
after ``ducklake_retry_wait_ms`` (100 ms by default, growing 1.5x: a wait of 5.8 s
after ten lost races); a commit takes ~10-20 ms here, so a short wait growing
slowly keeps writers flowing.  Measured with 4 writers on 2 cores (benchmarks/bench_lake.py):
1.5x gave 45 add_event/s but calls stalled up to 18-24 s; 1.1x gives 32-36/s with
the slowest call 1-2 s.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import duckdb

#: DuckDB threads on a lake's connection, outside the scans of :func:`every_thread`.
LAKE_THREADS = 1
#: DuckLake's own retry of a commit that lost the race for the next snapshot.
RETRY_WAIT_MS = 5
RETRY_BACKOFF = 1.1
MAX_COMMIT_RETRIES = 100


def apply(con: duckdb.DuckDBPyConnection) -> None:
    """Set a new lake connection's threads and commit retries (the ducklake extension
    loaded)."""
    con.execute(f"SET threads = {LAKE_THREADS}")
    con.execute(f"SET ducklake_retry_wait_ms = {RETRY_WAIT_MS}")
    con.execute(f"SET ducklake_max_retry_count = {MAX_COMMIT_RETRIES}")
    con.execute(f"SET ducklake_retry_backoff = {RETRY_BACKOFF}")


@contextlib.contextmanager
def every_thread(
    cursor: Callable[[], duckdb.DuckDBPyConnection], is_open: Callable[[], bool]
) -> Iterator[None]:
    """DuckDB's default threads while the block runs, :data:`LAKE_THREADS` after."""
    cursor().execute("RESET threads")
    try:
        yield
    finally:
        if is_open():
            with contextlib.suppress(duckdb.Error):
                cursor().execute(f"SET threads = {LAKE_THREADS}")
