"""The audit trail: one row per mutation, append-only, retention cleanup, queryable as a DataFrame."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pandas as pd

from nbmemory import Memory


def test_each_mutation_appends_one_row_with_actor_targets_and_details(
    store_path: str, tmp_path: Path
) -> None:
    with Memory(store_path, embedder="hash", actor="agent-7") as mem:
        event = mem.add_event("s1", "user", "first")
        ids = mem.add_events([{"session_id": "s1", "role": "user", "content": "bulk"}])
        mem.delete(ids)
        mem.configure(relevance_threshold=0.5)
        sid = mem.start_session("u").session_id
        mem.save_session_state(sid, {"current_plan": ["x"]})
        mem.close_session(sid)
        agents = tmp_path / "AGENTS.md"
        agents.write_text("# Rules\n\nBe brief.\n", encoding="utf-8")
        mem.sync_agents_md(agents)
        mem.flush()
        mem.export_json(tmp_path / "out.json")
        mem.import_json(tmp_path / "out.json", namespace="copy")
        mem.cleanup_sessions()  # nothing expired: no row
        mem.cleanup_audit()
        log = mem.audit_log()
    assert _actions_from(log) == [
        "add",
        "add",
        "delete",
        "configure",
        "session_start",
        "session_state",
        "session_close",
        "add",
        "agents_md_sync",
        "export",
        "import",
        "cleanup",
    ]
    assert set(log["actor"]) == {"agent-7"}
    first = log.iloc[-1]
    assert first["target_ids"].tolist() == [event.id]
    assert json.loads(first["details"]) == {"session_id": "s1"}
    assert json.loads(log[log["action"] == "configure"]["details"].iloc[0]) == {
        "changes": {"relevance_threshold": 0.5}
    }
    assert pd.api.types.is_datetime64_any_dtype(log["logged_at"])
    assert log["id"].is_monotonic_decreasing  # newest first


def _actions_from(log: pd.DataFrame) -> list[str]:
    return log["action"].tolist()[::-1]  # oldest first


def test_reads_append_nothing(mem: Memory) -> None:
    mem.add_event("s1", "user", "hello world")
    mem.flush()
    before = len(mem.audit_log())
    mem.search("hello")
    mem.get_context("s1", "hello")
    mem.events()
    mem.recent("s1")
    mem.sessions()
    assert len(mem.audit_log()) == before


def test_audit_rows_are_never_changed_by_later_operations(mem: Memory) -> None:
    mem.add_event("s1", "user", "one")
    ids = mem.add_events([{"session_id": "s2", "role": "user", "content": "two"}])
    snapshot = mem.store.df("SELECT * FROM audit_log ORDER BY id")
    mem.delete(ids)
    mem.start_session("u")
    mem.cleanup_sessions()
    mem.cleanup_audit()
    after = mem.store.df("SELECT * FROM audit_log ORDER BY id").head(len(snapshot))
    pd.testing.assert_frame_equal(snapshot, after)


def test_retention_cleanup_removes_only_rows_older_than_the_setting(mem: Memory) -> None:
    now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    with mem.writer.transaction() as tx:
        tx.audit("add", namespace="default", at=now - dt.timedelta(days=91))
        tx.audit("add", namespace="default", at=now - dt.timedelta(days=89))
    mem.add_event("s", "user", "recent")
    total = len(mem.audit_log())
    assert mem.cleanup_audit(dry_run=True) == 1
    assert len(mem.audit_log()) == total  # dry run deletes nothing, records nothing
    assert mem.cleanup_audit() == 1
    log = mem.audit_log()
    assert len(log) == total  # one old row gone, one cleanup row added
    assert log["logged_at"].min() >= now - dt.timedelta(days=90)
    assert json.loads(log["details"].iloc[0]) == {"days": 90, "rows": 1, "what": "audit_log"}
    mem.configure(audit_retention_days=30)
    assert mem.cleanup_audit(dry_run=True) == 1  # the 89-day-old row


def test_audit_log_filters(mem: Memory) -> None:
    mem.add_event("s", "user", "a", namespace="one")
    mem.add_event("s", "user", "b", namespace="two")
    mem.delete([mem.events(namespace="two")["id"].iloc[0]], namespace="two")
    assert mem.audit_log(namespace="one")["action"].tolist() == ["add"]
    assert mem.audit_log(namespace="two")["action"].tolist() == ["delete", "add"]
    assert mem.audit_log(action="delete")["namespace"].tolist() == ["two"]
    assert len(mem.audit_log(limit=1)) == 1
