"""Keeping a lake small: what it holds, its snapshots, compaction, expiry, erasure.

Every commit is a snapshot.  Small commits (one ``add_event``) are *inlined*:
their rows are kept in the catalog database instead of a Parquet file each, so
ten thousand single-event commits do not become ten thousand files.
:func:`compact` moves inlined rows into Parquet and merges small adjacent files;
:func:`expire` forgets snapshots older than a cut-off (time travel stops there)
and deletes the files nothing refers to any more.  Neither erases what was
deleted: :func:`erase` (``purge`` on a lake) does.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import random
import time
from typing import Any, Protocol

import duckdb
import pandas as pd

from ...errors import StoreError


class Lake(Protocol):
    """What maintenance asks of the lake's store (:class:`~.store.LakeStore`), which
    calls these functions: a protocol, so this module does not import it back."""

    path: str
    lake_name: str

    def exclusively(self) -> contextlib.AbstractContextManager[None]: ...

    def current_snapshot(self) -> int: ...

    def fetch_lake(self, sql: str, params: Any = None, fetch: str = "rows") -> Any: ...

    def commit_lake(self, sql: str, params: Any, message: str) -> list[tuple]: ...


#: The commit messages of the snapshots maintenance makes.
COMPACT = "nbmemory compact"
PURGE = "nbmemory purge"
#: Tables of a lake, by the order ``status`` lists them.
_MAIN_TABLES = ("events", "event_vectors", "audit_log", "facts", "sessions")


def status(store: Lake) -> dict[str, Any]:
    """What the lake holds: snapshots, events, and the Parquet files of each table."""
    files = store.fetch_lake(
        "SELECT table_name, file_count, file_size_bytes FROM ducklake_table_info(?)"
        " ORDER BY table_name",
        [store.lake_name],
    )
    snapshots = store.fetch_lake(
        f"SELECT count(*), max(snapshot_id), min(snapshot_time) FROM {store.lake_name}.snapshots()"
    )[0]
    return {
        "catalog": store.path,
        "data_path": data_path(store),
        "snapshots": int(snapshots[0]),
        "current_snapshot": int(snapshots[1]),
        "oldest_snapshot_time": snapshots[2],
        "events": int(store.fetch_lake("SELECT count(*) FROM events")[0][0]),
        "files": {row[0]: int(row[1]) for row in files},
        "bytes": {row[0]: int(row[2]) for row in files},
        "files_on_disk": files_on_disk(store),
    }


def data_path(store: Lake) -> str:
    rows = store.fetch_lake(
        "SELECT value FROM ducklake_options(?) WHERE option_name = 'data_path'",
        [store.lake_name],
    )
    return str(rows[0][0]) if rows else ""


def files_on_disk(store: Lake) -> int:
    """Parquet files under the lake's data path (a local or mounted folder)."""
    root = data_path(store)
    if not root or "://" in root or not os.path.isdir(root):
        return 0
    return sum(1 for _, _, names in os.walk(root) for name in names if name.endswith(".parquet"))


def snapshots(store: Lake, limit: int = 20) -> pd.DataFrame:
    """The latest snapshots: id, time, who made it (the process's author tag), changes."""
    frame: pd.DataFrame = store.fetch_lake(
        "SELECT snapshot_id, snapshot_time, author, commit_message, changes"
        f" FROM {store.lake_name}.snapshots() ORDER BY snapshot_id DESC LIMIT ?",
        [int(limit)],
        "df",
    )
    names = {
        str(row[0]): str(row[1])
        for row in store.fetch_lake(
            "SELECT table_id, table_name FROM ducklake_table_info(?)", [store.lake_name]
        )
    }
    frame["changes"] = [_named(changes, names) for changes in frame["changes"]]
    return frame


def _named(changes: Any, names: dict[str, str]) -> Any:
    """``{'inlined_insert': ['11']}`` -> ``{'inlined_insert': ['events']}`` (ids of
    tables dropped since keep their number)."""
    if not isinstance(changes, dict):
        return changes
    return {
        kind: [names.get(str(item), str(item)) for item in items]
        if kind.startswith(("inlined_", "tables_inserted", "tables_deleted"))
        else items
        for kind, items in changes.items()
    }


def compact(store: Lake) -> dict[str, Any]:
    """Move inlined rows into Parquet and merge small files; returns files before/after.

    Holds the lake's fence alone (:mod:`.fence`): a flush, a merge and the deletion of
    old files are no safer beside another writer's transaction than a purge's steps.
    """
    before = files_on_disk(store)
    with store.exclusively():
        lake = store.lake_name
        flushed = _retrying(store, "CALL ducklake_flush_inlined_data(?)", [lake], COMPACT)
        merged = _retrying(store, "CALL ducklake_merge_adjacent_files(?)", [lake], COMPACT)
        cleaned = store.fetch_lake(
            "CALL ducklake_cleanup_old_files(?, cleanup_all => true)", [store.lake_name]
        )
    return {
        "rows_flushed": int(sum(r[2] for r in flushed)),
        "files_merged": int(sum(r[2] for r in merged)),
        "files_deleted": len(cleaned),
        "files_before": before,
        "files_after": files_on_disk(store),
    }


