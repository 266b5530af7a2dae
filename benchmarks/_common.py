"""Shared helpers of the benchmark scripts: timing, tables, synthetic stores."""

from __future__ import annotations

import compileall
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

import nbmemory
from nbmemory import Memory
from nbmemory.event_rows import build_row


def timings(fn: Callable[[int], object], repeat: int, warmup: int = 2) -> list[float]:
    """Seconds per call of ``fn(i)`` for ``repeat`` calls after ``warmup`` calls."""
    for i in range(warmup):
        fn(i)
    out = []
    for i in range(repeat):
        start = time.perf_counter()
        fn(i)
        out.append(time.perf_counter() - start)
    return out


def interleaved(
    fns: Sequence[Callable[[int], object]], repeat: int, warmup: int = 2
) -> list[list[float]]:
    """Seconds per call of each ``fn(i)``, the functions called in turn (a, b, a, b, ...):
    on a shared machine whose speed drifts, their ratio stays fair."""
    for i in range(warmup):
        for fn in fns:
            fn(i)
    out: list[list[float]] = [[] for _ in fns]
    for i in range(repeat):
        for fn, times in zip(fns, out, strict=True):
            start = time.perf_counter()
            fn(i)
            times.append(time.perf_counter() - start)
    return out


def p50(values: Sequence[float]) -> float:
    return statistics.median(values)


def p95(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f}"


def peak_rss_mb() -> float:
    """Peak resident set size of this process in MiB.

    From /proc (VmHWM) where there is one: ``ru_maxrss`` survives ``exec`` on Linux,
    so a child started by a big parent would report the parent's peak.
    """
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def compile_package() -> None:
    """Write nbmemory's bytecode, as installing it does, before timing new processes.

    A process timed from its start would otherwise compile nbmemory's sources on
    every import where bytecode is not written (an editable install under
    ``PYTHONDONTWRITEBYTECODE``, as in this project's sandbox): 0.15 s more than a
    user's installed package costs.
    """
    compileall.compile_dir(Path(nbmemory.__file__).parent, quiet=1)


def machine() -> str:
    cpus = os.cpu_count()
    try:
        model = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    except (OSError, StopIteration):
        model = platform.processor() or "unknown CPU"
    mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{model}, {cpus} cores, {mem_gb:.0f} GiB RAM, Python {platform.python_version()}"


def print_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """A GitHub-flavoured Markdown table on stdout."""
    print("| " + " | ".join(headers) + " |")
    print("|" + "|".join("---" for _ in headers) + "|")
    for row in rows:
        print("| " + " | ".join(str(cell) for cell in row) + " |")


def children_at_once(
    args: Sequence[str], count: int, env: dict[str, str] | None = None
) -> list[tuple[float, float]]:
    """Start ``count`` ``python <args>`` at once; each prints its wall and CPU seconds
    last on stdout: those pairs, in start order (exits if a child fails)."""
    children = [
        subprocess.Popen([sys.executable, *args], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(count)
    ]
    results = []
    for child in children:
        out, _ = child.communicate()
        if child.returncode:
            raise SystemExit(f"a child failed (exit {child.returncode})")
        wall, cpu = out.split()[-2:]
        results.append((float(wall), float(cpu)))
    return results


class FixedEmbedder:
    """Stands in for the model where the vectors are given (random benchmark data)."""

    def __init__(self, dim: int = 384, name: str = "bench/random-384") -> None:
        self.dim = dim
        self.name = name

    def embed(self, texts: list[str]) -> np.ndarray:
        rng = np.random.default_rng(abs(hash(tuple(texts))) % 2**32)
        out = rng.standard_normal((len(texts), self.dim)).astype(np.float32)
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def random_unit_vectors(n: int, dim: int = 384, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = rng.standard_normal((n, dim), dtype=np.float32)
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out


VOCABULARY = [f"w{i}" for i in range(5000)]


def random_text(rng: np.random.Generator, words: int) -> str:
    """Words drawn Zipf-like from a 5,000-word vocabulary (for BM25 to chew on)."""
    ranks = np.minimum(rng.zipf(1.3, size=words), len(VOCABULARY)) - 1
    return " ".join(VOCABULARY[r] for r in ranks)


def fill_store(
    mem: Memory,
    vectors: np.ndarray,
    sessions: int = 100,
    chunk: int = 100_000,
    content: Callable[[np.random.Generator, int], str] | None = None,
) -> None:
    """Insert ``len(vectors)`` memories with the given vectors in Arrow chunks.

    ``content(rng, i)`` writes the i-th memory's text (default: 12 Zipf words).
    """
    settings = mem.settings
    rng = np.random.default_rng(len(vectors))
    write = content or (lambda generator, i: random_text(generator, 12))
    for start in range(0, len(vectors), chunk):
        block = vectors[start : start + chunk]
        rows = [
            build_row(
                settings,
                session_id=f"s{(start + i) % sessions}",
                role="user" if i % 2 else "assistant",
                content=write(rng, start + i),
                namespace=mem.namespace,
                importance=0.9 if (start + i) % 1000 == 0 else None,
            )
            for i in range(len(block))
        ]
        with mem.writer.transaction() as tx:
            tx.events.insert(rows, matrix=(mem.model_name, block), bulk=True)
