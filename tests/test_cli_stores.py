"""The stores of the ``nbmemory`` command line: ``--shared`` on every command that
opens one, a held store refused in the command line's words, and no new store
left behind by a command that fails (an existing one is never removed)."""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from child_process import child_env, expect, spawn

from nbmemory import Memory, StoreError, StoreLocked
from nbmemory.cli import build_parser, main
from nbmemory.cli.options import in_cli_words
from nbmemory.cli.stores import opened
from nbmemory.facade.groups import TransferGroup
from nbmemory.store import SharedStore

pytestmark = pytest.mark.timeout(600)

HANG = 300


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _leaves(
    parser: argparse.ArgumentParser, prefix: str = ""
) -> dict[str, argparse.ArgumentParser]:
    """Every command of ``parser`` that runs something, by its words (``state list``)."""
    found = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.update(_leaves(sub, f"{prefix} {name}".strip()))
    if not found and prefix:
        found[prefix] = parser
    return found


# -- --shared ---------------------------------------------------------------------------------
def test_every_command_that_opens_a_store_takes_shared():
    commands = _leaves(build_parser())
    on_a_store = {
        name for name, parser in commands.items() if "--store" in parser._option_string_actions
    }
    lake = {name for name in on_a_store if name.startswith("lake ")}  # a lake is always shared
    assert on_a_store - lake >= {
        "demo", "health", "import-sqlite", "eval locomo", "memory sync", "memory purge",
        "memory reembed", "state list", "state cleanup", "state delete", "state export",
        "state import",
    }  # fmt: skip
    for name in on_a_store - lake:
        options = commands[name]._option_string_actions
        assert "--shared" in options and "--no-shared" in options, name
        assert options["--shared"] is options["--no-shared"]  # one definition, in options.py


def test_shared_follows_the_option_then_the_environment(tmp_path, monkeypatch):
    path = str(tmp_path / "modes.duckdb")
    args = lambda shared: argparse.Namespace(shared=shared, embedder="hash")  # noqa: E731
    monkeypatch.setenv("NBMEMORY_SHARED", "1")
    for shared, expected in ((None, True), (False, False), (True, True)):
        with opened(args(shared), path) as mem:
            assert isinstance(mem.store, SharedStore) is expected, shared
    monkeypatch.delenv("NBMEMORY_SHARED")
    with opened(args(None), path) as mem:
        assert not isinstance(mem.store, SharedStore)


