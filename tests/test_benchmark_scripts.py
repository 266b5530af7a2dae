"""The benchmark scripts keep working (tiny sizes; the scripts themselves assert no time)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

#: Each script runs in a process of its own over thousands of rows.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]


def test_endurance_script_runs_and_prints_the_rss_table(tmp_path):
    store = tmp_path / "endurance.duckdb"
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "endurance.py"),
            "--events",
            "120",
            "--searches",
            "12",
            "--checkpoints",
            "2",
            "--tail-searches",
            "10",
            "--churn",
            "20",
            "--store",
            str(store),
        ],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT / "src")),
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "| events | searches | RSS MiB |" in out
    assert "| 60 | 6 |" in out and "| 120 | 12 |" in out
    assert "120 events, 120 embedded, 0 failed" in out
    assert "Search-only tail: 10 search+get_context calls" in out
    assert "Churn: 20 add_event + delete pairs" in out


def test_write_benchmark_runs_and_every_row_is_embedded() -> None:
    """benchmarks/bench_write.py at a tiny size (it asserts every row got its vector)."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_write.py"), "--sizes", "300"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    row = next(line for line in result.stdout.splitlines() if line.startswith("| 300 |"))
    # rows, floor, same-commits floor, nbmemory, both ratios, share in flush, close, RSS
    assert len(row.split("|")) == 11


def test_session_index_benchmark_runs_with_and_without_the_index() -> None:
    """benchmarks/bench_session_index.py at a tiny size (it asserts the index is there,
    or dropped, and every row stored)."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_session_index.py")]
        + ["--rows", "400", "--sessions", "20", "--batch", "200", "--rounds", "1"],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT / "src")),
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "| without |" in result.stdout and "| with the index |" in result.stdout


def test_signals_benchmark_runs_and_the_signals_act() -> None:
    """benchmarks/bench_signals.py at a tiny size: both tables, and the speaker signal
    fired on the synthetic transcript (so "on" really differs from "off")."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_signals.py")]
        + ["--sizes", "300", "--queries", "4", "--rounds", "1", "--writes", "20"],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT / "src")),
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    rows = [line for line in result.stdout.splitlines() if line.startswith("| 300 |")]
    assert len(rows) == 2
    latency, writes = (row.strip("|").split("|") for row in rows)
    assert len(latency) == 6 and int(latency[5]) > 0  # speaker hits in a top 50
    assert len(writes) == 4 and float(writes[1]) > 0 and float(writes[2]) > 0


def test_lake_benchmark_runs_at_tiny_sizes(lake_catalog: str, tmp_path: Path) -> None:
    """benchmarks/bench_lake.py on the test PostgreSQL at tiny sizes: the four tables,
    and every throughput run verified (exactly the events written, no duplicates)."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_lake.py")]
        + ["--catalog", lake_catalog, "--workdir", str(tmp_path), "--writes", "10"]
        + ["--events", "300", "--commits", "30", "--lag-samples", "3", "--queries", "5"]
        + ["--writers", "1", "2"],  # 4 writer processes too would pass a minute on 2 cores
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT / "src")),
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "| call | store | writers | events | events/s |" in out
    assert "| rounds | found | lag p50 ms | lag max ms |" in out
    assert "| store | load s (add_events + flush) | open + first search s |" in out
    assert "| stage | seconds (writes + flush / compact / expire) | events | snapshots |" in out
    # 2 calls x (file + 1, 2 writers), and 2 writers of add_event taking turns
    assert out.count(": ok") == 7 and "WRONG" not in out
    assert "| add_event | lake, turns on | 2 |" in out
    assert "| 3 | 3 |" in out  # every lag round found its event
    assert "| lake / file |" in out


def test_search_benchmark_runs_and_its_answers_are_exact() -> None:
    """benchmarks/bench_search.py at a tiny size: every table, the top-k equal to numpy's,
    and the cold opens (saved indexes checked or unchanged, rebuilt) answering in new
    processes."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_search.py")]
        + ["--sizes", "3000", "--queries", "10", "--cold-repeat", "1"],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT / "src")),
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "| 3,000 |" in out and "| yes |" in out
    for table in ("filtered / unfiltered", "hybrid s rebuilt", "| stack s |", "hybrid / vector"):
        assert table in out


