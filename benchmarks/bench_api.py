"""The cost of the API's own bookkeeping, this checkout against another: add_event,
add_events, search and get_context with an embedder that costs nothing.

    python benchmarks/bench_api.py --baseline-src ../before/src [--rounds 3]

A refactoring (the backend contract, the facade's groups) must not make the
engine slower.  Each side runs in a child process of its own with the hash
embedder on a fresh file store, in turns (this, baseline, baseline, this ...)
so that the machine's drift falls on both; the median of the rounds is printed,
with the ratio this / baseline.  CPU seconds of the whole process (all threads)
are the measure, since other work on the machine moves wall time far more than
5%; wall time is printed beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1] / "src"

CHILD = r"""
import json, os, sys, tempfile, time
from nbmemory import Memory

n, bulk, queries = (int(a) for a in sys.argv[1:4])
out = {}
with tempfile.TemporaryDirectory() as folder:
    mem = Memory(os.path.join(folder, "b.duckdb"), embedder="hash",
                 background_consolidation=False)
    for i in range(50):
        mem.add_event("warm", "user", f"warm {i}")
    mem.flush()

    def timed(name, count, block):
        cpu, wall = time.process_time(), time.perf_counter()
        block()
        out[name] = ((time.process_time() - cpu) / count, (time.perf_counter() - wall) / count)

    def singles():
        for i in range(n):
            mem.add_event(f"s{i % 7}", "user", f"note number {i} about topic {i % 13}")
        mem.flush()

    rows = [{"session_id": f"b{i % 5}", "role": "user", "content": f"bulk row {i} on {i % 17}"}
            for i in range(bulk)]

    def batches():
        for k in range(0, bulk, 1000):
            mem.add_events(rows[k:k + 1000])
        mem.flush()

    def searches():
        for i in range(queries):
            mem.search(f"topic {i % 13}", limit=5)

    def contexts():
        for i in range(queries):
            mem.get_context(f"s{i % 7}", f"topic {i % 13}")

    timed("add_event", n, singles)
    timed("add_events (per row)", bulk, batches)
    timed("search", queries, searches)
    timed("get_context", queries, contexts)
    mem.close()
print(json.dumps(out))
"""


def side(src: Path, n: int, bulk: int, queries: int) -> dict[str, list[float]]:
    """One child run with ``src`` first on the path: name -> (cpu s, wall s) per call."""
    env = dict(os.environ, PYTHONPATH=str(src))
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "child.py"
        script.write_text(CHILD)
        done = subprocess.run(
            [sys.executable, str(script), str(n), str(bulk), str(queries)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
    return json.loads(done.stdout.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline-src", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--events", type=int, default=1_000, help="add_event calls")
    parser.add_argument("--bulk", type=int, default=20_000, help="rows through add_events")
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    runs: dict[str, list[dict[str, list[float]]]] = {"now": [], "before": []}
    started = time.perf_counter()
    for r in range(args.rounds):
        order = ("now", "before") if r % 2 == 0 else ("before", "now")
        for which in order:
            src = HERE if which == "now" else args.baseline_src.resolve()
            runs[which].append(side(src, args.events, args.bulk, args.queries))
    print(f"{args.rounds} rounds per side in {time.perf_counter() - started:.0f} s; medians")
    print(
        f"{'call':<22} {'cpu ms now':>11} {'cpu ms before':>14} {'ratio':>6} {'wall ms now':>12} {'wall ms before':>15}"
    )
    for name in runs["now"][0]:

        def median(which: str, k: int, name: str = name) -> float:
            return statistics.median(run[name][k] for run in runs[which]) * 1000

        now, before = median("now", 0), median("before", 0)
        print(
            f"{name:<22} {now:>11.3f} {before:>14.3f} {now / before:>6.2f}"
            f" {median('now', 1):>12.3f} {median('before', 1):>15.3f}"
        )


if __name__ == "__main__":
    main()
