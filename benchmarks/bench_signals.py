"""What the hybrid ranking's speaker and time signals cost: search and context latency
with them on and off, and the write-time work they need per event.

    python benchmarks/bench_signals.py --sizes 10000 100000

For each size, a store of n turns written as transcripts ("Name: text", two of 20
speakers per session, 100 sessions, 12 Zipf words, a fifth of the turns placing
something in time: "last week", "on Sunday", "in May 2023") with random 384-d
vectors.  Half the questions ask "When did <Name> ...?" (both signals act), half
"What did <Name> ...?" (the speaker signal acts).  Hybrid search (top 5) and
get_context (hybrid profile) are timed with the default weights (speaker 0.2,
time 0.3) and with both at 0, in turns (on, off, off, on ...: the machine may be
shared), the query vector given (the model's query time is the same either way
and is left out).

At write time the keyword index tokenises each new event for BM25 and, for the
two signals, reads its speaker ("Name: " at the start) and whether it places
something in time (one regular expression): ``KeywordIndex.add`` of one event is
timed whole, and the two detections alone.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import _common as bench  # noqa: E402

from nbmemory import Memory, Settings  # noqa: E402
from nbmemory.retrieval.keyword_index import KeywordIndex, mentions_time, speaker_of  # noqa: E402

NAMES = [
    "Caroline", "Melanie", "Jon", "Gina", "Maria", "John", "Joanna", "Nate", "Tim", "Audrey",
    "Andrew", "James", "Deborah", "Jolene", "Evan", "Sam", "Calvin", "Dave", "Joshua", "Ana",
]  # fmt: skip
WHEN = ["last week", "on Sunday", "in May 2023", "yesterday", "two years ago"]


def turn(rng: np.random.Generator, i: int) -> str:
    """Turn ``i`` of a transcript: its session's two speakers take turns."""
    session = i % 100
    speaker = NAMES[(session + i // 100 % 2 * 7) % len(NAMES)]
    text = f"{speaker}: {bench.random_text(rng, 12)}"
    if rng.random() < 0.2:
        text += f" {WHEN[int(rng.integers(len(WHEN)))]}"
    return text


def one_size(n: int, queries: int, rounds: int, writes: int) -> dict:
    mem = Memory(":memory:", embedder=bench.FixedEmbedder(), background_consolidation=False)
    bench.fill_store(mem, bench.random_unit_vectors(n, seed=n), content=turn)
    start = time.perf_counter()
    mem.indexes.keywords()  # built on first use: once, outside the timings
    mem.indexes.vectors(mem.model_name)
    build_s = time.perf_counter() - start
    rng = np.random.default_rng(7)
    texts = [
        f"{'When' if i % 2 else 'What'} did {NAMES[i % len(NAMES)]} {bench.random_text(rng, 4)}?"
        for i in range(queries)
    ]
    vectors = bench.random_unit_vectors(queries, seed=n + 1)
    vector_of = {text: vectors[i] for i, text in enumerate(texts)}
    mem.retriever.embed_query = vector_of.__getitem__  # type: ignore[method-assign]
    on = mem.settings.replace(profile="hybrid")
    off = on.replace(speaker_weight=0.0, time_weight=0.0)
    signalled = sum("speaker" in s for s in mem.search(texts[0], limit=50, settings=on)["signals"])

    def search(settings: Settings) -> Callable[[int], object]:
        return lambda i: mem.search(texts[i % queries], limit=5, mode="hybrid", settings=settings)

    def context(settings: Settings) -> Callable[[int], object]:
        return lambda i: mem.get_context("s1", texts[i % queries], settings=settings)

    searches = paired(search(on), search(off), queries * rounds)
    contexts = paired(context(on), context(off), queries * rounds)
    mem.close()
    # write time: one event at a time into an index already holding the n turns
    rng = np.random.default_rng(n + 2)
    rows = [(f"e{i}", "ns", f"s{i % 100}", turn(rng, i), i, i) for i in range(n + writes)]
    index = KeywordIndex()
    index.rebuild(rows[:n])
    fresh = [row[3] for row in rows[n:]]
    add, detect = paired(
        lambda i: index.add([rows[n + i]]),
        lambda i: (speaker_of(fresh[i]), mentions_time(fresh[i])),
        writes,
        warmup=0,
    )
    return {
        "n": n,
        "build_s": build_s,
        "signalled": signalled,
        "search_on": bench.p50(searches[0]),
        "search_off": bench.p50(searches[1]),
        "context_on": bench.p50(contexts[0]),
        "context_off": bench.p50(contexts[1]),
        "add_us": bench.p50(add) * 1e6,
        "detect_us": bench.p50(detect) * 1e6,
    }


def paired(
    first: Callable[[int], object], second: Callable[[int], object], repeat: int, warmup: int = 2
) -> tuple[list[float], list[float]]:
    """Seconds per call of ``first(i)`` and ``second(i)``, called in turns (which one
    goes first alternates): on a shared machine, a busy moment weighs on both alike."""
    for i in range(warmup):
        first(i), second(i)
    times: tuple[list[float], list[float]] = ([], [])
    for i in range(repeat):
        for which in (0, 1) if i % 2 == 0 else (1, 0):
            fn = first if which == 0 else second
            start = time.perf_counter()
            fn(i)
            times[which].append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=50, help="questions per round")
    parser.add_argument("--rounds", type=int, default=4, help="times each question is asked")
    parser.add_argument("--writes", type=int, default=2000, help="events added one at a time")
    args = parser.parse_args()
    results = [one_size(n, args.queries, args.rounds, args.writes) for n in args.sizes]
    print(f"machine: {bench.machine()}\n")
    print(
        f"hybrid search (top 5) and get_context, {args.queries} questions x {args.rounds} rounds, "
        "query vector given: speaker and time signals on (0.2 / 0.3) vs off (0 / 0)"
    )
    bench.print_table(
        ["memories", "search p50 ms on / off", "search on / off"]
        + ["get_context p50 ms on / off", "get_context on / off", "speaker hits in a top 50"],
        [
            [
                f"{r['n']:,}",
                f"{bench.ms(r['search_on'])} / {bench.ms(r['search_off'])}",
                f"{r['search_on'] / r['search_off']:.2f}x",
                f"{bench.ms(r['context_on'])} / {bench.ms(r['context_off'])}",
                f"{r['context_on'] / r['context_off']:.2f}x",
                r["signalled"],
            ]
            for r in results
        ],
    )
    print()
    print(f"write time, {args.writes} events added one at a time to the keyword index")
    bench.print_table(
        ["memories", "KeywordIndex.add p50 µs/event", "speaker + time detection p50 µs/event"]
        + ["share of the add"],
        [
            [
                f"{r['n']:,}",
                f"{r['add_us']:.1f}",
                f"{r['detect_us']:.1f}",
                f"{r['detect_us'] / r['add_us']:.0%}",
            ]
            for r in results
        ],
    )


if __name__ == "__main__":
    main()
