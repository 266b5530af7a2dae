"""Importing a running agent's SQLite memory (seed 000 schema) into a store."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from nbmemory import InvalidInput, Memory
from nbmemory.cli import main
from nbmemory.retrieval.embedders import HashEmbedder

SEED_TABLES = """
CREATE TABLE {events} (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    role TEXT NOT NULL,
    content TEXT,
    tool_call_id TEXT,
    tool_name TEXT,
    tool_calls_json TEXT,
    created_at TEXT NOT NULL,
    importance REAL DEFAULT 0.5,
    embedding BLOB,
    embedding_error TEXT,
    consolidated_at TEXT
);
CREATE INDEX idx_{events}_session ON {events}(session_id);
CREATE TABLE facts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    category TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    source TEXT DEFAULT '',
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (category, key)
);
CREATE TABLE macros (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    trigger_tool TEXT NOT NULL,
    trigger_args_pattern TEXT,
    next_tool TEXT NOT NULL,
    next_args TEXT NOT NULL,
    confidence REAL DEFAULT 0.0,
    used_count INTEGER DEFAULT 0,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE TABLE scheduled_tasks (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    cron_expr TEXT NOT NULL,
    original_schedule TEXT NOT NULL,
    prompt TEXT NOT NULL,
    source TEXT NOT NULL,
    is_oneshot INTEGER DEFAULT 0,
    is_paused INTEGER DEFAULT 0,
    is_trusted INTEGER DEFAULT 0,
    next_run_at TEXT NOT NULL,
    last_run_at TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE TABLE terminal_allowed_prefixes (prefix TEXT PRIMARY KEY);
"""

HASH = HashEmbedder(384)


def _blob(vector) -> bytes:
    """Seed 000 stores embeddings as a JSON array of floats in a BLOB."""
    return json.dumps([float(x) for x in vector]).encode()


def build_agent_db(path: Path, *, table: str = "events") -> dict:
    """A seed 000 database as the Rust agent would leave it; returns what was written."""
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode=WAL")
    con.executescript(SEED_TABLES.format(events=table))
    same_dim = HASH.embed(["Our deadline is March 3rd"])[0]
    rows = [
        # id, session, role, content, created_at, importance, embedding, error, consolidated
        (
            "m-kept",
            "s1",
            "user",
            "Our deadline is March 3rd",
            "2024-05-08T13:56:00.123456789Z",
            0.9,
            _blob(same_dim),
            None,
            "2024-05-09T00:00:00+00:00",
        ),
        (
            "m-olddim",
            "s1",
            "assistant",
            "Noted, the deadline is in March",
            "2024-05-08T13:57:00+02:00",
            0.55,
            _blob([0.1] * 8),
            None,
            None,
        ),
        (
            "m-missing",
            "s2",
            "tool",
            "calendar.create -> ok",
            "2024-05-08T14:00:00Z",
            None,
            None,
            None,
            None,
        ),
        (
            "m-broken",
            "s2",
            "user",
            "I love TypeScript",
            "2024-05-08T14:01:00Z",
            0.5,
            b"\x00\x01not json",
            None,
            None,
        ),
        (
            "m-failed",
            "s2",
            "user",
            "a text the embedder refused",
            "2024-05-08T14:02:00Z",
            0.2,
            None,
            "model timeout",
            None,
        ),
    ]
    con.executemany(
        f"INSERT INTO {table} (id, session_id, role, content, created_at, importance, embedding,"
        " embedding_error, consolidated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    con.execute(
        "INSERT INTO facts (id, category, key, value, source, created_at, updated_at)"
        " VALUES (7, 'project', 'deadline', 'March 3rd', 'user', ?, ?)",
        ["2024-05-08T13:56:00Z", "2024-05-08T15:00:00Z"],
    )
    con.execute(
        "INSERT INTO macros (id, trigger_tool, trigger_args_pattern, next_tool, next_args,"
        " confidence, used_count, created_at, updated_at)"
        " VALUES (12, 'git_status', NULL, 'git_diff', '--stat', 0.8, 4, ?, ?)",
        ["2024-05-01T10:00:00Z", "2024-05-02T10:00:00Z"],
    )
    con.execute(
        "INSERT INTO scheduled_tasks VALUES ('t-1', 'standup', '0 9 * * 1-5', 'every weekday at 9',"
        " 'Summarise yesterday', 'tool', 0, 1, 0, '2024-05-09T09:00:00Z', NULL,"
        " '2024-05-08T12:00:00Z', '2024-05-08T12:00:00Z')"
    )
    con.execute("INSERT INTO terminal_allowed_prefixes VALUES ('git '), ('ls')")
    con.commit()
    con.close()
    return {"same_dim": same_dim}


@pytest.fixture
def agent_db(tmp_path: Path) -> tuple[Path, dict]:
    path = tmp_path / "agent.db"
    return path, build_agent_db(path)


def test_rows_arrive_with_ids_timestamps_and_importance(mem: Memory, agent_db) -> None:
    path, written = agent_db
    report = mem.import_sqlite(path)
    assert mem.flush(timeout=30)
    assert report.sources == ["events"]
    assert report.events == 5
    rows = mem.events().set_index("id")
    assert sorted(rows.index) == ["m-broken", "m-failed", "m-kept", "m-missing", "m-olddim"]
    kept = rows.loc["m-kept"]
    assert kept["session_id"] == "s1"
    assert kept["importance"] == pytest.approx(0.9)
    # RFC 3339 with nanoseconds and offsets, stored as naive UTC
    assert str(kept["created_at"]) == "2024-05-08 13:56:00.123456"
    assert str(kept["consolidated_at"]) == "2024-05-09 00:00:00"
    assert str(rows.loc["m-olddim", "created_at"]) == "2024-05-08 11:57:00"
    # a missing importance gets the role default (tool 0.3)
    assert rows.loc["m-missing", "importance"] == pytest.approx(0.3)
    assert rows.loc["m-failed", "embedding_error"] == "model timeout"


def test_embeddings_kept_when_dimension_matches_recomputed_otherwise(mem: Memory, agent_db) -> None:
    path, written = agent_db
    report = mem.import_sqlite(path)
    assert mem.flush(timeout=30)
    assert report.embeddings_kept == 1
    assert report.recomputed_dimension == 1
    assert report.recomputed_missing == 1
    assert report.recomputed_unreadable == 1
    assert report.recomputed == 3
    assert report.embedding_errors == 1
    assert (report.source_dim, report.store_dim) == (384, 384)
    assert "1 kept, 3 re-computed" in report.summary()

    vectors = {
        r[0]: (np.asarray(r[1], dtype=np.float32) if r[1] is not None else None, r[2])
        for r in mem.store.fetchall(
            "SELECT e.id, v.embedding, e.embedding_model FROM events e"
            " LEFT JOIN event_vectors v USING (id)"
        )
    }
    kept, model = vectors["m-kept"]
    assert model == mem.model_name
    np.testing.assert_allclose(kept, written["same_dim"], rtol=1e-6)
    for ident, text in [
        ("m-olddim", "Noted, the deadline is in March"),
        ("m-missing", "calendar.create -> ok"),
        ("m-broken", "I love TypeScript"),
    ]:
        vector, model = vectors[ident]
        assert model == mem.model_name
        assert vector.shape == (384,)
        np.testing.assert_allclose(vector, HASH.embed([text])[0], rtol=1e-5, atol=1e-6)
    # the failed one keeps its error and no vector until retried
    assert vectors["m-failed"] == (None, None)
    hits = mem.search("When is the deadline?", limit=2)
    assert "m-kept" in set(hits["id"])


def test_facts_macros_tasks_prefixes_keep_ids_and_later_inserts_do_not_collide(
    mem: Memory, agent_db
) -> None:
    path, _ = agent_db
    report = mem.import_sqlite(path, namespace="agent")
    assert (report.facts, report.macros, report.scheduled_tasks) == (1, 1, 1)
    assert report.terminal_allowed_prefixes == 2
    fact = mem.store.records("SELECT * FROM facts")[0]
    assert (fact["id"], fact["namespace"], fact["key"], fact["value"]) == (
        7,
        "agent",
        "deadline",
        "March 3rd",
    )
    assert str(fact["updated_at"]) == "2024-05-08 15:00:00"
    macro = mem.store.records("SELECT * FROM macros")[0]
    assert (macro["id"], macro["next_args"], macro["used_count"]) == (12, "--stat", 4)
    task = mem.store.records("SELECT * FROM scheduled_tasks")[0]
    assert task["id"] == "t-1" and task["is_paused"] is True and task["is_oneshot"] is False
    assert task["last_run_at"] is None
    prefixes = {r[0] for r in mem.store.fetchall("SELECT prefix FROM terminal_allowed_prefixes")}
    # kept as mem.prefixes.add keeps it: 'git ' allowed nothing ('git status' does not
    # start with 'git  '); 'git' allows 'git status'
    assert prefixes == {"git", "ls"}
    assert mem.prefixes.allows("git status")
    # the sequences moved past the imported ids: a new fact gets a fresh id
    new_id = mem.store.fetchone(
        "INSERT INTO facts (namespace, category, key, value, created_at, updated_at)"
        " VALUES ('agent', 'x', 'y', 'z', now()::TIMESTAMP, now()::TIMESTAMP) RETURNING id"
    )[0]
    assert new_id > 7
    assert int(mem.store.fetchone("SELECT nextval('macros_id_seq')")[0]) > 12


def test_importing_twice_adds_nothing_and_is_audited(mem: Memory, agent_db) -> None:
    path, _ = agent_db
    mem.import_sqlite(path)
    again = mem.import_sqlite(path)
    assert again.events == 0 and again.facts == 0
    assert again.skipped_existing == {
        "events": 5,
        "facts": 1,
        "macros": 1,
        "scheduled_tasks": 1,
        "terminal_allowed_prefixes": 2,
    }
    assert mem.store.fetchone("SELECT count(*) FROM events")[0] == 5
    audit = mem.audit_log(action="import_sqlite")
    assert len(audit) == 2
    assert sorted(audit["target_ids"].iloc[-1]) == [
        "m-broken",
        "m-failed",
        "m-kept",
        "m-missing",
        "m-olddim",
    ]
    assert json.loads(audit["details"].iloc[-1])["embeddings_kept"] == 1


def test_legacy_messages_table(mem: Memory, tmp_path: Path) -> None:
    path = tmp_path / "old-agent.db"
    build_agent_db(path, table="messages")
    report = mem.import_sqlite(path)
    assert report.sources == ["messages"]
    assert report.events == 5
    assert mem.get_event("m-kept").importance == pytest.approx(0.9)


def test_a_bad_row_stores_nothing_and_names_the_row(mem: Memory, tmp_path: Path) -> None:
    path = tmp_path / "bad.db"
    build_agent_db(path)
    con = sqlite3.connect(path)
    con.execute(
        "INSERT INTO events (id, session_id, role, content, created_at, importance)"
        " VALUES ('m-bad', 's1', 'user', 'x', 'yesterday-ish', 0.5)"
    )
    con.commit()
    con.close()
    with pytest.raises(InvalidInput, match="m-bad.*created_at"):
        mem.import_sqlite(path)
    assert mem.store.fetchone("SELECT count(*) FROM events")[0] == 0
    assert mem.store.fetchone("SELECT count(*) FROM facts")[0] == 0


@pytest.mark.parametrize(
    ("statement", "words"),
    [
        (
            "UPDATE scheduled_tasks SET cron_expr = '0 0 30 2 *'",
            r"scheduled_tasks row 't-1': cron_expr '0 0 30 2 \*' never fires",
        ),
        ("UPDATE scheduled_tasks SET name = ''", "scheduled_tasks row 't-1': name must be"),
        ("UPDATE facts SET category = ''", "facts row 7: category must be a non-empty string"),
        ("UPDATE facts SET source = 'gossip'", "facts row 7: source must be one of"),
        ("UPDATE macros SET confidence = 2.5", "macros row 12: confidence must be a number"),
        (
            "UPDATE events SET content = NULL WHERE id = 'm-kept'",
            "events row 'm-kept': content is missing and there are no tool_calls",
        ),
        (
            "UPDATE events SET content = '  ' WHERE id = 'm-kept'",
            "events row 'm-kept': content is empty",
        ),
    ],
)
def test_a_row_the_api_would_refuse_stores_nothing(
    mem: Memory, tmp_path: Path, statement: str, words: str
) -> None:
    """Each row is checked as the API that makes it (and an export's rows) are checked."""
    path = tmp_path / "agent.db"
    build_agent_db(path)
    con = sqlite3.connect(path)
    con.execute(statement)
    con.commit()
    con.close()
    with pytest.raises(InvalidInput, match=words):
        mem.import_sqlite(path)
    for table in ("events", "facts", "macros", "scheduled_tasks", "terminal_allowed_prefixes"):
        assert mem.store.fetchone(f"SELECT count(*) FROM {table}")[0] == 0


def test_not_a_database_is_a_clear_error(mem: Memory, tmp_path: Path) -> None:
    text = tmp_path / "notes.db"
    text.write_text("this is not sqlite " * 100)
    with pytest.raises(InvalidInput, match="not a readable SQLite database"):
        mem.import_sqlite(text)
    with pytest.raises(InvalidInput, match="no SQLite database"):
        mem.import_sqlite(tmp_path / "missing.db")
    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).execute("CREATE TABLE other (x)").connection.close()
    with pytest.raises(InvalidInput, match="none of the agent's tables"):
        mem.import_sqlite(empty)


def test_the_source_file_is_not_changed(mem: Memory, agent_db) -> None:
    path, _ = agent_db
    before = path.read_bytes()
    mem.import_sqlite(path)
    assert path.read_bytes() == before


def test_cli_import_sqlite(agent_db, tmp_path: Path, capsys) -> None:
    path, _ = agent_db
    store = tmp_path / "research.duckdb"
    code = main(["import-sqlite", str(path), "--store", str(store), "--embedder", "hash"])
    out = capsys.readouterr().out
    assert code == 0
    assert "events: 5" in out and "1 kept, 3 re-computed" in out
    with Memory(str(store), embedder="hash") as again:
        assert again.status()["events"] == 5
    assert main(["import-sqlite", str(tmp_path / "nope.db"), "--store", str(store)]) == 1
    assert "no SQLite database" in capsys.readouterr().err
