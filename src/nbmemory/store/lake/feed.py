"""The lake's change feed: what other writers' snapshots changed, row by row.

:meth:`LakeStore.refresh <.store.LakeStore.refresh>` finds the snapshots other
writers committed since it last looked (:class:`Snapshots`); :func:`changes`
reads their rows from DuckLake's ``ducklake_table_changes``, only of the tables
they wrote (:func:`touched`), and says what they mean to the caches (a
:class:`~..changes.Change`): events added, deleted, re-texted; vectors added
and dropped; sessions active and closed.  Never a reload of a table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import duckdb
import numpy as np

from ..changes import Change, Vectors
from ..schema import READ_COLUMNS
from .url import LAKE

#: Runs one statement on the lake's connection (the store's ``run``).
Run = Callable[..., Any]

#: The tables whose rows the caches follow.
FOLLOWED = ("events", "event_vectors", "sessions")

#: Kinds of change in a snapshot's changes that name the ids of the tables whose rows
#: they added or deleted, as DuckLake's catalog table ``ducklake_snapshot_changes``
#: writes them and as its ``snapshots()`` shows them.  Any other kind (a table
#: created, altered or compacted, a schema change) makes the feed read every table.
_ROW_CHANGES = frozenset(
    {
        "inserted_into_table",
        "deleted_from_table",
        "tables_inserted_into",
        "tables_deleted_from",
        "inlined_insert",
        "inlined_delete",
    }
)

#: What one snapshot changed: kind -> table ids or names (None: not known).
Changed = Mapping[str, Sequence[str]] | None


class Snapshots:
    """The snapshots other writers made in a range of ids, each with what it changed.

    Read from the catalog's own ``ducklake_snapshot_changes`` table, which the
    catalog database filters by id.  DuckLake's ``snapshots()`` reads every
    snapshot the lake ever made and filters after: 35-70 ms of a reader's CPU per
    call at 4,000 snapshots, against 2 ms, and it grows with the lake's history.
    Where that table cannot be read (another layout), ``snapshots()`` it is.
    """

    def __init__(self, run: Run, catalog: str, schema: str | None) -> None:
        self._run = run
        schema = schema or ("public" if catalog == "postgres" else "main")
        name = schema.replace('"', '""')
        self._table: str | None = f'__ducklake_metadata_{LAKE}."{name}".ducklake_snapshot_changes'

    def foreign(self, first: int, last: int, author: str) -> list[tuple[int, Changed]]:
        """(id, what it changed) of the snapshots in ``[first, last]`` not by ``author``."""
        if self._table is not None:
            try:
                rows = self._run(
                    f"SELECT snapshot_id, changes_made FROM {self._table}"
                    " WHERE snapshot_id BETWEEN ? AND ? AND coalesce(author, '') <> ?",
                    [first, last, author],
                )
                return [(int(i), _parsed(text)) for i, text in rows]
            except (duckdb.CatalogException, duckdb.BinderException):
                self._table = None  # not DuckLake's layout as this version knows it
        rows = self._run(
            f"SELECT snapshot_id, changes FROM {LAKE}.snapshots()"
            " WHERE snapshot_id BETWEEN ? AND ? AND coalesce(author, '') <> ?",
            [first, last, author],
        )
        return [(int(i), changed) for i, changed in rows]


def _parsed(text: str | None) -> Changed:
    """``inlined_insert:3,inserted_into_table:9`` as {kind: [value, ...]}; None when a
    part has no kind (a quoted name with a comma, say)."""
    changed: dict[str, list[str]] = {}
    for part in (text or "").split(","):
        if not part:
            continue
        kind, colon, value = part.partition(":")
        if not colon:
            return None
        changed.setdefault(kind, []).append(value)
    return changed


class TableNames:
    """The lake's table ids -> names (DuckLake's ``ducklake_table_info``), asked once,
    and again after a snapshot made or altered a table."""

    def __init__(self, run: Run) -> None:
        self._run = run
        self._names: dict[int, str] | None = None

    def __call__(self) -> dict[int, str]:
        if self._names is None:
            rows = self._run("SELECT table_id, table_name FROM ducklake_table_info(?)", [LAKE])
            self._names = {int(i): name for i, name in rows}
        return self._names

    def forget(self) -> None:
        self._names = None


def touched(snapshot_changes: Iterable[Changed], names: TableNames) -> set[str] | None:
    """The followed tables whose rows the snapshots changed, from their ``changes``
    maps; None when a snapshot changed something else (then every table is read).

    Reading a table's changes costs a catalog query of 25-75 ms even when the
    snapshots wrote nothing to it, and most snapshots of a team's lake write one
    table (an event, or a batch of its vectors).
    """
    ids: set[int] = set()
    for changed in snapshot_changes:
        if changed is None:
            names.forget()
            return None
        for kind, values in changed.items():
            if kind not in _ROW_CHANGES:
                names.forget()  # a table made, altered, dropped: its id may be new
                return None
            try:
                ids.update(int(v) for v in values)
            except ValueError:
                return None
    known = names()
    if not ids <= set(known):
        names.forget()
        return None  # a table this process does not know yet: read them all
    return {known[i] for i in ids} & set(FOLLOWED)


def changes(
    run: Run, first: int, last: int, foreign: set[int], tables: set[str] | None = None
) -> Change:
    """What the snapshots ``foreign`` (of other writers, between ``first`` and ``last``)
    changed in the rows the caches follow: events, their vectors, sessions (only
    those of ``tables`` when given: see :func:`touched`)."""
    change = Change()
    wanted = sorted(foreign)
    read = set(FOLLOWED) if tables is None else tables
    rows = (
        _feed(run, "events", first, last, wanted, READ_COLUMNS + ("seq",))
        if "events" in read
        else []
    )
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
    vector_rows = (
        _feed(
            run,
            "event_vectors",
            first,
            last,
            wanted,
            ("id", "namespace", "model", "embedding", "passage"),
        )
        if "event_vectors" in read
        else []
    )
    for kind, record in vector_rows:
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
    session_rows = (
        _feed(
            run,
            "sessions",
            first,
            last,
            wanted,
            ("namespace", "session_id", "status", "last_activity"),
        )
        if "sessions" in read
        else []
    )
    for kind, record in session_rows:
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
