"""Long memories with the real model: ingest time, peak memory, sharing, memory after close.

    NBMEMORY_MODEL_PATH=... python benchmarks/long_memories.py [--n 200] [--rounds 2] [--quick]

N messages of 2-4k characters (prose, code, logs, JSON, tracebacks; generated from
a seed, ``benchmarks/long_texts.py``) are ingested with ``add_events`` + ``flush``
into a ``Memory`` on a file, in a child process of its own so its peak resident
memory is its own (another child embeds the same texts with fastembed alone, whose
peak is printed beside it).  That child then opens a second ``Memory`` on another
file (the RSS it adds) and closes both (RSS against the process before the first
opened, split into heap and mapped files).

Tail facts: five messages each end with a fact stated only in their last 300
characters, as their last paragraph after whatever the message ends with (code, a
log, JSON: cut at a line end, an open code fence closed); the table says how many a
``mode="vector"`` and a default search find in the top 3.  (A fact spliced into the
middle of a code line is one line of a passage of code: the default search finds it
by its words, the vector alone not always.)

Speed: issue 36 compares ``add_events`` + ``flush`` with fastembed alone on the same
texts: the long messages one vector each (passages off; fastembed at 256
word-pieces, batch 16), the long messages as passages (fastembed embedding the
very passages nbmemory cuts, batch 16), and short turns (batch 64).  Both sides run
in turn in one child process (a b, b a, ... for ``--rounds`` rounds, seconds
summed), so a machine whose load swings treats them alike.  A last child times
warm vector search over ``--search`` short memories (random vectors, as
``bench_search.py``) against the numpy floor, the ratio compared with the one
measured before long memories.

Figures are ratios from one run on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

#: Facts planted in the last 300 characters of a message, each in one message: (fact, question).
TAIL_FACTS = [
    (
        "The staging database password rotates every Thursday at 04:00.",
        "when does the staging password rotate",
    ),
    (
        "Marta's parrot is called Biscuit and speaks Portuguese.",
        "what is the name of Marta's parrot",
    ),
    (
        "The quarterly offsite will be held in Ljubljana in October.",
        "where is the quarterly offsite",
    ),
    ("Rollbacks of the billing service need approval from Kofi.", "who approves billing rollbacks"),
    ("Our CDN bill doubled after the video launch in March.", "why did the CDN bill go up"),
]


def _rss_mb(key: str = "VmRSS") -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {key} in /proc/self/status")


def messages(n: int) -> tuple[list[str], list[tuple[int, str]]]:
    """The long messages, each fact of TAIL_FACTS planted once in the last 300 characters
    of a message (spread evenly over the ``n``); and (index, question) of each fact.

    Each fact is in one message only, so the message that holds it is the one answer:
    a copy planted in several messages would let the copies crowd each other out of
    the top 3."""
    from long_texts import long_messages

    texts = long_messages(n)
    facts = TAIL_FACTS[:n]
    questions = []
    for k, (fact, question) in enumerate(facts):
        index = (2 * k + 1) * n // (2 * len(facts))
        texts[index] = _state_at_end(texts[index], fact)
        questions.append((index, question))
    return texts, questions


def _state_at_end(text: str, fact: str) -> str:
    """``text`` of the same length or less, ending with ``fact`` as its last paragraph:
    the part it cuts short ends at a line end (an open code fence closed), as when a
    message says one more thing after its code or log."""
    head = text[: len(text) - len(fact) - 2]
    line_end = head.rfind("\n")
    if line_end > len(text) - 300 + len(fact):
        head = head[:line_end]
    if head.count("```") % 2:
        head += "\n```"
    return head + "\n\n" + fact


def passage_texts(model: object, texts: list[str]) -> list[str]:
    """The passages nbmemory embeds for ``texts`` (its splitter over the model's own
    word-pieces, window 254), cut outside any timing."""
    from tokenizers import Tokenizer

    from nbmemory.retrieval.passages import split_passages

    counter = Tokenizer.from_str(model.model.tokenizer.to_str())  # type: ignore[attr-defined]
    counter.no_truncation()
    counter.no_padding()

    def spans_of(text: str) -> list[tuple[int, int]]:
        return list(counter.encode(text, add_special_tokens=False).offsets)

    out = []
    for text in texts:
        cut = [(0, len(text))] if len(text) <= WINDOW else split_passages(text, spans_of, WINDOW)
        out += [text[start:stop] for start, stop in cut]
    return out


#: all-MiniLM-L6-v2's window less [CLS] and [SEP], as nbmemory reads it.
WINDOW = 254


def child_fastembed(n: int) -> dict:
    """fastembed alone on the long texts (256 word-pieces, batch 16): its peak RSS, the
    reference for nbmemory's."""
    texts, _ = messages(n)
    model = _fastembed_alone()
    start = time.perf_counter()
    vectors = list(model.embed(texts, batch_size=16))
    return {
        "long_s": time.perf_counter() - start,
        "peak_mb": _rss_mb("VmHWM"),
        "rows": len(vectors),
    }


