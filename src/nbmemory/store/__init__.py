"""The store layer: the only place that speaks SQL.

* :mod:`.connection` — :class:`Store`: one DuckDB connection, its lock,
  transactions, and the announcement of every committed change;
* :mod:`.peers` — stores of one process open on one file, telling each other
  when they write (so each one's caches follow the other's writes);
* :mod:`.shared` — :class:`SharedStore`: several processes taking turns on a file;
* :mod:`.lake` — :class:`LakeStore`: many processes and hosts at once on DuckLake;
* :mod:`.schema` and :mod:`.migrations` — the tables as they are, and how they
  came to be (numbered migrations recorded in the file);
* the table objects — ``store.events``, ``store.facts``, ``store.macros``,
  ``store.tasks``, ``store.prefixes``, ``store.sessions``, ``store.audit``;
* :mod:`.writer` — :class:`Writer`: the one write path (transaction, redaction,
  audit, session touch, announcement).
"""

from __future__ import annotations

import datetime as dt

from ..errors import InvalidInput
from .changes import Change, Vectors
from .connection import Store
from .lake import LakeStore, is_lake_url
from .schema import EVENTS, FILTER_COLUMNS, READ_COLUMNS
from .shared import SharedStore, shared_from_env
from .writer import Tx, Writer

__all__ = [
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
    "shared_from_env",
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
    if is_lake_url(path):
        return LakeStore(path, data_path=data_path, read_only=read_only, snapshot=snapshot)
    if data_path is not None or snapshot is not None:
        raise InvalidInput("data_path= and snapshot= are for a lake (a ducklake: address)")
    if shared is None and path != ":memory:":
        shared = shared_from_env()
    if shared:
        return SharedStore(path, read_only=read_only, adopt=adopt)
    return Store(path, read_only=read_only, adopt=adopt)
