"""nbmemory's own write cost: add_events + flush() with an embedder that costs nothing.

    python benchmarks/bench_write.py --sizes 10000 100000

The model hides the write path on a CPU (about 140 texts/s); on a GPU, or with any
faster embedder, nbmemory's bookkeeping is what limits ingest.  Side by side in
one run, on the same texts and vectors, in fresh stores:

* the floor: DuckDB alone, one ``INSERT`` of the rows and their vectors from Arrow;
* the floor in the same transactions: DuckDB alone, with the store's settings,
  appending rows (to a table keyed by id, as ``events`` is) and their vectors
  from Arrow and committing every ``--batch`` rows, as each ``add_events`` call
  must (one call, one durable transaction);
* ``add_events`` (bulk, batches of ``--batch``) followed by ``flush()``, the
  embedder a lookup of precomputed vectors (no model time at all).

Dirty pages are flushed (``os.sync``) before each side runs, so no side's commits
wait for the write-back of the one before.  The rows/s of each, the share of
nbmemory's time spent in ``flush()`` (the
worker writing the vectors back), the seconds ``close()`` then takes (DuckDB's
checkpoint of what the WAL still holds; not in the rows/s) and the peak RSS of
the process that wrote through nbmemory (each size in a process of its own) are
printed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).parent))
from _common import (  # noqa: E402
    machine,
    peak_rss_mb,
    print_table,
    random_text,
    random_unit_vectors,
)

from nbmemory import Memory  # noqa: E402
from nbmemory.event_rows import new_ids  # noqa: E402
from nbmemory.store.connection import CHECKPOINT_THRESHOLD, DISABLED_COMPRESSION  # noqa: E402


class LookupEmbedder:
    """Returns the precomputed vector of each text: an embedder that costs nothing."""

    name = "bench/lookup-384"
    dim = 384

    def __init__(self, texts: list[str], vectors: np.ndarray) -> None:
        self.rows = {text: i for i, text in enumerate(texts)}
        self.vectors = vectors

    def embed(self, texts: list[str]) -> np.ndarray:
        return self.vectors[[self.rows[t] for t in texts]]


def duckdb_floor(texts: list[str], vectors: np.ndarray, folder: str) -> float:
    """Seconds for DuckDB to store the same rows and vectors in one Arrow INSERT."""
    con = duckdb.connect(os.path.join(folder, "floor.duckdb"))
    con.execute("CREATE TABLE t (id VARCHAR, session_id VARCHAR, content VARCHAR, v FLOAT[])")
    start = time.perf_counter()
    table = pa.table(
        {
            "id": [f"id-{i}" for i in range(len(texts))],
            "session_id": [f"s{i % 100}" for i in range(len(texts))],
            "content": texts,
            "v": pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), 384).cast(
                pa.list_(pa.float32())
            ),
        }
    )
    con.register("incoming", table)
    con.execute("INSERT INTO t SELECT * FROM incoming")
    con.close()
    return time.perf_counter() - start


def duckdb_transactions_floor(
    texts: list[str], vectors: np.ndarray, folder: str, batch: int
) -> float:
    """Seconds for DuckDB to store the same rows and vectors committing every ``batch``
    rows: rows keyed by id (``events`` has its primary key), vectors in a table of
    their own, the store's settings.  What one durable transaction per call costs
    before nbmemory does anything."""
    con = duckdb.connect(os.path.join(folder, "floor-tx.duckdb"))
    con.execute(f"SET checkpoint_threshold = '{CHECKPOINT_THRESHOLD}'")
    con.execute(f"SET disabled_compression_methods = '{DISABLED_COMPRESSION}'")
    con.execute(
        "CREATE TABLE events (id VARCHAR PRIMARY KEY, session_id VARCHAR, content VARCHAR,"
        " created_at TIMESTAMP, importance DOUBLE)"
    )
    con.execute("CREATE TABLE vectors (id VARCHAR, model VARCHAR, embedding FLOAT[])")
    start = time.perf_counter()
    for i in range(0, len(texts), batch):
        # the ids nbmemory makes, made as it makes them (their time is each batch's)
        chunk = new_ids(len(texts[i : i + batch]))
        rows = pa.table(
            {
                "id": chunk,
                "session_id": [f"s{j % 100}" for j in range(i, i + len(chunk))],
                "content": texts[i : i + batch],
                "created_at": pa.array([time.time_ns() // 1000] * len(chunk)).cast(
                    pa.timestamp("us")
                ),
                "importance": [0.5] * len(chunk),
            }
        )
        block = vectors[i : i + batch]
        vector_rows = pa.table(
            {
                "id": chunk,
                "model": ["m"] * len(chunk),
                "embedding": pa.FixedSizeListArray.from_arrays(
                    pa.array(block.reshape(-1)), 384
                ).cast(pa.list_(pa.float32())),
            }
        )
        con.execute("BEGIN TRANSACTION")
        con.register("incoming_rows", rows)
        con.register("incoming_vectors", vector_rows)
        con.execute("INSERT INTO events SELECT * FROM incoming_rows")
        con.execute("INSERT INTO vectors SELECT * FROM incoming_vectors")
        con.execute("COMMIT")
        con.unregister("incoming_rows")
        con.unregister("incoming_vectors")
    elapsed = time.perf_counter() - start
    con.close()
    return elapsed


def nbmemory_write(
    texts: list[str], vectors: np.ndarray, folder: str, batch: int
) -> tuple[float, float, float]:
    """(seconds for add_events + flush, seconds of that in flush, seconds to close)."""
    mem = Memory(
        os.path.join(folder, "bench.duckdb"),
        embedder=LookupEmbedder(texts, vectors),
        background_consolidation=False,
    )
    try:
        start = time.perf_counter()
        for i in range(0, len(texts), batch):
            mem.add_events(
                [
                    {"session_id": f"s{j % 100}", "role": "user", "content": texts[j]}
                    for j in range(i, min(i + batch, len(texts)))
                ]
            )
        added = time.perf_counter()
        assert mem.flush()
        done = time.perf_counter()
        assert mem.status()["embedded"] == len(texts)
    finally:
        closing = time.perf_counter()
        mem.close()
    return done - start, done - added, time.perf_counter() - closing


def data(n: int) -> tuple[list[str], np.ndarray]:
    """The texts (all distinct) and vectors of a size, the same in every process."""
    rng = np.random.default_rng(n)
    return [f"{i} {random_text(rng, 12)}" for i in range(n)], random_unit_vectors(n)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000])
    parser.add_argument("--batch", type=int, default=1_000, help="rows per add_events call")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:  # one size through nbmemory, in a process of its own (peak RSS)
        texts, vectors = data(args.child)
        inputs = peak_rss_mb()  # the benchmark's own texts and vectors
        with tempfile.TemporaryDirectory(prefix="nbmemory-write-") as folder:
            total, in_flush, close = nbmemory_write(texts, vectors, folder, args.batch)
        result = {
            "total": total,
            "in_flush": in_flush,
            "close": close,
            "rss_mb": peak_rss_mb(),
            "inputs": inputs,
        }
        print(json.dumps(result))
        return
    print(f"machine: {machine()}")
    print(f"add_events in batches of {args.batch:,}, an embedder that costs nothing\n")
    rows = []
    for n in args.sizes:
        texts, vectors = data(n)
        with tempfile.TemporaryDirectory(prefix="nbmemory-write-") as folder:
            os.sync()  # each side starts on a quiet disk: no earlier writes to flush
            floor = duckdb_floor(texts, vectors, folder)
            os.sync()
            floor_tx = duckdb_transactions_floor(texts, vectors, folder, args.batch)
        os.sync()
        del texts, vectors
        child = subprocess.run(
            [sys.executable, __file__, "--child", str(n), "--batch", str(args.batch)],
            capture_output=True,
            text=True,
            check=True,
        )
        result = json.loads(child.stdout.strip().splitlines()[-1])
        total, in_flush = result["total"], result["in_flush"]
        rows.append(
            [
                f"{n:,}",
                f"{n / floor:,.0f}",
                f"{n / floor_tx:,.0f}",
                f"{n / total:,.0f}",
                f"{floor / total:.3f}",
                f"{floor_tx / total:.2f}",
                f"{in_flush / total:.0%}",
                f"{result['close']:.2f}",
                f"{result['rss_mb']:,.0f} ({result['inputs']:,.0f})",
            ]
        )
    print_table(
        [
            "rows",
            "DuckDB Arrow INSERT rows/s (floor)",
            f"DuckDB, a commit every {args.batch:,} rows, rows/s",
            "nbmemory add_events + flush rows/s",
            "nbmemory / floor",
            "nbmemory / same-commits floor",
            "share in flush()",
            "then close() s",
            "peak RSS MiB (of it the inputs)",
        ],
        rows,
    )


if __name__ == "__main__":
    main()
