"""The store on DuckLake (PostgreSQL catalog): write throughput, freshness, reads, files.

    python benchmarks/bench_lake.py --catalog "dbname=nbm host=127.0.0.1 port=5432 user=nbm"
        [--writes 500] [--events 100000] [--commits 10000] [--lag-samples 20]
        [--only throughput,lag,search,files] [--workdir DIR] [--model NAME] [--keep]

(``--catalog`` defaults to ``$NBMEMORY_LAKE_PG``; without either the script exits 2.)
Four tables, each on lakes of its own: a new ``metadata_schema`` (``b_<hex>``) in
the catalog database and a new data path in this run's folder under ``--workdir``
per lake, all dropped at the end unless ``--keep``, so no run sees another's rows:

* **throughput**: 1, 2 and 4 (``--writers``) writer processes on one lake, each its own
  ``Memory`` (``embedder="hash"``: the store is measured, not the model), all
  opened first and then started together; each writes ``--writes`` events by
  ``add_event`` (one commit each), then ``--batch-events`` by ``add_events`` in
  batches of ``--batch``.  Events/s is every writer's events over the time from
  the first start to the last call's return (and to the last ``flush()``, the
  vectors written); the floor is one writer on a DuckDB file in the same run.
  CPU is the writers' own (``time.process_time``) per event, and *races lost* the
  commits DuckLake had to try again because another writer took the snapshot
  first (tries of ``ducklake_snapshot`` inserts in PostgreSQL's statistics, less
  the snapshots made).  The most writers also run taking turns to commit
  (``NBMEMORY_LAKE_TURNS=1``; by default every commit races, as DuckLake's do).
  After each run the store must hold exactly the events written, with no
  duplicate id or text and one vector each: else the script exits 1.
* **lag**: this process adds an event carrying a new token; another process,
  open all along with its indexes built, searches for the token in a loop from
  just before the write; lag = when it first finds it - when ``add_event``
  returned (``time.monotonic``, one clock for the machine), next to how long
  the reader's searches take.
* **search**: ``search`` and ``get_context`` p50/p95 on ``--events`` events in a
  lake and in a DuckDB file (the same texts, ``add_events`` in batches of
  ``--chunk``, vectors waited for), each store reopened first ("open" is
  ``Memory()`` + the first search, which builds the indexes); ratio lake/file.
* **files**: one writer makes ``--commits`` single-event commits; Parquet files on
  disk, files the catalog lists, snapshots and rows inlined in the catalog, then
  again after ``maintenance.compact`` and after ``maintenance.expire`` of every
  older snapshot.

The script asserts no times.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

import duckdb
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import machine, ms, p50, p95, print_table, random_text, timings  # noqa: E402

from nbmemory import Memory  # noqa: E402
from nbmemory.errors import StoreError  # noqa: E402
from nbmemory.store.lake import LakeStore, extensions, maintenance  # noqa: E402
from nbmemory.store.lake.fence import ENV_TURNS  # noqa: E402

SECTIONS = ("throughput", "lag", "search", "files")

#: A writer process: opens its Memory, says "ready", waits for "go", writes, reports.
WRITER = """
import json, os, sys, time
path, mode, count, batch, tag = sys.argv[1:6]
count, batch = int(count), int(batch)
talk = os.fdopen(os.dup(1), "w", buffering=1)  # stdout is for our lines only:
os.dup2(2, 1)  # DuckDB draws its progress bar on fd 1 when a query takes > 2 s
from nbmemory import Memory

mem = Memory(path, embedder="hash", background_consolidation=False)
print("ready", file=talk)
sys.stdin.readline()
calls = []
start, cpu = time.monotonic(), time.process_time()
if mode == "add_event":
    for i in range(count):
        t = time.monotonic()
        mem.add_event(f"{tag}-s{i % 10}", "user", f"{tag} note {i}")
        calls.append(time.monotonic() - t)
else:
    for i in range(0, count, batch):
        rows = [
            {"session_id": f"{tag}-s{j % 10}", "role": "user", "content": f"{tag} note {j}"}
            for j in range(i, min(i + batch, count))
        ]
        t = time.monotonic()
        mem.add_events(rows)
        calls.append(time.monotonic() - t)
end = time.monotonic()
flushed = mem.flush(timeout=600)
done, cpu = time.monotonic(), time.process_time() - cpu
mem.close()
print(json.dumps({"start": start, "end": end, "done": done, "flushed": flushed, "calls": calls,
                  "cpu": cpu}), file=talk)
