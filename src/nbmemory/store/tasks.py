"""``store.tasks`` (scheduled prompts) and ``store.prefixes`` (allowed command prefixes)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pandas as pd

from .schema import SCHEDULED_TASKS, TERMINAL_ALLOWED_PREFIXES
from .table import TableObject

TASK_COLUMNS = [
    "id",
    "name",
    "cron_expr",
    "original_schedule",
    "prompt",
    "source",
    "is_oneshot",
    "is_paused",
    "is_trusted",
    "next_run_at",
    "last_run_at",
    "created_at",
    "updated_at",
]
_TASK = ", ".join(TASK_COLUMNS)


class TasksTable(TableObject):
    table = SCHEDULED_TASKS

    def get(self, task_id: str, namespace: str) -> dict[str, Any] | None:
        rows = self.store.run(
            f"SELECT {_TASK} FROM scheduled_tasks WHERE id = ? AND namespace = ?",
            [task_id, namespace],
            "records",
        )
        return rows[0] if rows else None

    def frame(self, namespace: str, *, due_by: dt.datetime | None = None) -> pd.DataFrame:
        """Tasks of the namespace, next to run first (only unpaused due ones with ``due_by``)."""
        sql = f"SELECT {_TASK} FROM scheduled_tasks WHERE namespace = ?"
        params: list[Any] = [namespace]
        if due_by is not None:
            sql += " AND NOT is_paused AND next_run_at <= ?"
            params.append(due_by)
        frame: pd.DataFrame = self.store.run(sql + " ORDER BY next_run_at, name, id", params, "df")
        return frame

    def add(self, task: dict[str, Any]) -> None:
        self._write()
        task = self._redact(task)
        columns = [*TASK_COLUMNS, "namespace"]
        self.store.statements.insert("scheduled_tasks", {c: task.get(c) for c in columns})

    def set_paused(
        self, task_id: str, namespace: str, paused: bool, next_run_at: Any, now: dt.datetime
    ) -> None:
        self._write()
        self.store.statements.update(
            "scheduled_tasks",
            "is_paused = ?, next_run_at = ?, updated_at = ?",
            [paused, next_run_at, now],
            "id = ? AND namespace = ?",
            [task_id, namespace],
        )

    def delete(self, task_id: str, namespace: str) -> bool:
        self._write()
        rows = self.store.statements.delete(
            "scheduled_tasks", "id = ? AND namespace = ?", [task_id, namespace], returning=("id",)
        )
        return bool(rows)

    def claim(
        self,
        task_id: str,
        due_at: dt.datetime,
        *,
        next_run_at: dt.datetime | None,
        now: dt.datetime,
    ) -> bool:
        """Take a due task before it fires: a recurring one moves to ``next_run_at``, a
        one-shot is deleted.  False when another caller claimed it first."""
        self._write()
        if next_run_at is None:
            rows = self.store.statements.delete(
                "scheduled_tasks",
                "id = ? AND next_run_at = ? AND NOT is_paused",
                [task_id, due_at],
                returning=("id",),
            )
        else:
            rows = self.store.statements.update(
                "scheduled_tasks",
                "next_run_at = ?, last_run_at = ?, updated_at = ?",
                [next_run_at, now, now],
                "id = ? AND next_run_at = ? AND NOT is_paused",
                [task_id, due_at],
                returning=("id",),
            )
        return bool(rows)


class PrefixesTable(TableObject):
    table = TERMINAL_ALLOWED_PREFIXES

    def all(self) -> list[str]:
        return [
            r[0]
            for r in self.store.run("SELECT prefix FROM terminal_allowed_prefixes ORDER BY prefix")
        ]

    def add(self, prefix: str, now: dt.datetime) -> bool:
        """Allow a prefix; False if it was already allowed."""
        self._write()
        self.store.claim()
        rows = self.store.statements.insert(
            "terminal_allowed_prefixes",
            dict(zip(self.table.names, [prefix, now], strict=True)),
            returning=("prefix",),
            if_absent=True,
        )
        return bool(rows)

    def remove(self, prefix: str) -> bool:
        self._write()
        rows = self.store.statements.delete(
            "terminal_allowed_prefixes", "prefix = ?", [prefix], returning=("prefix",)
        )
        return bool(rows)
