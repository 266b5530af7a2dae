"""``store.sessions``: an agent's operational state per user and namespace."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from typing import Any

import pandas as pd

from .backend import TableHost
from .changes import Change
from .schema import EVENT_SEQ, SESSIONS
from .table import TableObject

SESSION_COLUMNS = SESSIONS.names
_SESSION = ", ".join(SESSION_COLUMNS)
ACTIVE = "active"
CLOSED = "closed"
#: The key of a session's state that records its last built context (ids, never texts).
LAST_CONTEXT = "last_context"


def forget_context_ids(host: TableHost, ids: Sequence[str]) -> int:
    """Take deleted event ids out of every session's recorded last context
    (``state["last_context"]``, :mod:`nbmemory.sessions.context_record`): an erased
    event leaves no id in a session's state.  Returns the sessions rewritten."""
    rows = host.run(
        "SELECT namespace, session_id, state FROM sessions WHERE list_has_any("
        f"json_extract_string(state, '$.{LAST_CONTEXT}.ids[*]'), ?::VARCHAR[])",
        [list(ids)],
    )
    gone = set(ids)
    for namespace, session_id, text in rows:
        state = json.loads(text)
        record = state[LAST_CONTEXT]
        kept = [i for i, e in enumerate(record["ids"]) if e not in gone]
        for name in ("ids", "strategies"):
            if isinstance(record.get(name), list):
                record[name] = [record[name][i] for i in kept if i < len(record[name])]
        record["digest"] = None  # of texts that included the erased ones: never valid again
        host.statements.update(
            "sessions",
            "state = ?",
            [json.dumps(state, sort_keys=True, ensure_ascii=False)],
            "namespace = ? AND session_id = ?",
            [namespace, session_id],
        )
    return len(rows)


