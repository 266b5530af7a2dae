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


def child_fastembed(n: int, shorts: int) -> dict:
    """fastembed alone: the long texts at 256 word-pieces, batch 16; short texts, batch 64."""
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
    return {"long_s": long_s, "peak_mb": peak, "short_s": short_s, "rows": len(vectors)}


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
    return {
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
    parser.add_argument("--child", choices=("memory", "fastembed"), help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.n, args.shorts = 20, 200
    if args.child == "memory":
        print(json.dumps(child_memory(args.n, args.shorts, args.folder)))
        return
    if args.child == "fastembed":
        print(json.dumps(child_fastembed(args.n, args.shorts)))
        return
    if not os.environ.get("NBMEMORY_MODEL_PATH"):
        raise SystemExit("set NBMEMORY_MODEL_PATH to the all-MiniLM-L6-v2 folder")
    from _common import machine, print_table

    with tempfile.TemporaryDirectory(prefix="nbmemory-long-") as folder:
        alone = _run_child("fastembed", args, folder)
        mem = _run_child("memory", args, folder)
    assert mem["embedded"] == args.n + 1, mem  # every message (and the warm-up) has its vector
    print(f"{args.n} long messages, {args.shorts} short turns; {machine()}")
    print(f"embedder footprint after the ingest: {mem['footprint']}")
    ratio = mem["long_s"] / alone["long_s"]
    short_ratio = alone["short_s"] / mem["short_s"]
    tail = f"{mem['tail_vector']}/{mem['tail_questions']} vector, {mem['tail_default']}/{mem['tail_questions']} default"
    rows = [
        (
            "ingest of the long messages (add_events + flush)",
            f"{mem['long_s']:.1f} s",
            f"{alone['long_s']:.1f} s",
            f"{ratio:.2f}x",
            "<= 1.5x",
            "yes" if ratio <= 1.5 else "no",
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