"""

#: The reader of the lag test: open, indexes built; for each token, search until found.
READER = """
import json, os, sys, time
path, timeout = sys.argv[1], float(sys.argv[2])
talk = os.fdopen(os.dup(1), "w", buffering=1)
os.dup2(2, 1)  # DuckDB's progress bar to stderr
from nbmemory import Memory

mem = Memory(path, embedder="hash", background_consolidation=False)
mem.search("warm up the indexes")
mem.get_context("lag", "warm up the indexes")
print("ready", file=talk)
for line in sys.stdin:
    token = line.strip()
    if not token:
        break
    print("watching", file=talk)
    took, found, deadline = [], None, time.monotonic() + timeout
    while time.monotonic() < deadline:
        start = time.monotonic()
        hits = mem.search(token, limit=5)
        took.append(time.monotonic() - start)
        if hits["content"].str.contains(token, regex=False).any():
            found = time.monotonic()
            break
    print(json.dumps({"found": found, "took": took}), file=talk)
mem.close()
"""


class Catalog:
    """The PostgreSQL database of the lakes: makes a new lake address, drops them all."""

    def __init__(self, dsn: str, workdir: str) -> None:
        self.dsn, self.workdir = dsn, workdir
        self.schemas: list[str] = []
        self.con = extensions.connect()
        extensions.load(self.con, "postgres")
        self.con.execute(f"ATTACH {_literal(dsn)} AS pg (TYPE postgres)")

    def new_lake(self, label: str) -> str:
        schema = f"b_{uuid.uuid4().hex[:12]}"
        self.schemas.append(schema)
        data = os.path.join(self.workdir, f"{label}-{schema}")
        return f"ducklake:postgres:{self.dsn} metadata_schema={schema} data_path={data}"

    def races_lost(self, lake: str) -> int | None:
        """Commits of ``lake`` that lost the race for a snapshot and were tried again:
        rows PostgreSQL counts as inserted into ``ducklake_snapshot`` (aborted tries
        included), less the rows there.  The writers' connections are closed by now;
        their counts reach the statistics as their backends exit, so read until two
        reads agree (a benchmark may wait; None if they never do)."""
        schema = re.search(r"metadata_schema=(\S+)", lake)
        assert schema is not None
        sql = (
            "SELECT (SELECT n_tup_ins FROM pg_stat_user_tables WHERE schemaname = "
            f"'{schema[1]}' AND relname = 'ducklake_snapshot') - (SELECT count(*) FROM "
            f"{schema[1]}.ducklake_snapshot)"
        )
        last = None
        for _ in range(20):
            self.con.execute("CALL postgres_execute('pg', 'SELECT pg_stat_clear_snapshot()')")
            [[value]] = self.con.execute("SELECT * FROM postgres_query('pg', ?)", [sql]).fetchall()
            if value == last:
                return int(value)
            last = value
            time.sleep(0.5)
        return None

    def versions(self) -> str:
        ducklake = self.con.execute(
            "SELECT extension_version FROM duckdb_extensions() WHERE extension_name = 'ducklake'"
        ).fetchall()
        server = self.con.execute(
            "SELECT * FROM postgres_query('pg', 'SELECT current_setting(''server_version'')')"
        ).fetchall()
        return (
            f"duckdb {duckdb.__version__}, ducklake extension "
            f"{ducklake[0][0] if ducklake else '?'}, PostgreSQL {server[0][0] if server else '?'}"
        )

    def drop_all(self) -> None:
        for schema in self.schemas:
            try:
                self.con.execute(
                    "CALL postgres_execute('pg', ?)", [f"DROP SCHEMA IF EXISTS {schema} CASCADE"]
                )
            except duckdb.Error as exc:
                print(f"could not drop the catalog schema {schema}: {exc}", file=sys.stderr)
        self.con.close()


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _open(path: str, embedder: Any = "hash") -> Memory:
    return Memory(path, embedder=embedder, background_consolidation=False)


def spawn(code: str, argv: list[str], log: str, **env: str) -> subprocess.Popen[str]:
    """A child Python running ``code``: our lines on its stdout, its stderr in ``log``."""
    with open(log, "w") as errors:  # a file, never a pipe nobody reads while it runs
        return subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(code), *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
            env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), PYTHONUNBUFFERED="1", **env),
        )


def _tail(log: str) -> str:
    with open(log) as file:
        return file.read()[-2000:]


def verify(path: str, expected: int) -> tuple[bool, str]:
    """The store holds exactly ``expected`` events, no id or text twice, one vector each."""
    with _open(path) as mem:
        rows = mem.store.run(
            "SELECT (SELECT count(*) FROM events), (SELECT count(DISTINCT id) FROM events),"
            " (SELECT count(DISTINCT content) FROM events), (SELECT count(*) FROM event_vectors),"
            " (SELECT count(DISTINCT id) FROM event_vectors)"
        )
    events, ids, texts, vectors, vectored = (int(v) for v in rows[0])
    ok = events == ids == texts == vectors == vectored == expected
    return ok, (
        f"{events} events ({ids} ids, {texts} texts), {vectors} vectors "
        f"({vectored} ids), expected {expected}: {'ok' if ok else 'WRONG'}"
    )


# -- 1. throughput ----------------------------------------------------------------------
def run_writers(
    path: str, writers: int, mode: str, count: int, batch: int, workdir: str, **env: str
) -> dict[str, Any]:
    """``writers`` processes on ``path`` started together; their aggregate numbers."""
    _open(path).close()  # the store exists before the writers race to open it
    logs = [os.path.join(workdir, f"writer-{uuid.uuid4().hex[:8]}.log") for _ in range(writers)]
    children = [
        spawn(WRITER, [path, mode, str(count), str(batch), f"w{i}"], log, **env)
        for i, log in enumerate(logs)
    ]
    try:
        for child, log in zip(
            children, logs, strict=True
        ):  # all have opened the store before any writes
            assert child.stdout is not None
            if child.stdout.readline().strip() != "ready":
                child.kill()
                child.wait()
                raise RuntimeError(f"a writer did not start: {_tail(log)}")
        for child in children:
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        results = []
        for child, log in zip(children, logs, strict=True):
            out, _ = child.communicate(timeout=3600)
            if child.returncode != 0:
                raise RuntimeError(f"a writer failed (exit {child.returncode}): {_tail(log)}")
            results.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
    start = min(r["start"] for r in results)
    calls = [c for r in results for c in r["calls"]]
    return {
        "events": writers * count,
        "seconds": max(r["end"] for r in results) - start,
        "with_flush": max(r["done"] for r in results) - start,
        "flushed": all(r["flushed"] for r in results),
        "calls": calls,
        "cpu": sum(r["cpu"] for r in results),
    }


def throughput(args: argparse.Namespace, catalog: Catalog, failures: list[str]) -> None:
    print(
        f"\n## Write throughput: writer processes on one lake, embedder='hash', each writing "
        f"{args.writes:,} events by add_event (one commit each) or {args.batch_events:,} "
        f"by add_events in batches of {args.batch}\n"
    )
    rows = []
    for mode, count in (("add_event", args.writes), ("add_events", args.batch_events)):
        batch = 1 if mode == "add_event" else args.batch
        runs = [("file", 1, os.path.join(args.workdir, f"throughput-{mode}.duckdb"), {})] + [
            ("lake", n, catalog.new_lake(f"throughput-{mode}-{n}"), {}) for n in args.writers
        ]
        if mode == "add_event":  # the same race with the writers taking turns to commit
            most = max(args.writers)
            turns = catalog.new_lake(f"throughput-{mode}-{most}-turns")
            runs.append(("lake, turns on", most, turns, {ENV_TURNS: "1"}))
        rates: dict[tuple[str, int], float] = {}
        for store, writers, path, env in runs:
            try:
                r = run_writers(path, writers, mode, count, batch, args.workdir, **env)
            except RuntimeError as exc:
                print(f"- {mode}, {store}, {writers} writer(s): FAILED {exc}")
                failures.append(f"{mode} {store} x{writers}: {exc}")
                continue
            ok, line = verify(path, r["events"])
            print(f"- {mode}, {store}, {writers} writer(s): {line}")
            if not ok or not r["flushed"]:
                failures.append(f"{mode} {store} x{writers}: {line}, flushed={r['flushed']}")
            rate = rates[store, writers] = r["events"] / r["seconds"]
            one, floor = rates.get(("lake", 1)), rates.get(("file", 1))
            lost = catalog.races_lost(path) if store != "file" else None
            rows.append(
                [
                    mode,
                    store,
                    writers,
                    f"{r['events']:,}",
                    f"{rate:,.0f}",
                    f"{r['events'] / r['with_flush']:,.0f}",
                    f"{rate / one:.2f}" if store.startswith("lake") and one else "",
                    f"{rate / floor:.3f}" if floor else "",
                    ms(p50(r["calls"])),
                    ms(max(r["calls"])),
                    f"{1000 * r['cpu'] / r['events']:.1f}",
                    "" if lost is None else f"{lost:,}",
                ]
            )
    print()
    print_table(
        [
            "call",
            "store",
            "writers",
            "events",
            "events/s",
            "events/s incl. flush",
            "x 1 lake writer",
            "x file (floor)",
            "call p50 ms",
            "call max ms",
            "writers' CPU ms/event",
            "races lost",
        ],
        rows,
    )


# -- 2. freshness lag --------------------------------------------------------------------
def lag(args: argparse.Namespace, catalog: Catalog, failures: list[str]) -> None:
    lake = catalog.new_lake("lag")
    writer = _open(lake)
    reader = None
    try:
        rng = np.random.default_rng(1)
        writer.add_events(
            [
                {"session_id": f"lag-s{i % 10}", "role": "user", "content": random_text(rng, 12)}
                for i in range(200)
            ]
        )
        writer.flush(timeout=600)
        log = os.path.join(args.workdir, "lag-reader.log")
        reader = spawn(READER, [lake, str(args.lag_timeout)], log)
        assert reader.stdin is not None and reader.stdout is not None
        if reader.stdout.readline().strip() != "ready":
            raise RuntimeError(f"the reader did not start: {_tail(log)}")
        lags, calls, polls, took, missed = [], [], [], [], 0
        for _ in range(args.lag_samples):
            token = f"tok{uuid.uuid4().hex[:12]}"
            reader.stdin.write(token + "\n")
            reader.stdin.flush()
            if reader.stdout.readline().strip() != "watching":
                raise RuntimeError(f"the reader stopped: {_tail(log)}")
            time.sleep(0.05)  # the reader is in its loop, its first searches done
            before = time.monotonic()
            writer.add_event("lag", "user", f"the deploy marker is {token} today")
            after = time.monotonic()
            line = reader.stdout.readline()
            if not line.strip():
                raise RuntimeError(f"the reader stopped: {_tail(log)}")
            answer = json.loads(line)
            if answer["found"] is None:
                missed += 1
            else:
                lags.append(answer["found"] - after)
            calls.append(after - before)
            polls.append(len(answer["took"]))
            took.extend(answer["took"])
        reader.stdin.write("\n")
        reader.stdin.flush()
        reader.communicate(timeout=120)
    finally:
        if reader is not None and reader.poll() is None:
            reader.kill()
            reader.wait()
        writer.close()
    print(
        f"\n## Freshness: another process's search finds a new event ({args.lag_samples} rounds;"
        " lag from add_event's return to the first search that finds it)\n"
    )
    print_table(
        [
            "rounds",
            "found",
            "lag p50 ms",
            "lag max ms",
            "add_event p50 ms",
            "reader's search p50 ms",
            "searches per round p50",
        ],
        [
            [
                args.lag_samples,
                args.lag_samples - missed,
                ms(p50(lags)) if lags else "-",
                ms(max(lags)) if lags else "-",
                ms(p50(calls)),
                ms(p50(took)),
                f"{p50(polls):.0f}",
            ]
        ],
    )
    if missed:
        failures.append(f"lag: {missed} of {args.lag_samples} events not found in time")


# -- 3. search and get_context -----------------------------------------------------------
def search(args: argparse.Namespace, catalog: Catalog, failures: list[str]) -> None:
    embedder = args.model or "hash"
    rng = np.random.default_rng(args.events)
    texts = [f"{i} {random_text(rng, 12)}" for i in range(args.events)]
    queries = [random_text(rng, 6) for _ in range(args.queries)]
    stores = {
        "file": os.path.join(args.workdir, "search.duckdb"),
        "lake": catalog.new_lake("search"),
    }
    results = {
        name: read_store(name, path, embedder, texts, queries, args, failures)
        for name, path in stores.items()
    }
    print(
        f"\n## Reads: {args.events:,} events, embedder {embedder!r}, {args.queries} queries "
        "(p50/p95 ms), the lake next to a DuckDB file\n"
    )
    rows = []
    for name in ("file", "lake"):
        r = results[name]
        rows.append(
            [
                name,
                f"{r['load']:.1f}",
                f"{r['open']:.2f}",
                ms(p50(r["search"])),
                ms(p95(r["search"])),
                ms(p50(r["context"])),
                ms(p95(r["context"])),
            ]
        )
    lake, file = results["lake"], results["file"]
    rows.append(
        [
            "lake / file",
            f"{lake['load'] / file['load']:.2f}",
            f"{lake['open'] / file['open']:.2f}",
            f"{p50(lake['search']) / p50(file['search']):.2f}",
            f"{p95(lake['search']) / p95(file['search']):.2f}",
            f"{p50(lake['context']) / p50(file['context']):.2f}",
            f"{p95(lake['context']) / p95(file['context']):.2f}",
        ]
    )
    print_table(
        [
            "store",
            "load s (add_events + flush)",
            "open + first search s",
            "search p50 ms",
            "search p95 ms",
            "get_context p50 ms",
            "get_context p95 ms",
        ],
        rows,
    )


def read_store(
    name: str,
    path: str,
    embedder: str,
    texts: list[str],
    queries: list[str],
    args: argparse.Namespace,
    failures: list[str],
) -> dict[str, Any]:
    """Load ``texts`` into ``path``, reopen it, time search and get_context."""
    with _open(path, embedder) as mem:
        start = time.perf_counter()
        for i in range(0, len(texts), args.chunk):
            mem.add_events(
                [
                    {"session_id": f"s{j % 100}", "role": "user", "content": texts[j]}
                    for j in range(i, min(i + args.chunk, len(texts)))
                ]
            )
        if not mem.flush(timeout=args.flush_timeout):
            failures.append(f"search {name}: embeddings not written in time")
        loaded = time.perf_counter() - start
    start = time.perf_counter()
    with _open(path, embedder) as mem:
        mem.search(queries[0])
        opened = time.perf_counter() - start
        embedded = mem.status()["embedded"]
        if embedded != len(texts):
            failures.append(f"search {name}: {embedded} of {len(texts)} events embedded")
        return {
            "load": loaded,
            "open": opened,
            "search": timings(lambda i: mem.search(queries[i % len(queries)]), args.queries),
            "context": timings(
                lambda i: mem.get_context(f"s{i % 100}", queries[i % len(queries)]), args.queries
            ),
        }


# -- 4. files on disk ----------------------------------------------------------------------
def inlined_rows(store: LakeStore, schema: str) -> tuple[int, int]:
    """Rows kept in the catalog instead of Parquet: (all tables, events), live ones only.

    Read from DuckLake's own catalog tables (``ducklake_inlined_data_tables`` lists
    one table of rows per lake table and schema version); ``status`` does not show them.
    """
    meta = f"__ducklake_metadata_{store.lake_name}.{schema}"
    fetch = store.fetch_lake
    total = events = 0
    for table_id, name in fetch(
        f"SELECT table_id, table_name FROM {meta}.ducklake_inlined_data_tables"
    ):
        count = int(fetch(f"SELECT count(*) FROM {meta}.{name} WHERE end_snapshot IS NULL")[0][0])
        owner = fetch(
            f"SELECT table_name FROM {meta}.ducklake_table WHERE table_id = ?", [table_id]
        )
        total += count
        if owner and owner[0][0] == "events":
            events += count
    return total, events


def files(args: argparse.Namespace, catalog: Catalog, failures: list[str]) -> None:
    lake = catalog.new_lake("files")
    schema = lake.split("metadata_schema=")[1].split()[0]
    rows = []
    rng = np.random.default_rng(2)
    with _open(lake) as mem:
        start = time.perf_counter()
        for i in range(args.commits):
            mem.add_event(f"s{i % 10}", "user", f"{i} {random_text(rng, 12)}")
        if not mem.flush(timeout=args.flush_timeout):
            failures.append("files: embeddings not written in time")
        wrote = time.perf_counter() - start
        store = mem.store
        assert isinstance(store, LakeStore)

        def stage(name: str, seconds: float) -> None:
            state = maintenance.status(store)
            total, events = inlined_rows(store, schema)
            rows.append(
                [
                    name,
                    f"{seconds:.1f}",
                    f"{state['events']:,}",
                    f"{state['snapshots']:,}",
                    f"{state['files_on_disk']:,}",
                    f"{sum(state['files'].values()):,}",
                    f"{state['files'].get('events', 0):,}",
                    f"{sum(state['bytes'].values()) / 2**20:.2f}",
                    f"{total:,}",
                    f"{events:,}",
                ]
            )
            if state["events"] != args.commits:
                failures.append(f"files {name}: {state['events']} events, not {args.commits}")

        stage(f"after {args.commits:,} add_event commits", wrote)
        start = time.perf_counter()
        compacted = maintenance.compact(store)
        stage("after compact", time.perf_counter() - start)
        start = time.perf_counter()
        expired = maintenance.expire(store, dt.timedelta(0))
        stage("after expire (all older snapshots)", time.perf_counter() - start)
    print(
        f"\n## Files: one writer, {args.commits:,} single-event commits, then "
        "maintenance.compact and maintenance.expire\n"
    )
    print_table(
        [
            "stage",
            "seconds (writes + flush / compact / expire)",
            "events",
            "snapshots",
            "Parquet files on disk",
            "files in catalog",
            "events' files",
            "MiB in catalog's files",
            "rows inlined in catalog",
            "events' rows inlined",
        ],
        rows,
    )
    print(f"\ncompact: {compacted}\nexpire: {expired}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--catalog",
        default=os.environ.get("NBMEMORY_LAKE_PG"),
        help="libpq connection string of the catalog database (default $NBMEMORY_LAKE_PG)",
    )
    parser.add_argument(
        "--workdir", help="where this run's folder of data paths and files goes (default: /tmp)"
    )
    parser.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections")
    parser.add_argument("--writes", type=int, default=500, help="add_event calls per writer")
    parser.add_argument(
        "--batch-events", type=int, help="events per writer by add_events (default 10 x --writes)"
    )
    parser.add_argument("--batch", type=int, default=100, help="events per add_events call")
    parser.add_argument("--writers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--lag-samples", type=int, default=20)
    parser.add_argument("--lag-timeout", type=float, default=30.0, help="seconds per round")
    parser.add_argument("--events", type=int, default=100_000, help="events of the read test")
    parser.add_argument("--queries", type=int, default=50, help="timed calls of each read")
    parser.add_argument("--chunk", type=int, default=5_000, help="add_events batch when loading")
    parser.add_argument("--model", help="embedder of the read test (default 'hash')")
    parser.add_argument("--commits", type=int, default=10_000, help="commits of the files test")
    parser.add_argument("--flush-timeout", type=float, default=3600.0)
    parser.add_argument(
        "--keep", action="store_true", help="keep the run's lakes (catalog schemas and files)"
    )
    args = parser.parse_args()
    # the tables on stdout, DuckDB's progress bar (drawn on fd 1 by queries > 2 s) on stderr
    sys.stdout.flush()
    sys.stdout = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = sorted(set(only) - set(SECTIONS))
    if unknown:
        parser.error(f"--only takes {', '.join(SECTIONS)}; not {', '.join(unknown)}")
    if not args.catalog:
        print(
            "bench_lake.py: no catalog: pass --catalog 'dbname=... host=... user=...' "
            "or set $NBMEMORY_LAKE_PG",
            file=sys.stderr,
        )
        sys.exit(2)
    if args.batch_events is None:
        args.batch_events = 10 * args.writes
    if args.workdir:
        os.makedirs(args.workdir, exist_ok=True)
    args.workdir = tempfile.mkdtemp(prefix="bench-lake-", dir=args.workdir)
    try:
        catalog = Catalog(args.catalog, args.workdir)
    except (StoreError, duckdb.Error) as exc:
        shutil.rmtree(args.workdir, ignore_errors=True)
        first = re.sub(r'(password=)[^\s"]+', r"\1***", str(exc).strip().splitlines()[0])
        print(f"bench_lake.py: {first}", file=sys.stderr)
        sys.exit(2)
    failures: list[str] = []
    try:
        print(f"machine: {machine()}")
        print(f"{catalog.versions()}; workdir {args.workdir}")
        runs = {"throughput": throughput, "lag": lag, "search": search, "files": files}
        for section in SECTIONS:
            if section in only:
                runs[section](args, catalog, failures)
    finally:
        if args.keep:
            print(f"\nkept: {args.workdir} and catalog schemas {', '.join(catalog.schemas)}")
        else:
            catalog.drop_all()
            shutil.rmtree(args.workdir, ignore_errors=True)
    if failures:
        print("\nFAILED:\n" + "\n".join(f"- {f}" for f in failures))
        sys.exit(1)


if __name__ == "__main__":
    main()
