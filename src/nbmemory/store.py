"""The DuckDB file: connection, schema, migrations, and the statements on ``events``.

One connection per store per process, guarded by a lock so the embedding worker
and the caller's thread never interleave statements on it.  Every statement is
parameterised; the only names ever formatted into SQL are column names taken from
the fixed whitelists below.  Results are always fetched whole (an unfinished
result keeps the connection busy, see DESIGN.md "Traps").
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import re
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .errors import InvalidInput, StoreError, StoreLocked
from .keyword_index import KeywordIndex
from .vector_index import VectorIndex

SCHEMA_VERSION = 1

#: Columns of ``events`` in table order: the seed 000 columns, then ours.
EVENT_COLUMNS = (
    "id",
    "session_id",
    "namespace",
    "kind",
    "role",
    "content",
    "tool_call_id",
    "tool_name",
    "tool_calls_json",
    "metadata",
    "graph_id",
    "task_id",
    "created_at",
    "updated_at",
    "importance",
    "embedding",
    "embedding_model",
    "embedding_error",
    "consolidated_at",
)

#: Columns a caller may filter ``events`` on with equality (``filters={...}``).
FILTER_COLUMNS = frozenset(
    {"session_id", "namespace", "kind", "role", "tool_call_id", "tool_name", "graph_id", "task_id"}
)

#: Columns returned by reads (everything but the vector, which is large).
READ_COLUMNS = tuple(c for c in EVENT_COLUMNS if c != "embedding")

ARROW_EVENT_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("session_id", pa.string()),
        ("namespace", pa.string()),
        ("kind", pa.string()),
        ("role", pa.string()),
        ("content", pa.string()),
        ("tool_call_id", pa.string()),
        ("tool_name", pa.string()),
        ("tool_calls_json", pa.string()),
        ("metadata", pa.string()),
        ("graph_id", pa.string()),
        ("task_id", pa.string()),
        ("created_at", pa.timestamp("us")),
        ("updated_at", pa.timestamp("us")),
        ("importance", pa.float64()),
        ("embedding", pa.list_(pa.float32())),
        ("embedding_model", pa.string()),
        ("embedding_error", pa.string()),
        ("consolidated_at", pa.timestamp("us")),
    ]
)

_SCHEMA_V1 = [
    """CREATE TABLE IF NOT EXISTS nbmemory_meta (
        key VARCHAR PRIMARY KEY,
        value VARCHAR
    )""",
    "CREATE SEQUENCE IF NOT EXISTS events_seq START 1",
    # seed 000 `events` (it replaced `messages`) plus namespace, kind, metadata,
    # Astreus scope (graph_id, task_id), embedding_model and updated_at.
    """CREATE TABLE IF NOT EXISTS events (
        id VARCHAR PRIMARY KEY,
        session_id VARCHAR NOT NULL,
        namespace VARCHAR NOT NULL DEFAULT 'default',
        kind VARCHAR NOT NULL DEFAULT 'message',
        role VARCHAR NOT NULL,
        content VARCHAR,
        tool_call_id VARCHAR,
        tool_name VARCHAR,
        tool_calls_json VARCHAR,
        metadata VARCHAR,
        graph_id VARCHAR,
        task_id VARCHAR,
        created_at TIMESTAMP NOT NULL,
        updated_at TIMESTAMP NOT NULL,
        importance DOUBLE NOT NULL DEFAULT 0.5,
        embedding FLOAT[],
        embedding_model VARCHAR,
        embedding_error VARCHAR,
        consolidated_at TIMESTAMP
    )""",
    # insertion order: breaks created_at ties (rowid is not stable across updates)
    "ALTER TABLE events ADD COLUMN IF NOT EXISTS seq BIGINT DEFAULT nextval('events_seq')",
    "CREATE SEQUENCE IF NOT EXISTS facts_id_seq START 1",
    """CREATE TABLE IF NOT EXISTS facts (
        id INTEGER PRIMARY KEY DEFAULT nextval('facts_id_seq'),
        namespace VARCHAR NOT NULL DEFAULT 'default',
        category VARCHAR NOT NULL,
        key VARCHAR NOT NULL,
        value VARCHAR NOT NULL,
        source VARCHAR NOT NULL DEFAULT '',
        created_at TIMESTAMP NOT NULL,
        updated_at TIMESTAMP NOT NULL,
        embedding FLOAT[],
        embedding_model VARCHAR,
        UNIQUE (namespace, category, key)
    )""",
    # Replaced fact values are kept here, never silently overwritten.
    """CREATE TABLE IF NOT EXISTS fact_history (
        fact_id INTEGER NOT NULL,
        namespace VARCHAR NOT NULL,
        category VARCHAR NOT NULL,
        key VARCHAR NOT NULL,
        value VARCHAR NOT NULL,
        source VARCHAR NOT NULL,
        valid_from TIMESTAMP NOT NULL,
        superseded_at TIMESTAMP NOT NULL
    )""",
    "CREATE SEQUENCE IF NOT EXISTS macros_id_seq START 1",
    """CREATE TABLE IF NOT EXISTS macros (
        id INTEGER PRIMARY KEY DEFAULT nextval('macros_id_seq'),
        namespace VARCHAR NOT NULL DEFAULT 'default',
        trigger_tool VARCHAR NOT NULL,
        trigger_args_pattern VARCHAR,
        next_tool VARCHAR NOT NULL,
        next_args VARCHAR NOT NULL DEFAULT '',
        confidence DOUBLE NOT NULL DEFAULT 0.0,
        used_count INTEGER NOT NULL DEFAULT 0,
        created_at TIMESTAMP NOT NULL,
        updated_at TIMESTAMP NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS scheduled_tasks (
        id VARCHAR PRIMARY KEY,
        namespace VARCHAR NOT NULL DEFAULT 'default',
        name VARCHAR NOT NULL,
        cron_expr VARCHAR NOT NULL,
        original_schedule VARCHAR NOT NULL,
        prompt VARCHAR NOT NULL,
        source VARCHAR NOT NULL DEFAULT 'tool',
        is_oneshot BOOLEAN NOT NULL DEFAULT false,
        is_paused BOOLEAN NOT NULL DEFAULT false,
        is_trusted BOOLEAN NOT NULL DEFAULT false,
        next_run_at TIMESTAMP NOT NULL,
        last_run_at TIMESTAMP,
        created_at TIMESTAMP NOT NULL,
        updated_at TIMESTAMP NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS terminal_allowed_prefixes (
        prefix VARCHAR PRIMARY KEY,
        created_at TIMESTAMP
    )""",
    # seed 003: sessions per user + namespace, with TTL on last_activity.
    """CREATE TABLE IF NOT EXISTS sessions (
        namespace VARCHAR NOT NULL,
        session_id VARCHAR NOT NULL,
        user_id VARCHAR NOT NULL DEFAULT '',
        status VARCHAR NOT NULL DEFAULT 'active',
        state VARCHAR NOT NULL DEFAULT '{}',
        created_at TIMESTAMP NOT NULL,
        last_activity TIMESTAMP NOT NULL,
        closed_at TIMESTAMP,
        PRIMARY KEY (namespace, session_id)
    )""",
    # seed 003: append-only audit trail (only retention cleanup deletes).
    "CREATE SEQUENCE IF NOT EXISTS audit_id_seq START 1",
    """CREATE TABLE IF NOT EXISTS audit_log (
        id BIGINT PRIMARY KEY DEFAULT nextval('audit_id_seq'),
        logged_at TIMESTAMP NOT NULL,
        namespace VARCHAR,
        actor VARCHAR NOT NULL,
        action VARCHAR NOT NULL,
        target_ids VARCHAR[],
        details VARCHAR
    )""",
]

# seed 000's old table: what a v0.8 store has before `events` replaced it.
_LEGACY_MESSAGES = "messages"
_LEGACY_RENAMED = "messages_migrated"

_PID_RE = re.compile(r"PID (\d+)")

#: Statements that may change which vectors ``events`` holds (see vector_index.py).
_MUTATES_VECTORS = re.compile(
    r"\s*(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM|ALTER\s+TABLE|DROP\s+TABLE|TRUNCATE)"
    r"(?:\s+IF\s+EXISTS)?\s+(?:main\.)?events\b",
    re.IGNORECASE,
)


def _utc_timestamp_sql(column: str, column_type: str) -> str:
    """SQL turning a legacy RFC3339 text (or timestamp) column into a UTC TIMESTAMP."""
    if column_type.upper().startswith("TIMESTAMP WITH"):
        return f"timezone('UTC', {column})"
    if column_type.upper().startswith("TIMESTAMP"):
        return column
    return f"timezone('UTC', TRY_CAST({column} AS TIMESTAMPTZ))"


def _first_line(message: str) -> str:
    return message.strip().splitlines()[0] if message.strip() else message


_SQLITE_MAGIC = b"SQLite format 3\x00"


def check_store_path(path: str, *, read_only: bool = False) -> None:
    """Refuse, with a one-line :class:`StoreError`, a path that cannot be a store file.

    Checked before DuckDB sees the path: an empty path (DuckDB would silently open
    a private in-memory database: memories lost at exit), a NUL byte, a missing or
    unwritable parent directory, a directory, and a SQLite file (DuckDB would try
    to download its sqlite extension to open it).  Nothing is created or changed.
    """
    if not path.strip():
        raise StoreError(
            "the store path is empty; pass a file name (Memory('agent.duckdb')), "
            "or ':memory:' for a store that is not kept"
        )
    if "\x00" in path:
        raise StoreError(f"the store path {path!r} contains a NUL byte; pass a valid file name")
    try:
        target = Path(path).expanduser()
        parent = target.resolve().parent
        if parent.exists() and not parent.is_dir():
            raise StoreError(
                f"cannot create the store {path}: {parent} is a file, not a directory. "
                "Pass a path inside a directory."
            )
        if not parent.is_dir():
            raise StoreError(
                f"cannot create the store {path}: the directory {parent} does not exist. "
                "Create it first or pass another path."
            )
        if target.is_dir():
            raise StoreError(
                f"the store path {path} is a directory; pass a file inside it "
                f"({os.path.join(path, 'nbmemory.duckdb')})"
            )
        exists = target.exists()
        if not read_only and not exists and not os.access(parent, os.W_OK):
            raise StoreError(
                f"cannot create the store {path}: the directory {parent} is not writable. "
                "Pass a path in a writable directory (Memory('~/agent.duckdb'))."
            )
        if exists and target.is_file():
            with open(target, "rb") as handle:
                head = handle.read(len(_SQLITE_MAGIC))
            if head == _SQLITE_MAGIC:
                raise StoreError(
                    f"{path} is a SQLite database, not a DuckDB store; nothing was changed. "
                    "Import it with Memory(...).import_sqlite(path) or `nbmemory import-sqlite`."
                )
    except OSError as exc:
        raise StoreError(f"cannot use {path!r} as a store: {exc.strerror or exc}") from None


class Store:
    """One open DuckDB file (or ``:memory:``) with nbmemory's schema."""

    def __init__(self, path: str | os.PathLike[str], *, read_only: bool = False) -> None:
        self.path = str(path)
        self.read_only = read_only
        #: Held by transactions (and callers needing a read-modify-write to be atomic).
        self._lock = threading.RLock()
        #: Number of statements run; tests use it to prove a read touched no SQL.
        self.statements_run = 0
        #: Bumped by every statement that may change stored vectors (see vector_index.py)
        #: and by every one that may change content (see keyword_index.py).
        self.vectors_version = 0
        self.text_version = 0
        self._version_lock = threading.Lock()
        self._keywords: KeywordIndex | None = None
        self._local = threading.local()
        self._indexes: dict[str, VectorIndex] = {}
        #: Answer unfiltered similarity searches from the in-memory index (exact).
        self.use_index = True
        self.con = self._connect()
        self.migrated_messages = 0
        if not read_only:
            self._migrate()

    # -- connection -------------------------------------------------------------------
    def _connect(self) -> duckdb.DuckDBPyConnection:
        path = self.path
        if path != ":memory:":
            check_store_path(path, read_only=self.read_only)
        try:
            return duckdb.connect(path, read_only=self.read_only)
        except duckdb.IOException as exc:
            message = str(exc)
            if "lock" in message.lower():
                match = _PID_RE.search(message)
                holder = None
                held = re.search(r"held in (\S+)", message)
                if held:
                    holder = held.group(1)
                raise StoreLocked(path, int(match.group(1)) if match else None, holder) from None
            if "not a valid DuckDB database" in message:
                raise StoreError(
                    f"{path} exists but is not a DuckDB database; nothing was changed. "
                    "Pass the path of an nbmemory store, or a new file name."
                ) from None
            if "Permission denied" in message or "Read-only" in message:
                raise StoreError(
                    f"cannot open the store {path} for writing (permission denied). "
                    "Pass a writable path, or open it with read_only=True."
                ) from None
            raise StoreError(f"cannot open the store {path}: {_first_line(message)}") from None
        except duckdb.Error as exc:
            raise StoreError(f"cannot open the store {path}: {_first_line(str(exc))}") from None

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self._lock:
            if self.con is not None:
                self._indexes.clear()
                self.con.close()
                self.con = None  # type: ignore[assignment]

    @property
    def closed(self) -> bool:
        return self.con is None

    # -- statement helpers -------------------------------------------------------------
    def _cursor(self) -> duckdb.DuckDBPyConnection:
        """The one connection; callers hold ``self._lock`` while they use it.

        One connection per store per process, every statement under one lock:
        DuckDB's optimistic concurrency between connections can turn a
        transaction's UPDATE of a row another thread just committed into a silent
        no-op, and a memory layer must not lose writes.
        """
        con = self.con
        if con is None:
            raise StoreError("this store is closed; open a new Memory(path)")
        return con

    def _run(self, sql: str, params: Any, fetch: str) -> Any:
        """Run one statement and fetch its result whole, under the store lock."""
        with self._lock:
            self.statements_run += 1
            if _MUTATES_VECTORS.match(sql):
                with self._mutation(vectors=True, text=True):
                    return self._retrying(sql, params, fetch)
            return self._retrying(sql, params, fetch)

    @contextlib.contextmanager
    def _mutation(self, *, vectors: bool, text: bool):
        """Count a change of ``events`` (store lock held); yields a :class:`_Change`.

        The caches may apply the change themselves only when it committed on its
        own (``change.applicable``); inside a transaction the commit (or rollback)
        bumps the versions again, so the caches rebuild instead.
        """
        change = _Change()
        with self._version_lock:
            change.before = (self.vectors_version, self.text_version)
            try:
                yield change
            finally:
                if vectors:
                    self.vectors_version += 1
                if text:
                    self.text_version += 1
                change.after = (self.vectors_version, self.text_version)
                if getattr(self._local, "in_transaction", False):
                    self._local.dirty = True
                    change.applicable = False

    def mark_stale(self) -> None:
        """Make every in-memory cache rebuild on its next use (another writer changed the file)."""
        with self._version_lock:
            self.vectors_version += 1
            self.text_version += 1

    def _retrying(self, sql: str, params: Any, fetch: str) -> Any:
        """Execute; a write-write conflict (another process in shared mode) is retried."""
        attempts = 1 if getattr(self._local, "in_transaction", False) else 5
        for attempt in range(attempts):
            try:
                return self._fetch(self._cursor().execute(sql, params or []), fetch)
            except duckdb.TransactionException:
                if attempt == attempts - 1:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    @staticmethod
    def _fetch(cursor: duckdb.DuckDBPyConnection, fetch: str) -> Any:
        if fetch == "df":
            return cursor.df()
        rows = cursor.fetchall()
        if fetch == "records":
            names = [d[0] for d in cursor.description]
            return [dict(zip(names, row, strict=True)) for row in rows]
        return rows

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None) -> None:
        """Run one parameterised statement, discarding any result."""
        self._run(sql, params, "rows")

    def fetchall(
        self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None
    ) -> list[tuple]:
        """Run one parameterised statement and return every row."""
        return self._run(sql, params, "rows")

    def fetchone(self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None) -> Any:
        rows = self.fetchall(sql, params)
        return rows[0] if rows else None

    def df(self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None) -> pd.DataFrame:
        """Run one parameterised statement and return a pandas DataFrame."""
        return self._run(sql, params, "df")

    def records(
        self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        """Rows as dicts (column name -> Python value)."""
        return self._run(sql, params, "records")

    def insert_arrow(self, table_name: str, data: pa.Table) -> None:
        """Bulk insert through Arrow: ``INSERT INTO t BY NAME SELECT * FROM data``."""
        if table_name not in _INSERTABLE:
            raise ValueError(f"not an nbmemory table: {table_name}")
        carries_vectors = (
            table_name == "events"
            and "embedding" in data.column_names
            and data.column("embedding").null_count < data.num_rows
        )
        with self._lock:
            cur = self._cursor()
            view = "_nbmemory_insert"
            cur.register(view, data)
            try:
                sql = f"INSERT INTO {table_name} BY NAME SELECT * FROM {view}"
                self.statements_run += 1
                if table_name != "events":
                    self._retrying(sql, None, "rows")
                    return
                with self._mutation(vectors=carries_vectors, text=True) as change:
                    inserted = self._retrying(
                        sql + " RETURNING id, namespace, session_id, content, created_at, seq",
                        None,
                        "rows",
                    )
            finally:
                cur.unregister(view)
            self._keywords_apply(change, lambda k: k.add(inserted))

    def transaction(self) -> _Transaction:
        """``with store.transaction(): ...`` runs statements atomically under the lock."""
        return _Transaction(self)

    # -- schema ------------------------------------------------------------------------
    def table_exists(self, name: str) -> bool:
        row = self.fetchone(
            "SELECT count(*) FROM information_schema.tables "
            "WHERE table_schema = 'main' AND table_name = ?",
            [name],
        )
        return bool(row and row[0])

    def schema_version(self) -> int:
        if not self.table_exists("nbmemory_meta"):
            return 0
        row = self.fetchone("SELECT value FROM nbmemory_meta WHERE key = 'schema_version'")
        return int(row[0]) if row else 0

    def _migrate(self) -> None:
        """Create missing tables and move legacy rows; safe to run any number of times."""
        with self.transaction():
            for statement in _SCHEMA_V1:
                self.execute(statement)
            self.execute(
                "INSERT INTO nbmemory_meta VALUES ('schema_version', ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                [str(SCHEMA_VERSION)],
            )
            if self.table_exists(_LEGACY_MESSAGES):
                self.migrated_messages = self._migrate_messages()

    def _migrate_messages(self) -> int:
        """Copy seed 000's ``messages`` rows into ``events``, then keep the old table renamed."""
        columns = {
            name: dtype
            for name, dtype in self.fetchall(
                "SELECT column_name, data_type FROM information_schema.columns "
                "WHERE table_schema = 'main' AND table_name = ?",
                [_LEGACY_MESSAGES],
            )
        }

        def col(name: str, default: str = "NULL") -> str:
            return f"m.{name}" if name in columns else default

        embedding_type = columns.get("embedding", "")
        if not embedding_type:
            embedding_sql = "NULL"
        elif embedding_type.upper() == "BLOB":
            embedding_sql = "TRY_CAST(decode(m.embedding) AS FLOAT[])"
        else:
            embedding_sql = "TRY_CAST(m.embedding AS FLOAT[])"
        created = _utc_timestamp_sql("m.created_at", columns.get("created_at", "VARCHAR"))
        consolidated = (
            _utc_timestamp_sql("m.consolidated_at", columns["consolidated_at"])
            if "consolidated_at" in columns
            else "NULL"
        )
        from .config import DEFAULT_MODEL  # the seed's AllMiniLML6V2

        sql = f"""
            INSERT INTO events BY NAME
            SELECT
                CAST(m.id AS VARCHAR) AS id,
                CAST(m.session_id AS VARCHAR) AS session_id,
                'default' AS namespace,
                'message' AS kind,
                COALESCE(CAST(m.role AS VARCHAR), 'user') AS role,
                {col("content")} AS content,
                {col("tool_call_id")} AS tool_call_id,
                {col("tool_name")} AS tool_name,
                {col("tool_calls_json")} AS tool_calls_json,
                COALESCE({created}, current_timestamp::TIMESTAMP) AS created_at,
                COALESCE({created}, current_timestamp::TIMESTAMP) AS updated_at,
                COALESCE(CAST({col("importance")} AS DOUBLE), 0.5) AS importance,
                {embedding_sql} AS embedding,
                CASE WHEN {embedding_sql} IS NULL THEN NULL ELSE ? END AS embedding_model,
                {col("embedding_error")} AS embedding_error,
                {consolidated} AS consolidated_at
            FROM {_LEGACY_MESSAGES} m
            WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.id = CAST(m.id AS VARCHAR))
        """
        before = self.fetchone("SELECT count(*) FROM events")[0]
        self.execute(sql, [DEFAULT_MODEL])
        after = self.fetchone("SELECT count(*) FROM events")[0]
        suffix = ""
        if self.table_exists(_LEGACY_RENAMED):
            suffix = "_" + str(self.fetchone("SELECT count(*) FROM duckdb_tables()")[0])
        # Keep the old rows (renamed) rather than dropping them: nothing is lost.
        self.execute(f"ALTER TABLE {_LEGACY_MESSAGES} RENAME TO {_LEGACY_RENAMED}{suffix}")
        return after - before

    # -- events ------------------------------------------------------------------------
    def insert_events(self, rows: pa.Table) -> None:
        """Bulk insert (Arrow)."""
        self.insert_arrow("events", rows)

    def insert_event(self, row: dict[str, Any]) -> None:
        """Insert one event without a vector: a plain parameterised INSERT, the
        cheapest single-row write (registering an Arrow view costs more).

        Timestamps travel as epoch microseconds (``make_timestamp(?)``): binding a
        datetime parameter into a TIMESTAMP column costs ~3 ms in DuckDB 2.0,
        the integer ~0.1 ms.
        """
        values = [
            to_epoch_us(row.get(column)) if column in _TIMESTAMP_COLUMNS else row.get(column)
            for column in _SINGLE_INSERT_COLUMNS
        ]
        with self._lock:
            self.statements_run += 1
            with self._mutation(vectors=False, text=True) as change:
                inserted = self._retrying(_SINGLE_INSERT_SQL, values, "rows")
            self._keywords_apply(change, lambda k: k.add(inserted))

    def events(
        self,
        *,
        ids: Sequence[str] | None = None,
        namespace: str | None = None,
        where: dict[str, Any] | None = None,
        order: str = "created_at, id",
        limit: int | None = None,
        with_embedding: bool = False,
    ) -> pd.DataFrame:
        """Events as a DataFrame, filtered by ids, namespace and equality filters."""
        columns = EVENT_COLUMNS if with_embedding else READ_COLUMNS
        clauses, params = where_clause(namespace=namespace, filters=where)
        if ids is not None:
            clauses.append("id IN (SELECT unnest(?::VARCHAR[]))")
            params.append(list(ids))
        sql = f"SELECT {', '.join(columns)} FROM events"
        if clauses:
            sql += " WHERE " + " AND ".join(clauses)
        if order not in _ORDERINGS:
            raise ValueError(f"unsupported ordering {order!r}")
        sql += f" ORDER BY {order}"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(int(limit))
        return self.df(sql, params)

    def recent(self, namespace: str, session_id: str, limit: int) -> list[dict[str, Any]]:
        """The last ``limit`` events of one session, oldest first."""
        return self.records(
            f"SELECT {', '.join(READ_COLUMNS)} FROM ("
            f"  SELECT * FROM events WHERE namespace = ? AND session_id = ?"
            "   ORDER BY created_at DESC, seq DESC LIMIT ?"
            ") ORDER BY created_at, seq",
            [namespace, session_id, int(limit)],
        )

    def pending_embeddings(self, limit: int | None = None) -> list[tuple[str, str]]:
        """(id, content) of events with text, no vector and no recorded failure.

        Rows embedded by another model are left alone (``Memory.reembed`` converts them).
        """
        sql = (
            "SELECT id, content FROM events WHERE content IS NOT NULL AND embedding_error IS NULL"
            " AND embedding IS NULL ORDER BY created_at, id"
        )
        params: list[Any] = []
        if limit is not None:
            sql += " LIMIT ?"
            params.append(int(limit))
        return [(row[0], row[1]) for row in self.fetchall(sql, params)]

    def write_embeddings(self, ids: Sequence[str], vectors: np.ndarray, model: str) -> None:
        """Store vectors (one row per id) for ``model``; clears any earlier error.

        The in-memory index of ``model`` is updated in step (no rebuild needed).
        """
        if not len(ids):
            return
        vectors = np.asarray(vectors, dtype=np.float32)
        data = pa.table(
            {
                "id": pa.array(list(ids), pa.string()),
                "embedding": pa.FixedSizeListArray.from_arrays(
                    pa.array(vectors.reshape(-1)), vectors.shape[1]
                ).cast(pa.list_(pa.float32())),
            }
        )
        with self._lock:
            cur = self._cursor()
            view = "_nbmemory_vectors"
            cur.register(view, data)
            try:
                self.statements_run += 1
                with self._mutation(vectors=True, text=False) as change:
                    written = self._retrying(
                        "UPDATE events SET embedding = v.embedding, embedding_model = ?,"
                        f" embedding_error = NULL FROM {view} v WHERE events.id = v.id"
                        " RETURNING events.id, events.namespace",
                        [model],
                        "rows",
                    )
            finally:
                cur.unregister(view)
            if change.applicable:
                self._after_vectors_written(
                    ids, vectors, model, written, change.before[0], change.after[0]
                )

    def _after_vectors_written(
        self,
        ids: Sequence[str],
        vectors: np.ndarray,
        model: str,
        written: list[tuple[str, str]],
        before: int,
        after: int,
    ) -> None:
        """Apply a write of vectors to the in-memory indexes (store lock held)."""
        index = self._indexes.get(model)
        if index is not None and written:
            row_of = {event_id: i for i, event_id in enumerate(ids)}
            chosen = [row_of[event_id] for event_id, _ in written]
            index.apply(
                before,
                after,
                lambda: index.upsert(
                    [event_id for event_id, _ in written],
                    [ns for _, ns in written],
                    vectors[chosen],
                ),
            )
        for other_model, other in self._indexes.items():
            if other_model != model:  # those rows may have left another model's index
                other.apply(before, after, lambda o=other: o.remove(ids))

    def write_embedding_errors(self, errors: dict[str, str]) -> None:
        if not errors:
            return
        data = pa.table(
            {
                "id": pa.array(list(errors), pa.string()),
                "error": pa.array(list(errors.values()), pa.string()),
            }
        )
        with self._lock:
            cur = self._cursor()
            view = "_nbmemory_errors"
            cur.register(view, data)
            try:
                self.statements_run += 1
                with self._mutation(vectors=True, text=False) as change:
                    self._retrying(
                        "UPDATE events SET embedding = NULL, embedding_error = e.error"
                        f" FROM {view} e WHERE events.id = e.id",
                        None,
                        "rows",
                    )
            finally:
                cur.unregister(view)
            if change.applicable:
                for index in self._indexes.values():
                    index.apply(change.before[0], change.after[0], lambda i=index: i.remove(errors))

    # -- relevance ---------------------------------------------------------------------
    def vector_index(self, model: str) -> VectorIndex:
        """The in-memory index of ``model``, rebuilt from the table if it is behind."""
        index = self._indexes.get(model)
        if index is None:
            index = self._indexes.setdefault(model, VectorIndex(model))
        if index.version != self.vectors_version:
            with self._lock, index._lock:  # lock order: store, then index, then version
                if index.version != self.vectors_version:
                    self._rebuild(index)
        return index

    def _rebuild(self, index: VectorIndex) -> None:
        version = self.vectors_version  # read before the snapshot: later writes re-trigger
        self.statements_run += 1
        table = (
            self._cursor()
            .sql(
                "SELECT id, namespace, embedding FROM events"
                " WHERE embedding IS NOT NULL AND embedding_model = ?",
                params=[index.model],
            )
            .to_arrow_table()
        )
        lists = table.column("embedding").combine_chunks()
        lengths = pc.list_value_length(lists).to_numpy(zero_copy_only=False)
        dim = int(np.bincount(lengths).argmax()) if len(lengths) else (index.dim or 0)
        keep = lengths == dim
        if not keep.all():  # a stray vector of another size is never compared
            mask = pa.array(keep)
            table = table.filter(mask)
            lists = table.column("embedding").combine_chunks()
        flat = lists.flatten().to_numpy(zero_copy_only=False).astype(np.float32, copy=False)
        vectors = flat.reshape(-1, dim) if dim else np.zeros((0, 0), np.float32)
        index.rebuild(
            table.column("id").to_pylist(), table.column("namespace").to_pylist(), vectors, version
        )

    def _keywords_apply(self, change: _Change, fn) -> None:
        """Apply a committed change to the keyword index if it is current."""
        if self._keywords is not None and change.applicable:
            self._keywords.apply(change.before[1], change.after[1], lambda: fn(self._keywords))

    def keyword_index(self) -> KeywordIndex:
        """The BM25 index of event content, rebuilt from the table if it is behind."""
        if self._keywords is None:
            with self._lock:
                if self._keywords is None:
                    self._keywords = KeywordIndex()
        index = self._keywords
        if index.version != self.text_version:
            with self._lock, index._lock:  # lock order: store, then index
                if index.version != self.text_version:
                    version = self.text_version
                    self.statements_run += 1
                    rows = (
                        self._cursor()
                        .execute(
                            "SELECT id, namespace, session_id, content, created_at, seq FROM events"
                            " WHERE content IS NOT NULL ORDER BY created_at, seq"
                        )
                        .fetchall()
                    )
                    index.rebuild(rows, version)
        return index

    def similarity_search(
        self,
        vector: np.ndarray,
        model: str,
        *,
        limit: int,
        namespace: str | None,
        threshold: float | None = None,
        strict: bool = False,
        filters: dict[str, Any] | None = None,
        since: Any = None,
        until: Any = None,
        exclude_ids: Iterable[str] = (),
    ) -> pd.DataFrame:
        """Exact cosine top-``limit``, best first (``similarity`` column).

        Only vectors from ``model`` are compared.  ``threshold`` keeps hits with
        similarity ``>= threshold`` (``> threshold`` when ``strict``).  Searches
        scoped by namespace alone are answered from the in-memory index; with other
        filters, DuckDB ranks with ``list_cosine_similarity``.  Both give the same
        answer (tests/test_vector_index.py).
        """
        if self.use_index and not filters and since is None and until is None:
            return self._index_search(
                vector,
                model,
                limit=limit,
                namespace=namespace,
                threshold=threshold,
                strict=strict,
                exclude_ids=exclude_ids,
            )
        return self.sql_similarity_search(
            vector,
            model,
            limit=limit,
            namespace=namespace,
            threshold=threshold,
            strict=strict,
            filters=filters,
            since=since,
            until=until,
            exclude_ids=exclude_ids,
        )

    def _index_search(
        self,
        vector: np.ndarray,
        model: str,
        *,
        limit: int,
        namespace: str | None,
        threshold: float | None,
        strict: bool,
        exclude_ids: Iterable[str],
    ) -> pd.DataFrame:
        hits = self.vector_index(model).search(
            vector,
            limit,
            namespace=namespace,
            threshold=threshold,
            strict=strict,
            exclude_ids=exclude_ids,
        )
        columns = [*READ_COLUMNS, "similarity"]
        if not hits:
            return pd.DataFrame(columns=columns)
        similarity = dict(hits)
        rows = self.rows_by_ids([event_id for event_id, _ in hits])
        for row in rows:
            row["similarity"] = similarity[row["id"]]
        # ties broken as the SQL path does: newest first, then id (a Python sort:
        # pandas' sort_values costs milliseconds on a handful of rows)
        rows.sort(key=lambda r: r["id"])
        rows.sort(key=lambda r: r["created_at"], reverse=True)
        rows.sort(key=lambda r: r["similarity"], reverse=True)
        return pd.DataFrame.from_records(rows[:limit], columns=columns)

    def rows_by_ids(self, ids: Sequence[str]) -> list[dict[str, Any]]:
        """The stored rows (without vectors) of these ids, in no particular order."""
        if not ids:
            return []
        return self.records(
            f"SELECT {', '.join(READ_COLUMNS)} FROM events"
            f" WHERE id IN ({', '.join('?' for _ in ids)})",
            list(ids),
        )

    def sql_similarity_search(
        self,
        vector: np.ndarray,
        model: str,
        *,
        limit: int,
        namespace: str | None,
        threshold: float | None = None,
        strict: bool = False,
        filters: dict[str, Any] | None = None,
        since: Any = None,
        until: Any = None,
        exclude_ids: Iterable[str] = (),
    ) -> pd.DataFrame:
        """The ranking in SQL with ``list_cosine_similarity`` (the reference path)."""
        clauses, params = where_clause(
            namespace=namespace, filters=filters, since=since, until=until
        )
        clauses += ["embedding IS NOT NULL", "embedding_model = ?"]
        params.append(model)
        exclude = list(exclude_ids)
        if exclude:
            clauses.append("id NOT IN (SELECT unnest(?::VARCHAR[]))")
            params.append(exclude)
        inner = (
            f"SELECT {', '.join(READ_COLUMNS)},"
            " list_cosine_similarity(embedding, ?::FLOAT[]) AS similarity"
            f" FROM events WHERE {' AND '.join(clauses)}"
        )
        params = [np.asarray(vector, dtype=np.float32).tolist(), *params]
        sql = f"SELECT * FROM ({inner}) WHERE similarity IS NOT NULL"
        if threshold is not None:
            sql += " AND similarity > ?" if strict else " AND similarity >= ?"
            params.append(float(threshold))
        sql += " ORDER BY similarity DESC, created_at DESC, id LIMIT ?"
        params.append(int(limit))
        return self.df(sql, params)

    def best_similarity(
        self,
        vector: np.ndarray,
        model: str,
        *,
        namespace: str | None,
        filters: dict | None = None,
        since: Any = None,
        until: Any = None,
    ) -> float | None:
        """The highest similarity any memory reaches (to explain an empty thresholded answer)."""
        hits = self.similarity_search(
            vector, model, limit=1, namespace=namespace, filters=filters, since=since, until=until
        )
        return None if hits.empty else float(hits["similarity"].iloc[0])

    def delete_events(self, ids: Sequence[str], namespace: str | None = None) -> list[str]:
        """Delete events by id (within ``namespace`` when given); returns the ids deleted."""
        if not ids:
            return []
        sql = "DELETE FROM events WHERE id IN (SELECT unnest(?::VARCHAR[]))"
        params: list[Any] = [list(ids)]
        if namespace is not None:
            sql += " AND namespace = ?"
            params.append(namespace)
        with self._lock:
            self.statements_run += 1
            with self._mutation(vectors=True, text=True) as change:
                deleted = [r[0] for r in self._retrying(sql + " RETURNING id", params, "rows")]
            if change.applicable:
                for index in self._indexes.values():
                    index.apply(
                        change.before[0], change.after[0], lambda i=index: i.remove(deleted)
                    )
            self._keywords_apply(change, lambda k: k.remove(deleted))
        return deleted

    def counts(self) -> pd.DataFrame:
        """Events per namespace, session and kind, with the embedding backlog."""
        return self.df(
            "SELECT namespace, session_id, kind, count(*) AS events,"
            " count(embedding) AS embedded,"
            " count(*) FILTER (WHERE embedding IS NULL AND embedding_error IS NULL"
            "   AND content IS NOT NULL) AS pending,"
            " count(embedding_error) AS failed,"
            " min(created_at) AS first_at, max(created_at) AS last_at"
            " FROM events GROUP BY ALL ORDER BY namespace, session_id, kind"
        )


_TIMESTAMP_COLUMNS = frozenset({"created_at", "updated_at", "consolidated_at"})
_SINGLE_INSERT_COLUMNS = tuple(c for c in EVENT_COLUMNS if c != "embedding")
_SINGLE_INSERT_SQL = (
    f"INSERT INTO events ({', '.join(_SINGLE_INSERT_COLUMNS)}) VALUES ("
    + ", ".join(
        "make_timestamp(?)" if c in _TIMESTAMP_COLUMNS else "?" for c in _SINGLE_INSERT_COLUMNS
    )
    + ") RETURNING id, namespace, session_id, content, created_at, seq"
)
_EPOCH = dt.datetime(1970, 1, 1)


def to_epoch_us(value: dt.datetime | None) -> int | None:
    """A naive UTC datetime as microseconds since the epoch (for ``make_timestamp``)."""
    if value is None:
        return None
    return (value - _EPOCH) // dt.timedelta(microseconds=1)


_ORDERINGS = frozenset(
    {
        "created_at, id",
        "created_at DESC, id",
        "updated_at, id",
        "updated_at DESC, id",
        "importance DESC, created_at DESC, id",
    }
)

_INSERTABLE = frozenset(
    {
        "events",
        "facts",
        "fact_history",
        "macros",
        "scheduled_tasks",
        "terminal_allowed_prefixes",
        "sessions",
        "audit_log",
    }
)


def where_clause(
    *,
    namespace: str | None = None,
    filters: dict[str, Any] | None = None,
    since: Any = None,
    until: Any = None,
) -> tuple[list[str], list[Any]]:
    """SQL conditions and parameters for a namespace, equality filters and a date range.

    Filter keys must be known ``events`` columns (``FILTER_COLUMNS``); a value of
    ``None`` matches SQL NULL; a list/tuple/set matches any of its values.
    """
    clauses: list[str] = []
    params: list[Any] = []
    if namespace is not None:
        clauses.append("namespace = ?")
        params.append(namespace)
    for key, value in (filters or {}).items():
        if key not in FILTER_COLUMNS:
            raise InvalidInput(
                f"cannot filter on {key!r}; filterable fields: {', '.join(sorted(FILTER_COLUMNS))}"
            )
        if value is None:
            clauses.append(f"{key} IS NULL")
        elif isinstance(value, (list, tuple, set, frozenset)):
            clauses.append(f"{key} IN (SELECT unnest(?::VARCHAR[]))")
            params.append([str(v) for v in value])
        else:
            clauses.append(f"{key} = ?")
            params.append(value)
    if since is not None:
        clauses.append("created_at >= ?")
        params.append(since)
    if until is not None:
        clauses.append("created_at <= ?")
        params.append(until)
    return clauses, params


class _Change:
    """Versions before and after one counted change of ``events``."""

    before: tuple[int, int] = (0, 0)
    after: tuple[int, int] = (0, 0)
    applicable: bool = True


class _Transaction:
    """BEGIN/COMMIT on this thread's cursor, holding the store lock throughout.

    If a statement inside changed vectors, the version is bumped again after the
    commit, so an index rebuilt from the pre-commit snapshot is seen as stale.
    """

    def __init__(self, store: Store) -> None:
        self.store = store

    def __enter__(self) -> Store:
        store = self.store
        store._lock.acquire()
        try:
            store._cursor().execute("BEGIN TRANSACTION")
        except BaseException:
            store._lock.release()
            raise
        store._local.in_transaction = True
        store._local.dirty = False
        return store

    def __exit__(self, exc_type, exc, tb) -> None:
        store = self.store
        try:
            if store.con is not None:
                store._cursor().execute("ROLLBACK" if exc_type else "COMMIT")
        finally:
            store._local.in_transaction = False
            if getattr(store._local, "dirty", False):
                store.mark_stale()
            store._local.dirty = False
            store._lock.release()
