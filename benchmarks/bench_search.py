"""Relevance search and get_context latency against the numpy floor, with RSS and file size.

    python benchmarks/bench_search.py --sizes 10000 100000 1000000

Each size runs in its own process (so peak RSS is per size).  For every size the
same random unit vectors (384-d) are searched three ways in the same run:
numpy brute force (the floor), nbmemory's search (in-memory index + row fetch),
and DuckDB's list_cosine_similarity (the SQL path).  The top-k of nbmemory is
checked against the exact numpy ranking.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import (  # noqa: E402
    FixedEmbedder,
    compile_package,
    fill_store,
    interleaved,
    machine,
    ms,
    p50,
    p95,
    peak_rss_mb,
    print_table,
    random_text,
    random_unit_vectors,
    timings,
)

from nbmemory import Memory  # noqa: E402
from nbmemory.retrieval.index_cache import CHECKED, SETTLE_NS, SUFFIX  # noqa: E402


def one_size(n: int, queries: int, k: int, cold_repeat: int, drop_caches: bool) -> dict:
    """Every measurement of one size, in a folder removed afterwards (5 GB at 1M)."""
    folder = tempfile.mkdtemp(prefix="nbmemory-bench-")
    try:
        return measure(n, queries, k, cold_repeat, drop_caches, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def measure(n: int, queries: int, k: int, cold_repeat: int, drop_caches: bool, folder: str) -> dict:
    vectors = random_unit_vectors(n, seed=n)
    qs = random_unit_vectors(queries, seed=n + 1)
    path = os.path.join(folder, "bench.duckdb")
    mem = Memory(path, embedder=FixedEmbedder())
    start = time.perf_counter()
    fill_store(mem, vectors)
    load_s = time.perf_counter() - start
    start = time.perf_counter()
    mem.indexes.vectors(mem.model_name)  # first search builds the index
    index_build_s = time.perf_counter() - start
    start = time.perf_counter()
    mem.indexes.keywords()
    keyword_build_s = time.perf_counter() - start
    # measured as a user meets the store: opened again (DuckDB's scans of a table
    # this connection just bulk-loaded were measured up to twice as slow)
    mem.close()
    mem = Memory(path, embedder=FixedEmbedder(), background_consolidation=False)
    ids = mem.store.df("SELECT id FROM events")["id"]  # rowid order == insertion order
    model = mem.model_name

    def floor(i: int) -> np.ndarray:
        scores = vectors @ qs[i % queries]
        top = np.argpartition(-scores, k)[:k]
        return top[np.argsort(-scores[top])]

    def ours(i: int):
        return mem.retriever.vector_search(qs[i % queries], "default", limit=k)

    exact = True
    for i in range(min(queries, 20)):
        expected = ids.iloc[floor(i)].tolist()
        exact &= ours(i)["id"].tolist() == expected
    t_floor, t_ours = interleaved([floor, ours], queries)
    sql_repeat = max(3, queries // 10) if n >= 1_000_000 else queries

    def sql(i: int):
        return mem.store.vectors.similar(qs[i % queries], model, limit=k, namespace="default")

    t_sql = timings(sql, sql_repeat, warmup=1)

    def filtered(i: int):  # one session of 100: 1% of the rows
        return mem.retriever.vector_search(
            qs[i % queries], "default", limit=k, filters={"session_id": f"s{i % 100}"}
        )

    t_unfiltered, t_filtered = interleaved([ours, filtered], queries)
    # get_context with a pre-computed query vector (the model's query time is separate):
    # the spec profile (cosine relevance) and the hybrid default (cosine + BM25 + neighbours)
    rng = np.random.default_rng(3)
    texts = [random_text(rng, 8) for _ in range(queries)]
    vector_of = {text: qs[i] for i, text in enumerate(texts)}
    mem.retriever.embed_query = vector_of.__getitem__  # type: ignore[method-assign]
    # an agent asks in its current session: working memory is warm after the first call

    def context(profile: str):
        # per call, not mem.configure(): that is audited, a write between the timings
        settings = mem.settings.replace(profile=profile)
        return lambda i: mem.get_context("s1", texts[i % queries], settings=settings)

    def search(mode: str):
        return lambda i: mem.search(texts[i % queries], limit=k, mode=mode)

    t_ctx, t_hctx, t_vector, t_hybrid = interleaved(
        [context("spec"), context("hybrid"), search("vector"), search("hybrid")], queries
    )
    mem.close()
    size_mb = Path(path).stat().st_size / 2**20
    cache_mb = sum(p.stat().st_size for p in Path(path + ".nbmemory-index").glob("*")) / 2**20
    np.save(os.path.join(folder, "vectors.npy"), vectors)
    cold = cold_opens(folder, cold_repeat, COLD_MODES, drop=False)
    dropped = cold_opens(folder, cold_repeat, DROPPED_MODES, drop=True) if drop_caches else {}
    return {
        "unfiltered_p50": p50(t_unfiltered),
        "filtered_p50": p50(t_filtered),
        "vector_p50": p50(t_vector),
        "cache_mb": cache_mb,
        "cold": cold,
        "dropped": dropped,
        "n": n,
        "floor_p50": p50(t_floor),
        "floor_p95": p95(t_floor),
        "ours_p50": p50(t_ours),
        "ours_p95": p95(t_ours),
        "sql_p50": p50(t_sql),
        "ctx_p50": p50(t_ctx),
        "ctx_p95": p95(t_ctx),
        "hctx_p50": p50(t_hctx),
        "hctx_p95": p95(t_hctx),
        "hybrid_p50": p50(t_hybrid),
        "keyword_build_s": keyword_build_s,
        "exact": exact,
        "rss_mb": peak_rss_mb(),
        "file_mb": size_mb,
        "load_s": load_s,
        "index_build_s": index_build_s,
    }


#: Memories the session before a "-written" open adds.
WRITTEN = 100

COLD = """
import json, sys, time
WRITTEN = int(sys.argv[4])
start = time.perf_counter()
mode, folder = sys.argv[1], sys.argv[2]
import numpy as np
if mode == "numpy":  # the floor: nothing but numpy
    vectors = np.load(folder + "/vectors.npy")
    query = np.random.default_rng(0).standard_normal(vectors.shape[1]).astype(np.float32)
    top = np.argpartition(-(vectors @ query), 5)[:5]
