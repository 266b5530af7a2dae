"""A team's first morning: many processes open a brand-new lake at the same moment.

Before the first-open lock, 1 to 4 of 5 such processes failed at open with
``duplicate key value violates unique constraint "pg_type_typname_nsp_index"``
(or ``... "pg_namespace_nspname_index"``, ``... "ducklake_snapshot_pkey"``).  Run
by ``.ci/run`` in ``.venv-lake`` against its throwaway PostgreSQL, whose role may
create databases (half the rounds use a new database, the others a new schema).
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from child_process import child_env, expect, spawn

from nbmemory.store.lake import extensions

#: Rounds of the race (a new, empty catalog each): $NBMEMORY_LAKE_FIRST_OPEN_ROUNDS.
ROUNDS = int(os.environ.get("NBMEMORY_LAKE_FIRST_OPEN_ROUNDS", "20"))
WRITERS = 4
#: Events each writer adds per round, one add_event (one commit) each.
WRITES = 5

_RACER = """
import json, os, re, select, sys
from nbmemory import Memory

role, writes, writers = sys.argv[1], int(sys.argv[2]), int(sys.argv[4])
barriers = [int(fd) for fd in sys.argv[3].split(",")]
NOTE = re.compile(r"writer (\\d+) note (\\d+) ")

def consistent(frame):
    # ids unique, and of each writer a prefix of its notes: its add_event calls are
    # commits made one after another, so a snapshot holds its first j and no other
    ids = frame["id"].tolist()
    notes = {}
    for text in frame["content"]:
        found = NOTE.match(text)
        if found is None:
            return f"a row nobody wrote: {text!r}"
        notes.setdefault(found.group(1), set()).add(int(found.group(2)))
    if len(ids) != len(set(ids)):
        return "an id twice"
    for writer, seen in notes.items():
        if seen != set(range(len(seen))):
            return f"writer {writer}'s notes {sorted(seen)} are not a prefix"
    return None

for round_, barrier in enumerate(barriers):
    url = sys.stdin.readline().strip()
    if not url:
        break  # the parent stopped early
    print("ready", flush=True)
    os.read(barrier, 1)  # b"" the moment the parent closes the other end: all start
    try:
        mem = Memory(url, embedder="hash")
    except Exception as exc:
        print("result " + json.dumps({"opened": False, "error": f"{type(exc).__name__}: {exc}"}), flush=True)
        if role == "reader":
            sys.stdin.readline()
        continue
    with mem:
        if role.startswith("writer"):
            n = role[len("writer"):]
            ids = [mem.add_event(f"w{n}", "user", f"writer {n} note {i} tag w{n}n{i}").id
                   for i in range(writes)]
            result = {"ids": ids}
        else:
            reads, problems = 0, []
            # read again and again until the parent says the writers are done (waiting
            # up to 20 ms for that word between reads leaves the writers some CPU)
            while not select.select([sys.stdin], [], [], 0.02)[0]:
                problem = consistent(mem.events())
                reads += 1
                if problem:
                    problems.append(problem)
            sys.stdin.readline()
            final = mem.events()
            problem = consistent(final)
            if problem:
                problems.append(problem)
            last = [f"w{n}n{writes - 1}" for n in range(writers)]
            found = {tag: mem.search(tag, limit=1, mode="keyword")["content"].tolist() for tag in last}
            result = {"ids": final["id"].tolist(), "reads": reads, "problems": problems,
                      "found": {tag: bool(hit and tag in hit[0]) for tag, hit in found.items()}}
    print("result " + json.dumps({"opened": True, **result}), flush=True)
