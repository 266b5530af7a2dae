"""``store.audit`` (the append-only audit trail) and ``store.meta`` (file-level facts)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from typing import Any

import pandas as pd
import pyarrow as pa

from .clauses import to_epoch_us
from .schema import AUDIT_LOG, META
from .table import TableObject

_SEP = "\x1f"  # ASCII unit separator: never in an id nbmemory makes
_COLUMNS = "id, logged_at, namespace, actor, action, target_ids, details"


class AuditTable(TableObject):
    """Append-only: nothing updates or deletes audit rows but the retention cleanup,
    and the pseudonymisation of the ids of a forgotten user or session
    (:meth:`quoting`, :meth:`rewrite_rows`)."""

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
        row: dict[str, Any] = {"logged_at": to_epoch_us(at), "namespace": namespace}
        row["actor"] = actor
        row.update(action=action, target_ids=ids_param, details=text)
        self.store.statements.insert(
            "audit_log", row, placeholders={"logged_at": "make_timestamp(?)", "target_ids": ids_sql}
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

    def sessions_started_for(self, user_id: str, namespace: str | None) -> list[tuple[str, str]]:
        """(namespace, session_id) of every session the trail says was started for
        ``user_id`` (or evicted from its sessions), in one namespace or all: found even
        when the session row is long gone (a TTL cleanup keeps the events)."""
        quoted = json.dumps(user_id, ensure_ascii=False)  # as ``append`` wrote it
        sql = (
            "SELECT DISTINCT namespace, target FROM (SELECT namespace,"
            " unnest(target_ids) AS target FROM audit_log WHERE action IN (?, ?)"
            " AND contains(details, ?) AND CASE WHEN json_valid(details)"
            " THEN json_extract_string(details, '$.user_id') = ? ELSE false END"
        )
        params: list[Any] = ["session_start", "session_evicted", quoted, user_id]
        if namespace is not None:
            sql += " AND namespace = ?"
            params.append(namespace)
        rows = self.store.run(sql + ") WHERE target IS NOT NULL ORDER BY ALL", params)
        return [(str(r[0]), str(r[1])) for r in rows]

    def quoting(
        self, needles: Sequence[str], namespaces: Sequence[str] | None
    ) -> list[tuple[int, str, list[str], str | None]]:
        """(id, actor, target_ids, details) of the rows whose actor, target ids or
        details contain one of ``needles``: rows of ``namespaces`` and rows of no
        namespace (store-wide actions), or every row when ``namespaces`` is None."""
        if not needles:
            return []
        text = f"concat_ws(chr({ord(_SEP)}), actor, array_to_string(target_ids, chr({ord(_SEP)})), details)"
        found: dict[int, tuple[int, str, list[str], str | None]] = {}
        for start in range(0, len(needles), 100):  # a bounded statement per 100 needles
            chunk = list(needles[start : start + 100])
            sql = f"SELECT {_COLUMNS} FROM audit_log WHERE ("
            sql += " OR ".join(f"contains({text}, ?)" for _ in chunk) + ")"
            params: list[Any] = list(chunk)
            if namespaces is not None:
                sql += " AND (namespace IS NULL OR namespace IN (SELECT unnest(?::VARCHAR[])))"
                params.append(list(namespaces))
            for row in self.store.run(sql + " ORDER BY id", params):
                found[int(row[0])] = (int(row[0]), row[3], list(row[5] or []), row[6])
        return [found[key] for key in sorted(found)]

    def rewrite_rows(self, rows: Sequence[tuple[int, str, list[str], str | None]]) -> int:
        """Replace the actor, target ids and details of rows by id (pseudonymised ids:
        what the rows say happened, and when, stays); returns how many."""
        self._write()
        if not rows:
            return 0
        data = pa.table(
            {
                "id": pa.array([r[0] for r in rows], pa.int64()),
                "actor": pa.array([r[1] for r in rows], pa.string()),
                "target_ids": pa.array([r[2] for r in rows], pa.list_(pa.string())),
                "details": pa.array([r[3] for r in rows], pa.string()),
            }
        )
        with self.store.registered("_nbmemory_audit_rows", data) as view:
            self.store.statements.update(
                "audit_log",
                "actor = v.actor, target_ids = v.target_ids, details = v.details",
                where_sql="audit_log.id = v.id",
                from_=f"{view} v",
            )
        return len(rows)

    def count_older(self, cutoff: dt.datetime) -> int:
        return int(
            self.store.run("SELECT count(*) FROM audit_log WHERE logged_at < ?", [cutoff])[0][0]
        )

    def delete_older(self, cutoff: dt.datetime) -> int:
        """Apply the retention: delete rows logged before ``cutoff``; returns how many."""
        self._write()
        return len(
            self.store.statements.delete("audit_log", "logged_at < ?", [cutoff], returning=("id",))
        )


class MetaTable(TableObject):
    table = META

    def get(self, key: str) -> str | None:
        rows = self.store.run("SELECT value FROM nbmemory_meta WHERE key = ?", [key])
        return rows[0][0] if rows else None

    def setdefault(self, key: str, value: str) -> str:
        """The value of ``key``, stored as ``value`` first when there is none."""
        self._write()
        self.store.statements.insert("nbmemory_meta", {"key": key, "value": value}, if_absent=True)
        stored = self.get(key)
        assert stored is not None
        return stored

    def delete(self, key: str) -> bool:
        """Remove ``key``; True when it was there."""
        self._write()
        present = self.get(key) is not None
        self.store.statements.delete("nbmemory_meta", "key = ?", [key])
        return present
