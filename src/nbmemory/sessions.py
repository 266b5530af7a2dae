"""Sessions of seed 003: operational state per user + namespace, with TTL.

A session row (table ``sessions``) holds what an agent needs to resume work after
a restart: its ``state`` (a JSON object: current plan, tool history, anything
else) and the times it was created, last used and closed.

Rules (all of them tested in ``tests/test_sessions.py``):

* ``last_activity`` moves forward on every use: starting/continuing the session,
  saving its state, and every ``add_event`` / ``add_events`` / ``get_context``
  in it (throttled to one write a second, so hot loops stay cheap).
* A session whose ``last_activity`` is older than ``Settings.session_ttl_hours``
  (24 h) is *expired*: it cannot be continued and :func:`expired` lists it for
  cleanup (``dry_run`` shows the list without deleting).  Cleanup removes the
  session row (its operational state), never the memories recorded in it.
* At most ``Settings.max_concurrent_sessions`` (5) sessions are active per
  user + namespace.  Starting one more closes the least recently active one
  first (its state is kept, status ``closed``, audit action ``session_evicted``);
  it is never an error.
* Closing a session persists its final state (``persist_on_exit`` of seed 003).
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from .errors import InvalidInput, NbMemoryError
from .store import Store

ACTIVE = "active"
CLOSED = "closed"

SESSION_COLUMNS = (
    "namespace",
    "session_id",
    "user_id",
    "status",
    "state",
    "created_at",
    "last_activity",
    "closed_at",
)

#: Columns of :meth:`Memory.sessions`.
LIST_COLUMNS = [
    "namespace",
    "session_id",
    "user_id",
    "status",
    "events",
    "created_at",
    "last_activity",
    "expires_at",
    "closed_at",
    "state",
]


class SessionNotFound(NbMemoryError, KeyError):
    """No usable session with that id in the namespace (never created, deleted or expired)."""

    def __init__(self, session_id: str, namespace: str, why: str = "not found") -> None:
        super().__init__(
            f"session {session_id!r} {why} in namespace {namespace!r}; "
            "list sessions with mem.sessions() (or `nbmemory state list`) "
            "or start a new one with mem.start_session()"
        )
        self.session_id = session_id
        self.namespace = namespace

    def __str__(self) -> str:
        return str(self.args[0])


def default_state() -> dict[str, Any]:
    """The state a new session starts with (seed 003: a current plan and tool history)."""
    return {"current_plan": [], "tool_history": []}


def new_session_id() -> str:
    return "sess_" + uuid.uuid4().hex[:16]


@dataclass
class Session:
    """One row of ``sessions``; ``state`` is the parsed JSON object."""

    namespace: str
    session_id: str
    user_id: str
    status: str
    created_at: dt.datetime
    last_activity: dt.datetime
    closed_at: dt.datetime | None = None
    state: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Session:
        values = dict(record)
        values["state"] = parse_state(values.get("state"))
        return cls(**{k: values[k] for k in SESSION_COLUMNS})

    def expires_at(self, ttl_hours: float) -> dt.datetime:
        """When the TTL removes it unless it is used again."""
        return self.last_activity + dt.timedelta(hours=ttl_hours)

    def is_expired(self, now: dt.datetime, ttl_hours: float) -> bool:
        return self.last_activity < now - dt.timedelta(hours=ttl_hours)

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in SESSION_COLUMNS}


def parse_state(raw: Any) -> dict[str, Any]:
    if raw is None:
        return {}
    if isinstance(raw, dict):
        return raw
    value = json.loads(raw)
    return value if isinstance(value, dict) else {"_value": value}


def dump_state(state: Any) -> str:
    """The state as JSON text; it must be a JSON-serialisable dict."""
    if not isinstance(state, dict):
        raise InvalidInput(f"session state must be a dict, got {type(state).__name__}")
    try:
        return json.dumps(state, ensure_ascii=False, allow_nan=False, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"session state must be JSON-serialisable: {exc}") from None


def get(store: Store, namespace: str, session_id: str) -> Session | None:
    rows = store.records(
        f"SELECT {', '.join(SESSION_COLUMNS)} FROM sessions WHERE namespace = ? AND session_id = ?",
        [namespace, session_id],
    )
    return Session.from_record(rows[0]) if rows else None


def insert(store: Store, session: Session) -> None:
    store.execute(
        f"INSERT INTO sessions ({', '.join(SESSION_COLUMNS)}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [
            session.namespace,
            session.session_id,
            session.user_id,
            session.status,
            dump_state(session.state),
            session.created_at,
            session.last_activity,
            session.closed_at,
        ],
    )


def active_for_user(
    store: Store, namespace: str, user_id: str, not_before: dt.datetime
) -> list[Session]:
    """Active, unexpired sessions of a user in a namespace, least recently active first."""
    rows = store.records(
        f"SELECT {', '.join(SESSION_COLUMNS)} FROM sessions WHERE namespace = ? AND user_id = ?"
        " AND status = ? AND last_activity >= ? ORDER BY last_activity, created_at, session_id",
        [namespace, user_id, ACTIVE, not_before],
    )
    return [Session.from_record(r) for r in rows]


def touch(store: Store, namespace: str, session_id: str, now: dt.datetime) -> None:
    """Move ``last_activity`` forward (never back) on an active session."""
    store.execute(
        "UPDATE sessions SET last_activity = greatest(last_activity, ?)"
        " WHERE namespace = ? AND session_id = ? AND status = ?",
        [now, namespace, session_id, ACTIVE],
    )


def save_state(
    store: Store, namespace: str, session_id: str, state: dict[str, Any], now: dt.datetime
) -> None:
    store.execute(
        "UPDATE sessions SET state = ?, last_activity = greatest(last_activity, ?)"
        " WHERE namespace = ? AND session_id = ?",
        [dump_state(state), now, namespace, session_id],
    )


def close(
    store: Store, namespace: str, session_id: str, state: dict[str, Any], now: dt.datetime
) -> None:
    store.execute(
        "UPDATE sessions SET state = ?, status = ?, closed_at = ?,"
        " last_activity = greatest(last_activity, ?) WHERE namespace = ? AND session_id = ?",
        [dump_state(state), CLOSED, now, now, namespace, session_id],
    )


def reopen(store: Store, namespace: str, session_id: str, now: dt.datetime) -> None:
    store.execute(
        "UPDATE sessions SET status = ?, closed_at = NULL, last_activity = greatest(last_activity, ?)"
        " WHERE namespace = ? AND session_id = ?",
        [ACTIVE, now, namespace, session_id],
    )


def delete(store: Store, namespace: str, session_ids: list[str]) -> list[str]:
    rows = store.fetchall(
        "DELETE FROM sessions WHERE namespace = ? AND session_id IN (SELECT unnest(?::VARCHAR[]))"
        " RETURNING session_id",
        [namespace, list(session_ids)],
    )
    return [r[0] for r in rows]


def expired(store: Store, cutoff: dt.datetime, namespace: str | None) -> pd.DataFrame:
    """Session rows (any status) whose last activity is before ``cutoff``."""
    sql = f"SELECT {', '.join(SESSION_COLUMNS)} FROM sessions WHERE last_activity < ?"
    params: list[Any] = [cutoff]
    if namespace is not None:
        sql += " AND namespace = ?"
        params.append(namespace)
    sql += " ORDER BY namespace, last_activity, session_id"
    return store.df(sql, params)


def active_keys(store: Store) -> dict[tuple[str, str], dt.datetime]:
    """(namespace, session_id) -> last_activity of every active session (for the touch cache)."""
    rows = store.fetchall(
        "SELECT namespace, session_id, last_activity FROM sessions WHERE status = ?", [ACTIVE]
    )
    return {(r[0], r[1]): r[2] for r in rows}


def listing(
    store: Store,
    *,
    namespace: str | None,
    user_id: str | None,
    ttl_hours: float,
    now: dt.datetime,
    include_untracked: bool = True,
) -> pd.DataFrame:
    """Tracked sessions plus (optionally) sessions that only exist as events.

    ``status`` is ``active``, ``expired`` (active but past its TTL), ``closed``, or
    ``untracked`` (events carry the session id but no session was started for it).
    """
    ns_clause = "WHERE namespace = ?" if namespace is not None else ""
    params: list[Any] = [namespace] if namespace is not None else []
    sql = f"""
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
    """
    frame = store.df(sql, params + params)
    if not include_untracked:
        frame = frame[frame["status"] != "untracked"]
    if user_id is not None:
        frame = frame[frame["user_id"] == user_id]
    ttl = pd.Timedelta(hours=ttl_hours)
    tracked = frame["status"] != "untracked"
    frame["expires_at"] = (frame["last_activity"] + ttl).where(tracked)
    frame["state"] = [parse_state(s) if isinstance(s, str) else None for s in frame["state"]]
    frame["events"] = frame["events"].astype("int64")
    expired_mask = (frame["status"] == ACTIVE) & (frame["last_activity"] < now - ttl)
    frame.loc[expired_mask, "status"] = "expired"
    frame = frame.sort_values(
        ["namespace", "last_activity", "session_id"], ascending=[True, False, True]
    )
    return frame.reindex(columns=LIST_COLUMNS).reset_index(drop=True)
