"""Another application's DuckDB file is never written, wherever its objects live.

A file is nbmemory's when it is new (nothing in it), carries nbmemory's marker, or
is the Rust agent's v0.8 store.  These files are none of those: tables in a schema
of their own, only a sequence, a view, a macro or an enum type (in ``main`` or in
another schema), an ``nbmemory_meta`` that is not nbmemory's, a ``messages`` table
of another shape.  Each is refused in one line, writable or read-only, through
Python and the command line, and left byte-for-byte as it was.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from child_process import child_env

from nbmemory import Memory, StoreError
from nbmemory.store.migrations import SCHEMA_VERSION

#: ``crash``: run again under the oldest DuckDB the package allows (see ``.ci/run``).
pytestmark = pytest.mark.crash

#: Another application's file, by what it holds (and nothing else).
FOREIGN = {
    "table in its own schema": "CREATE SCHEMA crm; CREATE TABLE crm.customers (id INTEGER);"
    " INSERT INTO crm.customers VALUES (1)",
    "view in its own schema": "CREATE SCHEMA crm; CREATE VIEW crm.totals AS SELECT 42 AS n",
    "sequence": "CREATE SEQUENCE invoice_numbers START 100",
    "sequence in its own schema": "CREATE SCHEMA billing; CREATE SEQUENCE billing.numbers",
    "view": "CREATE VIEW answer AS SELECT 42 AS n",
    "macro": "CREATE MACRO add_one(x) AS x + 1",
    "table macro": "CREATE SCHEMA lib; CREATE MACRO lib.numbers() AS TABLE SELECT 1 AS n",
    "enum type": "CREATE TYPE mood AS ENUM ('happy', 'sad')",
    "enum type in its own schema": "CREATE SCHEMA app; CREATE TYPE app.mood AS ENUM ('ok')",
    "empty schema": "CREATE SCHEMA reserved",
    "messages of another shape": "CREATE TABLE messages (a INTEGER, b VARCHAR);"
    " INSERT INTO messages VALUES (1, 'hello')",
}
#: Files with an ``nbmemory_meta`` that nbmemory did not write, and why it is not ours.
FOREIGN_META = {
    "another format": (
        "CREATE TABLE nbmemory_meta (key VARCHAR PRIMARY KEY, value VARCHAR);"
        " INSERT INTO nbmemory_meta VALUES ('format', 'otherapp'), ('schema_version', '1')",
        "says format 'otherapp'",
    ),
    "no primary key": (
        "CREATE TABLE nbmemory_meta (key VARCHAR, value VARCHAR);"
        " INSERT INTO nbmemory_meta VALUES ('schema_version', '1')",
        "no primary key on key",
    ),
    "other columns": (
        "CREATE TABLE nbmemory_meta (name VARCHAR PRIMARY KEY, setting VARCHAR)",
        "has the columns name, setting, not key and value",
    ),
    "no marker": (
        "CREATE TABLE nbmemory_meta (key VARCHAR PRIMARY KEY, value VARCHAR);"
        " INSERT INTO nbmemory_meta VALUES ('theme', 'dark')",
        "holds no format marker",
    ),
}


def _make(path: Path, sql: str) -> None:
    con = duckdb.connect(str(path))
    con.execute(sql)
    con.close()


def _fingerprint(path: Path) -> tuple[str, list[str], list[tuple]]:
    """The file's bytes, what lies beside it, and every object in it (read afterwards)."""
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    beside = sorted(os.listdir(path.parent))
    con = duckdb.connect(str(path), read_only=True)
    try:
        objects = con.execute(
            "SELECT 'table', schema_name, table_name FROM duckdb_tables() WHERE NOT internal"
            " UNION ALL SELECT 'view', schema_name, view_name FROM duckdb_views()"
            "  WHERE NOT internal"
            " UNION ALL SELECT 'sequence', schema_name, sequence_name FROM duckdb_sequences()"
            " UNION ALL SELECT 'macro', schema_name, function_name FROM duckdb_functions()"
            "  WHERE NOT internal AND function_type IN ('macro', 'table_macro')"
            " UNION ALL SELECT 'type', schema_name, type_name FROM duckdb_types()"
            "  WHERE NOT internal"
            " UNION ALL SELECT 'schema', schema_name, '' FROM duckdb_schemas() WHERE NOT internal"
            " ORDER BY ALL"
        ).fetchall()
    finally:
        con.close()
    return digest, beside, objects


def _refused(path: Path, **kwargs: object) -> str:
    with pytest.raises(StoreError) as refused:
        Memory(str(path), embedder="hash", **kwargs)  # type: ignore[arg-type]
    message = str(refused.value)
    assert "\n" not in message and "nothing was changed" in message
    return message


@pytest.mark.parametrize("kind", list(FOREIGN))
def test_another_applications_file_is_refused_wherever_its_objects_are(tmp_path, kind):
    path = tmp_path / "theirs.duckdb"
    _make(path, FOREIGN[kind])
    before = _fingerprint(path)
    message = _refused(path)
    assert "another application's DuckDB file" in message and "adopt=True" in message
    assert "another application's DuckDB file, not an nbmemory store" in _refused(
        path, read_only=True
    )
    assert "another application's DuckDB file" in _refused(path, shared=True)
    assert _fingerprint(path) == before


