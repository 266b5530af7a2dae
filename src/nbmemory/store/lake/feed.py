"""The lake's change feed: what other writers' snapshots changed, row by row.

:meth:`LakeStore.refresh <.store.LakeStore.refresh>` finds the snapshots other
writers committed since it last looked; :func:`changes` reads their rows from
DuckLake's ``ducklake_table_changes`` and says what they mean to the caches (a
:class:`~..changes.Change`): events added, deleted, re-texted; vectors added
and dropped; sessions active and closed.  Never a reload of a table.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..changes import Change, Vectors
from ..schema import READ_COLUMNS
from .url import LAKE

#: Runs one statement on the lake's connection (the store's ``run``).
Run = Callable[..., Any]


def changes(run: Run, first: int, last: int, foreign: set[int]) -> Change:
    """What the snapshots ``foreign`` (of other writers, between ``first`` and ``last``)
    changed in the rows the caches follow: events, their vectors, sessions."""
    change = Change()
    wanted = sorted(foreign)
    rows = _feed(run, "events", first, last, wanted, READ_COLUMNS + ("seq",))
    before: dict[str, Any] = {}
    for kind, record in rows:
        if kind == "insert":
            change.added.append(record)
        elif kind == "delete":
            change.deleted.append(record["id"])
        elif kind == "update_preimage":
            before[record["id"]] = record["content"]
        elif kind == "update_postimage":
            if before.get(record["id"]) != record["content"]:
                change.retexted.append(
                    tuple(
                        record[c]
                        for c in ("id", "namespace", "session_id", "content", "created_at")
                    )
                    + (record["seq"],)
                )
            else:
                change.updated.append(record["id"])
    change.added.sort(key=lambda r: (r["created_at"], r["seq"]))
    change.bulk = len(change.added) > 1000
    by_model: dict[str, list[dict[str, Any]]] = {}
    for kind, record in _feed(
        run,
        "event_vectors",
        first,
        last,
        wanted,
        ("id", "namespace", "model", "embedding", "passage"),
    ):
        if kind == "insert":
            by_model.setdefault(record["model"], []).append(record)
        elif kind == "delete":
            change.unvectored.append(record["id"])
    for model, records in by_model.items():
        change.vectors.append(
            Vectors(
                model,
                [r["id"] for r in records],
                [r["namespace"] for r in records],
                np.asarray([r["embedding"] for r in records], dtype=np.float32),
                [r["passage"] for r in records],
            )
        )
    for kind, record in _feed(
        run, "sessions", first, last, wanted, ("namespace", "session_id", "status", "last_activity")
    ):
        key = (record["namespace"], record["session_id"])
        if kind in ("insert", "update_postimage") and record["status"] == "active":
            change.sessions_inactive.discard(key)
            change.sessions_active[key] = record["last_activity"]
        elif kind in ("delete", "update_postimage"):
            change.sessions_active.pop(key, None)
            change.sessions_inactive.add(key)
    return change


def _feed(
    run: Run, table: str, first: int, last: int, snapshots: list[int], columns: Sequence[str]
) -> list[tuple[str, dict[str, Any]]]:
    rows = run(
        f"SELECT change_type, {', '.join(columns)} FROM ducklake_table_changes(?, 'main', ?, ?, ?)"
        " WHERE snapshot_id IN (SELECT unnest(?::BIGINT[])) ORDER BY snapshot_id, rowid",
        [LAKE, table, first, last, snapshots],
        "records",
    )
    return [(r.pop("change_type"), r) for r in rows]
