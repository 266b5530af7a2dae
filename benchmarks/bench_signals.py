"""What the hybrid ranking's signals cost: search and context latency against the
ranking of another checkout, and the write-time work they need per event.

    python benchmarks/bench_signals.py --sizes 10000 100000 --baseline-src ../before/src

For each size, a store of n turns written as transcripts ("Name: text", two of 20
speakers per session, 100 sessions, 12 Zipf words, a fifth of the turns placing
something in time: "last week", "on Sunday", "in May 2023") with random 384-d
vectors.  Half the questions ask "When did <Name> ...?", half "What did <Name> ...
in May 2023?" (so the speaker, time and date signals all act).  Hybrid search (top
5) and get_context (hybrid profile) are timed with the default settings, the query
vector given (the model's query time is the same either way and is left out).

Each side runs in processes of its own, this checkout's ``src`` and, with
``--baseline-src``, another's (say a git worktree of the commit before the
learned fusion), in turns (this, baseline, baseline, this ...: the machine may be
shared); each side's p50 is the median of its processes' p50s.

At write time the keyword index tokenises each new event for BM25 and, for the
signals, reads its speaker ("Name: " at the start), whether it places something
in time and the days it names (:func:`nbmemory.retrieval.keywords.said_days`)
and whether it is a question: ``KeywordIndex.add`` of one event is timed whole,
and the detections alone.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import _common as bench  # noqa: E402

from nbmemory import Memory  # noqa: E402

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


def latency(n: int, queries: int, rounds: int) -> dict:
    """p50 seconds of hybrid search and get_context on a store of ``n`` turns (the
    nbmemory this process imports: this checkout's or the baseline's)."""
    mem = Memory(":memory:", embedder=bench.FixedEmbedder(), background_consolidation=False)
    bench.fill_store(mem, bench.random_unit_vectors(n, seed=n), content=turn)
    mem.indexes.keywords()  # built on first use: once, outside the timings
    mem.indexes.vectors(mem.model_name)
    rng = np.random.default_rng(7)
    texts = [
        f"When did {NAMES[i % len(NAMES)]} {bench.random_text(rng, 4)}?"
        if i % 2
        else f"What did {NAMES[i % len(NAMES)]} {bench.random_text(rng, 4)} in May 2023?"
        for i in range(queries)
    ]
    vectors = bench.random_unit_vectors(queries, seed=n + 1)
    vector_of = {text: vectors[i] for i, text in enumerate(texts)}
    mem.retriever.embed_query = vector_of.__getitem__  # type: ignore[method-assign]
    signalled = sum("speaker" in s for s in mem.search(texts[0], limit=50)["signals"])
    searches, contexts = paired(
        lambda i: mem.search(texts[i % queries], limit=5, mode="hybrid"),
        lambda i: mem.get_context("s1", texts[i % queries]),
        queries * rounds,
    )
    features = features_cost(mem, texts, vector_of, queries * rounds)
    mem.close()
    return {
        "search": bench.p50(searches),
        "context": bench.p50(contexts),
        "signalled": signalled,
        **features,
    }


def features_cost(mem: Memory, texts: list[str], vector_of: dict, repeat: int) -> dict:
    """p50 milliseconds per query of each step that computes the fusion's features
    (``hybrid.find_candidates`` with its helpers timed where they are called), and of
    the two inputs alone (cosine top 50, BM25 top 50).  Empty for a checkout without
    ``find_candidates`` (a baseline)."""
    try:
        from nbmemory.retrieval import hybrid
    except ImportError:
        return {}
    if not hasattr(hybrid, "find_candidates"):
        return {}
    vectors, keywords = mem.indexes.vectors(mem.model_name), mem.indexes.keywords()
    namespace = mem.namespace
    spent: dict[str, float] = {}

    def timed(name: str, fn: Callable) -> Callable:
        def call(*args: object, **kwargs: object) -> object:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[name] = spent.get(name, 0.0) + time.perf_counter() - start

        return call

    steps = {  # the step's name in the table: (owner, attribute)
        "inputs: cosine top 50": (vectors, "search"),
        "inputs: BM25 top 50": (keywords, "score_array"),
        "neighbours (pool)": (hybrid, "_with_neighbours"),
        "cosine of the pool": (vectors, "similarities"),
        "facts (sessions, speakers, dates)": (keywords, "facts"),
        "speaker named": (keywords, "speakers_named"),
        "mention": (keywords, "mention_share"),
        "dates (question resolved)": (hybrid, "_dates"),
        "ranks": (hybrid, "_reciprocal_ranks"),
    }
    saved = {name: getattr(owner, attr) for name, (owner, attr) in steps.items()}
    for name, (owner, attr) in steps.items():
        setattr(owner, attr, timed(name, saved[name]))
    score_array = saved["inputs: BM25 top 50"]  # the method itself: timed once, below

    def scores(*args: object, **kwargs: object) -> object:  # its lazy parts timed too
        found = score_array(*args, **kwargs)
        found.top = timed("inputs: BM25 top 50", found.top)
        found.prefetch = timed("BM25 of the pool's common terms", found.prefetch)
        return found

    keywords.score_array = timed("inputs: BM25 top 50", scores)
    steps["BM25 of the pool's common terms"] = (keywords, "score_array")
    per_query: dict[str, list[float]] = {name: [] for name in [*steps, "all features"]}
    try:
        for i in range(repeat):
            text = texts[i % len(texts)]
            spent.clear()
            start = time.perf_counter()
            hybrid.find_candidates(vectors, keywords, text, vector_of[text], namespace=namespace)
            whole = time.perf_counter() - start
            for name in steps:
                per_query[name].append(spent.get(name, 0.0))
            inputs = spent.get("inputs: cosine top 50", 0.0) + spent.get("inputs: BM25 top 50", 0.0)
            per_query["all features"].append(whole - inputs)
    finally:
        for name, (owner, attr) in steps.items():
            if owner is hybrid:
                setattr(owner, attr, saved[name])
            elif attr in vars(owner):
                delattr(owner, attr)  # the instance attribute hid the class's method
    return {"features": {name: bench.p50(values) for name, values in per_query.items()}}


def writes_cost(n: int, writes: int) -> dict:
    """p50 µs of adding one event to a keyword index of ``n``, and of its detections."""
    # here, not at the top: a --baseline-src child may be a checkout without this package
    from nbmemory.retrieval import keywords

    rng = np.random.default_rng(n + 2)
    rows = [
        (f"e{i}", "ns", f"s{i % 100}", turn(rng, i), i * 60_000_000, i) for i in range(n + writes)
    ]
    index = keywords.KeywordIndex()
    index.rebuild(rows[:n])
    fresh = [row[3] for row in rows[n:]]

    def detect(i: int) -> object:
        text = fresh[i]
        timed = keywords.mentions_time(text)
        days = keywords.said_days(text, rows[n + i][4]) if timed else None
        return keywords.speaker_of(text), days, keywords.question_share(text)

    add, detected = paired(lambda i: index.add([rows[n + i]]), detect, writes, warmup=0)
    return {"add_us": bench.p50(add) * 1e6, "detect_us": bench.p50(detected) * 1e6}


def side(src: Path, n: int, queries: int, rounds: int) -> dict:
    """:func:`latency` in a process of its own that imports nbmemory from ``src``."""
    result = subprocess.run(
        [sys.executable, __file__, "--child", str(n), "--queries", str(queries)]
        + ["--rounds", str(rounds)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(src)},
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def one_size(
    n: int, queries: int, rounds: int, writes: int, baseline: Path | None, processes: int
) -> dict:
    here = Path(__file__).resolve().parent.parent / "src"
    runs: dict[str, list[dict]] = {"now": [], "before": []}
    for i in range(processes):
        order = ("now", "before") if i % 2 == 0 else ("before", "now")
        for which in order:
            if which == "before" and baseline is None:
                continue
            runs[which].append(side(here if which == "now" else baseline, n, queries, rounds))

    def median(which: str, key: str) -> float | None:
        values = [r[key] for r in runs[which]]
        return float(np.median(values)) if values else None

    return {
        "n": n,
        "signalled": runs["now"][0]["signalled"],
        "features": {
            name: float(np.median([r["features"][name] for r in runs["now"]]))
            for name in runs["now"][0].get("features", {})
        },
        **{f"{k}_{w}": median(w, k) for k in ("search", "context") for w in ("now", "before")},
        **writes_cost(n, writes),
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
    parser.add_argument(
        "--baseline-src", type=Path, default=None, help="another checkout's src to compare with"
    )
    parser.add_argument("--processes", type=int, default=2, help="processes per side and size")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(latency(args.child, args.queries, args.rounds)))
        return
    results = [
        one_size(n, args.queries, args.rounds, args.writes, args.baseline_src, args.processes)
        for n in args.sizes
    ]
    print(f"machine: {bench.machine()}\n")
    print(
        f"hybrid search (top 5) and get_context, {args.queries} questions x {args.rounds} rounds, "
        f"query vector given, {args.processes} process(es) per side: this checkout"
        + (f" vs {args.baseline_src}" if args.baseline_src else "")
    )

    def pair(r: dict, key: str) -> list[str]:
        now, before = r[f"{key}_now"], r[f"{key}_before"]
        if before is None:
            return [bench.ms(now), "-"]
        return [f"{bench.ms(now)} / {bench.ms(before)}", f"{now / before:.2f}x"]

    bench.print_table(
        ["memories", "search p50 ms now / before", "search now / before"]
        + [
            "get_context p50 ms now / before",
            "get_context now / before",
            "speaker hits in a top 50",
        ],
        [[f"{r['n']:,}", *pair(r, "search"), *pair(r, "context"), r["signalled"]] for r in results],
    )
    print()
    print(
        "the fusion's features, p50 ms per query of each step that computes them "
        "(the first two rows are the inputs, not features)"
    )
    names = list(results[0]["features"])
    bench.print_table(
        ["step", *[f"{r['n']:,} memories" for r in results]],
        [[name, *[bench.ms(r["features"][name]) for r in results]] for name in names],
    )
    print()
    print(f"write time, {args.writes} events added one at a time to the keyword index")
    bench.print_table(
        ["memories", "KeywordIndex.add p50 µs/event", "signal detection p50 µs/event"]
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