class SessionsTable(TableObject):
    table = SESSIONS

    # -- reads ------------------------------------------------------------------------
    def tool_turns(self, namespace: str, session_id: str, limit: int) -> list[dict[str, Any]]:
        """The last ``limit`` turns of a session that call tools or answer a call, oldest first."""
        rows: list[dict[str, Any]] = self.store.run(
            "SELECT * FROM (SELECT id, role, tool_call_id, tool_name, tool_calls_json, content,"
            " metadata, created_at, seq FROM events WHERE namespace = ? AND session_id = ?"
            " AND (tool_calls_json IS NOT NULL OR role = 'tool' OR tool_name IS NOT NULL)"
            " ORDER BY created_at DESC, seq DESC LIMIT ?) ORDER BY created_at, seq",
            [namespace, session_id, int(limit)],
            "records",
        )
        return rows

    def context_freshness(self, namespace: str) -> list[Any]:
        """What tells a context of ``namespace`` built earlier (in another process) is
        still valid: [last seq, event count, last updated_at (ISO), events waiting for
        a vector]; any change of it since the context was built makes it stale."""
        row = self.store.run(
            f"SELECT max({EVENT_SEQ}), count(*), max(updated_at),"
            " count(*) FILTER (WHERE embedding_model IS NULL AND embedding_error IS NULL)"
            " FROM events WHERE namespace = ?",
            [namespace],
        )[0]
        return [row[0], row[1], None if row[2] is None else row[2].isoformat(), row[3]]

    def get(self, namespace: str, session_id: str) -> dict[str, Any] | None:
        rows = self.store.run(
            f"SELECT {_SESSION} FROM sessions WHERE namespace = ? AND session_id = ?",
            [namespace, session_id],
            "records",
        )
        return rows[0] if rows else None

    def records(self, namespace: str, session_id: str | None = None) -> list[dict[str, Any]]:
        """Every session row of a namespace (or one), by session id."""
        sql = f"SELECT {_SESSION} FROM sessions WHERE namespace = ?"
        params = [namespace]
        if session_id is not None:
            sql += " AND session_id = ?"
            params.append(session_id)
        rows: list[dict[str, Any]] = self.store.run(sql + " ORDER BY session_id", params, "records")
        return rows

    def active_for_user(
        self, namespace: str, user_id: str, not_before: dt.datetime
    ) -> list[dict[str, Any]]:
        """Active, unexpired sessions of a user in a namespace, least recently active first."""
        rows: list[dict[str, Any]] = self.store.run(
            f"SELECT {_SESSION} FROM sessions WHERE namespace = ? AND user_id = ?"
            " AND status = ? AND last_activity >= ? ORDER BY last_activity, created_at, session_id",
            [namespace, user_id, ACTIVE, not_before],
            "records",
        )
        return rows

    def of_user(self, user_id: str, namespace: str | None) -> list[tuple[str, str]]:
        """(namespace, session_id) of the session rows of ``user_id`` (one namespace or all)."""
        sql = "SELECT namespace, session_id FROM sessions WHERE user_id = ?"
        params = [user_id]
        if namespace is not None:
            sql += " AND namespace = ?"
            params.append(namespace)
        return [(str(r[0]), str(r[1])) for r in self.store.run(sql + " ORDER BY ALL", params)]

    def owners(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], str]:
        """(namespace, session_id) -> user_id of those of ``keys`` that have a row."""
        if not keys:
            return {}
        rows = self.store.run(
            "SELECT namespace, session_id, user_id FROM sessions"
            " WHERE namespace || chr(31) || session_id IN (SELECT unnest(?::VARCHAR[]))",
            [[f"{ns}\x1f{sid}" for ns, sid in keys]],
        )
        return {(str(r[0]), str(r[1])): str(r[2]) for r in rows}

    def active_keys(self) -> dict[tuple[str, str], dt.datetime]:
        """(namespace, session_id) -> last_activity of every active session."""
        rows = self.store.run(
            "SELECT namespace, session_id, last_activity FROM sessions WHERE status = ?", [ACTIVE]
        )
        return {(r[0], r[1]): r[2] for r in rows}

    def keys(self) -> set[tuple[str, str]]:
        return set(self.store.run("SELECT namespace, session_id FROM sessions"))

    def expired(self, cutoff: dt.datetime, namespace: str | None) -> pd.DataFrame:
        """Session rows (any status) whose last activity is before ``cutoff``."""
        sql = f"SELECT {_SESSION} FROM sessions WHERE last_activity < ?"
        params: list[Any] = [cutoff]
        if namespace is not None:
            sql += " AND namespace = ?"
            params.append(namespace)
        frame: pd.DataFrame = self.store.run(
            sql + " ORDER BY namespace, last_activity, session_id", params, "df"
        )
        return frame

    def namespaces_of(self, session_id: str) -> list[str]:
        """Namespaces where a session id has a session row or events."""
        rows = self.store.run(
            "SELECT namespace FROM sessions WHERE session_id = ?"
            " UNION SELECT namespace FROM events WHERE session_id = ?",
            [session_id, session_id],
        )
        return sorted(r[0] for r in rows)

    def with_events(self, namespace: str | None) -> pd.DataFrame:
        """Tracked sessions joined with per-session event counts (and untracked sessions).

        ``status`` is ``untracked`` for session ids that only appear on events.
        """
        ns_clause = "WHERE namespace = ?" if namespace is not None else ""
        params: list[Any] = [namespace] if namespace is not None else []
        frame: pd.DataFrame = self.store.run(
            f"""
            WITH s AS (SELECT * FROM sessions {ns_clause}),
            e AS (
                SELECT namespace, session_id, count(*) AS events,
                       min(created_at) AS first_at, max(created_at) AS last_at
                FROM events {ns_clause} GROUP BY ALL
            )
            SELECT coalesce(s.namespace, e.namespace) AS namespace,
                   coalesce(s.session_id, e.session_id) AS session_id,
                   coalesce(s.user_id, '') AS user_id,
                   coalesce(s.status, 'untracked') AS status,
                   coalesce(e.events, 0) AS events,
                   coalesce(s.created_at, e.first_at) AS created_at,
                   coalesce(s.last_activity, e.last_at) AS last_activity,
                   s.closed_at AS closed_at,
                   s.state AS state
            FROM s FULL OUTER JOIN e ON s.namespace = e.namespace AND s.session_id = e.session_id
            """,
            params + params,
            "df",
        )
        return frame

    # -- writes -----------------------------------------------------------------------
    def insert(self, row: dict[str, Any]) -> None:
        self._write()
        self.store.claim()  # the caller checked the session is new: keep that true
        row = self._redact(row)
        self.store.statements.insert("sessions", {c: row.get(c) for c in SESSION_COLUMNS})
        self._note(row["namespace"], row["session_id"], row["status"], row["last_activity"])

    def insert_rows(self, rows: Sequence[dict[str, Any]]) -> int:
        count = super().insert_rows(rows)
        for row in rows:
            self._note(row["namespace"], row["session_id"], row["status"], row["last_activity"])
        return count

    def touch(self, namespace: str, session_id: str, now: dt.datetime) -> None:
        """Move ``last_activity`` forward (never back) on an active session."""
        self._write()
        rows = self.store.statements.update(
            "sessions",
            "last_activity = greatest(last_activity, ?)",
            [now],
            "namespace = ? AND session_id = ? AND status = ?",
            [namespace, session_id, ACTIVE],
            returning=("session_id",),
        )
        if rows:
            self._note(namespace, session_id, ACTIVE, now)

    def save_state(self, namespace: str, session_id: str, state: str, now: dt.datetime) -> None:
        self._write()
        state = self._redact({"state": state}, namespace)["state"]
        self.store.statements.update(
            "sessions",
            "state = ?, last_activity = greatest(last_activity, ?)",
            [state, now],
            "namespace = ? AND session_id = ?",
            [namespace, session_id],
        )

    def close(self, namespace: str, session_id: str, state: str, now: dt.datetime) -> None:
        self._write()
        state = self._redact({"state": state}, namespace)["state"]
        self.store.statements.update(
            "sessions",
            "state = ?, status = ?, closed_at = ?, last_activity = greatest(last_activity, ?)",
            [state, CLOSED, now, now],
            "namespace = ? AND session_id = ?",
            [namespace, session_id],
        )
        self._note(namespace, session_id, CLOSED, now)

    def reopen(self, namespace: str, session_id: str, now: dt.datetime) -> None:
        self._write()
        self.store.statements.update(
            "sessions",
            "status = ?, closed_at = NULL, last_activity = greatest(last_activity, ?)",
            [ACTIVE, now],
            "namespace = ? AND session_id = ?",
            [namespace, session_id],
        )
        self._note(namespace, session_id, ACTIVE, now)

    def forget_context_ids(self, ids: Sequence[str]) -> int:
        """See :func:`forget_context_ids`."""
        self._write()
        return forget_context_ids(self.store, ids)

    def delete(self, namespace: str, session_ids: Sequence[str]) -> list[str]:
        self._write()
        rows = self.store.statements.delete(
            "sessions",
            "namespace = ? AND session_id IN (SELECT unnest(?::VARCHAR[]))",
            [namespace, list(session_ids)],
            returning=("session_id",),
        )
        gone = [r[0] for r in rows]
        if gone:
            self.store.changed(Change(sessions_inactive={(namespace, s) for s in gone}))
        return gone

    def _note(self, namespace: str, session_id: str, status: str, last: Any) -> None:
        key = (namespace, session_id)
        if status == ACTIVE:
            self.store.changed(Change(sessions_active={key: last}))
        else:
            self.store.changed(Change(sessions_inactive={key}))