elif mode == "stack":  # what any DataFrame answer from a DuckDB file pays
    import duckdb, pandas, pyarrow
    con = duckdb.connect(folder + "/bench.duckdb", read_only=True)
    con.sql("SELECT id, content FROM events LIMIT 5").df()
elif mode == "import":  # nbmemory imported, nothing opened
    import nbmemory
elif mode == "write":  # not timed: a session that adds memories, searches and closes
    sys.path.insert(0, sys.argv[3])
    from _common import FixedEmbedder
    from nbmemory import Memory
    mem = Memory(folder + "/bench.duckdb", embedder=FixedEmbedder(),
                 background_consolidation=False)
    mem.search("a first question", limit=5)
    mem.add_events([{"session_id": "later", "role": "user", "content": f"w{i} w{i + 1} later"}
                    for i in range(WRITTEN)])
    mem.flush()
    mem.search("a second question", limit=5)
    mem.close()
else:
    sys.path.insert(0, sys.argv[3])
    from _common import FixedEmbedder
    from nbmemory import Memory
    mem = Memory(folder + "/bench.duckdb", embedder=FixedEmbedder(),
                 background_consolidation=False, index_cache=mode != "rebuild")
    mem.search("a first question", limit=5, mode=mode.split("-")[0].replace("rebuild", "hybrid"))
