"""``store.tasks`` (scheduled prompts) and ``store.prefixes`` (allowed command prefixes)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pandas as pd

from .clauses import placeholders
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
        self.store.run(
            f"INSERT INTO scheduled_tasks ({', '.join(columns)}) VALUES ({placeholders(columns)})",
            [task.get(c) for c in columns],
        )

    def set_paused(
        self, task_id: str, namespace: str, paused: bool, next_run_at: Any, now: dt.datetime
    ) -> None:
        self._write()
        self.store.run(
            "UPDATE scheduled_tasks SET is_paused = ?, next_run_at = ?, updated_at = ?"
            " WHERE id = ? AND namespace = ?",
            [paused, next_run_at, now, task_id, namespace],
        )

    def delete(self, task_id: str, namespace: str) -> bool:
        self._write()
        rows = self.store.run(
            "DELETE FROM scheduled_tasks WHERE id = ? AND namespace = ? RETURNING id",
            [task_id, namespace],
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
            rows = self.store.run(
                "DELETE FROM scheduled_tasks WHERE id = ? AND next_run_at = ?"
                " AND NOT is_paused RETURNING id",
                [task_id, due_at],
            )
        else:
            rows = self.store.run(
                "UPDATE scheduled_tasks SET next_run_at = ?, last_run_at = ?, updated_at = ?"
                " WHERE id = ? AND next_run_at = ? AND NOT is_paused RETURNING id",
                [next_run_at, now, now, task_id, due_at],
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
        rows = self.store.run(
            "INSERT INTO terminal_allowed_prefixes VALUES (?, ?) ON CONFLICT DO NOTHING"
            " RETURNING prefix",
            [prefix, now],
        )
        return bool(rows)

    def remove(self, prefix: str) -> bool:
        self._write()
        rows = self.store.run(
            "DELETE FROM terminal_allowed_prefixes WHERE prefix = ? RETURNING prefix", [prefix]
        )
        return bool(rows)
