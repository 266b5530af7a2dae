"""A store written under one DuckDB release the package allows opens under the others.

``pyproject.toml`` allows duckdb 1.5.5 (what the ``[lake]`` extra pins) to 2.0.x, and
installing the extra moves a user from one to the other.  DuckDB 2.0 writes a file
format 1.5 cannot read unless told otherwise: nbmemory writes every new store in the
format of the oldest allowed release (``files.STORAGE_VERSION``).

These tests run a second DuckDB release in child processes: ``NBMEMORY_DUCKDB_FLOOR``
names a folder holding it (``pip install --target DIR duckdb==1.5.5``; ``.ci/run``
makes one, and runs them under every release the range allows).  Without it they
are skipped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import duckdb
import pytest
from child_process import child_env

from nbmemory import Memory, StoreError

FLOOR = os.environ.get("NBMEMORY_DUCKDB_FLOOR", "")

pytestmark = [
    pytest.mark.crash,
    pytest.mark.slow,
    pytest.mark.skipif(
        not FLOOR,
        reason="set NBMEMORY_DUCKDB_FLOOR to a folder holding the oldest allowed duckdb "
        "(pip install --target DIR duckdb==1.5.5); .ci/run does",
    ),
]

#: Runs under the floor release: opens the store, prints what it reads, writes a row.
UNDER_FLOOR = """
import json, sys
import duckdb
from nbmemory import Memory, StoreError
path, write = sys.argv[1], sys.argv[2] == "write"
try:
    with Memory(path, embedder="hash") as mem:
        if write:
            mem.add_event("s", "user", "written under the floor release")
            mem.flush()
        out = {
            "version": duckdb.__version__,
            "contents": sorted(mem.events()["content"]),
            "facts": mem.facts()["value"].tolist(),
            "hit": mem.search("cat on the mat", limit=1, mode="vector")["content"].tolist(),
        }
except StoreError as exc:
    out = {"version": duckdb.__version__, "error": str(exc)}
print(json.dumps(out))
"""


def _under_floor(path: str, *, write: bool = False) -> dict:
    env = child_env()
    env["PYTHONPATH"] = os.pathsep.join([FLOOR, env["PYTHONPATH"]])  # the floor first
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(UNDER_FLOOR), path, "write" if write else "read"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    answer: dict = json.loads(result.stdout.strip().splitlines()[-1])
    assert answer["version"] != duckdb.__version__ or duckdb.__version__.startswith("1.5")
    return answer


def test_a_store_written_here_opens_under_the_oldest_allowed_duckdb(tmp_path):
    path = str(tmp_path / "written-here.duckdb")
    with Memory(path, embedder="hash") as mem:
        mem.add_event("s", "user", "the cat sat on the mat")
        mem.set_fact("pets", "cat", "Tom")
        mem.flush()
        mem.purge()  # the file rewritten through ATTACH, in the same format
    answer = _under_floor(path, write=True)
    assert answer.get("error") is None, answer
    assert answer["contents"] == ["the cat sat on the mat", "written under the floor release"]
    assert answer["facts"] == ["Tom"] and answer["hit"] == ["the cat sat on the mat"]
    with Memory(path, embedder="hash") as mem:  # and back: both releases keep writing it
        assert sorted(mem.events()["content"]) == [
            "the cat sat on the mat",
            "written under the floor release",
        ]


def test_a_file_in_a_newer_duckdb_format_is_refused_by_name_and_left_alone(tmp_path):
    if duckdb.__version__.startswith("1."):
        pytest.skip("this DuckDB writes no format newer than the floor's")
    path = str(tmp_path / "newer-format.duckdb")
    con = duckdb.connect(path)  # DuckDB 2's own format, as a store made before the fix was
    con.execute("CREATE TABLE scratch (a INTEGER)")
    con.close()
    before = Path(path).read_bytes()
    answer = _under_floor(path)
    assert "written by a newer DuckDB" in answer["error"]
    assert "nothing was changed" in answer["error"]
    assert Path(path).read_bytes() == before
    with pytest.raises(StoreError, match="another application's DuckDB file"):
        Memory(path, embedder="hash")  # this release reads it; it is not ours either
