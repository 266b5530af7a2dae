"""Long memories with the real model: ingest time, peak memory, sharing, memory after close.

    NBMEMORY_MODEL_PATH=... python benchmarks/long_memories.py [--n 200] [--quick]

N messages of 2-4k characters (prose, code, logs, JSON, tracebacks; generated from
a seed, ``benchmarks/long_texts.py``) are ingested with ``add_events`` + ``flush``
into a ``Memory`` on a file, in a child process of its own so its peak resident
memory is its own; another child embeds the same texts with fastembed alone
(truncated at 256 word-pieces, batch 16), the comparison issue 36 sets.  The first
child then opens a second ``Memory`` on another file (the RSS it adds), closes both
(RSS against the process before the first opened) and, for short texts, times a
bulk ingest against fastembed alone (batch 64) on the same turns.

Tail facts: some messages end with a fact stated only in their last 300
characters; the table says how many a ``mode="vector"`` and a default search find
in the top 3.  A message's vector sees its first 254 word-pieces only, so they are
found once long memories are embedded as passages (issue 36, the passages part).

Ingest is compared twice: with passages off (one vector per message, what
fastembed alone does at 256 word-pieces) and with passages on against fastembed
embedding the very passages nbmemory cuts.  A last child times warm vector search
over ``--search`` short memories (random vectors, as ``bench_search.py``) against
the numpy floor, the ratio compared with the one measured before long memories.

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
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

#: Facts planted in the last 300 characters of every TAIL_EVERY-th message: (fact, question).
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
TAIL_EVERY = 10


def _rss_mb(key: str = "VmRSS") -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {key} in /proc/self/status")


def messages(n: int) -> tuple[list[str], list[tuple[int, str]]]:
    """The long messages, with a tail fact in some; and (index, question) of each fact."""
    from long_texts import long_messages

    texts = long_messages(n)
    questions = []
    for k, index in enumerate(range(TAIL_EVERY - 1, n, TAIL_EVERY)):
        fact, question = TAIL_FACTS[k % len(TAIL_FACTS)]
        texts[index] = texts[index][: len(texts[index]) - len(fact) - 1] + " " + fact
        questions.append((index, question))
    return texts, questions[: len(TAIL_FACTS)]


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


def child_fastembed(n: int, shorts: int) -> dict:
    """fastembed alone: the long texts at 256 word-pieces, batch 16; short texts, batch 64;
    then the passages nbmemory cuts the long texts into, batch 16."""
    from fastembed import TextEmbedding
    from long_texts import short_messages

    from nbmemory.config import DEFAULT_MODEL

    texts, _ = messages(n)
    model = TextEmbedding(
        model_name=DEFAULT_MODEL, specific_model_path=os.environ["NBMEMORY_MODEL_PATH"]
    )
    model.model.tokenizer.enable_truncation(max_length=256)
    list(model.embed(["warm up"]))
    start = time.perf_counter()
    vectors = list(model.embed(texts, batch_size=16))
    long_s = time.perf_counter() - start
    peak = _rss_mb("VmHWM")
    short = short_messages(shorts)
    start = time.perf_counter()
    list(model.embed(short, batch_size=64))
    short_s = time.perf_counter() - start
    passages = passage_texts(model, texts)
    start = time.perf_counter()
    list(model.embed(passages, batch_size=16))
    passages_s = time.perf_counter() - start
    return {
        "long_s": long_s,
        "peak_mb": peak,
        "short_s": short_s,
        "rows": len(vectors),
        "passages": len(passages),
        "passages_s": passages_s,
    }


def child_memory(n: int, shorts: int, folder: str) -> dict:
    """nbmemory: ingest, peak, a second store, close, short texts."""
    from long_texts import short_messages

    from nbmemory import Memory

    texts, questions = messages(n)
    before = _rss_mb()
    import fastembed  # noqa: F401  (what importing the model's libraries costs, for the table)

    imports = _rss_mb() - before
    first = Memory(os.path.join(folder, "first.duckdb"))
    first.add_events([{"session_id": "warm", "role": "user", "content": "warm up"}])
    first.flush()
    rows = [
        {"session_id": f"s{i // 20}", "role": "assistant", "content": t}
        for i, t in enumerate(texts)
    ]
    start = time.perf_counter()
    first.add_events(rows)
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
    after_close = _rss_mb() - before
    short = short_messages(shorts)
    third = Memory(os.path.join(folder, "short.duckdb"))
    third.add_events([{"session_id": "warm", "role": "user", "content": "warm up"}])
    third.flush()
    start = time.perf_counter()
    third.add_events(
        [{"session_id": f"s{i // 50}", "role": "user", "content": t} for i, t in enumerate(short)]
    )
    third.flush()
    short_s = time.perf_counter() - start
    third.close()
    # the same long texts, one vector each (passages off): what fastembed alone does
    whole = Memory(os.path.join(folder, "whole.duckdb"))
    whole.add_events([{"session_id": "warm", "role": "user", "content": "warm up"}])
    whole.flush()
    whole.core.worker.split = None  # type: ignore[union-attr]
    start = time.perf_counter()
    whole.add_events(rows)
    whole.flush()
    whole_s = time.perf_counter() - start
    whole_rows = whole.store.run("SELECT count(*) FROM event_vectors")[0][0]
    whole.close()
    return {
        "whole_s": whole_s,
        "whole_rows": whole_rows,
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
        "after_close_mb": after_close,
        "imports_mb": imports,
        "short_s": short_s,
    }


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
    command = [
        sys.executable,
        __file__,
        "--child",
        kind,
        "--n",
        str(args.n),
        "--shorts",
        str(args.shorts),
        "--search",
        str(args.search),
        "--folder",
        folder,
    ]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        sys.stderr.write(result.stderr)
        raise SystemExit(f"the {kind} child failed (exit {result.returncode})")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200, help="long messages (default 200)")
    parser.add_argument("--shorts", type=int, default=2000, help="short turns for the bulk ingest")
    parser.add_argument("--quick", action="store_true", help="20 long messages, 200 short turns")
    parser.add_argument(
        "--search", type=int, default=100_000, help="short memories for the warm vector search"
    )
    parser.add_argument(
        "--child", choices=("memory", "fastembed", "search"), help=argparse.SUPPRESS
    )
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.n, args.shorts, args.search = 20, 200, 10_000
    if args.child == "memory":
        print(json.dumps(child_memory(args.n, args.shorts, args.folder)))
        return
    if args.child == "fastembed":
        print(json.dumps(child_fastembed(args.n, args.shorts)))
        return
    if args.child == "search":
        print(json.dumps(child_search(args.search)))
        return
    if not os.environ.get("NBMEMORY_MODEL_PATH"):
        raise SystemExit("set NBMEMORY_MODEL_PATH to the all-MiniLM-L6-v2 folder")
    from _common import machine, print_table

    with tempfile.TemporaryDirectory(prefix="nbmemory-long-") as folder:
        alone = _run_child("fastembed", args, folder)
        mem = _run_child("memory", args, folder)
        search = _run_child("search", args, folder)
    assert mem["embedded"] == args.n + 1, mem  # every message (and the warm-up) has its vector
    print(f"{args.n} long messages, {args.shorts} short turns; {machine()}")
    print(f"embedder footprint after the ingest: {mem['footprint']}")
    whole_ratio = mem["whole_s"] / alone["long_s"]
    passage_ratio = mem["long_s"] / alone["passages_s"]
    search_ratio = search["ours_ms"] / search["floor_ms"]
    search_goal = 1.2 * SEARCH_RATIO_BEFORE
    short_ratio = alone["short_s"] / mem["short_s"]
    tail = f"{mem['tail_vector']}/{mem['tail_questions']} vector, {mem['tail_default']}/{mem['tail_questions']} default"
    rows = [
        (
            f"ingest, one vector per message, passages off ({mem['whole_rows'] - 1} vectors)",
            f"{mem['whole_s']:.1f} s",
            f"{alone['long_s']:.1f} s",
            f"{whole_ratio:.2f}x",
            "<= 1.5x",
            "yes" if whole_ratio <= 1.5 else "no",
        ),
        (
            f"ingest with passages ({mem['passage_rows']} vectors; fastembed: the same "
            f"{alone['passages']} passages)",
            f"{mem['long_s']:.1f} s",
            f"{alone['passages_s']:.1f} s",
            f"{passage_ratio:.2f}x",
            "<= 1.5x",
            "yes" if passage_ratio <= 1.5 else "no",
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
            f"{mem['after_close_mb']:+.0f} MB (importing fastembed: {mem['imports_mb']:+.0f})",
            "",
            "",
            "<= +100 MB",
            "yes" if mem["after_close_mb"] <= 100 else "no",
        ),
        (
            "short turns, bulk ingest (speed vs fastembed alone)",
            f"{mem['short_s']:.1f} s",
            f"{alone['short_s']:.1f} s",
            f"{short_ratio:.2f}x",
            ">= 0.95x",
            "yes" if short_ratio >= 0.95 else "no",
        ),
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