def test_the_refusal_names_what_the_file_holds(tmp_path):
    path = tmp_path / "theirs.duckdb"
    _make(path, FOREIGN["table in its own schema"] + "; " + FOREIGN["macro"])
    message = _refused(path)
    assert "(tables: crm.customers; macros: add_one)" in message


@pytest.mark.parametrize("kind", list(FOREIGN_META))
def test_an_nbmemory_meta_table_nbmemory_did_not_write_is_not_its_marker(tmp_path, kind):
    path = tmp_path / "theirs.duckdb"
    sql, why = FOREIGN_META[kind]
    _make(path, sql)
    before = _fingerprint(path)
    for kwargs in ({}, {"adopt": True}):
        message = _refused(path, **kwargs)
        assert "another application's DuckDB file" in message and why in message
        assert "adopt=True" not in message  # adopting it could not help: the name is ours
    assert why in _refused(path, read_only=True)
    assert _fingerprint(path) == before


def test_adopt_adds_nbmemory_beside_objects_in_any_schema(tmp_path):
    path = tmp_path / "theirs.duckdb"
    _make(path, FOREIGN["table in its own schema"] + "; " + FOREIGN["messages of another shape"])
    with Memory(str(path), embedder="hash", adopt=True) as mem:
        mem.add_event("s", "user", "beside the customers")
    with Memory(str(path), embedder="hash", read_only=True) as mem:  # ours from now on
        assert mem.events()["content"].tolist() == ["beside the customers"]
        assert not mem.store.catalog.table_exists("messages_migrated")
    con = duckdb.connect(str(path), read_only=True)
    assert con.execute("SELECT * FROM crm.customers").fetchall() == [(1,)]
    assert con.execute("SELECT * FROM messages").fetchall() == [(1, "hello")]  # not migrated
    con.close()


def test_adopt_never_takes_a_sequence_of_nbmemorys_name(tmp_path):
    path = tmp_path / "theirs.duckdb"
    _make(path, "CREATE TABLE orders (id INTEGER); CREATE SEQUENCE facts_id_seq START 7")
    before = _fingerprint(path)
    message = _refused(path, adopt=True)
    assert "with its own facts_id_seq sequence" in message
    assert _fingerprint(path) == before


def test_files_of_nbmemorys_own_still_open(tmp_path):
    """What is not another application's: a file DuckDB just made, one holding only
    nbmemory's sequences (a pull from a lake makes them first), and a store of an
    nbmemory from before the marker (its schema version only)."""
    fresh = tmp_path / "fresh.duckdb"
    duckdb.connect(str(fresh)).close()
    sequences = tmp_path / "sequences.duckdb"
    _make(sequences, "CREATE SEQUENCE facts_id_seq START 5; CREATE SEQUENCE events_seq START 3")
    for path in (fresh, sequences):
        with Memory(str(path), embedder="hash") as mem:
            assert mem.add_event("s", "user", "hello").id
    with Memory(str(sequences), embedder="hash") as mem:
        assert mem.facts.set("user", "name", "John")["id"] == 5
    unmarked = tmp_path / "unmarked.duckdb"
    with Memory(str(unmarked), embedder="hash") as mem:
        mem.add_event("s", "user", "written before the marker")
    _make(unmarked, "DELETE FROM nbmemory_meta WHERE key = 'format'")
    with Memory(str(unmarked), embedder="hash") as mem:
        assert len(mem.events()) == 1
        assert mem.store.meta.get("format") == "nbmemory"  # marked now
        assert mem.store.catalog.schema_version() == SCHEMA_VERSION


# -- the command line ----------------------------------------------------------------------
def _cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nbmemory", *argv],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=child_env(),
        timeout=300,
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "command",
    [
        ["state", "import", "--input", "EXPORT"],
        ["demo"],
        ["memory", "purge"],
        ["state", "list"],
        ["health"],
    ],
    ids=lambda words: " ".join(words[:2]),
)
def test_the_command_line_refuses_it_in_one_line(tmp_path, command):
    export = tmp_path / "export.json"
    with Memory(":memory:", embedder="hash") as mem:
        mem.add_event("s", "user", "exported")
        mem.transfer.export_json(str(export))
    folder = tmp_path / "theirs"
    folder.mkdir()
    path = folder / "theirs.duckdb"
    _make(path, FOREIGN["table in its own schema"])
    before = _fingerprint(path)
    argv = [str(export) if word == "EXPORT" else word for word in command]
    done = _cli(*argv, "--store", str(path), "--embedder", "hash", cwd=tmp_path)
    said = done.stdout + done.stderr  # health reports on stdout, the others on stderr
    assert done.returncode == 1, said
    assert said.count("\n") == 1 and "Traceback" not in said, said
    assert said.startswith("store      FAIL  " if command == ["health"] else "nbmemory: error: ")
    assert "another application's DuckDB file" in said
    assert _fingerprint(path) == before
