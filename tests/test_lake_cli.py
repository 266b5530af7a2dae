"""``nbmemory lake ...``: status, snapshots, compact, expire, and push/pull between a file
and a lake that keep every row, field and vector bit (a real PostgreSQL catalog).

The tests that take ``lake_url`` are lake tests (run by ``.ci/run`` in ``.venv-lake``);
the ones without a lake run everywhere.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from nbmemory import Memory
from nbmemory.cli import main
from nbmemory.store import open_store
from nbmemory.store.lake.transfer import IDENTITY_KEYS
from nbmemory.store.schema import EVENT_SEQ, EVENTS, META, TABLES

#: How each table is read for a comparison (every key; fact_history has none).
_ORDER = {
    "events": "id",
    "event_vectors": "id, model",
    "event_archive": "id",
    "event_vector_archive": "id, model, passage",
    "facts": "id",
    "fact_history": "fact_id, valid_from, value",
    "macros": "id",
    "scheduled_tasks": "id",
    "terminal_allowed_prefixes": "prefix",
    "sessions": "namespace, session_id",
    "audit_log": "id",
    "nbmemory_meta": "key",
}
_VECTORS = {
    "event_vectors": "embedding",
    "event_vector_archive": "embedding",
    "facts": "embedding",
}


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _one_line_error(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("nbmemory: error: ")
    return lines[0]


def _contents(where: str) -> dict[str, pa.Table]:
    """Every table of :data:`TABLES` (events with ``seq``), in key order, read-only;
    ``nbmemory_meta`` without the rows that name a lake itself."""
    store = open_store(where, read_only=True, shared=False)
    try:
        tables = {}
        for table in TABLES.values():
            columns = table.names + ((EVENT_SEQ,) if table is EVENTS else ())
            sql = f"SELECT {', '.join(columns)} FROM {table.name}"
            if table is META:
                sql += " WHERE key NOT IN (SELECT unnest(?::VARCHAR[]))"
            tables[table.name] = store.run(
                sql + f" ORDER BY {_ORDER[table.name]}",
                [list(IDENTITY_KEYS)] if table is META else None,
                "arrow",
            )
        return tables
    finally:
        store.close()


def _vectors(column: pa.ChunkedArray) -> list[np.ndarray | None]:
    return [None if v is None else np.asarray(v, dtype=np.float32) for v in column.to_pylist()]


def _assert_same(left: dict[str, pa.Table], right: dict[str, pa.Table]) -> None:
    """Row by row, field by field; vectors bit for bit."""
    assert list(left) == list(right) == list(TABLES)
    for name in TABLES:
        a, b = left[name], right[name]
        assert a.column_names == b.column_names, name
        assert a.num_rows == b.num_rows, name
        plain = [c for c in a.column_names if c != _VECTORS.get(name)]
        for row_a, row_b in zip(
            a.select(plain).to_pylist(), b.select(plain).to_pylist(), strict=True
        ):
            assert row_a == row_b, name
        if name in _VECTORS:
            column = _VECTORS[name]
            for x, y in zip(_vectors(a[column]), _vectors(b[column]), strict=True):
                if x is None or y is None:
                    assert x is None and y is None, name
                else:
                    assert x.dtype == y.dtype == np.float32
                    assert x.tobytes() == y.tobytes(), name  # bit for bit


def _fill(path: str) -> None:
    """A file store with a row in every table, ids with gaps, history and vectors."""
    with Memory(path, embedder="hash", background_consolidation=False) as mem:
        mem.add_events(
            [
                {
                    "session_id": "a",
                    "role": "user",
                    "content": f"message {i}: I like tea number {i}",
                    "metadata": {"turn": i, "tags": ["x", "é"]},
                }
                for i in range(30)
            ]
        )
        mem.add_event(
            "a",
            "tool",
            "ls -la printed 12 files",
            tool_name="shell",
            tool_call_id="call-1",
            importance=0.25,
        )
        mem.add_event("b", "user", "another namespace", namespace="team")
        memory = mem.add_memory("I moved to Lisbon last May", session_id="a", importance=0.9)
        mem.update_memory(memory.id, content="I moved to Porto last May")
        doomed = mem.add_event("a", "user", "deleted later")
        mem.delete(doomed.id)
        mem.set_fact("user", "city", "Lisbon")
        mem.set_fact("user", "city", "Porto")  # history
        mem.set_fact("user", "gone", "soon")
        mem.delete_fact("user", "gone")  # an id used once, never to be reused
        mem.set_fact("user", "name", "John")
        mem.relevant_facts("where do I live")  # the facts' vectors
        macro = mem.add_macro("git_status", "git_diff", next_args={"staged": True})
        mem.record_macro_use(macro)
        task = mem.schedule_task("digest", "every day at 9am", "summarise the day")
        mem.pause_task(task["id"])
        mem.start_session("u1", session_id="c", state={"step": 1})
        mem.save_session_state("c", {"step": 2, "plan": ["a", "b"]})
        mem.close_session("c")
        mem.start_session("u2", session_id="d")
        mem.add_allowed_prefix("ls")
        mem.add_allowed_prefix("git status")
        old = "2024-01-01T09:00:00"  # compacted: the originals and their vectors archived
        for i in range(3):
            mem.add_event("e", "user", f"an old remark {i} about the harbour", created_at=old)
        assert mem.flush(timeout=60)
        assert mem.consolidation.run(session_id="e", compact=True).archived == 3
        assert mem.flush(timeout=60)  # the summary's vector
        assert mem.status()["pending"] == 0


def _max(contents: dict[str, pa.Table], table: str, column: str) -> int:
    return max(v for v in contents[table][column].to_pylist() if v is not None)


# -- a plain path ------------------------------------------------------------------------
@pytest.mark.parametrize("action", ["status", "snapshots", "compact"])
def test_a_plain_path_is_refused_by_every_lake_command(
    action: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    monkeypatch.delenv("NBMEMORY_PATH", raising=False)
    store = str(tmp_path / "agent.duckdb")
    Memory(store, embedder="hash").close()
    code, _, err = _run(capsys, "lake", action, "--store", store)
    assert code == 1
    assert "nbmemory lake commands need a ducklake: URL" in _one_line_error(err)
    monkeypatch.setenv("NBMEMORY_PATH", store)  # the default store is no lake either
    code, _, err = _run(capsys, "lake", action)
    assert code == 1 and "need a ducklake: URL" in _one_line_error(err)


def test_bad_usage_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (
        ["lake", "expire", "--store", "ducklake:x", "--older-than", "soon"],
        ["lake", "expire", "--store", "ducklake:x"],
        ["lake", "snapshots", "--store", "ducklake:x", "--limit", "0"],
        ["lake", "pull"],
        ["lake"],
    ):
        with pytest.raises(SystemExit) as exited:
            main(argv)
        assert exited.value.code == 2, argv
    assert "not a duration" in capsys.readouterr().err


def test_durations() -> None:
    from nbmemory.cli.lake import parse_duration

    assert parse_duration("7d").total_seconds() == 7 * 86400
    assert parse_duration("12h").total_seconds() == 12 * 3600
    assert parse_duration("30m").total_seconds() == 1800
    assert parse_duration("45s").total_seconds() == 45
    assert parse_duration("2w").days == 14


def test_push_and_pull_refuse_the_wrong_kind_of_argument(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    monkeypatch.delenv("NBMEMORY_PATH", raising=False)
    store = str(tmp_path / "agent.duckdb")
    code, _, err = _run(capsys, "lake", "push", store, str(tmp_path / "other.duckdb"))
    assert code == 1 and "need a ducklake: URL" in _one_line_error(err)
    code, _, err = _run(capsys, "lake", "pull", store, str(tmp_path / "new.duckdb"))
    assert code == 1 and "need a ducklake: URL" in _one_line_error(err)
    assert not (tmp_path / "new.duckdb").exists()


# -- status, snapshots, compact, expire ----------------------------------------------------
def _lake_with_events(url: str, count: int = 4) -> None:
    with Memory(url, embedder="hash", background_consolidation=False) as mem:
        for i in range(count):
            mem.add_event("s", "user", f"small commit {i}")
        assert mem.flush(timeout=60)


def test_status_and_snapshots_describe_the_lake(
    lake_url: str, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    _lake_with_events(lake_url)
    code, out, _ = _run(capsys, "lake", "status", "--store", lake_url, "--json")
    assert code == 0
    status = json.loads(out)
    assert status["events"] == 4
    assert status["snapshots"] >= 5 and status["current_snapshot"] == status["snapshots"] - 1
    assert {"events", "event_vectors", "audit_log"} <= set(status["files"])
    assert "password=" not in out or "password=***" in out

    code, out, _ = _run(capsys, "lake", "status", "--store", lake_url)
    assert code == 0
    lines = out.splitlines()
    assert any(line.split()[:2] == ["events", "4"] for line in lines), out
    assert lines[2].startswith("snapshots") and f"current {status['current_snapshot']}" in out
    assert any(line.split()[0] == "event_vectors" for line in lines if line.strip())

    monkeypatch.setenv("NBMEMORY_PATH", lake_url)  # the lake from the environment
    code, out, _ = _run(capsys, "lake", "snapshots", "--limit", "3", "--json")
    assert code == 0
    snapshots = json.loads(out)
    assert [s["snapshot_id"] for s in snapshots] == [
        status["current_snapshot"] - i for i in range(3)
    ]
    assert all(s["author"].startswith("nbmemory:") for s in snapshots)
    assert {s["commit_message"] for s in snapshots} == {"nbmemory api"}
    assert all(isinstance(s["changes"], dict) and s["changes"] for s in snapshots)

    code, out, _ = _run(capsys, "lake", "snapshots", "--limit", "2")
    assert code == 0
    head, *rows = out.splitlines()
    assert head.split() == ["id", "time", "author", "message", "changes"]
    assert len(rows) == 2 and rows[0].split()[0] == str(status["current_snapshot"])
    assert "nbmemory api" in rows[0]


def test_the_other_commands_take_a_lake_url_as_store(
    lake_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _lake_with_events(lake_url, 2)
    code, out, _ = _run(
        capsys, "state", "list", "--store", lake_url, "--embedder", "hash", "--with-untracked"
    )
    assert code == 0 and "s" in out.split()
    code, out, _ = _run(capsys, "health", "--store", lake_url, "--embedder", "hash")
    assert code == 0 and "2 events" in out and "lake       ok    snapshot" in out


def test_compact_writes_inlined_rows_to_parquet_and_keeps_them(
    lake_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _lake_with_events(lake_url)
    before = _contents(lake_url)
    status = json.loads(_run(capsys, "lake", "status", "--store", lake_url, "--json")[1])
    assert status["files_on_disk"] == 0  # small commits are inlined in the catalog

    code, out, _ = _run(capsys, "lake", "compact", "--store", lake_url)
    assert code == 0
    after_status = json.loads(_run(capsys, "lake", "status", "--store", lake_url, "--json")[1])
    files = after_status["files_on_disk"]
    assert files > 0 and after_status["files"]["events"] >= 1
    assert f"files on disk: 0 before, {files} after" in out
    assert "inlined row(s) written to Parquet" in out
    _assert_same(_contents(lake_url), before)


def test_expire_forgets_old_snapshots_and_a_dry_run_changes_nothing(
    lake_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _lake_with_events(lake_url)
    before = _contents(lake_url)
    count = json.loads(_run(capsys, "lake", "status", "--store", lake_url, "--json")[1])[
        "snapshots"
    ]

    code, out, _ = _run(capsys, "lake", "expire", "--store", lake_url, "--older-than", "7d")
    assert code == 0 and out.startswith("expired 0 snapshot(s) older than 7d")

    code, out, _ = _run(
        capsys, "lake", "expire", "--store", lake_url, "--older-than", "0s", "--dry-run"
    )
    assert code == 0
    assert out.startswith(f"would expire {count - 1} snapshot(s) older than 0s")
    assert "nothing was changed" in out
    status = json.loads(_run(capsys, "lake", "status", "--store", lake_url, "--json")[1])
    assert status["snapshots"] == count

    code, out, _ = _run(capsys, "lake", "expire", "--store", lake_url, "--older-than", "0s")
    assert code == 0 and out.startswith(f"expired {count - 1} snapshot(s) older than 0s")
    status = json.loads(_run(capsys, "lake", "status", "--store", lake_url, "--json")[1])
    assert status["snapshots"] == 1  # the current one stays: it is what the lake holds
    _assert_same(_contents(lake_url), before)


def test_memory_purge_erases_on_a_lake_only_with_expire_snapshots(
    lake_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``nbmemory memory purge`` on a lake: refused in one line, nothing expired, without
    --expire-snapshots; with it, the deleted text goes, the rest stays, one audit row."""
    secret = "zqx-cli-lake-secret-7731"
    with Memory(lake_url, embedder="hash") as mem:
        mem.add_events([{"session_id": "s", "role": "user", "content": f"kept {i}"}
                        for i in range(20)] + [{"session_id": "s", "role": "user",
                                                "content": f"the code is {secret}"}])  # fmt: skip
        mem.delete(mem.events()[lambda f: f["content"].str.contains(secret)]["id"].tolist())
    count = json.loads(_run(capsys, "lake", "status", "--store", lake_url, "--json")[1])[
        "snapshots"
    ]
    root = Path(
        json.loads(_run(capsys, "lake", "status", "--store", lake_url, "--json")[1])["data_path"]
    )
    files = [p for p in root.rglob("*") if p.is_file()]
    assert any(secret.encode() in p.read_bytes() for p in files)  # deleted, not erased
    common = ["--store", lake_url, "--embedder", "hash"]
    code, _, err = _run(capsys, "memory", "purge", *common)
    assert code == 1 and "--expire-snapshots" in _one_line_error(err)
    status = json.loads(_run(capsys, "lake", "status", "--store", lake_url, "--json")[1])
    assert status["snapshots"] == count

    code, out, _ = _run(capsys, "memory", "purge", "--expire-snapshots", *common)
    assert code == 0 and "file(s) rewritten without deleted rows" in out
    assert "time travel starts now" in out
    status = json.loads(_run(capsys, "lake", "status", "--store", lake_url, "--json")[1])
    assert status["snapshots"] < count
    assert not any(secret.encode() in p.read_bytes() for p in root.rglob("*") if p.is_file())
    with Memory(lake_url, embedder="hash") as mem:
        assert sorted(mem.events()["content"]) == sorted(f"kept {i}" for i in range(20))
        purged = mem.audit_log(action="purge")
        assert len(purged) == 1 and purged["actor"].iloc[0] == "cli"
    snapshots = json.loads(_run(capsys, "lake", "snapshots", "--store", lake_url, "--json")[1])
    assert "nbmemory purge" in {row["commit_message"] for row in snapshots}