def _fastembed_alone() -> Any:
    """fastembed's own ``TextEmbedding`` of the spec's model, cut at 256, warmed up."""
    from fastembed import TextEmbedding

    from nbmemory.config import DEFAULT_MODEL

    model = TextEmbedding(
        model_name=DEFAULT_MODEL, specific_model_path=os.environ["NBMEMORY_MODEL_PATH"]
    )
    model.model.tokenizer.enable_truncation(max_length=256)
    list(model.embed(["warm up"]))
    return model


def child_memory(n: int, folder: str) -> dict:
    """nbmemory: ingest with passages, peak, tail facts, a second store, close."""
    from nbmemory import Memory

    texts, questions = messages(n)
    before = _status()
    first = Memory(os.path.join(folder, "first.duckdb"))
    first.add_events([{"session_id": "warm", "role": "user", "content": "warm up"}])
    first.flush()
    start = time.perf_counter()
    first.add_events(_rows(texts, 20, "assistant"))
    first.flush()
    long_s = time.perf_counter() - start
    peak = _rss_mb("VmHWM")
    status = first.status()
    passage_rows = first.store.run("SELECT count(*) - 1 FROM event_vectors")[0][0]
    found_vector = found_default = 0
    for index, question in questions:
        wanted = texts[index]
        hits = first.search(question, mode="vector", limit=3)["content"].tolist()
        found_vector += wanted in hits
        hits = first.search(question, limit=3)["content"].tolist()
        found_default += wanted in hits
    one_open = _rss_mb()
    second = Memory(os.path.join(folder, "second.duckdb"))
    second.add_events([{"session_id": "s", "role": "user", "content": t} for t in texts[:20]])
    second.flush()
    second_delta = _rss_mb() - one_open
    shared_by = second.status()["embedder"].get("shared_by")
    first.close()
    second.close()
    after = _status()
    return {
        "passage_rows": passage_rows,
        "long_s": long_s,
        "peak_mb": peak,
        "embedded": status["embedded"],
        "footprint": status["embedder"],
        "tail_questions": len(questions),
        "tail_vector": found_vector,
        "tail_default": found_default,
        "second_mb": second_delta,
        "shared_by": shared_by,
        "after_close_mb": after["VmRSS"] - before["VmRSS"],
        "after_close_anon_mb": after["RssAnon"] - before["RssAnon"],
        "after_close_file_mb": after["RssFile"] - before["RssFile"],
    }


def _status() -> dict[str, float]:
    """Resident memory now (MiB): in all, anonymous (heap) and file-backed (code, maps)."""
    return {key: _rss_mb(key) for key in ("VmRSS", "RssAnon", "RssFile")}


def _rows(texts: list[str], per_session: int, role: str) -> list[dict]:
    return [
        {"session_id": f"s{i // per_session}", "role": role, "content": t}
        for i, t in enumerate(texts)
    ]