def test_peers_benchmark_runs_with_or_without_the_peers() -> None:
    """benchmarks/bench_peers.py at a tiny size: nbmemory's exact top-k is the floor's,
    and each peer is either measured (exact too) or shown as not installed."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_peers.py")]
        + ["--sizes", "3000", "--queries", "5"],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT / "src")),
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    lines = {
        line.split(" | ")[1]: line for line in result.stdout.splitlines() if "| 3,000 |" in line
    }
    assert lines["nbmemory"].endswith("| 1.00 |")
    for peer in ("faiss IndexFlatIP", "sqlite-vec vec0", "lancedb, no index"):
        assert "not installed" in lines[peer] or lines[peer].endswith("| 1.00 |"), lines[peer]


def test_api_benchmark_compares_this_checkout_with_another():
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_api.py"),
            "--baseline-src",
            str(ROOT / "src"),
            "--rounds",
            "1",
            "--events",
            "20",
            "--bulk",
            "1000",
            "--queries",
            "3",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "ratio" in lines[1]
    calls = {line.split("  ")[0].strip() for line in lines[2:]}
    assert calls == {"add_event", "add_events (per row)", "search", "get_context"}


def test_long_memories_benchmark_runs_quick(model_path: str) -> None:
    """benchmarks/long_memories.py --quick: 20 long messages with the real model; the
    second store shares the model, every message gets its vector (the script asserts
    it) and the tail facts are found (no timing is asserted)."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "long_memories.py"), "--quick"],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT / "src")),
        timeout=900,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for row in (  # every figure of issue 36's goals has its row
        "| ingest, one vector per message, passages off (20 vectors) |",
        "| ingest with passages (",
        "| peak RSS of the ingesting process |",
        "| RSS after closing both vs before the first opened |",
        "| short turns, bulk ingest (speed vs fastembed alone) |",
        "| warm vector search, 10,000 short memories, p50 (vs the numpy floor) |",
    ):
        assert row in out, row
    assert "a second Memory, same process (model shared by 2)" in out
    # the five tail facts, each planted once among the 20 messages, are found by their
    # passages, both ways
    assert "| tail facts found in the top 3 | 5/5 vector, 5/5 default |" in out


def test_shared_rate_benchmark_runs_quick_and_loses_nothing() -> None:
    """benchmarks/bench_shared_rate.py --quick: two shared writers and a reader beside the
    exclusive floor; every returned id is stored, and loosely (a shared CI machine, 3 s)
    each writer keeps up: a quarter of the exclusive writer's rate measured in the same
    run (0.74-0.83x here; an absolute 50/s failed a loaded CI run at 48/s), the slower
    within 4x of the faster."""
    out = run_quick("bench_shared_rate.py")
    assert "| exclusive writer (floor) |" in out and "| shared writer2 |" in out
    assert "| shared reader |" in out
    assert "lost 0 (goal 0)" in out
    summary = out.split("per shared writer: ", 1)[1]
    of_floor = float(summary.split("; ", 1)[1].split("x the exclusive floor", 1)[0])
    fairness = float(summary.split("slowest / fastest writer ", 1)[1].split(" ", 1)[0])
    assert of_floor >= 0.25 and fairness >= 0.25, summary


def test_cold_first_search_quick_prints_the_goal_table() -> None:
    """benchmarks/cold_first_search.py --quick: 20k rows, a new process per first search."""
    out = run_quick("cold_first_search.py")
    assert "| new process | open s | open + first search s |" in out
    assert "20000 memories:" in out and "embedded 20000" in out
    rows = [line for line in out.splitlines() if line.startswith("| search(mode=")]
    assert len(rows) == 2
    # the goals, loosely (a shared CI machine): the ingest saved both indexes, so each
    # first reader loads them; within twice the time goal and a quarter over the RSS goal
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        first, goal_s, rss, goal_mb = (float(cells[i]) for i in (2, 3, 4, 5))
        assert first <= 2 * goal_s and rss <= 1.25 * goal_mb, row


def test_large_stores_benchmark_runs_quick() -> None:
    """benchmarks/large_stores.py --quick: 20k rows with the free embedder, every row
    stored and embedded (the script checks), the floor and each stage printed."""
    out = run_quick("large_stores.py")
    assert "| DuckDB floor: INSERT INTO t SELECT * FROM df |" in out
    assert "| add_events + flush() |" in out and "| close() |" in out
    assert "| build_rows |" in out and "| vectors write (worker) |" in out
    # The rate is the benchmark's to print, not this test's to time: a bound of 3k
    # rows/s (23k here alone, 7.7k in a CI run) failed at 2.7k on a loaded runner.
    assert "ingest: " in out and " rows/s (goal >= 30,000 rows/s at 200k)" in out


def test_array_column_benchmark_runs_quick() -> None:
    """benchmarks/array_column.py --quick: both columns give the floor's vectors and
    top-10 (the script asserts it) and every column of the table is printed."""
    out = run_quick("array_column.py")
    assert "| `FLOAT[]` |" in out and "| `FLOAT[384]` |" in out and "| numpy floor |" in out
    assert "same top-10 ids from both columns and the floor: yes" in out


def test_vector_budget_benchmark_runs_quick() -> None:
    """benchmarks/vector_budget.py --quick: 20k rows in four namespaces; the answers
    under half the raw vectors and under none are the floor's (the script exits
    non-zero otherwise), and under half the p50 stays loosely within the goal's 5x."""
    out = run_quick("vector_budget.py")
    rows = [line for line in out.splitlines() if line.startswith("| budget ")]
    assert len(rows) == 2 and "| no budget (floor) |" in out
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert cells[-1] == "yes", row
        if not row.startswith("| budget 0 |"):  # half the raw vectors: the goal's row
            assert float(cells[3]) <= 10, row


def test_blas_threads_benchmark_runs_quick() -> None:
    """benchmarks/blas_threads.py --quick: both parts print a row per policy."""
    out = run_quick("blas_threads.py")
    assert "| 3,000 | nbmemory's (one thread) |" in out
    assert "| 3,000 | BLAS's threads always |" in out
    assert "| nbmemory's | " in out and "| BLAS's threads always | " in out


def run_quick(script: str) -> str:
    """What ``benchmarks/<script> --quick`` prints, once it exited 0."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), "--quick"],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT / "src")),
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout
