"""Files nbmemory is pointed at that are not its own: the store itself, a CSV, a SQLite
or another application's DuckDB file, a path DuckDB would open as an in-memory
database.  Each is refused in one line that says what to do, before a byte is
written: the file's bytes are the same after the call."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from IPython.core.error import UsageError

from nbmemory import InvalidInput, Memory
from nbmemory.cli import main
from nbmemory.errors import StoreError


def digest(path: Path | str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def others(tmp_path: Path) -> dict[str, Path]:
    """Files of other applications: a CSV, a SQLite database, a DuckDB database."""
    csv = tmp_path / "data.csv"
    csv.write_text("a,b\n1,2\n", encoding="utf-8")
    lite = tmp_path / "app.sqlite"
    with sqlite3.connect(lite) as con:
        con.execute("CREATE TABLE t (x)")
        con.execute("INSERT INTO t VALUES (1)")
    con.close()
    crm = tmp_path / "crm.duckdb"
    with duckdb.connect(str(crm)) as db:
        db.execute("CREATE TABLE customers (x INT)")
    return {"csv": csv, "sqlite": lite, "duckdb": crm}


# -- export ----------------------------------------------------------------------------
def test_export_refuses_the_store_own_file_and_its_wal(mem: Memory, store_path: str) -> None:
    mem.add_event("s1", "user", "before the export")
    mem.flush()
    before = digest(store_path)
    for target in (store_path, store_path + ".wal"):
        with pytest.raises(InvalidInput, match="this store's own file.*export.json"):
            mem.transfer.export_json(target)
    assert digest(store_path) == before
    mem.add_event("s1", "user", "after the export")
    mem.close()
    with Memory(store_path, embedder="hash") as again:  # nothing was lost
        assert len(again.events()) == 2


def test_export_refuses_databases_and_needs_overwrite_for_other_files(
    mem: Memory, others: dict[str, Path], tmp_path: Path
) -> None:
    mem.add_event("s1", "user", "hello")
    for kind in ("sqlite", "duckdb"):
        before = digest(others[kind])
        for overwrite in (False, True):
            with pytest.raises(InvalidInput, match="never replaces one.*ending in .json"):
                mem.transfer.export_json(others[kind], overwrite=overwrite)
        assert digest(others[kind]) == before
    with pytest.raises(InvalidInput, match="named like a database"):
        mem.transfer.export_json(tmp_path / "new.duckdb")  # JSON under a database's name
    assert not (tmp_path / "new.duckdb").exists()
    before = digest(others["csv"])
    with pytest.raises(InvalidInput, match="not an nbmemory export.*overwrite=True"):
        mem.transfer.export_json(others["csv"])
    assert digest(others["csv"]) == before
    assert mem.transfer.export_json(others["csv"], overwrite=True)["events"] == 1
    assert json.loads(others["csv"].read_text(encoding="utf-8"))["format"] == "nbmemory.export"


def test_export_replaces_an_earlier_export_and_an_empty_file(mem: Memory, tmp_path: Path) -> None:
    file = tmp_path / "backup.json"
    mem.add_event("s1", "user", "one")
    assert mem.transfer.export_json(file)["events"] == 1
    mem.add_event("s1", "user", "two")
    assert mem.transfer.export_json(file)["events"] == 2  # an export of ours is replaced
    empty = tmp_path / "made-by-mkstemp"
    empty.write_bytes(b"")
    assert mem.transfer.export_json(empty)["events"] == 2


def test_cli_export_refuses_the_store_and_other_files(
    capsys, tmp_path: Path, others: dict[str, Path]
) -> None:
    store = str(tmp_path / "agent.duckdb")
    with Memory(store, embedder="hash") as mem:
        mem.add_event("s", "user", "hello")
    for target in (store, str(others["duckdb"]), str(others["csv"])):
        before = digest(target)
        code, out, err = cli(capsys, "state", "export", "--store", store, "--output", target)
        assert code == 1 and out == "" and err.count("\n") == 1 and "nothing was written" in err
        assert digest(target) == before
    code, _, _ = cli(
        capsys, "state", "export", "--store", store, "--output", str(others["csv"]), "--force"
    )
    assert code == 0 and others["csv"].read_text(encoding="utf-8").startswith("{")


def test_magic_export_refuses_the_store_file(ip, magics, tmp_path: Path) -> None:
    ip.run_cell_magic("remember", "", "kept")
    store = magics.path
    magics.memory.flush()
    before = digest(store)
    with pytest.raises(UsageError, match="this store's own file"):
        ip.run_line_magic("memory", f"export {store}")
    assert digest(store) == before
    csv = tmp_path / "data.csv"
    csv.write_text("a\n1\n", encoding="utf-8")
    with pytest.raises(UsageError, match="--force"):
        ip.run_line_magic("memory", f"export {csv}")
    assert ip.run_line_magic("memory", f"export {csv} --force")["events"] == 1


# -- store paths -----------------------------------------------------------------------
@pytest.mark.parametrize("name", ["data.csv", "big.TSV", "export.json", "t.parquet", "l.jsonl.gz"])
@pytest.mark.parametrize("adopt", [False, True])
def test_a_name_duckdb_reads_as_a_table_is_no_store(tmp_path: Path, name: str, adopt: bool) -> None:
    """DuckDB (1.5, 2.x) opens an existing ``data.csv`` (not a DuckDB file) as an in-memory
    database with a view of it: every write would be lost at close."""
    file = tmp_path / name
    file.write_text("a,b\n" + "1,2\n" * 5000, encoding="utf-8")
    before = digest(file)
    for read_only in (False, True):
        if adopt and read_only:
            continue
        with pytest.raises(StoreError, match=r"reads as a table.*such as agent.duckdb"):
            Memory(str(file), embedder="hash", adopt=adopt, read_only=read_only)
    assert digest(file) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]
    with pytest.raises(StoreError, match="reads as a table"):  # nor a new store of that name
        Memory(str(tmp_path / "new.csv"), embedder="hash")
    assert not (tmp_path / "new.csv").exists()


def test_a_duckdb_store_under_a_table_name_still_opens(tmp_path: Path) -> None:
    """A store made under such a name (by DuckDB 1.x or renamed) is a database: kept."""
    with Memory(str(tmp_path / "agent.duckdb"), embedder="hash") as mem:
        mem.add_event("s", "user", "kept")
    (tmp_path / "agent.duckdb").rename(tmp_path / "memories.json")
    with Memory(str(tmp_path / "memories.json"), embedder="hash") as mem:
        assert mem.events()["content"].tolist() == ["kept"]


def test_a_store_path_ending_with_a_slash_creates_nothing(capsys, tmp_path: Path) -> None:
    path = str(tmp_path / "x.duckdb") + "/"
    with pytest.raises(StoreError, match=r"ends with '/'.*pass a file name"):
        Memory(path, embedder="hash")
    assert list(tmp_path.iterdir()) == []
    backup = tmp_path / "backup.json"
    with Memory(":memory:", embedder="hash") as mem:
        mem.add_event("s", "user", "hello")
        mem.transfer.export_json(backup)
    for store, words in ((path, "pass a file name"), (str(tmp_path / "d.csv"), "as a table")):
        code, _, err = cli(capsys, "state", "import", "--store", store, "--input", str(backup))
        assert code == 1 and err.count("\n") == 1 and words in err and "Traceback" not in err
        assert [p.name for p in tmp_path.iterdir()] == ["backup.json"]


# -- learnings -------------------------------------------------------------------------
def test_a_learning_goes_only_into_a_markdown_or_text_file(
    capsys, mem: Memory, store_path: str, others: dict[str, Path], tmp_path: Path
) -> None:
    mem.flush()
    py = tmp_path / "app.py"
    py.write_text("print(1)\n", encoding="utf-8")
    blob = tmp_path / "blob"
    blob.write_bytes(b"\x00\x01binary")
    cases = {
        Path(store_path): "a DuckDB database",
        others["duckdb"]: "a DuckDB database",
        others["sqlite"]: "a SQLite database",
        others["csv"]: "a .csv file, not Markdown",
        py: "a .py file, not Markdown",
        blob: "not a text file",
    }
    for file, reason in cases.items():
        before = digest(file)
        with pytest.raises(InvalidInput, match=f"{reason}.*such as AGENTS.md"):
            mem.agents_md.add_learning("Prefs", "short answers", path=file)
        assert digest(file) == before
    with pytest.raises(InvalidInput, match="named like a database"):
        mem.agents_md.add_learning("Prefs", "short answers", path=tmp_path / "new.sqlite")
    assert not (tmp_path / "new.sqlite").exists()
    rules = tmp_path / ".cursorrules"  # a text file with no suffix is fine
    rules.write_text("# Rules\n", encoding="utf-8")
    assert mem.agents_md.add_learning("Prefs", "short answers", path=rules).learning
    assert "- short answers" in rules.read_text(encoding="utf-8")
    mem.close()
    before = digest(others["csv"])
    code, out, err = cli(
        capsys, "memory", "learn", "--store", store_path, "--section", "Prefs", "--text", "x",
        "--file", str(others["csv"]),
    )  # fmt: skip
    assert code == 1 and err.count("\n") == 1 and "not Markdown" in err
    assert digest(others["csv"]) == before


def test_syncing_the_store_file_is_refused_and_keeps_its_lock(mem: Memory, store_path: str) -> None:
    """Reading the store file with a plain open() and close() dropped DuckDB's lock on it
    (POSIX locks go with any descriptor of the file): another process could then write."""
    mem.add_event("s", "user", "hello")
    mem.flush()
    probe = [sys.executable, "-c", f"import duckdb; duckdb.connect({store_path!r}).close()"]
    with pytest.raises(InvalidInput, match="is a DuckDB database, not an AGENTS.md"):
        mem.agents_md.sync(store_path)
    assert subprocess.run(probe, capture_output=True, timeout=60).returncode != 0  # still held
    assert mem.events()["content"].tolist() == ["hello"]


# -- configuration files ---------------------------------------------------------------
def test_config_and_ipython_config_under_a_file_are_one_line(capsys, tmp_path: Path) -> None:
    csv = tmp_path / "data.csv"
    csv.write_text("a,b\n", encoding="utf-8")
    before = digest(csv)
    for argv in (
        ["config", "set", "--file", str(csv / "nbmemory.toml"), "state.audit.retain_days", "5"],
        ["install-ipython-config", "--ipython-dir", str(csv)],
        ["install-ipython-config", "--ipython-dir", str(csv / "deeper")],
    ):
        code, out, err = cli(capsys, *argv)
        assert code == 1 and out == "" and err.count("\n") == 1, err
        assert "cannot write" in err and "a folder you can write" in err
    assert digest(csv) == before and sorted(p.name for p in tmp_path.iterdir()) == ["data.csv"]


@pytest.mark.parametrize("name", ["agent.duckdb", "notes.sqlite", "crm.duckdb"])
def test_config_set_never_writes_a_database(
    capsys, tmp_path: Path, others: dict[str, Path], name: str
) -> None:
    file = others["duckdb"] if name == "crm.duckdb" else tmp_path / name
    if not file.exists():
        file.write_bytes(b"")  # empty: TOML would parse it; nbmemory opens it as a new store
    before = digest(file)
    code, _, err = cli(capsys, "config", "set", "--file", str(file), "state.audit.retain_days", "5")
    assert code == 1 and err.count("\n") == 1 and "not a configuration file" in err
    assert "Pass nbmemory.toml" in err and digest(file) == before
