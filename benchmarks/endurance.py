"""Endurance: many add_event calls and searches in one process, with its memory (RSS) over time.

    python benchmarks/endurance.py            # 100k add_event + 10k searches, then 5k searches, 10k churn
    python benchmarks/endurance.py --events 20000 --searches 2000 --checkpoints 5
    NBMEMORY_MODEL_PATH=... python benchmarks/endurance.py --model real --events 10000

One Memory on a file store; ``add_event`` calls spread over ``--sessions``
sessions, a search every ``events / searches`` events (queries drawn from the
stored words, so the query cache keeps turning over), and ``get_context`` with
each search.  At every checkpoint a row: events, searches, resident memory
(RSS), what the in-memory vector index legitimately holds (every stored vector,
float32), what DuckDB's buffer manager holds (``duckdb_memory()``), the rest of
RSS and its growth since the first checkpoint, the embedding backlog, and the
p50 of add_event / search over the segment.  A memory layer that leaks shows
the "rest" climbing with the events; a bounded one shows it flat.

Not a test: nothing here asserts a time.  The default embedder is nbmemory's
offline hash model (no download, CPU-cheap) so the run measures nbmemory, not
the model; ``--model real`` uses all-MiniLM-L6-v2.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import machine, ms, p50, peak_rss_mb, print_table  # noqa: E402

from nbmemory import Memory  # noqa: E402

WORDS = [
    "memory",
    "agent",
    "notebook",
    "budget",
    "deadline",
    "travel",
    "family",
    "music",
    "painting",
    "camping",
    "typescript",
    "python",
    "duckdb",
    "vector",
    "recall",
    "context",
    "session",
    "importance",
    "summary",
    "fact",
    "coffee",
    "garden",
    "weather",
    "meeting",
    "invoice",
    "birthday",
    "concert",
    "library",
    "holiday",
    "train",
]


def rss_mb() -> float:
    """Current resident set size in MiB (Linux /proc; peak RSS elsewhere)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return peak_rss_mb()


def index_mb(mem: Memory) -> float:
    """MiB of vectors the in-memory index holds (float32 x dim per live row): data, by design.

    The index's matrix grows by doubling, but the unused tail is never written, so
    the OS does not make it resident; counting rows x dim is what RSS really pays.
    """
    total = 0
    index = mem.indexes.vectors(mem.model_name)
    total += len(index) * (index.dim or 0) * 4
    return total / 2**20


def duckdb_mb(mem: Memory) -> float:
    """MiB DuckDB's buffer manager says it holds (cached table blocks and the like)."""
    row = mem.store.fetchone("SELECT sum(memory_usage_bytes) FROM duckdb_memory()")
    return (row[0] or 0) / 2**20 if row else 0.0


def sentence(rng: np.random.Generator, i: int) -> str:
    words = rng.choice(WORDS, size=int(rng.integers(6, 16)))
    return f"note {i}: " + " ".join(words)