seconds = time.perf_counter() - start
peak = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))
trusted = mem.indexes.cache.trusted if mode not in ("numpy", "stack", "import", "rebuild") else 0
print(json.dumps({"seconds": seconds, "rss_mb": peak / 1024, "trusted": trusted}))
"""


#: vector, hybrid: the saved indexes are loaded and checked against the table (every
#: row hashed), as the first open after another program changed the store; -unchanged:
#: reopened with nothing written since the last check, which the record beside the
#: copies shows; -written: after a session that added WRITTEN memories and closed
#: (its record says where the rows the copies lack are).
COLD_MODES = ("numpy", "stack", "import", "vector", "hybrid")
COLD_MODES += ("vector-unchanged", "hybrid-unchanged", "vector-written", "hybrid-written")
COLD_MODES += ("rebuild",)
DROPPED_MODES = ("numpy", "stack", "vector", "hybrid", "vector-unchanged", "hybrid-unchanged")
DROPPED_MODES += ("vector-written", "hybrid-written")


def cold_opens(folder: str, repeat: int, modes: Sequence[str], drop: bool) -> dict[str, dict]:
    """Each cold open ``repeat`` times, the modes taken in turn (so a slow spell of the
    machine is shared out): the median seconds and the largest peak RSS of each.

    Before every run the files that mode reads are either read through, so the new
    process finds them in the page cache as it would a store used a moment ago (this
    machine's kernel evicts idle pages within minutes, and a floor read from disk
    against a store read from memory compares nothing), or, with ``drop``, the
    whole page cache is dropped: a first open after a reboot.
    """
    compile_package()
    settle(folder)
    record = Path(folder, "bench.duckdb" + SUFFIX, CHECKED)
    copies = any(record.parent.glob("*.npz"))  # none below the size copies are saved from
    runs: dict[str, list[dict]] = {mode: [] for mode in modes}
    for _ in range(repeat):
        for mode in modes:
            if mode in ("vector", "hybrid"):
                record.unlink(missing_ok=True)  # its run checks the rows (and records it)
            if mode.endswith("-written"):
                cold_open("write", folder)
            if drop:
                drop_page_cache()
            else:
                read_through(files_read(mode, folder))
            result = cold_open(mode, folder)
            if copies and (result["trusted"] > 0) != mode.endswith(("-unchanged", "-written")):
                raise SystemExit(f"the {mode} open was not the open it stands for: {result}")
            runs[mode].append(result)
    return {
        mode: {
            "seconds": statistics.median(r["seconds"] for r in results),
            "rss_mb": max(r["rss_mb"] for r in results),
        }
        for mode, results in runs.items()
    }


def settle(folder: str) -> None:
    """Wait until the store and its saved indexes last changed SETTLE_NS ago: a check
    recorded sooner is not trusted (file times are coarse), and the unchanged opens
    would not be what they stand for."""
    paths = [Path(folder, "bench.duckdb"), *Path(folder, "bench.duckdb" + SUFFIX).glob("*")]
    newest = max(max(p.stat().st_mtime_ns, p.stat().st_ctime_ns) for p in paths)
    time.sleep(max(0.0, (newest + SETTLE_NS - time.time_ns()) / 1e9))


def files_read(mode: str, folder: str) -> list[Path]:
    """The files a cold open of ``mode`` reads."""
    store = Path(folder, "bench.duckdb")
    if mode == "numpy":
        return [Path(folder, "vectors.npy")]
    if mode in ("stack", "rebuild"):
        return [store]
    if mode.startswith(("vector", "hybrid")):
        return [store, *sorted(Path(folder, "bench.duckdb" + SUFFIX).glob("*"))]
    return []


def read_through(paths: Sequence[Path]) -> None:
    """Read the files to their end (into the page cache)."""
    buffer = bytearray(16 * 2**20)
    for path in paths:
        with open(path, "rb", buffering=0) as handle:
            while handle.readinto(buffer):
                pass


def drop_page_cache() -> None:
    """Write dirty pages back, then drop the page cache (Linux, as root)."""
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError as exc:
        raise SystemExit(f"--drop-caches needs root on Linux ({exc})") from None


def cold_open(mode: str, folder: str) -> dict:
    """A new process: open the store (or np.load the vectors) and answer one search."""
    out = subprocess.run(
        [sys.executable, "-c", COLD, mode, folder, str(Path(__file__).parent), str(WRITTEN)],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _pair(cold: dict, mode: str, floor: float | None = None) -> str:
    """Seconds of the checked, the written and the unchanged open of ``mode`` (or
    their ratio to ``floor``), as "a / b / c"."""
    both = [cold[m]["seconds"] for m in (mode, f"{mode}-written", f"{mode}-unchanged")]
    if floor is None:
        return " / ".join(f"{x:.2f}" for x in both)
    return " / ".join(f"{x / floor:.2f}x" for x in both)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("-k", type=int, default=5)
    parser.add_argument(
        "--cold-repeat", type=int, default=5, help="new processes per cold open (median)"
    )
    parser.add_argument(
        "--drop-caches",
        action="store_true",
        help="also time cold opens after dropping the page cache (Linux, root)",
    )
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(
            json.dumps(one_size(args.one, args.queries, args.k, args.cold_repeat, args.drop_caches))
        )
        return
    results = []
    for n in args.sizes:
        out = subprocess.run(
            [
                sys.executable,
                __file__,
                "--one",
                str(n),
                "--queries",
                str(args.queries),
                "-k",
                str(args.k),
                "--cold-repeat",
                str(args.cold_repeat),
                *(["--drop-caches"] if args.drop_caches else []),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        results.append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(f"machine: {machine()}\n")
    print(f"relevance search, top-{args.k} of n random 384-d unit vectors, {args.queries} queries")
    print_table(
        ["memories", "numpy floor p50/p95 ms", "nbmemory p50/p95 ms", "ratio p50"]
        + ["exact top-k", "SQL list_cosine p50 ms"],
        [
            [
                f"{r['n']:,}",
                f"{ms(r['floor_p50'])} / {ms(r['floor_p95'])}",
                f"{ms(r['ours_p50'])} / {ms(r['ours_p95'])}",
                f"{r['ours_p50'] / r['floor_p50']:.2f}x",
                "yes" if r["exact"] else "NO",
                ms(r["sql_p50"]),
            ]
            for r in results
        ],
    )
    print()
    print("a filter that selects 1% of the memories (one session of 100), vector mode")
    print_table(
        ["memories", "unfiltered p50 ms", "filtered p50 ms", "filtered / unfiltered"],
        [
            [
                f"{r['n']:,}",
                ms(r["unfiltered_p50"]),
                ms(r["filtered_p50"]),
                f"{r['filtered_p50'] / r['unfiltered_p50']:.2f}x",
            ]
            for r in results
        ],
    )
    print()
    print(
        "cold open: a new process opens the store and answers its first search"
        f" (median of {args.cold_repeat} processes; the files it reads in the page cache)"
    )
    print("(checked: the saved indexes are loaded and every row of the table hashed to check")
    print(" them, as at the first open after another program changed the store; written:")
    print(f" after a session that added {WRITTEN} memories and closed, whose record says where")
    print(" the rows the copies lack are; unchanged: reopened with nothing written since the")
    print(" last check; rebuilt: index_cache=False; stack: numpy,")
    print(" pyarrow, duckdb and pandas imported and five rows read from the file as a")
    print(" DataFrame, what any DataFrame answer costs; import: `import nbmemory` alone)")
    saved = ("vector", "hybrid", "vector-unchanged", "hybrid-unchanged")
    print_table(
        ["memories", "numpy floor s (np.load + search)", "stack s", "import s"]
        + [
            "vector s checked / written / unchanged",
            "hybrid s checked / written / unchanged",
            "hybrid s rebuilt",
        ]
        + ["vector / floor", "hybrid / floor", "peak RSS MiB numpy / vector / hybrid / rebuilt"],
        [
            [
                f"{r['n']:,}",
                *(f"{r['cold'][m]['seconds']:.2f}" for m in ("numpy", "stack", "import")),
                *(_pair(r["cold"], m) for m in ("vector", "hybrid")),
                f"{r['cold']['rebuild']['seconds']:.2f}",
                *(_pair(r["cold"], m, r["cold"]["numpy"]["seconds"]) for m in saved[:2]),
                " / ".join(
                    f"{r['cold'][m]['rss_mb']:.0f}" for m in ("numpy", *saved[:2], "rebuild")
                ),
            ]
            for r in results
        ],
    )
    print()
    if args.drop_caches:
        print("the same after dropping the page cache before each process (a first open")
        print("after a reboot: every file read from disk)")
        print_table(
            ["memories", "numpy floor s", "stack s", "vector s checked / written / unchanged"]
            + ["hybrid s checked / written / unchanged", "vector / floor", "hybrid / floor"],
            [
                [
                    f"{r['n']:,}",
                    *(f"{r['dropped'][m]['seconds']:.2f}" for m in ("numpy", "stack")),
                    *(_pair(r["dropped"], m) for m in ("vector", "hybrid")),
                    *(
                        _pair(r["dropped"], m, r["dropped"]["numpy"]["seconds"])
                        for m in ("vector", "hybrid")
                    ),
                ]
                for r in results
            ],
        )
        print()
    print("hybrid against vector relevance, called in turn (query vector given)")
    print_table(
        ["memories", "spec get_context p50/p95 ms", "hybrid get_context p50/p95 ms"]
        + ["hybrid / spec", "vector search p50 ms", "hybrid search p50 ms", "hybrid / vector"]
        + ["keyword index build s"],
        [
            [
                f"{r['n']:,}",
                f"{ms(r['ctx_p50'])} / {ms(r['ctx_p95'])}",
                f"{ms(r['hctx_p50'])} / {ms(r['hctx_p95'])}",
                f"{r['hctx_p50'] / r['ctx_p50']:.2f}x",
                ms(r["vector_p50"]),
                ms(r["hybrid_p50"]),
                f"{r['hybrid_p50'] / r['vector_p50']:.2f}x",
                f"{r['keyword_build_s']:.1f}",
            ]
            for r in results
        ],
    )
    print()
    print_table(
        ["memories", "peak RSS MiB", "store file MiB", "saved indexes MiB"]
        + ["bulk load s", "vector index build + save s"],
        [
            [
                f"{r['n']:,}",
                f"{r['rss_mb']:.0f}",
                f"{r['file_mb']:.0f}",
                f"{r['cache_mb']:.0f}",
                f"{r['load_s']:.1f}",
                f"{r['index_build_s']:.2f}",
            ]
            for r in results
        ],
    )


if __name__ == "__main__":
    main()