def expire(store: Lake, older_than: dt.timedelta) -> dict[str, Any]:
    """Forget snapshots older than ``older_than`` and delete files only they used.

    Holds the lake's fence alone (:mod:`.fence`): a commit checks conflicts against
    the records of the snapshots made since its transaction began, which expiring
    deletes.
    """
    cutoff = dt.datetime.now(dt.timezone.utc) - older_than
    with store.exclusively():
        expired = store.fetch_lake(
            "CALL ducklake_expire_snapshots(?, older_than => ?)", [store.lake_name, cutoff]
        )
        cleaned = store.fetch_lake(
            "CALL ducklake_cleanup_old_files(?, cleanup_all => true)", [store.lake_name]
        )
    return {"snapshots_expired": len(expired), "files_deleted": len(cleaned)}


#: Times a step of :func:`erase` is tried when another writer's append commits at the
#: same moment (DuckLake reports a flush and an append to one table as a conflict).
ERASE_ATTEMPTS = 30


def erase(store: Lake) -> dict[str, int]:
    """Leave no byte of a deleted row in the lake's files or its catalog.

    After a delete, DuckLake keeps the old rows for time travel: in the catalog
    (rows inlined there, and the minimum and maximum of each column of each data
    file) and in the Parquet files the older snapshots use, where later snapshots
    only mark them deleted.  ``expire`` then ``compact`` leave them all (measured:
    5 of 5 planted values in a ``pg_dump`` of the catalog and in the files).  This
    runs, in order:

    1. ``ducklake_flush_inlined_data``: inlined rows, and inlined deletions, into
       Parquet (a data file, and a delete file marking the deleted rows);
    2. ``ducklake_rewrite_data_files(delete_threshold => 0)``: every data file
       with deleted rows written again without them, with statistics of its own;
       a file left with deletions after it is refused (:class:`StoreError`,
       before anything is expired);
    3. ``ducklake_expire_snapshots`` of every snapshot before the last one: time
       travel to them ends, and the files and statistics only they used are
       forgotten;
    4. ``ducklake_cleanup_old_files(cleanup_all => true)``: those files deleted.

    It holds the lake's fence alone (:mod:`.fence`): the write transactions of other
    processes wait for it, and it waits for those in flight.
    """
    with store.exclusively():
        try:
            return _erase(store)
        except duckdb.Error as exc:
            raise StoreError(
                f"the purge of the lake {store.path} stopped "
                f"({str(exc).strip().splitlines()[0][:160]}); what it did is kept: call "
                "purge again"
            ) from None


def _erase(store: Lake) -> dict[str, int]:
    lake = store.lake_name
    flushed = _retrying(store, "CALL ducklake_flush_inlined_data(?)", [lake], PURGE)
    rewritten = _retrying(
        store, "CALL ducklake_rewrite_data_files(?, delete_threshold => 0)", [lake], PURGE
    )
    left = store.fetch_lake(
        "SELECT table_name, delete_file_count FROM ducklake_table_info(?)"
        " WHERE delete_file_count > 0 ORDER BY table_name",
        [lake],
    )
    if left:
        raise StoreError(
            f"the lake {store.path} still has deleted rows in the files of "
            f"{', '.join(f'{name} ({count})' for name, count in left)} after DuckLake "
            "rewrote them; no snapshot was expired. Call purge again; if this stays, "
            "report it with nbmemory lake status"
        )
    last = store.current_snapshot()
    older = [
        int(row[0])
        for row in store.fetch_lake(
            f"SELECT snapshot_id FROM {lake}.snapshots() WHERE snapshot_id < ? ORDER BY 1",
            [last],
        )
    ]
    expired = (
        store.fetch_lake("CALL ducklake_expire_snapshots(?, versions => ?)", [lake, older])
        if older
        else []
    )
    cleaned = store.fetch_lake("CALL ducklake_cleanup_old_files(?, cleanup_all => true)", [lake])
    return {
        "rows_flushed": int(sum(r[2] for r in flushed)),
        "files_rewritten": int(sum(r[2] for r in rewritten)),
        "snapshots_expired": len(expired),
        "files_deleted": len(cleaned),
    }


def _retrying(store: Lake, sql: str, params: list[Any], message: str) -> list[tuple]:
    """One maintenance call as a commit labelled ``message``, tried again (with a
    growing, jittered pause) while it conflicts with another writer's commit (one
    that takes no fence: another tool, an older nbmemory)."""
    for attempt in range(ERASE_ATTEMPTS):
        try:
            return store.commit_lake(sql, params, message)
        except duckdb.Error as exc:
            low = str(exc).lower()
            if "conflict" not in low and "could not serialize" not in low:
                raise
            if attempt == ERASE_ATTEMPTS - 1:
                raise StoreError(
                    f"{message} stopped: other writers of the lake {store.path} kept "
                    f"committing to the same tables ({str(exc).splitlines()[-1][:120]}); "
                    "nothing was expired: call again"
                ) from None
            time.sleep(random.uniform(0, min(0.5, 0.01 * 2**attempt)))
    raise AssertionError("unreachable")  # pragma: no cover


def stored_bytes(store: Lake) -> int:
    """Bytes under the lake's data path (a local or mounted folder), else the sizes
    of the live data and delete files the catalog records."""
    root = data_path(store)
    if root and "://" not in root and os.path.isdir(root):
        return sum(
            os.path.getsize(os.path.join(folder, name))
            for folder, _, names in os.walk(root)
            for name in names
        )
    rows = store.fetch_lake(
        "SELECT sum(file_size_bytes + delete_file_size_bytes) FROM ducklake_table_info(?)",
        [store.lake_name],
    )
    return int(rows[0][0] or 0)
