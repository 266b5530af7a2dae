"""The DuckDB file: creation, schema, migrations, the legacy ``messages`` table."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import numpy as np
import pytest

from nbmemory import Memory, StoreError
from nbmemory.config import DEFAULT_MODEL
from nbmemory.store import Store, migrations
from nbmemory.store.migrations import SCHEMA_VERSION

#: ``crash``: the migrations run again under the oldest DuckDB allowed (see ``.ci/run``).
pytestmark = pytest.mark.crash

SEED_TABLES = {
    "events": {
        "id",
        "session_id",
        "role",
        "content",
        "tool_call_id",
        "tool_name",
        "tool_calls_json",
        "created_at",
        "importance",
        "embedding_error",
        "consolidated_at",
        # ours
        "namespace",
        "kind",
        "metadata",
        "embedding_model",
        "updated_at",
    },
    "facts": {"id", "category", "key", "value", "source", "created_at", "updated_at"},
    "macros": {
        "id",
        "trigger_tool",
        "trigger_args_pattern",
        "next_tool",
        "next_args",
        "confidence",
        "used_count",
        "created_at",
        "updated_at",
    },
    "scheduled_tasks": {
        "id",
        "name",
        "cron_expr",
        "original_schedule",
        "prompt",
        "source",
        "is_oneshot",
        "is_paused",
        "is_trusted",
        "next_run_at",
        "last_run_at",
        "created_at",
        "updated_at",
    },
    "terminal_allowed_prefixes": {"prefix"},
}


def columns(con: duckdb.DuckDBPyConnection, table: str) -> dict[str, str]:
    rows = con.execute(
        "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = ?",
        [table],
    ).fetchall()
    return dict(rows)


def test_file_created_with_every_seed_table_and_column(store_path):
    assert not Path(store_path).exists()
    Memory(store_path, embedder="hash").close()
    assert Path(store_path).exists()
    con = duckdb.connect(store_path)
    try:
        for table, expected in SEED_TABLES.items():
            found = columns(con, table)
            assert expected <= set(found), f"{table} lacks {expected - set(found)}"
        # the seed's events.embedding lives apart, one row per (event, model), as a
        # LIST of FLOAT (works on plain DuckDB and DuckLake alike)
        assert "embedding" not in columns(con, "events")
        assert columns(con, "event_vectors") == {
            "id": "VARCHAR",
            "namespace": "VARCHAR",
            "model": "VARCHAR",
            "embedding": "FLOAT[]",
            "passage": "INTEGER",
            "span_start": "INTEGER",
            "span_stop": "INTEGER",
        }
        defaults = dict(
            con.execute(
                "SELECT column_name, column_default FROM information_schema.columns "
                "WHERE table_name = 'macros'"
            ).fetchall()
        )
        assert defaults["confidence"].startswith("0") and defaults["used_count"] == "0"
        version = con.execute("SELECT value FROM nbmemory_meta WHERE key = 'schema_version'")
        assert int(version.fetchone()[0]) == SCHEMA_VERSION
    finally:
        con.close()


def test_migrations_are_safe_to_run_twice(store_path):
    with Memory(store_path, embedder="hash") as mem:
        mem.add_event("s1", "user", "hello there")
        mem.flush()
    store = Store(store_path)
    migrations.migrate(store)  # a third run on the same file
    assert store.fetchone("SELECT count(*) FROM events")[0] == 1
    store.close()
    with Memory(store_path, embedder="hash") as mem:
        assert len(mem.events()) == 1


def make_version_1_file(path: str) -> np.ndarray:
    """A store as nbmemory wrote it before vectors left ``events`` (schema version 1)."""
    vectors = np.eye(2, 384, dtype=np.float32)
    con = duckdb.connect(path)
    for statement in migrations._V1_TABLES:
        con.execute(statement)
    con.execute("CREATE SEQUENCE events_seq START 1")
    con.execute("ALTER TABLE events ADD COLUMN seq BIGINT DEFAULT nextval('events_seq')")
    con.execute("CREATE TABLE nbmemory_migrations (name VARCHAR PRIMARY KEY, applied_at TIMESTAMP)")
    for name in ("m001_tables", "m002_events_seq", "m003_legacy_messages"):
        con.execute("INSERT INTO nbmemory_migrations VALUES (?, now())", [name])
    con.execute("INSERT INTO nbmemory_meta VALUES ('schema_version', '1'), ('format', 'nbmemory')")
    for i, text in enumerate(["the cat sat on the mat", "a dog in the fog"]):
        con.execute(
            "INSERT INTO events (id, session_id, namespace, role, content, created_at,"
            " updated_at, embedding, embedding_model) VALUES (?, 's', 'default', 'user', ?,"
            " now(), now(), ?, ?)",
            [f"e{i}", text, vectors[i].tolist(), "test/one-hot"],
        )
    con.execute(  # a pending text, and a row marked with a model but no vector
        "INSERT INTO events (id, session_id, namespace, role, content, created_at, updated_at,"
        " embedding_model) VALUES ('e2', 's', 'default', 'user', 'no vector yet', now(), now(),"
        " 'test/one-hot')"
    )
    con.close()
    return vectors


def test_a_version_1_file_keeps_every_vector_in_event_vectors(store_path):
    vectors = make_version_1_file(store_path)
    with pytest.raises(StoreError, match="older nbmemory.*m004_event_vectors.*read_only"):
        Memory(store_path, embedder="hash", read_only=True)
    store = Store(store_path)  # opening for writing migrates
    try:
        assert "embedding" not in {row[0] for row in store.fetchall("DESCRIBE events")}
        moved = store.fetchall(
            "SELECT id, namespace, model, embedding FROM event_vectors ORDER BY id"
        )
        assert [m[:3] for m in moved] == [
            ("e0", "default", "test/one-hot"),
            ("e1", "default", "test/one-hot"),
        ]
        for (_, _, _, stored), vector in zip(moved, vectors, strict=True):
            assert np.asarray(stored, dtype=np.float32).tobytes() == vector.tobytes()
        marked = store.fetchall("SELECT id, embedding_model FROM events ORDER BY id")
        assert marked == [("e0", "test/one-hot"), ("e1", "test/one-hot"), ("e2", None)]
        assert store.vectors.pending() == [("e2", "no vector yet")]
        assert store.catalog.schema_version() == SCHEMA_VERSION
    finally:
        store.close()


def make_legacy_file(path: str) -> list[tuple]:
    """A store from before `events` replaced `messages` (seed 000's columns, SQLite types)."""
    vector = np.linspace(-1, 1, 384, dtype=np.float32)
    vector /= np.linalg.norm(vector)
    rows = [
        (
            "11111111-1111-1111-1111-111111111111",
            "sess-a",
            "user",
            "My name is John",
            None,
            None,
            None,
            "2024-03-01T10:00:00Z",
            0.5,
            json.dumps(vector.tolist()).encode(),
            None,
            None,
        ),
        (
            "22222222-2222-2222-2222-222222222222",
            "sess-a",
            "assistant",
            "I will call a tool",
            None,
            None,
            '[{"id":"call_1","name":"search","arguments":"{\\"q\\":\\"x\\"}"}]',
            "2024-03-01T10:00:05+02:00",
            0.9,
            None,
            "model timed out",
            "2024-03-02T00:00:00Z",
        ),
        (
            "33333333-3333-3333-3333-333333333333",
            "sess-b",
            "tool",
            "search result: 42",
            "call_1",
            "search",
            None,
            "2024-03-01T10:00:06.250Z",
            0.3,
            None,
            None,
            None,
        ),
    ]
    con = duckdb.connect(path)
    con.execute(
        """CREATE TABLE messages (
            id TEXT PRIMARY KEY, session_id TEXT, role TEXT, content TEXT,
            tool_call_id TEXT, tool_name TEXT, tool_calls_json TEXT, created_at TEXT,
            importance REAL DEFAULT 0.5, embedding BLOB, embedding_error TEXT,
            consolidated_at TEXT)"""
    )
    for row in rows:
        con.execute("INSERT INTO messages VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", list(row))
    con.close()
    return rows


def test_legacy_messages_table_is_migrated_into_events(store_path):
    legacy = make_legacy_file(store_path)
    mem = Memory(store_path, embedder="hash")
    try:
        assert mem.store.migrated_messages == 3
        got = mem.store.records(
            "SELECT e.*, v.embedding FROM events e LEFT JOIN event_vectors v USING (id)"
            " ORDER BY e.created_at, e.id"
        )
        by_id = {r["id"]: r for r in got}
        assert set(by_id) == {r[0] for r in legacy}
        a, b, c = (by_id[r[0]] for r in legacy)
        assert (a["session_id"], a["role"], a["content"]) == ("sess-a", "user", "My name is John")
        assert a["created_at"].isoformat() == "2024-03-01T10:00:00"
        assert a["importance"] == pytest.approx(0.5)
        assert np.allclose(a["embedding"], json.loads(legacy[0][9]))
        assert a["embedding_model"] == DEFAULT_MODEL
        # offsets become UTC; tool calls, errors and consolidation survive
        assert b["created_at"].isoformat() == "2024-03-01T08:00:05"
        assert json.loads(b["tool_calls_json"])[0]["name"] == "search"
        assert b["embedding_error"] == "model timed out"
        assert b["consolidated_at"].isoformat() == "2024-03-02T00:00:00"
        assert b["importance"] == pytest.approx(0.9)
        assert (c["tool_call_id"], c["tool_name"]) == ("call_1", "search")
        assert c["created_at"].isoformat() == "2024-03-01T10:00:06.250000"
        # nothing lost: the old table is kept, renamed
        assert mem.store.catalog.table_exists("messages_migrated")
        assert not mem.store.catalog.table_exists("messages")
    finally:
        mem.close()
    # opening again migrates nothing twice
    with Memory(store_path, embedder="hash") as again:
        assert again.store.migrated_messages == 0
        assert len(again.events(namespace="default")) == 3


def test_not_a_duckdb_file_is_refused_and_left_untouched(tmp_path):
    path = tmp_path / "notes.duckdb"
    path.write_text("these are my notes, not a database\n" * 100)
    before = path.read_bytes()
    with pytest.raises(StoreError, match="not a DuckDB database"):
        Memory(str(path), embedder="hash")
    assert path.read_bytes() == before


def test_missing_directory_gives_a_clear_error(tmp_path):
    with pytest.raises(StoreError, match="does not exist"):
        Memory(str(tmp_path / "nope" / "agent.duckdb"), embedder="hash")


def test_stores_of_one_process_created_at_once_on_a_new_path_share_one_file(tmp_path):
    """Four threads open one new path together (each makes its own file beside it,
    one is linked into place): every Memory writes into that one store.  Before the
    openings of one file were taken in turn (``peers.opening``), three of the four
    failed with DuckDB's "Catalog write-write conflict" on ``nbmemory_migrations``."""
    import threading

    path = str(tmp_path / "new.duckdb")
    start, ids, errors = threading.Barrier(4), [], []

    def open_and_write(n: int) -> None:
        try:
            start.wait()
            with Memory(path, embedder="hash") as mem:
                ids.append(mem.add_event("s", "user", f"from thread {n}").id)
                mem.flush()
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_and_write, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    with Memory(path, embedder="hash") as mem:
        assert sorted(mem.events()["id"]) == sorted(ids)
    assert [p.name for p in tmp_path.iterdir() if ".nbmemory-new-" in p.name] == []


def test_a_missing_store_opened_read_only_says_so_and_creates_nothing(tmp_path):
    """It was DuckDB's own words ("IO Error: Cannot open database ... in read-only mode")."""
    path = tmp_path / "agent.duckdb"
    with pytest.raises(StoreError, match=r"does not exist, and read_only=True opens an existing"):
        Memory(str(path), embedder="hash", read_only=True)
    assert list(tmp_path.iterdir()) == []


def test_statements_are_parameterised_against_hostile_strings(mem):
    hostile = "s'); DROP TABLE events; --"
    mem.add_event(hostile, "user", "Robert'); DROP TABLE events;--", metadata={"k'": "v\"'"})
    mem.flush()
    frame = mem.events(session_id=hostile)
    assert frame["content"].tolist() == ["Robert'); DROP TABLE events;--"]
    assert mem.store.catalog.table_exists("events")
    hits = mem.search("Robert DROP TABLE", session_id=hostile)
    assert len(hits) == 1


def test_bulk_insert_goes_through_arrow_not_executemany(mem, monkeypatch):
    calls = []
    statements = mem.store.statements
    original = statements.insert_arrow

    def spy(table, data, returning=()):
        calls.append((table, data.num_rows))
        return original(table, data, returning=returning)

    monkeypatch.setattr(statements, "insert_arrow", spy)
    ids = mem.add_events(
        [{"session_id": "bulk", "role": "user", "content": f"row {i}"} for i in range(500)]
    )
    assert calls == [("events", 500)]
    assert len(ids) == 500 and len(mem.events(session_id="bulk")) == 500


def test_no_progress_bar_is_drawn_on_stdout(tmp_path):
    """DuckDB draws a progress bar on stdout (fd 1, even a pipe) for queries longer
    than two seconds; in the CLI's JSON or a notebook's output it would be garbage.
    (Checked in a plain process: under pytest's capture DuckDB starts without it.)"""
    import subprocess
    import sys

    code = (
        "import sys; from nbmemory import Memory; "
        "m = Memory(sys.argv[1], embedder='hash'); "
        "print(m.store.fetchall(\"SELECT current_setting('enable_progress_bar')\")[0][0])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "quiet.duckdb")],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    assert out.strip() == "False"


def test_an_error_inside_a_registered_view_is_the_one_raised(tmp_path):
    """A statement that aborts the transaction inside ``registered``: unregistering
    the view then fails too ("Current transaction is aborted"), and that second
    error hid the first (the worker logged it instead of DuckDB's conflict)."""
    import pyarrow as pa

    store = Store(str(tmp_path / "m.duckdb"))
    try:
        data = pa.table({"x": ["not a number"]})
        with (
            pytest.raises(duckdb.ConversionException),
            store.transaction(),
            store.registered("_probe", data) as view,
        ):
            store.run(f"SELECT CAST(x AS INTEGER) FROM {view}")
    finally:
        store.close()
