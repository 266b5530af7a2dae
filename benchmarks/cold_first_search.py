"""The first search of a new process after a bulk ingest, against the ``np.load`` floor.

    python benchmarks/cold_first_search.py            # 200k memories
    python benchmarks/cold_first_search.py --quick    # 20k (what CI runs)

One process builds the store with a free embedder (a vector computed from the
text, so only nbmemory's own cost is measured): DataFrames of 50k rows through
``add_events``, then ``flush()`` and ``close()``.  Then, each in a NEW process:
open the store and time the first ``search(mode="vector")``; then the same for
``search(mode="hybrid")`` (the hybrid process is the second reader, and the first
to load the keyword index); and the floor, ``np.load`` of the same vectors saved
as ``.npy``.  Peak RSS is reported per process.  The goal (issue 39) is a first
search <= 1.5x the floor + 0.5 s and a peak RSS <= 2x the raw vectors + 300 MB.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import compile_package, machine, peak_rss_mb, print_table  # noqa: E402

DIM = 384
BATCH = 50_000
WORDS = [
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
    "kilo",
    "lima",
    "mike",
    "november",
    "oscar",
    "papa",
    "quebec",
    "romeo",
    "sierra",
    "tango",
    "uniform",
    "victor",
    "whiskey",
    "xray",
    "yankee",
    "zulu",
    "river",
    "stone",
    "cloud",
    "paper",
    "garden",
    "window",
    "market",
    "signal",
]


def embed_one(text: str) -> np.ndarray:
    """Free embedder: a unit float32 vector seeded by the text."""
    vector = np.random.default_rng(zlib.crc32(text.encode())).standard_normal(DIM)
    vector = vector.astype(np.float32)
    return vector / np.linalg.norm(vector)


def embed(texts: list[str]) -> np.ndarray:
    """The callable ``Memory(path, embedder=...)`` takes: texts in, one row each out."""
    return np.stack([embed_one(t) for t in texts]).reshape(len(texts), DIM)


def contents(n: int) -> list[str]:
    rng = np.random.default_rng(0)
    picks = rng.integers(0, len(WORDS), size=(n, 12))
    return [" ".join(WORDS[j] for j in row) + f" item {i}" for i, row in enumerate(picks)]


def build(path: str, n: int, npy: str) -> dict:
    import pandas as pd

    from nbmemory import Memory

    texts = contents(n)
    np.save(npy, embed(texts))
    start = time.perf_counter()
    mem = Memory(path, embedder=embed)
    for lo in range(0, n, BATCH):
        hi = min(n, lo + BATCH)
        frame = pd.DataFrame(
            {
                "session_id": [f"s{i % 500}" for i in range(lo, hi)],
                "role": ["user"] * (hi - lo),
                "content": texts[lo:hi],
            }
        )
        mem.add_events(frame)
    mem.flush()
    flushed = time.perf_counter() - start
    embedded = mem.status().get("embedded")
    mem.close()
    closed = time.perf_counter() - start - flushed
    return {"ingest_s": flushed, "close_s": closed, "embedded": embedded}


def first_search(path: str, mode: str) -> dict:
    from nbmemory import Memory

    start = time.perf_counter()
    mem = Memory(path, embedder=embed)
    opened = time.perf_counter() - start
    hits = mem.search("delta garden item 7", mode=mode, limit=5)
    seconds = time.perf_counter() - start
    count = len(hits)
    mem.close()
    return {"open_s": opened, "first_s": seconds, "hits": count, "rss_mb": peak_rss_mb()}


def floor(npy: str) -> dict:
    start = time.perf_counter()
    vectors = np.load(npy)
    seconds = time.perf_counter() - start
    return {"first_s": seconds, "rss_mb": peak_rss_mb(), "bytes": int(vectors.nbytes)}


def child(*args: str) -> dict:
    result = subprocess.run(
        [sys.executable, __file__, "--child", *args],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise SystemExit(result.stderr)
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--quick", action="store_true", help="20k rows (CI)")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, *rest = args.child
        if kind == "build":
            out = build(rest[0], int(rest[1]), rest[2])
        elif kind == "floor":
            out = floor(rest[0])
        else:
            out = first_search(rest[0], kind)
        print(json.dumps(out))
        return
    rows = 20_000 if args.quick else args.rows
    compile_package()
    workdir = Path(tempfile.mkdtemp(prefix="nbm-cold-"))
    try:
        (workdir / "a").mkdir()
        store, npy = str(workdir / "a" / "store.duckdb"), str(workdir / "vectors.npy")
        built = child("build", store, str(rows), npy)
        base = child("floor", npy)
        vector = child("vector", store)
        # The same store: a reader changes nothing in it.  (A copy would be another
        # file, whose saved indexes every row is hashed against: a store another
        # program wrote, not the first read after an ingest.)
        hybrid = child("hybrid", store)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    raw_mb = base["bytes"] / 2**20
    goal_s = 1.5 * base["first_s"] + 0.5
    goal_mb = 2 * raw_mb + 300
    print(f"Machine: {machine()}")
    print(
        f"{rows} memories: add_events (DataFrames of {BATCH}) + flush "
        f"{built['ingest_s']:.2f} s ({rows / built['ingest_s']:,.0f} rows/s), "
        f"close {built['close_s']:.2f} s; raw vectors {raw_mb:.0f} MiB; "
        f"embedded {built['embedded']}"
    )
    print_table(
        [
            "new process",
            "open s",
            "open + first search s",
            "goal s",
            "peak RSS MiB",
            "goal MiB",
            "ok",
        ],
        [
            ["np.load floor", "", f"{base['first_s']:.3f}", "", f"{base['rss_mb']:.0f}", "", ""],
            *[
                [
                    f"search(mode={name!r})",
                    f"{out['open_s']:.3f}",
                    f"{out['first_s']:.3f}",
                    f"{goal_s:.3f}",
                    f"{out['rss_mb']:.0f}",
                    f"{goal_mb:.0f}",
                    "yes" if out["first_s"] <= goal_s and out["rss_mb"] <= goal_mb else "no",
                ]
                for name, out in (("vector", vector), ("hybrid", hybrid))
            ],
        ],
    )
    for name, out in (("vector", vector), ("hybrid", hybrid)):
        if out["hits"] == 0:
            raise SystemExit(f"{name} search found nothing")


if __name__ == "__main__":
    main()
