"""Ingest throughput with the real model, and how long add_event makes the caller wait.

    NBMEMORY_MODEL_PATH=... python benchmarks/bench_ingest.py --n 2000

Measured side by side in one run on the same texts (LoCoMo turns when
$NBMEMORY_LOCOMO_PATH is set, generated sentences otherwise):
raw fastembed (``TextEmbedding.embed(texts, batch_size=64)``), nbmemory's bulk
``add_events`` + ``flush()``, and a stream of ``add_event`` calls + ``flush()``
(the return time of each call is reported: embedding happens in the background).
Rounds alternate between the three to spread the machine's noise.
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import machine, ms, p50, p95, print_table, random_text  # noqa: E402

from nbmemory import Memory  # noqa: E402
from nbmemory.research.datasets import ENV_LOCOMO_PATH, locomo_files, read_locomo  # noqa: E402
from nbmemory.retrieval import FastEmbedEmbedder  # noqa: E402


def texts_for(n: int) -> list[str]:
    texts: list[str] = []
    if os.environ.get(ENV_LOCOMO_PATH):
        for file in locomo_files():
            texts += read_locomo(file).turns["content"].tolist()
    rng = np.random.default_rng(0)  # generated filler when LoCoMo is not there
    while len(texts) < n:
        texts.append(random_text(rng, int(rng.integers(6, 30))))
    return texts[:n]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="texts per round")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    texts = texts_for(args.n)
    embedder = FastEmbedEmbedder()
    embedder.embed(["warm up"])
    folder = tempfile.mkdtemp(prefix="nbmemory-ingest-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    raw, bulk, stream, waits = [], [], [], []
    for r in range(args.rounds):
        start = time.perf_counter()
        model = embedder._load()
        vectors = list(model.embed(texts, batch_size=64))
        raw.append(len(vectors) / (time.perf_counter() - start))

        with Memory(os.path.join(folder, f"bulk{r}.duckdb"), embedder=embedder) as mem:
            start = time.perf_counter()
            mem.add_events([{"session_id": "s", "role": "user", "content": t} for t in texts])
            mem.flush()
            bulk.append(len(texts) / (time.perf_counter() - start))

        with Memory(os.path.join(folder, f"stream{r}.duckdb"), embedder=embedder) as mem:
            start = time.perf_counter()
            for i, text in enumerate(texts):
                t0 = time.perf_counter()
                mem.add_event(f"s{i % 10}", "user", text)
                waits.append(time.perf_counter() - t0)
            mem.flush()
            stream.append(len(texts) / (time.perf_counter() - start))
    # an agent's pace: one event at a time, the model idle in between (the wait for
    # the background embedding is not timed; only add_event's return is)
    paced = []
    with Memory(os.path.join(folder, "paced.duckdb"), embedder=embedder) as mem:
        for i, text in enumerate(texts[:200]):
            t0 = time.perf_counter()
            mem.add_event(f"s{i % 10}", "user", text)
            paced.append(time.perf_counter() - t0)
            mem.flush()
    print(f"machine: {machine()}")
    print(f"model: {embedder.name} from {embedder.model_path or 'fastembed cache'}")
    print(f"{len(texts)} texts per round, {args.rounds} rounds (median shown)\n")
    raw_rate = float(np.median(raw))
    print_table(
        ["path", "texts/s", "vs raw fastembed"],
        [
            ["raw fastembed embed(batch_size=64)", f"{raw_rate:.0f}", "1.00"],
            [
                "add_events (bulk) + flush",
                f"{np.median(bulk):.0f}",
                f"{np.median(bulk) / raw_rate:.2f}",
            ],
            [
                "add_event stream + flush",
                f"{np.median(stream):.0f}",
                f"{np.median(stream) / raw_rate:.2f}",
            ],
        ],
    )
    print()
    print_table(
        ["add_event return time (model in the background)", "p50 ms", "p95 ms"],
        [
            ["agent-paced: model idle between events", ms(p50(paced)), ms(p95(paced))],
            ["saturated: back-to-back stream, model busy", ms(p50(waits)), ms(p95(waits))],
        ],
    )


if __name__ == "__main__":
    main()
