"""The append-only audit trail (seed 003): who changed what, when.

Every mutation of a store appends one row to ``audit_log``: actor, action, the
namespace, target ids and a JSON ``details`` object.  Nothing updates or deletes
audit rows except :func:`cleanup`, which applies the retention period (90 days by
default).  Details say *that* something happened (``{"redacted": 2}``), never
the secret itself.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from typing import Any

import pandas as pd

from .store import Store, to_epoch_us

_SEP = "\x1f"  # ASCII unit separator: never in an id nbmemory makes


def record(
    store: Store,
    action: str,
    *,
    actor: str = "api",
    namespace: str | None = None,
    target_ids: Sequence[str] = (),
    details: dict[str, Any] | None = None,
    at: dt.datetime | None = None,
) -> None:
    """Append one audit row."""
    when = at or dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    ids = [str(i) for i in target_ids]
    # Parameters are bound as an epoch-microsecond integer and a separator-joined
    # string: DuckDB 2.0 binds datetime and list parameters ~30x slower, and this
    # row is written on every add_event.
    if any(_SEP in i for i in ids):
        ids_sql, ids_param = "?::VARCHAR[]", ids
    else:
        ids_sql, ids_param = f"string_split(?, chr({ord(_SEP)}))", _SEP.join(ids)
        if not ids:
            ids_sql, ids_param = "?::VARCHAR[]", []
    store.execute(
        "INSERT INTO audit_log (logged_at, namespace, actor, action, target_ids, details)"
        f" VALUES (make_timestamp(?), ?, ?, ?, {ids_sql}, ?)",
        [
            to_epoch_us(when),
            namespace,
            actor,
            action,
            ids_param,
            json.dumps(details or {}, ensure_ascii=False, default=str, sort_keys=True),
        ],
    )


def frame(
    store: Store,
    *,
    namespace: str | None = None,
    action: str | None = None,
    since: dt.datetime | None = None,
    limit: int | None = None,
) -> pd.DataFrame:
    """Audit rows as a DataFrame, newest first."""
    clauses: list[str] = []
    params: list[Any] = []
    if namespace is not None:
        clauses.append("namespace = ?")
        params.append(namespace)
    if action is not None:
        clauses.append("action = ?")
        params.append(action)
    if since is not None:
        clauses.append("logged_at >= ?")
        params.append(since)
    sql = "SELECT id, logged_at, namespace, actor, action, target_ids, details FROM audit_log"
    if clauses:
        sql += " WHERE " + " AND ".join(clauses)
    sql += " ORDER BY id DESC"
    if limit is not None:
        sql += " LIMIT ?"
        params.append(int(limit))
    return store.df(sql, params)


def cleanup(store: Store, retention_days: int, *, now: dt.datetime | None = None) -> int:
    """Delete audit rows older than the retention period; returns how many went."""
    now = now or dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    cutoff = now - dt.timedelta(days=retention_days)
    rows = store.fetchall("DELETE FROM audit_log WHERE logged_at < ? RETURNING id", [cutoff])
    return len(rows)


def count_older(store: Store, retention_days: int, *, now: dt.datetime | None = None) -> int:
    """How many audit rows :func:`cleanup` would delete now (for a dry run)."""
    now = now or dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    cutoff = now - dt.timedelta(days=retention_days)
    row = store.fetchone("SELECT count(*) FROM audit_log WHERE logged_at < ?", [cutoff])
    return int(row[0]) if row else 0
