"""The store layer: the only place that speaks SQL.

* :mod:`.backend` — the contract a backend fulfils (what differs between a file,
  a shared file and a lake), and what the table objects may ask of a store;
* :mod:`.registry` — which backend opens an address (``ducklake:`` -> the lake);
* :mod:`.connection` — :class:`Store`: one DuckDB connection, its lock,
  transactions, and the announcement of every committed change;
* :mod:`.statements` — the writes whose SQL differs, as structured calls;
* :mod:`.side`, :mod:`.lean_scan`, :mod:`.plain_sql` — the connection's helpers: the
  embedding worker's transaction beside the caller's, scans that do not fill
  DuckDB's buffer pool, and the escape hatch (plain SQL);
* :mod:`.peers` — stores of one process open on one file, telling each other
  when they write (so each one's caches follow the other's writes);
* :mod:`.swap` — rewriting a file in place (``purge``): every store of the process
  on it lets go of the old file and opens the new one;
* :mod:`.shared` — :class:`SharedStore`: several processes taking turns on a file;
* :mod:`.lake` — :class:`LakeStore`: many processes and hosts at once on DuckLake;
* :mod:`.schema` and :mod:`.migrations` — the tables as they are, and how they
  came to be (numbered migrations recorded in the file); :mod:`.ownership` — whose
  file it is, decided before the migrations write a byte;
* the table objects — ``store.events``, ``store.vectors``, ``store.archive`` (events
  a compacting consolidation moved out), ``store.facts``, ``store.macros``,
  ``store.tasks``, ``store.prefixes``, ``store.sessions``, ``store.audit``;
* :mod:`.writer` — :class:`Writer`: the one write path (transaction, redaction,
  audit, session touch, announcement).
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from ..errors import InvalidInput
from .backend import Backend
from .changes import Change, Vectors
from .connection import Store
from .registry import backend_for, backend_prefix, register_backend, unregister_backend
from .schema import EVENTS, FILTER_COLUMNS, READ_COLUMNS
from .shared import SharedStore, shared_from_env
from .writer import Tx, Writer

if TYPE_CHECKING:
    from .lake.store import LakeStore


def __getattr__(name: str) -> Any:
    """``LakeStore``, imported when first asked for: the lake's package (and DuckLake's
    extensions) is never imported by opening a file."""
    if name == "LakeStore":
        from .lake.store import LakeStore

        return LakeStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def is_lake_url(path: object) -> bool:
    """Whether ``path`` names a DuckLake (``ducklake:...``) rather than a DuckDB file."""
    return backend_prefix(path) == "ducklake:"


__all__ = [
    "Backend",
    "EVENTS",
    "FILTER_COLUMNS",
    "READ_COLUMNS",
    "Change",
    "LakeStore",
    "SharedStore",
    "Store",
    "Tx",
    "Vectors",
    "Writer",
    "is_lake_url",
    "open_store",
    "register_backend",
    "shared_from_env",
    "unregister_backend",
]


def open_store(
    path: str,
    *,
    read_only: bool = False,
    shared: bool | None = None,
    adopt: bool = False,
    data_path: str | None = None,
    snapshot: int | dt.datetime | None = None,
) -> Store:
    """The store at ``path``: shared (several processes) when asked or ``$NBMEMORY_SHARED=1``;
    a lake when ``path`` is a ``ducklake:`` address (``data_path``: where its Parquet
    files go; ``snapshot``: read it as it was then).

    ``adopt=True`` lets nbmemory add its tables to another application's DuckDB file.
    """
    opener = backend_for(path)
    if opener is not None:  # a registered backend: the lake, or one of a test's
        options: dict[str, Any] = {}
        if data_path is not None:
            options["data_path"] = data_path
        if snapshot is not None:
            options["snapshot"] = snapshot
        store: Store = opener(path, read_only=read_only, **options)
        return store
    if data_path is not None or snapshot is not None:
        raise InvalidInput("data_path= and snapshot= are for a lake (a ducklake: address)")
    if shared is None and path != ":memory:":
        shared = shared_from_env()
    if shared:
        return SharedStore(path, read_only=read_only, adopt=adopt)
    return Store(path, read_only=read_only, adopt=adopt)
