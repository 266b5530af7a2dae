"""The main job: ``nbmemory demo`` on the embedded DuckDB default."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from nbmemory.cli import main
from nbmemory.cli.demo import DEMO_CONVERSATION


def test_demo_prints_search_and_context(capsys, tmp_path):
    store = tmp_path / "demo.duckdb"
    assert main(["demo", "--store", str(store), "--embedder", "hash"]) == 0
    out = capsys.readouterr().out
    assert "search('What language do I like?')" in out
    assert "get_context('demo'" in out and "prompt for the agent" in out
    con = duckdb.connect(str(store), read_only=True)
    try:
        count = con.execute(
            "SELECT count(*), (SELECT count(*) FROM event_vectors) FROM events"
        ).fetchone()
    finally:
        con.close()
    assert count == (len(DEMO_CONVERSATION), len(DEMO_CONVERSATION))


def test_demo_twice_on_one_file_adds_nothing_the_second_time(capsys, tmp_path):
    store = str(tmp_path / "demo.duckdb")
    assert main(["demo", "--store", store, "--embedder", "hash"]) == 0
    first = capsys.readouterr().out
    assert main(["demo", "--store", store, "--embedder", "hash"]) == 0
    second = capsys.readouterr().out
    assert "already in this store: nothing added" in second
    context = lambda out: out.split("get_context(")[1]  # noqa: E731
    assert context(first) == context(second)  # the same context, not doubled
    con = duckdb.connect(store, read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM events").fetchone()[0] == len(DEMO_CONVERSATION)
    finally:
        con.close()


def test_demo_help_says_where_the_store_is(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["demo", "--help"])
    assert exit_.value.code == 0
    assert "a store in memory, kept nowhere" in " ".join(capsys.readouterr().out.split())


@pytest.mark.slow
def test_demo_with_the_real_model_as_a_console_script(tmp_path, model_path):
    env = dict(os.environ, NBMEMORY_MODEL_PATH=model_path)
    script = Path(sys.executable).with_name("nbmemory")
    result = subprocess.run(
        [str(script), "demo", "--store", str(tmp_path / "d.duckdb")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    first_hit = result.stdout.split("search(")[1].splitlines()[1]
    assert "TypeScript" in first_hit


def test_cli_errors_are_one_line_and_nonzero(tmp_path, capsys):
    assert main(["demo", "--store", str(tmp_path / "no" / "dir.duckdb"), "--embedder", "hash"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("nbmemory: error:") and "\n" not in err