def child_turns(n: int, shorts: int, rounds: int, folder: str) -> dict:
    """The ingest speed ratios, nbmemory and fastembed alone called in turn in one
    process (a b, b a, ...), so a machine whose load swings treats both alike.

    Three comparisons, each over the same texts: the long messages one vector each
    (passages off) against fastembed at 256 word-pieces, batch 16; the long messages
    as passages against fastembed embedding the same passages, batch 16; short turns
    against fastembed, batch 64.  nbmemory's side is ``add_events`` + ``flush`` into a
    new store each time, opened and warmed up outside the timing."""
    from long_texts import short_messages

    from nbmemory import Memory

    texts, _ = messages(n)
    short = short_messages(shorts)
    model = _fastembed_alone()
    passages = passage_texts(model, texts)
    # a store held open all along keeps the shared model loaded between the timed stores
    holder = Memory(os.path.join(folder, "holder.duckdb"))
    holder.add_events([{"session_id": "warm", "role": "user", "content": "warm up"}])
    holder.flush()
    stores = iter(range(10**6))

    def ours(rows: list[dict], split: bool) -> tuple[float, int]:
        mem = Memory(os.path.join(folder, f"turn{next(stores)}.duckdb"))
        mem.add_events([{"session_id": "warm", "role": "user", "content": "warm up"}])
        mem.flush()
        if not split:
            mem.core.worker.split = None  # type: ignore[union-attr]
        start = time.perf_counter()
        mem.add_events(rows)
        mem.flush()
        seconds = time.perf_counter() - start
        vectors = mem.store.run("SELECT count(*) - 1 FROM event_vectors")[0][0]
        mem.close()
        return seconds, vectors

    def alone(items: list[str], batch: int) -> tuple[float, int]:
        start = time.perf_counter()
        count = len(list(model.embed(items, batch_size=batch)))
        return time.perf_counter() - start, count

    cases: dict[str, tuple[Callable[[], tuple[float, int]], ...]] = {
        "whole": (lambda: ours(_rows(texts, 20, "assistant"), False), lambda: alone(texts, 16)),
        "passages": (
            lambda: ours(_rows(texts, 20, "assistant"), True),
            lambda: alone(passages, 16),
        ),
        "short": (lambda: ours(_rows(short, 50, "user"), True), lambda: alone(short, 64)),
    }
    out: dict[str, Any] = {"rounds": rounds, "passages": len(passages)}
    for name, sides in cases.items():
        totals = [0.0, 0.0]
        for r in range(rounds):
            for side in (0, 1) if r % 2 == 0 else (1, 0):
                seconds, count = sides[side]()
                totals[side] += seconds
                out[f"{name}_{('ours', 'alone')[side]}_vectors"] = count
        out[f"{name}_ours_s"], out[f"{name}_alone_s"] = totals
    holder.close()
    return out


def child_search(n: int, queries: int = 50, k: int = 5) -> dict:
    """Warm vector search over ``n`` short memories (random unit vectors, as
    ``bench_search.py``), p50 against the numpy floor, called in turn."""
    import numpy as np
    from _common import FixedEmbedder, fill_store, interleaved, p50, random_unit_vectors

    from nbmemory import Memory

    vectors = random_unit_vectors(n, seed=n)
    qs = random_unit_vectors(queries, seed=n + 1)
    with tempfile.TemporaryDirectory(prefix="nbmemory-search-") as folder:
        path = os.path.join(folder, "search.duckdb")
        with Memory(path, embedder=FixedEmbedder()) as mem:
            fill_store(mem, vectors)
            mem.indexes.vectors(mem.model_name)
        with Memory(path, embedder=FixedEmbedder(), background_consolidation=False) as mem:

            def floor(i: int) -> np.ndarray:
                scores = vectors @ qs[i % queries]
                top = np.argpartition(-scores, k)[:k]
                return top[np.argsort(-scores[top])]

            def ours(i: int) -> object:
                return mem.retriever.vector_search(qs[i % queries], "default", limit=k)

            t_floor, t_ours = interleaved([floor, ours], queries)
    return {"n": n, "floor_ms": p50(t_floor) * 1000, "ours_ms": p50(t_ours) * 1000}


#: nbmemory's warm vector search at 100k memories over the numpy floor before long
#: memories (docs/performance.md, "Search and context", 2026-12-03): the goal is 1.2x it.
SEARCH_RATIO_BEFORE = 1.92


