"""Exact vector search: nbmemory beside the numpy floor, faiss, sqlite-vec and lancedb.

    python benchmarks/bench_peers.py --sizes 100000 1000000
    pip install -e ".[bench]"   # the peers (optional: one not installed is shown so)

Each size runs in a process of its own.  The same random unit vectors (384-d,
float32) and the same queries go to every engine, each searching exactly (no
approximate index): the numpy floor (``matrix @ query`` and ``argpartition``),
nbmemory's vector search (a store filled through the public API, reopened, warm),
faiss ``IndexFlatIP``, sqlite-vec (a ``vec0`` table, its exact KNN) and lancedb (a
table searched without a vector index).  Per engine: the time to load the vectors
into it, warm top-k latency (p50 / p95; the engines called in turn, query by query,
so a machine whose speed drifts treats them alike), the resident memory its load
added, and its recall against the floor's top-k (1.00: the same ids).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import (  # noqa: E402
    FixedEmbedder,
    fill_store,
    interleaved,
    machine,
    ms,
    p50,
    p95,
    print_table,
    random_unit_vectors,
)

from nbmemory import Memory  # noqa: E402

#: Search: query vector -> the row numbers of its top k, best first.
Search = Callable[[np.ndarray], list[int]]


def _rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def numpy_floor(vectors: np.ndarray, k: int, folder: str) -> Search:
    def search(query: np.ndarray) -> list[int]:
        scores = vectors @ query
        top = np.argpartition(-scores, k)[:k]
        return top[np.argsort(-scores[top])].tolist()

    return search


def nbmemory_search(vectors: np.ndarray, k: int, folder: str) -> Search:
    path = os.path.join(folder, "peers.duckdb")
    mem = Memory(path, embedder=FixedEmbedder())
    fill_store(mem, vectors)
    mem.close()
    mem = Memory(path, embedder=FixedEmbedder(), background_consolidation=False)
    row_of = {event_id: i for i, event_id in enumerate(mem.store.df("SELECT id FROM events")["id"])}
    mem.retriever.vector_search(vectors[0], "default", limit=k)  # the index, built or loaded

    def search(query: np.ndarray) -> list[int]:
        found = mem.retriever.vector_search(query, "default", limit=k)
        return [row_of[event_id] for event_id in found["id"]]

    return search


def faiss_flat(vectors: np.ndarray, k: int, folder: str) -> Search:
    import faiss

    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(vectors)

    def search(query: np.ndarray) -> list[int]:
        _, rows = index.search(query.reshape(1, -1), k)
        return rows[0].tolist()

    return search


def _sqlite_with_extensions(path: str) -> Any:
    """A SQLite connection that can load sqlite-vec: the standard library's, or apsw's
    where Python's sqlite3 was built without loadable extensions (pyenv's default)."""
    import sqlite3

    import sqlite_vec as extension

    con: Any = sqlite3.connect(path, check_same_thread=False)
    if hasattr(con, "enable_load_extension"):
        con.enable_load_extension(True)
        extension.load(con)
        return con
    con.close()
    import apsw

    con = apsw.Connection(path)
    con.enable_load_extension(True)
    con.load_extension(extension.loadable_path())
    return con


def sqlite_vec(vectors: np.ndarray, k: int, folder: str) -> Search:
    con = _sqlite_with_extensions(os.path.join(folder, "peers.sqlite"))
    con.execute(f"CREATE VIRTUAL TABLE v USING vec0(embedding float[{vectors.shape[1]}])")
    with con:
        con.executemany(
            "INSERT INTO v(rowid, embedding) VALUES (?, ?)",
            ((i, row.tobytes()) for i, row in enumerate(vectors)),
        )

    def search(query: np.ndarray) -> list[int]:
        rows = con.execute(
            "SELECT rowid FROM v WHERE embedding MATCH ? AND k = ? ORDER BY distance",
            (query.astype(np.float32).tobytes(), k),
        ).fetchall()
        return [row[0] for row in rows]

    return search


def lancedb_flat(vectors: np.ndarray, k: int, folder: str) -> Search:
    import lancedb
    import pyarrow as pa

    db = lancedb.connect(os.path.join(folder, "peers.lance"))
    flat = pa.array(vectors.reshape(-1), pa.float32())
    table = db.create_table(
        "v",
        pa.table(
            {
                "row": pa.array(np.arange(len(vectors)), pa.int64()),
                "vector": pa.FixedSizeListArray.from_arrays(flat, vectors.shape[1]),
            }
        ),
    )

    def search(query: np.ndarray) -> list[int]:
        found = table.search(query).metric("cosine").limit(k).select(["row"]).to_arrow()
        return found.column("row").to_pylist()

    return search


#: name -> (the Python module it needs, how to load the vectors into it)
ENGINES: dict[str, tuple[str | None, Callable[[np.ndarray, int, str], Search]]] = {
    "numpy floor": (None, numpy_floor),
    "nbmemory": (None, nbmemory_search),
    "faiss IndexFlatIP": ("faiss", faiss_flat),
    "sqlite-vec vec0": ("sqlite_vec", sqlite_vec),  # (and apsw where sqlite3 cannot load it)
    "lancedb, no index": ("lancedb", lancedb_flat),
}


def installed(module: str | None) -> bool:
    if module is None:
        return True
    try:
        __import__(module)
    except ImportError:
        return False
    return True


def one_size(n: int, queries: int, k: int) -> dict:
    """Every engine at one size, in a folder removed afterwards."""
    folder = tempfile.mkdtemp(prefix="nbmemory-peers-")
    try:
        vectors = random_unit_vectors(n, seed=n)
        qs = random_unit_vectors(queries, seed=n + 1)
        searches: dict[str, Search] = {}
        rows: dict[str, dict] = {}
        for name, (module, load) in ENGINES.items():
            if not installed(module):
                rows[name] = {"installed": False}
                continue
            gc.collect()
            before, start = _rss_mb(), time.perf_counter()
            searches[name] = load(vectors, k, folder)
            rows[name] = {
                "installed": True,
                "load_s": time.perf_counter() - start,
                "rss_mb": _rss_mb() - before,
            }
        floor = searches["numpy floor"]
        expected = [set(floor(q)) for q in qs]
        names = list(searches)
        times = interleaved([lambda i, s=searches[m]: s(qs[i % queries]) for m in names], queries)
        for name, seconds in zip(names, times, strict=True):
            found = [set(searches[name](q)) for q in qs]
            shared = [len(mine & theirs) / k for mine, theirs in zip(found, expected, strict=True)]
            rows[name].update(p50=p50(seconds), p95=p95(seconds), recall=float(np.mean(shared)))
        return {"n": n, "engines": rows}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("-k", type=int, default=10)
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one_size(args.one, args.queries, args.k)))
        return
    results = []
    for n in args.sizes:
        out = subprocess.run(
            [sys.executable, __file__, "--one", str(n), "--queries", str(args.queries)]
            + ["-k", str(args.k)],
            capture_output=True,
            text=True,
            check=False,
        )
        if out.returncode != 0:
            sys.stderr.write(out.stderr)
            raise SystemExit(f"the run at {n:,} failed (exit {out.returncode})")
        results.append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(f"machine: {machine()}; load average {os.getloadavg()[0]:.1f}\n")
    print(f"exact top-{args.k} of n random 384-d unit vectors, {args.queries} queries, warm")
    rows = []
    for result in results:
        floor = result["engines"]["numpy floor"]
        for name, row in result["engines"].items():
            if not row["installed"]:
                rows.append([f"{result['n']:,}", name, "not installed", "", "", "", ""])
                continue
            rows.append(
                [
                    f"{result['n']:,}",
                    name,
                    f"{row['load_s']:.2f}",
                    f"{ms(row['p50'])} / {ms(row['p95'])}",
                    f"{row['p50'] / floor['p50']:.2f}x",
                    f"{row['rss_mb']:+.0f}",
                    f"{row['recall']:.2f}",
                ]
            )
    print_table(
        ["memories", "engine", "load s", "p50 / p95 ms", "p50 vs floor", "RSS MiB"]
        + ["recall vs floor"],
        rows,
    )


if __name__ == "__main__":
    main()
