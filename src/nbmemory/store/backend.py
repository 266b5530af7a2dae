"""The backend contract: what differs between the places a store can live, and
what the table objects and migrations may ask of a store.

nbmemory's rows live in one of several backends, all queried by DuckDB:

* ``file`` — a DuckDB file one process holds from open to close
  (:class:`~.connection.Store`);
* ``shared`` — the same file, taken in turns by several processes, each holding it
  only for the length of a call (:class:`~.shared.SharedStore`);
* ``ducklake`` — a DuckLake catalog in PostgreSQL with Parquet data, written by
  many processes and hosts at once (:class:`~.lake.store.LakeStore`).

Everything else (the schema, the table objects' reads, the writer's one
transaction per call, the caches that follow announced changes) is the same on
each.  A backend provides exactly the parts below, in one module of its own,
and is registered under the address prefix that selects it
(:mod:`.registry`; ``open_store`` asks it first).

**What a backend must provide** (:class:`Backend`), and why:

1. *Connecting and locking* — ``_connect()`` returns a DuckDB connection with
   nbmemory's tables as its default database (a file opened, a lake attached, an
   in-memory database); ``_open_schema()`` checks the tables are nbmemory's and
   makes or migrates them; :meth:`Backend.locked` and :meth:`Backend.turn` hold
   the store for a multi-statement read or a whole call (a shared file is only
   open while they are held).  Why: where the rows are, and who else may be
   writing them, is what a backend *is*.
2. *Transactions* — :meth:`Backend.transaction` (one per ``Memory`` call: rows,
   audit row and session touch commit together) and :meth:`Backend.beside` (the
   embedding worker's vector writes, on a cursor of their own where the backend
   allows it: ``writes_beside``).  :meth:`Backend.claim` makes two concurrent
   upserts collide where no unique key does it; :meth:`Backend.begin_call` tells a
   backend whose commits may conflict (a lake) that a retryable call starts.
3. *The statements whose SQL differs* — ``statements``, a
   :class:`~.statements.Statements`: inserts, updates and deletes with returned
   columns, ``if_absent`` inserts, Arrow inserts.  A file runs them natively
   (``RETURNING``, ``ON CONFLICT``); a lake by key.  No SQL text is ever rewritten.
4. *The change feed* — :meth:`Backend.refresh` announces what other writers
   committed since the last call (another store of this process, another process
   of a shared file, another host of a lake), so the caches follow.
5. *Time travel, rewriting and purging* — ``snapshot`` (a lake read as it was),
   :meth:`Backend.check_rewritable`, :meth:`Backend.rewriting` (hold the store
   alone while it is rewritten: on a file, every other store of the process on it
   held still, :mod:`.swap`), :meth:`Backend.rewrite` (erase deleted bytes) and
   :meth:`Backend.stored_bytes`.

A new backend subclasses :class:`~.connection.Store` (which implements the
contract for a private DuckDB connection) and overrides what differs; the toy
backend in ``tests/test_backends.py`` (an in-memory DuckDB, no file) overrides
only ``_connect`` and is registered in one line.

The table objects (:mod:`.table`) and the migrations see a store only through
:class:`TableHost` and :class:`MigratingStore`: protocols of this module, which
imports nothing of the store's own, so no module of the table objects imports
the store that holds them (no import circle, not even under ``TYPE_CHECKING``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, runtime_checkable

import duckdb
import pyarrow as pa

from .changes import Change, Vectors
from .statements import Statements

Params = Sequence[Any] | dict[str, Any] | None


class VectorRows(Protocol):
    """What ``store.events`` asks of ``store.vectors``: append and drop vectors."""

    def append(self, group: Vectors) -> None: ...

    def drop(self, ids: Sequence[str]) -> None: ...


class ArchiveRows(Protocol):
    """What ``store.events`` asks of ``store.archive``: erase what a deletion matches."""

    def delete_where(self, where_sql: str, params: Sequence[Any]) -> list[str]: ...


class KeyValues(Protocol):
    """``store.meta``, as the migrations read it."""

    def get(self, key: str) -> str | None: ...


class TableHost(Protocol):
    """What a table object may ask of its store (and nothing else)."""

    @property
    def statements(self) -> Statements: ...

    @property
    def vectors(self) -> VectorRows: ...

    @property
    def archive(self) -> ArchiveRows: ...

    #: Removes secrets from user text before it is stored: ``text -> (text, count)``.
    redactor: Callable[[str], tuple[str, int]] | None
    redaction_suspects: Callable[[list[str]], list[int]] | None

    @property
    def in_transaction(self) -> bool: ...

    def run(self, sql: str, params: Params = None, fetch: str = "rows") -> Any: ...

    def stream(
        self, sql: str, params: Params, rows: int, *, lean: bool | str = False
    ) -> Iterator[pa.RecordBatch]: ...

    def registered(self, name: str, data: pa.Table) -> contextlib.AbstractContextManager[str]: ...

    def changed(self, change: Change) -> None: ...

    def count_redactions(self, namespace: str | None, count: int) -> None: ...

    def claim(self) -> None: ...

    def advance_ids(self, sequence: str, at_least: int) -> None: ...


class CatalogView(Protocol):
    """``store.catalog``: which tables the store holds (and what else, for whose file it is)
    and the version it records."""

    def tables(self) -> list[str]: ...

    def table_exists(self, name: str) -> bool: ...

    def objects(self) -> list[tuple[str, str, str]]: ...

    def columns(self, table: str) -> list[str]: ...

    def primary_key(self, table: str) -> list[str]: ...

    def schema_version(self) -> int: ...


class MigratingStore(Protocol):
    """What the migrations and the shape check may ask of the store they bring up to date."""

    path: str
    read_only: bool
    migrated_messages: int

    @property
    def meta(self) -> KeyValues: ...

    def run(self, sql: str, params: Params = None, fetch: str = "rows") -> Any: ...

    def transaction(self) -> contextlib.AbstractContextManager[Change]: ...

    def schema_changes(self) -> contextlib.AbstractContextManager[None]: ...

    @property
    def catalog(self) -> CatalogView: ...


@runtime_checkable
class Backend(Protocol):
    """The contract every backend fulfils (see the module's docstring for why each part)."""

    #: The backend's kind: ``"file"``, ``"ducklake"``, or a new one's name.
    backend: str
    path: str
    read_only: bool
    #: Whether :meth:`beside` runs on a cursor of its own beside the caller's appends.
    writes_beside: bool
    #: Whether the connection stays open from open to close.
    holds_file: bool
    #: Seconds the embedding worker waits for more texts before one write.
    embed_linger: float
    statements: Statements

    # 1. connecting and locking
    def _connect(self) -> duckdb.DuckDBPyConnection: ...

    def _open_schema(self, *, read_only: bool, adopt: bool) -> None: ...

    def locked(self) -> contextlib.AbstractContextManager[Any]: ...

    def turn(self) -> contextlib.AbstractContextManager[Any]: ...

    def close(self) -> None: ...

    # 2. transactions
    def transaction(self) -> contextlib.AbstractContextManager[Change]: ...

    def beside(self, block: Callable[[Change], Any]) -> Any: ...

    def claim(self) -> None: ...

    def begin_call(self) -> int: ...

    def advance_ids(self, sequence: str, at_least: int) -> None: ...

    # 4. the change feed
    def refresh(self) -> None: ...

    # 5. rewriting and purging
    def check_rewritable(self, *, expire_snapshots: bool = False) -> None: ...

    def rewriting(self) -> contextlib.AbstractContextManager[None]: ...

    def rewrite(self, *, expire_snapshots: bool = False) -> dict[str, int]: ...

    def stored_bytes(self) -> int: ...
