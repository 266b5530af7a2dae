"""The model's threads on a busy machine: NBMEMORY_MODEL_THREADS=1 against the default.

    NBMEMORY_MODEL_PATH=... python benchmarks/model_threads.py [--processes 2] [--rounds 2]

Each run starts ``--processes`` processes at once, each embedding the generated
technical chat (``nbmemory.research.corpora``, seed 0: long messages with code and
logs, cut into passages) into its own in-memory store, with the model loaded on
ONNX Runtime's default threads (one per core) or on one thread.  With as many
processes as cores, the machine is as busy as a CI runner's or a server's with
several agents: the table shows each process's wall time and CPU time, and the
CPU of one thread against the default's (measured in the same run).  The vectors
are the same either way (``tests/test_local_model.py``).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import children_at_once, machine, print_table  # noqa: E402

CHILD = """
import resource, sys, time
from nbmemory import Memory
from nbmemory.research.corpora import build_corpus, load_corpus
corpus = build_corpus("tech-chat", seed=0)
with Memory(":memory:", background_consolidation=False) as memory:
    memory.search("load the model first")
    before, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    load_corpus(corpus, memory)
    after, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter() - start
cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
print(f"{wall:.3f} {cpu:.3f}")
"""


def run(threads: str, processes: int) -> list[tuple[float, float]]:
    """(wall s, CPU s) of each of ``processes`` children started at once."""
    env = dict(os.environ)
    env.pop("NBMEMORY_MODEL_THREADS", None)
    if threads != "default":
        env["NBMEMORY_MODEL_THREADS"] = threads
    return children_at_once(["-c", CHILD], processes, env)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--rounds", type=int, default=2, help="alternating runs of each")
    args = parser.parse_args(argv)
    if not os.environ.get("NBMEMORY_MODEL_PATH"):
        raise SystemExit("set NBMEMORY_MODEL_PATH to a local copy of all-MiniLM-L6-v2")
    print(machine())
    measured: dict[str, list[tuple[float, float]]] = {"default": [], "1": []}
    for _ in range(args.rounds):
        for threads in measured:  # alternating, to spread the machine's noise
            measured[threads] += run(threads, args.processes)
    rows = []
    cpu_of = {}
    for threads, runs in measured.items():
        wall = sum(w for w, _ in runs) / len(runs)
        cpu_of[threads] = sum(c for _, c in runs) / len(runs)
        rows.append(
            [threads, args.processes, len(runs), f"{wall:.1f} s", f"{cpu_of[threads]:.1f} s"]
        )
    rows[1].append(f"{cpu_of['1'] / cpu_of['default']:.2f}x")
    rows[0].append("1.00x")
    print_table(["threads", "processes at once", "runs", "wall", "CPU", "CPU vs default"], rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