"""


@pytest.fixture
def catalogs(lake_catalog: str) -> Iterator[tuple[duckdb.DuckDBPyConnection, list[str]]]:
    """A DuckDB attached to the test PostgreSQL (as ``pg``), and the databases made on
    it, dropped afterwards."""
    con = extensions.connect()
    extensions.load(con, "postgres")
    con.execute(f"ATTACH '{lake_catalog.replace(chr(39), chr(39) * 2)}' AS pg (TYPE postgres)")
    made: list[str] = []
    try:
        yield con, made
    finally:
        for name in made:
            con.execute(
                "CALL postgres_execute('pg', ?, use_transaction := false)",
                [f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"],
            )
        con.close()


def _fresh_lake(lake_catalog: str, catalogs, round_: int, data: Path) -> str:
    """A lake nobody made yet: a new metadata schema on even rounds, a new database
    (DuckLake's tables in its ``public`` schema) on odd ones."""
    con, made = catalogs
    if round_ % 2 == 0:
        return f"ducklake:postgres:{lake_catalog} metadata_schema=f_{uuid.uuid4().hex[:12]} data_path={data}"
    name = f"nbm_first_{uuid.uuid4().hex[:12]}"
    con.execute(
        "CALL postgres_execute('pg', ?, use_transaction := false)", [f"CREATE DATABASE {name}"]
    )
    made.append(name)
    return (
        f"ducklake:postgres:{lake_catalog} dbname={name} data_path={data}"  # the last dbname wins
    )


def test_five_processes_open_a_brand_new_lake_at_once_every_round(
    lake_catalog: str, catalogs, tmp_path: Path
) -> None:
    """4 writers and a reader, started by one barrier on a lake nobody made, ROUNDS
    times (a new catalog each): every process opens, every written row is there
    once, and every view the reader had was a consistent snapshot."""
    barriers = [os.pipe() for _ in range(ROUNDS)]
    roles = [f"writer{n}" for n in range(WRITERS)] + ["reader"]
    children = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                textwrap.dedent(_RACER),
                role,
                str(WRITES),
                ",".join(str(r) for r, _ in barriers),
                str(WRITERS),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=child_env(),
            pass_fds=[r for r, _ in barriers],
        )
        for role in roles
    ]
    for read_end, _ in barriers:
        os.close(read_end)
    *writers, reader = children
    released: set[int] = set()
    failed_opens: list[str] = []
    problems: list[str] = []
    started = time.monotonic()
    try:
        for round_, (_, go) in enumerate(barriers):
            url = _fresh_lake(lake_catalog, catalogs, round_, tmp_path / f"lake-{round_}")
            for child in children:
                assert child.stdin is not None
                child.stdin.write(url + "\n")
                child.stdin.flush()
            for child in children:
                expect(child, "ready")
            os.close(go)  # every process leaves os.read() at once
            released.add(go)
            written = [json.loads(expect(w, "result ")) for w in writers]
            assert reader.stdin is not None
            reader.stdin.write("stop\n")
            reader.stdin.flush()
            seen = json.loads(expect(reader, "result "))
            for role, result in zip(roles, [*written, seen], strict=True):
                if not result["opened"]:
                    failed_opens.append(f"round {round_} {role}: {result['error'][:200]}")
            if not all(r["opened"] for r in [*written, seen]):
                continue
            ids = [i for w in written for i in w["ids"]]
            if len(ids) != len(set(ids)) or len(ids) != WRITERS * WRITES:
                problems.append(f"round {round_}: writers returned {len(ids)} ids")
            if sorted(seen["ids"]) != sorted(ids):
                problems.append(
                    f"round {round_}: the reader found {len(seen['ids'])} rows, "
                    f"{len(set(ids) - set(seen['ids']))} written ones missing"
                )
            problems += [f"round {round_}: {p}" for p in seen["problems"]]
            if not all(seen["found"].values()):
                problems.append(f"round {round_}: keyword search missed {seen['found']}")
    finally:
        for _, go in barriers:
            if go not in released:
                os.close(go)
        for child in children:
            if child.stdin is not None:
                child.stdin.close()
        for child in children:
            try:
                child.wait(timeout=60)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
    elapsed = time.monotonic() - started
    rounds_failed = len({line.split(" ")[1] for line in failed_opens})
    assert not failed_opens, (
        f"{rounds_failed}/{ROUNDS} rounds had a process that could not open "
        f"({len(failed_opens)} of {ROUNDS * len(roles)} opens):\n" + "\n".join(failed_opens)
    )
    assert not problems, "\n".join(problems)
    print(f"{ROUNDS}/{ROUNDS} rounds, {ROUNDS * len(roles)} opens, {elapsed:.0f} s")