def run(args: argparse.Namespace) -> None:
    embedder = "hash"
    if args.model == "real":
        from nbmemory.retrieval import FastEmbedEmbedder

        embedder = FastEmbedEmbedder()
    tmp = None
    path = args.store
    if path is None:
        tmp = tempfile.TemporaryDirectory(prefix="nbmemory-endurance-")
        path = os.path.join(tmp.name, "endurance.duckdb")
    rng = np.random.default_rng(args.seed)
    every = max(1, args.events // max(1, args.searches)) if args.searches else 0
    checkpoint_every = max(1, args.events // args.checkpoints)
    rows: list[list[object]] = []
    gc.collect()
    start_rss = rss_mb()
    with Memory(path, embedder=embedder, shared=args.shared) as mem:
        opened_rss = rss_mb()
        add_times: list[float] = []
        search_times: list[float] = []
        searches = 0
        began = time.perf_counter()
        baseline: float | None = None
        for i in range(1, args.events + 1):
            text = sentence(rng, i)
            t0 = time.perf_counter()
            mem.add_event(f"s{i % args.sessions}", "user" if i % 2 else "assistant", text)
            add_times.append(time.perf_counter() - t0)
            if every and i % every == 0 and searches < args.searches:
                query = " ".join(rng.choice(WORDS, size=3))
                t0 = time.perf_counter()
                mem.search(query, limit=5)
                mem.get_context(f"s{i % args.sessions}", query)
                search_times.append(time.perf_counter() - t0)
                searches += 1
            if i % checkpoint_every == 0 or i == args.events:
                if i == args.events:
                    mem.flush()
                gc.collect()
                now = rss_mb()
                held = index_mb(mem)
                engine = duckdb_mb(mem)
                unexplained = now - held - engine
                if baseline is None:
                    baseline = unexplained
                rows.append(
                    [
                        f"{i:,}",
                        f"{searches:,}",
                        f"{now:.0f}",
                        f"{held:.0f}",
                        f"{engine:.0f}",
                        f"{unexplained:.0f}",
                        f"{unexplained - baseline:+.0f}",
                        mem.backlog,
                        ms(p50(add_times)) if add_times else "-",
                        ms(p50(search_times)) if search_times else "-",
                        f"{time.perf_counter() - began:.0f}",
                    ]
                )
                add_times, search_times = [], []
                print(f"  checkpoint {i:,} events: RSS {now:.0f} MiB", file=sys.stderr, flush=True)
        # then searches only: with no new data nothing should grow at all
        gc.collect()
        tail_before = rss_mb()
        tail_began = time.perf_counter()
        for j in range(args.tail_searches):
            query = " ".join(rng.choice(WORDS, size=3))
            mem.search(query, limit=5)
            mem.get_context(f"s{j % args.sessions}", query)
        gc.collect()
        tail_after = rss_mb()
        tail_seconds = time.perf_counter() - tail_began
        # and churn: add_event + delete pairs, so the data stays the same size
        churn_began = time.perf_counter()
        for j in range(args.churn):
            event = mem.add_event(f"s{j % args.sessions}", "user", sentence(rng, -j))
            if j % 10 == 0:
                mem.search(" ".join(rng.choice(WORDS, size=3)), limit=5)
            mem.delete(event.id)
        mem.flush()
        gc.collect()
        churn_after = rss_mb()
        churn_seconds = time.perf_counter() - churn_began
        status = mem.status()
    end_rss = rss_mb()
    print(f"# nbmemory endurance: {args.events:,} add_event, {args.searches:,} searches")
    print(f"\n{machine()}; embedder {args.model}; store {path}; shared={args.shared}\n")
    print_table(
        [
            "events",
            "searches",
            "RSS MiB",
            "vector index MiB",
            "DuckDB MiB",
            "rest MiB",
            "rest: growth since 1st",
            "backlog",
            "add_event p50 ms",
            "search+context p50 ms",
            "elapsed s",
        ],
        rows,
    )
    print(
        f"\nRSS before opening {start_rss:.0f} MiB, after opening {opened_rss:.0f} MiB, "
        f"after close {end_rss:.0f} MiB, peak {peak_rss_mb():.0f} MiB.  Store: "
        f"{status['events']:,} events, {status['embedded']:,} embedded, "
        f"{status['failed']} failed, {os.path.getsize(path) / 2**20:.0f} MiB on disk."
    )
    if args.tail_searches:
        print(
            f"\nSearch-only tail: {args.tail_searches:,} search+get_context calls on the final "
            f"store, no new events: RSS {tail_before:.0f} -> {tail_after:.0f} MiB "
            f"({tail_after - tail_before:+.0f} MiB) in {tail_seconds:.0f} s."
        )
    if args.churn:
        print(
            f"Churn: {args.churn:,} add_event + delete pairs (a search every 10), same data size: "
            f"RSS {tail_after:.0f} -> {churn_after:.0f} MiB ({churn_after - tail_after:+.0f} MiB) "
            f"in {churn_seconds:.0f} s (the audit log still grows by two rows a pair)."
        )
    if tmp is not None:
        tmp.cleanup()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000, help="add_event calls")
    parser.add_argument("--searches", type=int, default=10_000, help="search+get_context calls")
    parser.add_argument(
        "--tail-searches",
        type=int,
        default=5_000,
        help="searches after the last event, with no new data (RSS must stay flat)",
    )
    parser.add_argument(
        "--churn",
        type=int,
        default=10_000,
        help="add_event + delete pairs at the end, data size constant (RSS must stay flat)",
    )
    parser.add_argument("--sessions", type=int, default=100, help="sessions written to")
    parser.add_argument("--checkpoints", type=int, default=10, help="rows in the table")
    parser.add_argument("--model", choices=["hash", "real"], default="hash")
    parser.add_argument("--store", default=None, help="store file (default: a temporary one)")
    parser.add_argument("--shared", action="store_true", help="open with shared=True")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.events < 1 or args.checkpoints < 1 or args.sessions < 1:
        parser.error("--events, --checkpoints and --sessions must be positive")
    if min(args.searches, args.tail_searches, args.churn) < 0:
        parser.error("--searches, --tail-searches and --churn must be 0 or more")
    run(args)


if __name__ == "__main__":
    main()
