"""``store.audit`` (the append-only audit trail) and ``store.meta`` (file-level facts)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from typing import Any

import pandas as pd

from .clauses import to_epoch_us
from .schema import AUDIT_LOG, META
from .table import TableObject

_SEP = "\x1f"  # ASCII unit separator: never in an id nbmemory makes
_COLUMNS = "id, logged_at, namespace, actor, action, target_ids, details"


class AuditTable(TableObject):
    """Append-only: nothing updates or deletes audit rows but the retention cleanup."""

    table = AUDIT_LOG

    def append(
        self,
        action: str,
        *,
        actor: str,
        namespace: str | None,
        target_ids: Sequence[str],
        details: dict[str, Any],
        at: dt.datetime,
    ) -> None:
        """Append one audit row (in the writer's transaction)."""
        self._write()
        ids = [str(i) for i in target_ids]
        # Bound as an epoch-microsecond integer and a separator-joined string:
        # DuckDB 2.0 binds datetime and list parameters ~30x slower, and this row
        # is written with every add_event.
        if ids and not any(_SEP in i for i in ids):
            ids_sql, ids_param = f"string_split(?, chr({ord(_SEP)}))", _SEP.join(ids)
        else:
            ids_sql, ids_param = "?::VARCHAR[]", ids  # type: ignore[assignment]
        text = json.dumps(details, ensure_ascii=False, default=str, sort_keys=True)
        if self.store.redactor is not None:  # details quote what callers handed in
            text = self.store.redactor(text)[0]
        self.store.run(
            "INSERT INTO audit_log (logged_at, namespace, actor, action, target_ids, details)"
            f" VALUES (make_timestamp(?), ?, ?, ?, {ids_sql}, ?)",
            [to_epoch_us(at), namespace, actor, action, ids_param, text],
        )

    def frame(
        self,
        *,
        namespace: str | None = None,
        action: str | None = None,
        since: dt.datetime | None = None,
        limit: int | None = None,
    ) -> pd.DataFrame:
        """Audit rows as a DataFrame, newest first."""
        clauses: list[str] = []
        params: list[Any] = []
        for clause, value in (
            ("namespace = ?", namespace),
            ("action = ?", action),
            ("logged_at >= ?", since),
        ):
            if value is not None:
                clauses.append(clause)
                params.append(value)
        sql = f"SELECT {_COLUMNS} FROM audit_log"
        if clauses:
            sql += " WHERE " + " AND ".join(clauses)
        sql += " ORDER BY id DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(int(limit))
        frame: pd.DataFrame = self.store.run(sql, params, "df")
        return frame

    def count_older(self, cutoff: dt.datetime) -> int:
        return int(
            self.store.run("SELECT count(*) FROM audit_log WHERE logged_at < ?", [cutoff])[0][0]
        )

    def delete_older(self, cutoff: dt.datetime) -> int:
        """Apply the retention: delete rows logged before ``cutoff``; returns how many."""
        self._write()
        return len(
            self.store.run("DELETE FROM audit_log WHERE logged_at < ? RETURNING id", [cutoff])
        )


class MetaTable(TableObject):
    table = META

    def get(self, key: str) -> str | None:
        rows = self.store.run("SELECT value FROM nbmemory_meta WHERE key = ?", [key])
        return rows[0][0] if rows else None
