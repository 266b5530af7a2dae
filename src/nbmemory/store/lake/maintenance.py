"""Keeping a lake small: what it holds, its snapshots, compaction and expiry.

Every commit is a snapshot.  Small commits (one ``add_event``) are *inlined*:
their rows are kept in the catalog database instead of a Parquet file each, so
ten thousand single-event commits do not become ten thousand files.
:func:`compact` moves inlined rows into Parquet and merges small adjacent files;
:func:`expire` forgets snapshots older than a cut-off (time travel stops there)
and deletes the files nothing refers to any more.
"""

from __future__ import annotations

import datetime as dt
import os
from typing import TYPE_CHECKING, Any

import pandas as pd

if TYPE_CHECKING:
    from .store import LakeStore

#: Tables of a lake, by the order ``status`` lists them.
_MAIN_TABLES = ("events", "event_vectors", "audit_log", "facts", "sessions")


def status(store: LakeStore) -> dict[str, Any]:
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


def data_path(store: LakeStore) -> str:
    rows = store.fetch_lake(
        "SELECT value FROM ducklake_options(?) WHERE option_name = 'data_path'",
        [store.lake_name],
    )
    return str(rows[0][0]) if rows else ""


def files_on_disk(store: LakeStore) -> int:
    """Parquet files under the lake's data path (a local or mounted folder)."""
    root = data_path(store)
    if not root or "://" in root or not os.path.isdir(root):
        return 0
    return sum(1 for _, _, names in os.walk(root) for name in names if name.endswith(".parquet"))


def snapshots(store: LakeStore, limit: int = 20) -> pd.DataFrame:
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


def compact(store: LakeStore) -> dict[str, Any]:
    """Move inlined rows into Parquet and merge small files; returns files before/after."""
    before = files_on_disk(store)
    flushed = store.fetch_lake("CALL ducklake_flush_inlined_data(?)", [store.lake_name])
    merged = store.fetch_lake("CALL ducklake_merge_adjacent_files(?)", [store.lake_name])
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


def expire(store: LakeStore, older_than: dt.timedelta) -> dict[str, Any]:
    """Forget snapshots older than ``older_than`` and delete files only they used."""
    cutoff = dt.datetime.now(dt.timezone.utc) - older_than
    expired = store.fetch_lake(
        "CALL ducklake_expire_snapshots(?, older_than => ?)", [store.lake_name, cutoff]
    )
    cleaned = store.fetch_lake(
        "CALL ducklake_cleanup_old_files(?, cleanup_all => true)", [store.lake_name]
    )
    return {"snapshots_expired": len(expired), "files_deleted": len(cleaned)}