def test_another_applications_lake_is_one_line(
    lake_url: str, foreign_lake, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    for argv in (
        ["lake", "status", "--store", lake_url],
        ["lake", "compact", "--store", lake_url],
        ["lake", "pull", lake_url, str(tmp_path / "copy.duckdb")],
    ):
        code, _, err = _run(capsys, *argv)
        assert code == 1 and "belongs to another application" in _one_line_error(err), argv
    assert not (tmp_path / "copy.duckdb").exists()


# -- push and pull -----------------------------------------------------------------------
def test_push_then_pull_keeps_every_row_field_and_vector_bit(
    lake_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    from nbmemory.store.lake import transfer

    monkeypatch.setattr(transfer, "BATCH_ROWS", 7)  # many batches per table
    first, second = str(tmp_path / "first.duckdb"), str(tmp_path / "second.duckdb")
    _fill(first)
    original = _contents(first)
    assert all(original[name].num_rows for name in TABLES), {
        name: t.num_rows for name, t in original.items()
    }
    assert None not in original["facts"]["embedding"].to_pylist()
    assert None not in original["events"]["embedding_model"].to_pylist()

    code, out, err = _run(capsys, "lake", "push", first, lake_url)
    assert code == 0, err
    assert (
        out.startswith(f"pushed {first} -> ")
        and "34 event(s), 34 vector(s), 3 archived event(s)" in out
    )
    assert "password=" not in out or "password=***" in out
    _assert_same(_contents(lake_url), original)  # the lake holds the same rows

    code, out, err = _run(capsys, "lake", "pull", lake_url, second)
    assert code == 0, err
    assert out.startswith("pulled ") and out.rstrip().split(" -> ")[1].startswith(second)
    _assert_same(_contents(second), original)  # and so does the file made from it

    # later writes never reuse an id: not on the lake, not in the new file
    for where in (lake_url, second):
        with Memory(where, embedder="hash", background_consolidation=False) as mem:
            fact = mem.set_fact("user", "pet", "a cat")
            macro = mem.add_macro("pytest", "git_add")
            event = mem.add_event("a", "user", "after the copy")
            assert mem.flush(timeout=60)
        now = _contents(where)
        assert fact["id"] > max(
            _max(original, "facts", "id"), _max(original, "fact_history", "fact_id")
        )
        assert macro > _max(original, "macros", "id")
        new_events = now["events"].filter(pc.equal(now["events"]["id"], event.id))
        assert new_events["seq"][0].as_py() > _max(original, "events", EVENT_SEQ)
        old_audit = set(original["audit_log"]["id"].to_pylist())
        new_audit = set(now["audit_log"]["id"].to_pylist()) - old_audit
        assert new_audit and min(new_audit) > max(old_audit)
        assert len(now["audit_log"]) == len(set(now["audit_log"]["id"].to_pylist()))


def test_push_into_a_lake_that_holds_rows_is_refused_and_changes_nothing(
    lake_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _lake_with_events(lake_url, 2)
    before = _contents(lake_url)
    source = str(tmp_path / "agent.duckdb")
    _fill(source)
    code, out, err = _run(capsys, "lake", "push", source, lake_url)
    assert code == 1 and not out
    line = _one_line_error(err)
    assert "is not empty (events: 2" in line and "push copies into a new lake only" in line
    _assert_same(_contents(lake_url), before)


def test_pull_never_overwrites_a_file(
    lake_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _lake_with_events(lake_url, 2)
    existing = tmp_path / "existing.duckdb"
    existing.write_bytes(b"mine")
    code, _, err = _run(capsys, "lake", "pull", lake_url, str(existing))
    assert code == 1
    assert "already exists; pull makes a new file" in _one_line_error(err)
    assert existing.read_bytes() == b"mine"


def test_push_refuses_what_is_not_an_nbmemory_file(
    lake_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = str(tmp_path / "missing.duckdb")
    code, _, err = _run(capsys, "lake", "push", missing, lake_url)
    assert code == 1 and "no store file at" in _one_line_error(err)

    foreign = str(tmp_path / "orders.duckdb")
    con = duckdb.connect(foreign)
    con.execute("CREATE TABLE orders (id INTEGER, total DOUBLE)")
    con.close()
    code, _, err = _run(capsys, "lake", "push", foreign, lake_url)
    assert code == 1 and "another application's DuckDB file" in _one_line_error(err)

    code, _, err = _run(capsys, "lake", "push", lake_url, lake_url)
    assert code == 1 and "name the file first" in _one_line_error(err)


def test_a_locomo_conversation_round_trips_bit_for_bit(
    lake_url: str, locomo_dir: Path, real_embedder, tmp_path: Path, capsys
) -> None:
    from nbmemory.research.datasets import load_locomo, locomo_files

    first, second = str(tmp_path / "locomo.duckdb"), str(tmp_path / "back.duckdb")
    with Memory(first, embedder=real_embedder, background_consolidation=False) as mem:
        loaded = load_locomo(locomo_files(locomo_dir)[0], mem)
        assert mem.flush(timeout=600)
    original = _contents(first)
    assert original["events"].num_rows == len(loaded.event_ids) > 100
    assert original["event_vectors"].num_rows == len(loaded.event_ids)

    assert _run(capsys, "lake", "push", first, lake_url)[0] == 0
    assert _run(capsys, "lake", "pull", lake_url, second)[0] == 0
    _assert_same(_contents(second), original)
