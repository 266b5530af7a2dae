"""A fixed-size ``FLOAT[384]`` column against the ``FLOAT[]`` list nbmemory stores today.

    python benchmarks/array_column.py               # 200k vectors
    python benchmarks/array_column.py --quick       # 20k (what CI runs)

Issue 39 asks whether vectors should live in a fixed-size ARRAY column: DuckDB
hands one out to Arrow as a ``FixedSizeList`` whose values are one block, so
numpy could take it without a per-row offset walk.  This measures DuckDB alone
(no nbmemory code), each column in its own table of the same file, in turn:

- writing the vectors from Arrow and checkpointing, and the file's growth;
- reading every vector into one float32 matrix, as the vector index does on a
  cold build (whole, and in batches of 8,192 rows as nbmemory reads them);
- an exact top-10 by cosine in SQL (``list_cosine_similarity`` against
  ``array_cosine_similarity``), the path a vector budget would search by;
- beside them, the numpy floor: the same matrix from ``np.load`` and ``matrix @ q``.

It reports; it changes nothing in nbmemory's schema.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).parent))
from _common import machine, print_table, random_unit_vectors  # noqa: E402

DIM = 384
BATCH = 8192


def best(fn: Callable[[], object], rounds: int) -> tuple[float, object]:
    """The fastest of ``rounds`` calls of ``fn`` (seconds) and its last result."""
    times, result = [], None
    for _ in range(rounds):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def median_of(fn: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def as_matrix(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Every vector of a list or fixed-size list column as one (n, DIM) float32 matrix."""
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    out = np.empty((sum(len(c) for c in chunks), DIM), np.float32)
    at = 0
    for chunk in chunks:
        values = chunk.flatten() if isinstance(chunk, pa.ListArray) else chunk.values
        block = values.to_numpy(zero_copy_only=False).reshape(-1, DIM)
        out[at : at + len(block)] = block
        at += len(block)
    return out


def read_batches(con: duckdb.DuckDBPyConnection, table: str, rows: int) -> np.ndarray:
    reader = con.sql(f"SELECT embedding FROM {table}").to_arrow_reader(BATCH)
    out = np.empty((rows, DIM), np.float32)
    at = 0
    for batch in reader:
        block = as_matrix(batch.column(0))
        out[at : at + len(block)] = block
        at += len(block)
    return out[:at]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="20k rows (CI)")
    args = parser.parse_args()
    rows = 20_000 if args.quick else args.rows
    vectors = random_unit_vectors(rows, DIM, seed=1)
    query = random_unit_vectors(1, DIM, seed=2)[0]
    expected = set(np.argsort(-(vectors @ query))[:10].tolist())
    flat = pa.array(vectors.reshape(-1))
    offsets = pa.array(np.arange(0, rows * DIM + 1, DIM, dtype=np.int32))
    columns = {
        "FLOAT[]": pa.ListArray.from_arrays(offsets, flat),
        f"FLOAT[{DIM}]": pa.FixedSizeListArray.from_arrays(flat, DIM),
    }
    print(machine())
    print(f"{rows} vectors of {DIM} float32 ({vectors.nbytes >> 20} MiB), best of {args.rounds}")
    print()
    results: list[list[object]] = []
    with tempfile.TemporaryDirectory(prefix="nbm-array-") as tmp:
        npy = os.path.join(tmp, "vectors.npy")
        np.save(npy, vectors)
        load_s, _ = best(lambda: np.load(npy), args.rounds)
        floor_q = median_of(lambda: np.argpartition(-(vectors @ query), 10)[:10], 5)
        path = os.path.join(tmp, "store.duckdb")
        con = duckdb.connect(path)
        con.execute("CREATE TABLE seed (id INTEGER)")
        con.execute("CHECKPOINT")
        for n, (name, column) in enumerate(columns.items()):
            table = f"t{n}"
            frame = pa.table({"id": pa.array(np.arange(rows, dtype=np.int64)), "embedding": column})
            size_before = os.path.getsize(path)
            start = time.perf_counter()
            con.execute(f"CREATE TABLE {table} (id BIGINT, embedding {name})")
            con.register("frame", frame)
            con.execute(f"INSERT INTO {table} SELECT * FROM frame")
            con.unregister("frame")
            con.execute("CHECKPOINT")
            write_s = time.perf_counter() - start
            growth = (os.path.getsize(path) - size_before) >> 20
            whole_s, matrix = best(
                lambda t=table: as_matrix(
                    con.sql(f"SELECT embedding FROM {t}").to_arrow_table().column(0)
                ),
                args.rounds,
            )
            assert isinstance(matrix, np.ndarray) and np.array_equal(matrix, vectors)
            batched_s, _ = best(lambda t=table: read_batches(con, t, rows), args.rounds)
            function = "list_cosine_similarity" if name == "FLOAT[]" else "array_cosine_similarity"
            sql = f"SELECT id FROM {table} ORDER BY {function}(embedding, ?::{name}) DESC LIMIT 10"
            params = [query.tolist()]
            found = {row[0] for row in con.execute(sql, params).fetchall()}
            assert found == expected, (name, found ^ expected)
            sql_s = median_of(lambda s=sql, p=params: con.execute(s, p).fetchall(), 5)
            results.append(
                [
                    f"`{name}`",
                    f"{write_s:.2f}",
                    growth,
                    f"{whole_s:.3f}",
                    f"{batched_s:.3f}",
                    f"{sql_s * 1000:.0f}",
                ]
            )
        con.close()
    results.append(["numpy floor", "", "", f"{load_s:.3f} (np.load)", "", f"{floor_q * 1000:.1f}"])
    print_table(
        [
            "column",
            "insert + checkpoint s",
            "file MiB",
            "read all into numpy s",
            f"read in batches of {BATCH:,} s",
            "SQL exact top-10 ms (p50)",
        ],
        results,
    )
    print()
    print("same top-10 ids from both columns and the floor: yes")


if __name__ == "__main__":
    main()
