"""Store paths as people write them: ``~/agent.duckdb``, bytes, and what is no path.

DuckDB expands a leading ``~`` itself; nbmemory's own checks and the files it makes
beside a store (the new file it links into place, lock files, saved indexes) did
not, so a store under ``~`` failed half-made.  The path is now expanded once, where
it comes in (``Memory``, ``--store``, a lake's pull and push), and every step looks
where DuckDB opens.  Every test runs with a fake ``$HOME``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from child_process import child_env

from nbmemory import InvalidInput, Memory, StoreError
from nbmemory.store.lake import transfer


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """A fake home folder, and a working folder apart from it (where nothing may land)."""
    folder = tmp_path / "home"
    folder.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("HOME", str(folder))
    monkeypatch.chdir(work)
    return folder


def _left_over(*folders: Path) -> list[str]:
    """Names in ``folders`` a half-made store leaves: its temporary new file, a stray ``~``."""
    return [
        name
        for folder in folders
        for name in os.listdir(folder)
        if ".nbmemory-new-" in name or name.startswith("~")
    ]


# -- ~ -------------------------------------------------------------------------------------
@pytest.mark.parametrize("shared", [False, True], ids=["alone", "shared"])
def test_a_store_under_the_home_folder_lands_there_and_leaves_nothing_else(home, shared):
    with Memory("~/agent.duckdb", embedder="hash", shared=shared) as mem:
        assert mem.path == str(home / "agent.duckdb")
        mem.add_event("s", "user", "kept at home")
        mem.flush()
    assert (home / "agent.duckdb").is_file()
    assert not _left_over(home, Path.cwd()) and os.listdir(Path.cwd()) == []
    with Memory(Path("~/agent.duckdb"), embedder="hash", read_only=True) as mem:
        assert mem.events()["content"].tolist() == ["kept at home"]


def test_a_tilde_that_names_no_user_is_a_folder_of_that_name(home):
    """``~nobody-here/x``: no user's home, so a folder of that name (here, missing);
    DuckDB alone would have opened ``$HOME`` + ``nobody-here/x``."""
    with pytest.raises(StoreError, match="does not exist") as refused:
        Memory("~nbmemory-no-such-user/agent.duckdb", embedder="hash")
    assert str(Path.cwd() / "~nbmemory-no-such-user") in str(refused.value)
    assert os.listdir(home) == [] and os.listdir(Path.cwd()) == []
    assert sorted(os.listdir(home.parent)) == ["home", "work"]


def test_nbmemory_path_under_the_home_folder(home, monkeypatch):
    monkeypatch.setenv("NBMEMORY_PATH", "~/from-env.duckdb")
    with Memory(embedder="hash") as mem:
        assert mem.path == str(home / "from-env.duckdb")
    assert not _left_over(home, Path.cwd())


def test_a_lake_pull_looks_for_the_file_under_the_home_folder(home):
    (home / "taken.duckdb").write_bytes(b"mine")
    with pytest.raises(StoreError, match=f"{home / 'taken.duckdb'} already exists"):
        transfer.pull("ducklake:postgres:dbname=nbmemory_nowhere", "~/taken.duckdb")
    assert (home / "taken.duckdb").read_bytes() == b"mine"


def _cli(*argv: str | bytes, home: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nbmemory", *argv],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=child_env(HOME=str(home)),
        timeout=300,
    )


@pytest.mark.slow
def test_the_command_line_expands_the_home_folder_of_store(home, tmp_path):
    export = tmp_path / "export.json"
    with Memory(":memory:", embedder="hash") as mem:
        mem.add_event("s", "user", "imported at home")
        mem.transfer.export_json(str(export))
    work = Path.cwd()
    done = _cli("state", "import", "--input", str(export), "--store", "~/imported.duckdb",
                "--embedder", "hash", home=home, cwd=work)  # fmt: skip
    assert done.returncode == 0, done.stderr
    done = _cli("demo", "--store", "~/demo.duckdb", "--embedder", "hash", home=home, cwd=work)
    assert done.returncode == 0, done.stderr
    assert f"store: {home / 'demo.duckdb'}" in done.stdout
    done = _cli("state", "list", "--store", "~/imported.duckdb", home=home, cwd=work)
    assert done.returncode == 0 and "s" in done.stdout, done.stderr
    assert sorted(n for n in os.listdir(home) if n.endswith(".duckdb")) == [
        "demo.duckdb",
        "imported.duckdb",
    ]
    assert not _left_over(home, work) and os.listdir(work) == []
    with Memory(str(home / "imported.duckdb"), embedder="hash", read_only=True) as mem:
        assert mem.events()["content"].tolist() == ["imported at home"]


# -- what a path is --------------------------------------------------------------------------
def test_a_path_given_as_bytes_is_the_same_store(home):
    path = home / "agent.duckdb"
    with Memory(os.fsencode(path), embedder="hash") as mem:
        assert mem.path == str(path)
        mem.add_event("s", "user", "opened by bytes")
    with Memory(b"~/agent.duckdb", embedder="hash", read_only=True) as mem:
        assert mem.events()["content"].tolist() == ["opened by bytes"]
    assert os.listdir(Path.cwd()) == []


@pytest.mark.parametrize(
    "path",
    [5, 2.5, True, ["agent.duckdb"], object()],
    ids=["int", "float", "bool", "list", "object"],
)
def test_what_is_no_path_is_refused_in_one_line_and_makes_no_file(home, path):
    with pytest.raises(InvalidInput, match="must be a file path") as refused:
        Memory(path, embedder="hash")
    assert "\n" not in str(refused.value)
    assert os.listdir(Path.cwd()) == [] and os.listdir(home) == []


@pytest.mark.parametrize(
    "path", ["a\udc80b.duckdb", b"a\x80b.duckdb"], ids=["lone surrogate", "undecodable byte"]
)
def test_a_name_that_is_not_unicode_is_refused_in_one_line_and_makes_no_file(home, path):
    with pytest.raises(InvalidInput, match="is not valid Unicode") as refused:
        Memory(path, embedder="hash")
    assert "\n" not in str(refused.value)
    assert os.listdir(Path.cwd()) == [] and os.listdir(home) == []


def test_memory_and_paths_still_open_as_before(home):
    with Memory(":memory:", embedder="hash") as mem:
        assert mem.path == ":memory:" and mem.add_event("s", "user", "hi").id
    with Memory(Path("agent.duckdb"), embedder="hash") as mem:
        assert mem.path == "agent.duckdb"  # a relative path stays as given
    assert (Path.cwd() / "agent.duckdb").is_file()


@pytest.mark.slow
def test_the_command_line_refuses_a_store_name_that_is_not_unicode(home):
    work = Path.cwd()
    done = _cli("demo", "--store", os.fsencode(work / "a\udc80b.duckdb"), "--embedder", "hash",
                home=home, cwd=work)  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.startswith("nbmemory: error: the store path ") and (
        done.stderr.count("\n") == 1
    ), done.stderr
    assert os.listdir(work) == []