_OPENER = """
import sys
from nbmemory import Memory
with Memory(sys.argv[1], embedder="hash") as mem:
    print("opened " + mem.add_event("s", "user", "made after the other creator").id, flush=True)
"""


def test_an_open_that_meets_a_creator_without_the_lock_opens_once_it_commits(
    lake_catalog: str, catalogs, tmp_path: Path
) -> None:
    """A creator that takes no lock (another tool, an older nbmemory) makes the
    lake's schema while nbmemory makes the lake: PostgreSQL holds nbmemory's
    ``CREATE SCHEMA`` until the other commits, then refuses it as a duplicate key.
    nbmemory then looks again, and opens."""
    con, _ = catalogs
    schema = f"f_{uuid.uuid4().hex[:12]}"
    url = f"ducklake:postgres:{lake_catalog} metadata_schema={schema} data_path={tmp_path / 'lake'}"
    con.execute("BEGIN TRANSACTION")
    con.execute("CALL postgres_execute('pg', ?)", [f'CREATE SCHEMA "{schema}"'])
    opener = spawn(_OPENER, url)
    watcher = con.cursor()  # outside the transaction: sees the opener wait on it
    try:
        deadline = time.monotonic() + 120
        while opener.poll() is None and time.monotonic() < deadline:
            waiting = watcher.execute(
                "SELECT * FROM postgres_query('pg', ?)",
                [
                    "SELECT count(*)::int FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                    f" AND query ILIKE '%CREATE SCHEMA%{schema}%'"
                ],
            ).fetchall()[0][0]
            if waiting:
                break
            select.select([opener.stdout], [], [], 0.05)  # returns early if it ended
        else:
            pytest.fail(f"the opener never waited on the other creator: {opener.communicate()}")
        con.execute("COMMIT")
        event_id = expect(opener, "opened ")
        assert opener.wait(timeout=60) == 0
    finally:
        if opener.poll() is None:
            opener.kill()
        opener.wait()
        watcher.close()
    from nbmemory import Memory

    with Memory(url, embedder="hash") as mem:
        assert mem.events()["id"].tolist() == [event_id]


_IMPATIENT = """
import sys
from nbmemory import Memory
from nbmemory.errors import StoreError
from nbmemory.store.lake import first_open
first_open.LOCK_TIMEOUT = 2  # seconds, instead of a minute
try:
    Memory(sys.argv[1], embedder="hash")
except StoreError as exc:
    print("refused " + str(exc), flush=True)
"""


def test_an_open_that_waits_too_long_for_the_maker_says_so_and_makes_nothing(
    lake_catalog: str, catalogs, tmp_path: Path
) -> None:
    """A process stuck while making the lake (here: the test, holding the lock) keeps
    the others waiting up to LOCK_TIMEOUT; then each says so in one line, having
    made nothing."""
    from nbmemory.store.lake import first_open, parse_lake_url

    con, _ = catalogs
    schema = f"f_{uuid.uuid4().hex[:12]}"
    url = f"ducklake:postgres:{lake_catalog} metadata_schema={schema} data_path={tmp_path / 'lake'}"
    classid, objid = first_open.lock_key(parse_lake_url(url))
    con.execute("BEGIN TRANSACTION")
    con.execute(
        "SELECT * FROM postgres_query('pg', ?)",
        [f"SELECT pg_advisory_xact_lock({classid}, {objid})::text"],
    ).fetchall()
    try:
        opener = spawn(_IMPATIENT, url)
        message = expect(opener, "refused ")
        assert opener.wait(timeout=60) == 0
    finally:
        con.execute("ROLLBACK")
    assert "has been making the lake" in message and "open the lake again" in message
    assert "password=***" in message or "password=" not in lake_catalog
    assert "\n" not in message
    [[schema_made]] = con.execute(
        "SELECT * FROM postgres_query('pg', ?)",
        [f"SELECT (to_regnamespace('{schema}') IS NOT NULL)::text"],
    ).fetchall()
    assert schema_made == "false"
    assert not (tmp_path / "lake").exists()
