"""What the index on ``events.session_id`` (migration m006) costs writes and gives reads.

    python benchmarks/bench_session_index.py --rows 20000 --rounds 5

The Rust agent's ``session_id`` is "indexado" (indexed).  Each round makes two fresh
stores, one as migrated (with the index) and one with the index dropped, in turns
(which goes first alternates), and in each: ``add_events`` of ``--rows`` rows over
``--sessions`` sessions in calls of ``--batch`` rows with the hash embedder (the
time of the calls; then ``flush()`` apart), then a session's last 10 events read
straight from the table (``store.events.recent``, what working memory loads) and
a session's whole ``events(session_id=...)`` frame, each over every session.
Medians over the rounds are printed; the script asserts no time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import machine, print_table  # noqa: E402

from nbmemory import Memory  # noqa: E402


def one_store(folder: Path, indexed: bool, args: argparse.Namespace) -> dict[str, float]:
    """Ingest and read one fresh store; seconds of each part."""
    path = str(folder / f"{'with' if indexed else 'without'}-{time.monotonic_ns()}.duckdb")
    with Memory(path, embedder="hash", background_consolidation=False, upkeep=False) as mem:
        if not indexed:
            mem.store.execute("DROP INDEX events_session_id")
            mem.store.execute("CHECKPOINT")
        rows = [
            {
                "session_id": f"session-{i % args.sessions}",
                "role": "user" if i % 2 else "assistant",
                "content": f"message {i} of session {i % args.sessions}: the plan number {i}",
            }
            for i in range(args.rows)
        ]
        started = time.perf_counter()
        for start in range(0, args.rows, args.batch):
            mem.add_events(rows[start : start + args.batch])
        ingest = time.perf_counter() - started
        started = time.perf_counter()
        assert mem.flush(timeout=600)
        flush = time.perf_counter() - started
        assert mem.status()["events"] == args.rows
        recent, frames = [], []
        for s in range(args.sessions):
            started = time.perf_counter()
            got = mem.store.events.recent("default", f"session-{s}", 10)
            recent.append(time.perf_counter() - started)
            assert len(got) == min(10, args.rows // args.sessions)
            started = time.perf_counter()
            mem.events(session_id=f"session-{s}")
            frames.append(time.perf_counter() - started)
        indexes = mem.store.run("SELECT count(*) FROM duckdb_indexes() WHERE table_name = 'events'")
        assert indexes[0][0] == (1 if indexed else 0)
    return {
        "ingest": ingest,
        "flush": flush,
        "recent": statistics.median(recent),
        "frame": statistics.median(frames),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--batch", type=int, default=1_000, help="rows per add_events call")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    results: dict[bool, list[dict[str, float]]] = {True: [], False: []}
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.rounds):
            for indexed in (True, False) if round_ % 2 == 0 else (False, True):
                results[indexed].append(one_store(Path(tmp), indexed, args))
    print(machine())
    print(f"{args.rows:,} rows, {args.sessions} sessions, add_events of {args.batch:,} rows, "
          f"hash embedder; medians of {args.rounds} rounds")  # fmt: skip
    table = []
    for indexed in (False, True):
        med = {k: statistics.median(r[k] for r in results[indexed]) for k in results[indexed][0]}
        table.append(
            [
                "with the index" if indexed else "without",
                f"{args.rows / med['ingest']:,.0f}",
                f"{med['ingest']:.2f}",
                f"{med['flush']:.2f}",
                f"{med['recent'] * 1000:.2f}",
                f"{med['frame'] * 1000:.2f}",
            ]
        )
    print_table(
        [
            "events.session_id",
            "add_events rows/s",
            "add_events s",
            "flush s",
            "recent(10) ms",
            "events(session) ms",
        ],
        table,
    )


if __name__ == "__main__":
    main()
