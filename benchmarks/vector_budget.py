"""Search under a vector budget of half the raw vectors, against the same in memory.

    python benchmarks/vector_budget.py               # 1M memories in 4 namespaces
    python benchmarks/vector_budget.py --quick       # 20k (what CI runs)

A store of ``--rows`` memories (free embedder: a unit vector seeded by the text) in
four namespaces of a quarter each.  The same 200 vector searches, their
namespaces drawn 40/30/20/10%, run warm three ways, each in a new process: no budget
(every vector in memory: the floor), ``vector_budget_mb`` = half the raw vectors
(two namespaces fit; a namespace searched again is read into memory, pushing out
the least recently used), and a budget of 0 (every search in DuckDB).  Printed:
p50/p90 per way, p50 by who answered (held in memory, read into memory by that
search, DuckDB), the peak RSS of each way's process, and whether every answer
(ids in order) is the floor's.  The goal (issue 39): identical answers, p50 <= 5x in memory.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import machine, peak_rss_mb, print_table  # noqa: E402
from cold_first_search import contents, embed  # noqa: E402

NAMESPACES = ["a", "b", "c", "d"]
SHARES = [0.4, 0.3, 0.2, 0.1]
QUERIES = 200


def build(path: str, rows: int) -> None:
    import pandas as pd

    from nbmemory import Memory

    texts = contents(rows)
    quarter = rows // len(NAMESPACES)
    with Memory(path, embedder=embed, index_cache=False) as mem:
        for k, namespace in enumerate(NAMESPACES):
            part = texts[k * quarter : (k + 1) * quarter]
            for lo in range(0, len(part), 50_000):
                chunk = part[lo : lo + 50_000]
                frame = pd.DataFrame(
                    {"session_id": [f"s{i % 100}" for i in range(len(chunk))], "content": chunk}
                )
                mem.add_events(frame.assign(role="user"), namespace=namespace)
        mem.flush()


def run(path: str, budget_mb: float | None, plan: list[tuple[str, str]]) -> dict:
    from nbmemory import Memory

    answers, seconds, who = [], [], []
    with Memory(path, embedder=embed, index_cache=False, vector_budget_mb=budget_mb) as mem:
        for namespace, query in plan[:4]:  # warm: imports, first builds
            mem.search(query, mode="vector", limit=10, namespace=namespace)
        held = mem.indexes._budget.namespaces.held
        for namespace, query in plan:
            before = (mem.model_name, namespace) in held
            start = time.perf_counter()
            hits = mem.search(query, mode="vector", limit=10, namespace=namespace)
            seconds.append(time.perf_counter() - start)
            answers.append(list(hits["id"]))
            after = (mem.model_name, namespace) in held
            if budget_mb is None:
                who.append("memory")
            else:
                who.append("memory" if before else "read in" if after else "DuckDB")
    return {"answers": answers, "seconds": seconds, "who": who, "rss_mb": peak_rss_mb()}


def plan_of() -> list[tuple[str, str]]:
    rng = np.random.default_rng(1)
    words = contents(QUERIES)
    return [
        (str(rng.choice(NAMESPACES, p=SHARES)), " ".join(words[i].split()[:3]))
        for i in range(QUERIES)
    ]


def child(path: str, budget_mb: float | None) -> dict:
    """One way, in a new process (its peak RSS is its own)."""
    result = subprocess.run(
        [sys.executable, __file__, "--child", path, json.dumps(budget_mb)],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise SystemExit(result.stderr)
    out: dict = json.loads(result.stdout.strip().splitlines()[-1])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--quick", action="store_true", help="20k rows (CI)")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run(args.child[0], json.loads(args.child[1]), plan_of())))
        return
    rows = 20_000 if args.quick else args.rows
    folder = Path(tempfile.mkdtemp(prefix="nbm-budget-"))
    try:
        path = str(folder / "store.duckdb")
        start = time.perf_counter()
        build(path, rows)
        built = time.perf_counter() - start
        raw_mb = rows * 384 * 4 / 2**20
        floor = child(path, None)
        half = child(path, raw_mb / 2)
        none = child(path, 0)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    p50 = statistics.median(floor["seconds"])
    print(f"Machine: {machine()}")
    print(
        f"{rows} memories in {len(NAMESPACES)} namespaces (built in {built:.1f} s), raw "
        f"vectors {raw_mb:.0f} MiB; {QUERIES} vector searches, top 10, namespaces "
        f"drawn {'/'.join(f'{s:.0%}' for s in SHARES)}"
    )
    table = []
    for name, out in (
        ("no budget (floor)", floor),
        (f"budget {raw_mb / 2:.0f} MB", half),
        ("budget 0", none),
    ):
        s = sorted(out["seconds"])
        by = {
            where: statistics.median(
                [t for t, w in zip(out["seconds"], out["who"], strict=True) if w == where]
            )
            for where in ("memory", "read in", "DuckDB")
            if where in out["who"]
        }
        table.append(
            [
                name,
                f"{statistics.median(s) * 1000:.1f}",
                f"{s[int(0.9 * len(s))] * 1000:.1f}",
                f"{statistics.median(s) / p50:.2f}",
                ", ".join(f"{w} {out['who'].count(w)} at {t * 1000:.1f}" for w, t in by.items()),
                f"{out['rss_mb']:.0f}",
                "yes" if out["answers"] == floor["answers"] else "NO",
            ]
        )  # fmt: skip
    print_table(
        ["vectors", "p50 ms", "p90 ms", "p50 x floor", "answered by (searches, p50 ms)", "peak RSS MiB", "same answers"],
        table,
    )  # fmt: skip
    if half["answers"] != floor["answers"] or none["answers"] != floor["answers"]:
        raise SystemExit("the answers under a budget differ from the floor's")


if __name__ == "__main__":
    main()
