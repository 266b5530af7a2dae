"""More of the bad-input battery (tests/test_bad_input.py): schedules that never fire,
imported rows the API would refuse.

Every refusal is one line, an ``nbmemory.errors`` exception (a ``UsageError`` in a
magic, exit 1 in the CLI), and leaves the store (or the file) as it was.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from nbmemory import InvalidInput, Memory

NOW = dt.datetime(2024, 5, 6, 8, 0)  # a Monday


def _one_line(exc: BaseException) -> str:
    message = str(exc)
    assert message and "\n" not in message, message
    return message


def _state(mem: Memory) -> tuple[int, ...]:
    """What a refused call must leave alone: rows of every table a call could change."""
    tables = ("events", "sessions", "facts", "macros", "scheduled_tasks", "audit_log")
    return tuple(mem.store.fetchone(f"SELECT count(*) FROM {t}")[0] for t in tables)


# -- 1: a cron that never fires ------------------------------------------------------------
@pytest.mark.parametrize("cron", ["0 0 30 2 *", "0 0 31 4,6 *"])
def test_a_cron_that_never_fires_is_refused_when_scheduled(mem, cron):
    before = _state(mem)
    with pytest.raises(InvalidInput, match="never fires") as info:
        mem.tasks.schedule("x", cron, "p", now=NOW)
    assert cron in _one_line(info.value)
    assert _state(mem) == before


def test_a_cron_with_a_list_of_days_is_read(mem):
    task = mem.tasks.schedule("twice a week", "0 9 * * 1,5", "p", now=NOW)
    assert task["cron_expr"] == "0 9 * * 1,5"
    assert task["next_run_at"] == dt.datetime(2024, 5, 6, 9, 0)


def _export_with_task(mem: Memory, tmp_path: Path) -> dict[str, Any]:
    mem.add_event("s", "user", "hello")
    mem.tasks.schedule("report", "0 9 * * *", "write the report", now=NOW)
    path = tmp_path / "export.json"
    mem.transfer.export_json(path)
    return json.loads(path.read_text())


def _refused_import(
    mem: Memory, tmp_path: Path, edit: Callable[[dict[str, Any]], Any], pattern: str
) -> str:
    """Export ``mem``, ``edit`` the file, import it into a new store: refused (the
    message, one line, matches ``pattern``) and that store left as it was."""
    document = _export_with_task(mem, tmp_path)
    edit(document)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(document))
    with Memory(str(tmp_path / "target.duckdb"), embedder="hash") as target:
        before = _state(target)
        with pytest.raises(InvalidInput, match=pattern) as info:
            target.transfer.import_json(path)
        assert _state(target) == before
    return _one_line(info.value)


def test_import_refuses_a_task_whose_cron_never_fires(mem, tmp_path):
    def edit(document: dict[str, Any]) -> None:
        document["scheduled_tasks"][0]["cron_expr"] = "0 0 30 2 *"

    _refused_import(mem, tmp_path, edit, r"scheduled_tasks\[0\]: cron_expr .* never fires")


def _task_on(mem: Memory, name: str, cron: str) -> str:
    """A task whose stored cron is ``cron`` (as an older version or an import left it)."""
    task = mem.tasks.schedule(name, "0 9 * * *", f"prompt of {name}", now=NOW)
    mem.store.execute("UPDATE scheduled_tasks SET cron_expr = ? WHERE id = ?", [cron, task["id"]])
    return task["id"]


@pytest.mark.parametrize("cron", ["0 0 30 2 *", "not cron"])
def test_run_due_pauses_a_task_whose_stored_cron_is_bad_and_runs_the_others(mem, cron):
    bad = _task_on(mem, "broken", cron)
    good = mem.tasks.schedule("fine", "0 9 * * *", "run me", now=NOW)["id"]
    called: list[str] = []
    later = NOW + dt.timedelta(hours=2)
    results = {r["id"]: r for r in mem.tasks.run_due(lambda t: called.append(t["id"]), now=later)}
    assert called == [good]
    assert results[good]["error"] is None
    assert "paused" in _one_line_text(results[bad]["error"]) and results[bad]["result"] is None
    assert mem.tasks.get(bad)["is_paused"] is True
    trail = mem.audit.log(action="pause_task")
    assert list(trail["target_ids"].iloc[0]) == [bad] and "paused" in trail["details"].iloc[0]
    assert mem.tasks.run_due(lambda t: called.append(t["id"]), now=later) == []


def _one_line_text(text: str | None) -> str:
    assert text and "\n" not in text, text
    return text


def test_resume_refuses_a_task_whose_stored_cron_never_fires(mem):
    bad = _task_on(mem, "broken", "0 0 30 2 *")
    mem.tasks.pause(bad)
    before = _state(mem)
    with pytest.raises(InvalidInput, match="cannot resume.*never fires") as info:
        mem.tasks.resume(bad, now=NOW)
    _one_line(info.value)
    assert _state(mem) == before and mem.tasks.get(bad)["is_paused"] is True


# -- 2: imported rows are checked as the API checks them ----------------------------------------
@pytest.mark.parametrize("content", [None, "   ", ""], ids=["none", "blank", "empty"])
def test_import_refuses_an_empty_turn_with_add_events_message(mem, tmp_path, content):
    with pytest.raises(InvalidInput) as refused:
        mem.add_event("s", "user", content)

    def edit(document: dict[str, Any]) -> None:
        event = document["events"][0]
        event["content"] = content
        event["embedding"] = event["embedding_dim"] = None

    message = _refused_import(mem, tmp_path, edit, r"events\[0\]")
    assert message.endswith(str(refused.value))


def test_import_keeps_a_turn_that_only_calls_tools(mem, tmp_path):
    mem.add_event("s", "assistant", None, tool_calls=[{"name": "ls"}])
    path = tmp_path / "calls.json"
    mem.transfer.export_json(path)
    with Memory(str(tmp_path / "target.duckdb"), embedder="hash") as target:
        assert target.transfer.import_json(path)["events_added"] == 1
        assert target.events()["content"].isna().all()


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("status", "wizard", "status must be 'active' or 'closed'"),
        ("user_id", "u" * 5000, "user_id is 5,000 bytes"),
    ],
)
def test_import_refuses_a_session_the_api_would_not_make(mem, tmp_path, field, value, words):
    mem.sessions.start("alice", session_id="s1")
    _refused_import(
        mem, tmp_path, lambda d: d["sessions"][0].update({field: value}), rf"sessions\[0\]: {words}"
    )


def test_import_refuses_an_embedding_error_that_is_not_text(mem, tmp_path):
    _refused_import(
        mem,
        tmp_path,
        lambda d: d["events"][0].update(embedding_error=5),
        r"events\[0\].*embedding_error must be text",
    )
