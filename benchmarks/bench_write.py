"""nbmemory's own write cost: add_events + flush() with an embedder that costs nothing.

    python benchmarks/bench_write.py --sizes 10000 100000

The model hides the write path on a CPU (about 140 texts/s); on a GPU, or with any
faster embedder, nbmemory's bookkeeping is what limits ingest.  Side by side in
one run, on the same texts and vectors, in fresh stores:

* the floor: DuckDB alone, one ``INSERT`` of the rows and their vectors from Arrow;
* ``add_events`` (bulk, batches of ``--batch``) followed by ``flush()``, the
  embedder a lookup of precomputed vectors (no model time at all).

The rows/s of each and the share of nbmemory's time spent in ``flush()`` (the
worker writing the vectors back) are printed.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).parent))
from _common import machine, print_table, random_text, random_unit_vectors  # noqa: E402

from nbmemory import Memory  # noqa: E402


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


def nbmemory_write(
    texts: list[str], vectors: np.ndarray, folder: str, batch: int
) -> tuple[float, float]:
    """(seconds for add_events + flush, seconds of that in flush)."""
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
        mem.close()
    return done - start, done - added


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000])
    parser.add_argument("--batch", type=int, default=1_000, help="rows per add_events call")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    print(f"add_events in batches of {args.batch:,}, an embedder that costs nothing\n")
    rows = []
    for n in args.sizes:
        rng = np.random.default_rng(n)
        texts = [f"{i} {random_text(rng, 12)}" for i in range(n)]  # all distinct
        vectors = random_unit_vectors(n)
        with tempfile.TemporaryDirectory(prefix="nbmemory-write-") as folder:
            floor = duckdb_floor(texts, vectors, folder)
            total, in_flush = nbmemory_write(texts, vectors, folder, args.batch)
        rows.append(
            [
                f"{n:,}",
                f"{n / floor:,.0f}",
                f"{n / total:,.0f}",
                f"{floor / total:.3f}",
                f"{in_flush / total:.0%}",
            ]
        )
    print_table(
        [
            "rows",
            "DuckDB Arrow INSERT rows/s (floor)",
            "nbmemory add_events + flush rows/s",
            "nbmemory / floor",
            "share in flush()",
        ],
        rows,
    )


if __name__ == "__main__":
    main()