def _run_child(kind: str, args: argparse.Namespace, folder: str) -> dict:
    command = [sys.executable, __file__, "--child", kind, "--folder", folder]
    for option in ("n", "shorts", "search", "rounds"):
        command += [f"--{option}", str(getattr(args, option))]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        sys.stderr.write(result.stderr)
        raise SystemExit(f"the {kind} child failed (exit {result.returncode})")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200, help="long messages (default 200)")
    parser.add_argument("--shorts", type=int, default=2000, help="short turns for the bulk ingest")
    parser.add_argument(
        "--rounds", type=int, default=2, help="rounds of each in-turn speed comparison"
    )
    parser.add_argument(
        "--quick", action="store_true", help="20 long messages, 200 short turns, one round"
    )
    parser.add_argument(
        "--search", type=int, default=100_000, help="short memories for the warm vector search"
    )
    parser.add_argument(
        "--child", choices=("memory", "fastembed", "turns", "search"), help=argparse.SUPPRESS
    )
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.n, args.shorts, args.search, args.rounds = 20, 200, 10_000, 1
    children = {
        "memory": lambda: child_memory(args.n, args.folder),
        "fastembed": lambda: child_fastembed(args.n),
        "turns": lambda: child_turns(args.n, args.shorts, args.rounds, args.folder),
        "search": lambda: child_search(args.search),
    }
    if args.child:
        print(json.dumps(children[args.child]()))
        return
    if not os.environ.get("NBMEMORY_MODEL_PATH"):
        raise SystemExit("set NBMEMORY_MODEL_PATH to the all-MiniLM-L6-v2 folder")
    from _common import machine, print_table

    with tempfile.TemporaryDirectory(prefix="nbmemory-long-") as folder:
        alone = _run_child("fastembed", args, folder)
        mem = _run_child("memory", args, folder)
        turns = _run_child("turns", args, folder)
        search = _run_child("search", args, folder)
    assert mem["embedded"] == args.n + 1, mem  # every message (and the warm-up) has its vector
    print(f"{args.n} long messages, {args.shorts} short turns; {machine()}")
    print(f"embedder footprint after the ingest: {mem['footprint']}")
    print(
        f"speed ratios: nbmemory and fastembed alone in turn in one process, "
        f"{turns['rounds']} round(s) of each, seconds summed"
    )
    search_ratio = search["ours_ms"] / search["floor_ms"]
    search_goal = 1.2 * SEARCH_RATIO_BEFORE

    def speed(name: str, label: str, goal: float, higher: bool = False) -> tuple[str, ...]:
        ours, theirs = turns[f"{name}_ours_s"], turns[f"{name}_alone_s"]
        ratio = theirs / ours if higher else ours / theirs
        met = ratio >= goal if higher else ratio <= goal
        return (
            label,
            f"{ours:.1f} s",
            f"{theirs:.1f} s",
            f"{ratio:.2f}x",
            f"{'>=' if higher else '<='} {goal}x",
            "yes" if met else "no",
        )

    tail = (
        f"{mem['tail_vector']}/{mem['tail_questions']} vector, "
        f"{mem['tail_default']}/{mem['tail_questions']} default"
    )
    rows = [
        speed(
            "whole",
            f"ingest, one vector per message, passages off ({turns['whole_ours_vectors']} vectors)",
            1.5,
        ),
        speed(
            "passages",
            f"ingest with passages ({turns['passages_ours_vectors']} vectors; fastembed: the "
            f"same {turns['passages']} passages)",
            1.5,
        ),
        (
            "peak RSS of the ingesting process",
            f"{mem['peak_mb']:.0f} MB",
            f"{alone['peak_mb']:.0f} MB",
            "",
            "<= 1536 MB",
            "yes" if mem["peak_mb"] <= 1536 else "no",
        ),
        (
            f"a second Memory, same process (model shared by {mem['shared_by']})",
            f"+{mem['second_mb']:.0f} MB",
            "",
            "",
            "<= +300 MB",
            "yes" if mem["second_mb"] <= 300 else "no",
        ),
        (
            "RSS after closing both vs before the first opened",
            f"{mem['after_close_mb']:+.0f} MB (heap {mem['after_close_anon_mb']:+.0f}, "
            f"mapped files {mem['after_close_file_mb']:+.0f})",
            "",
            "",
            "<= +100 MB",
            "yes" if mem["after_close_mb"] <= 100 else "no",
        ),
        speed("short", "short turns, bulk ingest (speed vs fastembed alone)", 0.95, higher=True),
        (
            f"warm vector search, {search['n']:,} short memories, p50 (vs the numpy floor)",
            f"{search['ours_ms']:.2f} ms",
            f"{search['floor_ms']:.2f} ms (floor)",
            f"{search_ratio:.2f}x",
            f"<= {search_goal:.2f}x (1.2 x {SEARCH_RATIO_BEFORE}x before)",
            "yes" if search_ratio <= search_goal else "no",
        ),
        (
            "tail facts found in the top 3",
            tail,
            "",
            "",
            "all",
            "yes" if mem["tail_vector"] == mem["tail_default"] == mem["tail_questions"] else "no",
        ),
    ]
    print_table(("measure", "nbmemory", "fastembed alone", "ratio", "goal", "met"), rows)


if __name__ == "__main__":
    main()