def test_shared_without_a_store_file_is_bad_input(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("NBMEMORY_MODEL_PATH", "/no/model/here")  # said before the model loads
    conversation = tmp_path / "conv.json"
    conversation.write_text("{}")
    for argv in (["demo", "--shared"], ["eval", "locomo", str(conversation), "--shared"]):
        code, _, err = run(capsys, *argv)
        assert code == 1 and err.count("\n") == 1, err
        assert "--shared needs a store file: pass --store PATH" in err


HOLDER = """
import os, sys
from nbmemory import Memory
mem = Memory(sys.argv[1], embedder="hash")
print("ready", os.getpid(), flush=True)
sys.stdin.readline()
"""


@pytest.mark.slow
def test_a_held_store_is_refused_with_the_command_lines_remedies(tmp_path, capsys):
    path = str(tmp_path / "held.duckdb")
    Memory(path, embedder="hash").close()
    holder = spawn(HOLDER, path)
    try:
        pid = expect(holder, "ready")
        code, _, err = run(capsys, "state", "list", "--store", path)
        assert code == 1 and err.count("\n") == 1
        assert err.startswith(f"nbmemory: error: the store {path} is in use by process {pid}")
        assert "--shared (or NBMEMORY_SHARED=1)" in err and "pass another --store" in err
        assert "mem.close()" not in err  # the Python API's words are not the remedy here
        code, out, _ = run(capsys, "health", "--store", path, "--embedder", "hash")
        assert code == 1
        store_line = next(line for line in out.splitlines() if line.startswith("store"))
        assert "FAIL" in store_line and "--shared" in store_line
    finally:
        holder.kill()
        holder.wait(timeout=HANG)
    # a command without --shared (lake push copies a file no one may use meanwhile)
    locked = StoreLocked(path, 4242)
    assert in_cli_words(locked, argparse.Namespace(file=path)).endswith(
        "close the other process (its Memory, or its kernel), then run this again."
    )


# -- failed commands leave no new store ------------------------------------------------------
def _fail_after_writing(
    monkeypatch, method: str, error: BaseException, owner: type = Memory
) -> None:
    """``<owner>.<method>`` (``Memory``'s, or a group's) does its work, then the command fails."""
    real = getattr(owner, method)

    def failing(self, *args, **kwargs):
        real(self, *args, **kwargs)
        raise error

    monkeypatch.setattr(owner, method, failing)


@pytest.mark.parametrize("shared", [False, True], ids=["alone", "shared"])
def test_a_demo_that_fails_after_writing_leaves_no_store(tmp_path, capsys, monkeypatch, shared):
    _fail_after_writing(monkeypatch, "get_context", StoreError("the disk went away"))
    path = str(tmp_path / "demo.duckdb")
    code, _, err = run(
        capsys, "demo", "--store", path, "--embedder", "hash", *(["--shared"] if shared else [])
    )
    assert code == 1 and "the disk went away" in err
    assert os.listdir(tmp_path) == []  # no store, WAL, saved indexes or lock files
    monkeypatch.undo()  # the next run starts afresh instead of "nothing added"
    code, out, _ = run(capsys, "demo", "--store", path, "--embedder", "hash")
    assert code == 0 and "remembered 7 events" in out


def test_an_interrupted_import_leaves_no_new_store(tmp_path, capsys, monkeypatch):
    source = str(tmp_path / "source.duckdb")
    export = str(tmp_path / "export.json")
    with Memory(source, embedder="hash") as mem:
        mem.add_event("s", "user", "exported")
        mem.export_json(export)
    os.remove(source)
    _fail_after_writing(monkeypatch, "import_json", KeyboardInterrupt(), TransferGroup)
    target = str(tmp_path / "target.duckdb")
    code, _, err = run(capsys, "state", "import", "--store", target, "--input", export,
                       "--embedder", "hash")  # fmt: skip
    assert code == 130 and "interrupted" in err
    assert sorted(os.listdir(tmp_path)) == ["export.json"]


@pytest.mark.parametrize("kind", ["not an export", "a crafted event"])
def test_a_refused_import_makes_no_store_and_changes_none(tmp_path, capsys, kind):
    bad = tmp_path / "bad.json"
    if kind == "not an export":
        bad.write_text(json.dumps({"hello": "world"}))
    else:
        event = {"id": "e1", "session_id": "s", "role": "user", "content": 42}
        bad.write_text(json.dumps({"format": "nbmemory.export", "version": 1, "events": [event]}))
    new = str(tmp_path / "new.duckdb")
    code, _, err = run(capsys, "state", "import", "--store", new, "--input", str(bad),
                       "--embedder", "hash")  # fmt: skip
    assert code == 1 and err.count("\n") == 1
    assert sorted(os.listdir(tmp_path)) == ["bad.json"]
    existing = str(tmp_path / "existing.duckdb")  # an existing store is never removed
    with Memory(existing, embedder="hash") as mem:
        kept = mem.add_event("s", "user", "kept").id
    code, _, _ = run(capsys, "state", "import", "--store", existing, "--input", str(bad),
                     "--embedder", "hash")  # fmt: skip
    assert code == 1
    with Memory(existing, embedder="hash", read_only=True) as mem:
        assert list(mem.events()["id"]) == [kept]


def test_an_sqlite_import_that_fails_after_writing_leaves_no_new_store(
    tmp_path, capsys, monkeypatch
):
    agent = tmp_path / "agent.db"
    con = sqlite3.connect(agent)
    con.execute(
        "CREATE TABLE messages (id TEXT PRIMARY KEY, session_id TEXT, role TEXT, content TEXT,"
        " created_at TEXT)"
    )
    con.execute(
        "INSERT INTO messages VALUES ('m1', 's', 'user', 'from the agent', '2024-05-01T09:00:00Z')"
    )
    con.commit()
    con.close()
    _fail_after_writing(
        monkeypatch, "import_sqlite", StoreError("the disk went away"), TransferGroup
    )
    code, _, err = run(capsys, "import-sqlite", str(agent), "--store", str(tmp_path / "new.duckdb"),
                       "--embedder", "hash")  # fmt: skip
    assert code == 1 and "the disk went away" in err  # it wrote, then the command failed
    assert sorted(os.listdir(tmp_path)) == ["agent.db"]


def test_an_evaluation_into_a_new_store_that_fails_leaves_none(tmp_path, capsys):
    notes = tmp_path / "notes.json"
    notes.write_text("my notes, not a conversation")
    code, _, err = run(capsys, "eval", "locomo", str(notes), "--store",
                       str(tmp_path / "eval.duckdb"), "--embedder", "hash")  # fmt: skip
    assert code == 1 and "LoCoMo" in err
    assert sorted(os.listdir(tmp_path)) == ["notes.json"]


# -- ... unless another process used it meanwhile --------------------------------------------
JOINER = """
import sys
from nbmemory import Memory
mem = Memory(sys.argv[1], embedder="hash", shared=True)
mem.add_event("other", "user", "written by another kernel")
if sys.argv[2] == "stay":
    print("ready", flush=True)
    sys.stdin.readline()
mem.close()
print("closed", flush=True)
"""


@pytest.mark.slow
@pytest.mark.parametrize("other", ["wrote and left", "stays open"])
def test_a_new_store_another_process_used_meanwhile_is_kept(tmp_path, capsys, monkeypatch, other):
    path = str(tmp_path / "joined.duckdb")
    children = []
    real = Memory.get_context

    def another_kernel_joins(self, *args, **kwargs):
        child = spawn(JOINER, path, "stay" if other == "stays open" else "leave")
        children.append(child)
        expect(child, "ready" if other == "stays open" else "closed")
        real(self, *args, **kwargs)
        raise StoreError("the disk went away")

    monkeypatch.setattr(Memory, "get_context", another_kernel_joins)
    try:
        code, _, err = run(capsys, "demo", "--store", path, "--embedder", "hash", "--shared")
        assert code == 1
        why = "another process has it open" if other == "stays open" else "another process wrote"
        assert f"nbmemory: note: kept the new store {path}: {why}" in err
    finally:
        for child in children:
            if other == "stays open":
                child.stdin.write("go\n")
                child.stdin.flush()
            assert child.wait(timeout=HANG) == 0, child.stderr.read()
            for stream in (child.stdin, child.stdout, child.stderr):
                stream.close()
    with Memory(path, embedder="hash", read_only=True) as mem:
        assert "written by another kernel" in set(mem.events()["content"])


@pytest.mark.slow
def test_the_console_script_without_a_model_leaves_no_store(tmp_path):
    """The command as a user runs it: a model folder that is not there, no store made."""
    env = child_env(NBMEMORY_MODEL_PATH=str(tmp_path / "no-model-here"))
    script = Path(sys.executable).with_name("nbmemory")
    done = subprocess.run(
        [str(script), "demo", "--store", "nbmemory.duckdb"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=HANG,
    )  # fmt: skip
    assert done.returncode == 1 and "is not a directory" in done.stderr
    assert os.listdir(tmp_path) == []
