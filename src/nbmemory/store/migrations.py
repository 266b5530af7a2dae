"""Numbered migrations, each applied once and recorded in ``nbmemory_migrations``.

A migration is a function ``mNNN_what(store)`` registered with :func:`migration`,
in order; :func:`migrate` runs the ones a file has not recorded yet, all in one
transaction (like simonw/llm's migrations).  Migrations are history: they are
never edited once released; a change of schema is a new migration.  The
current shape of every table is declared in :mod:`.schema`.

The first migrations are written so that a store made before this table existed
(its tables already there) records them without changing anything.
"""

from __future__ import annotations

from collections.abc import Callable

import duckdb

from ..config import DEFAULT_MODEL
from ..errors import StoreError
from .backend import MigratingStore
from .ownership import FORMAT, LEGACY_MESSAGES, legacy_messages, owner
from .shape import check_columns

#: Version of the file format written in ``nbmemory_meta`` (readers refuse newer ones).
SCHEMA_VERSION = 4

Migration = Callable[[MigratingStore], None]
MIGRATIONS: list[Migration] = []

# The Rust agent's v0.8 table is kept, renamed, after its rows are copied into ``events``.
LEGACY_RENAMED = "messages_migrated"


def migration(fn: Migration) -> Migration:
    """Register ``fn`` as the next migration (its name is what the table records)."""
    MIGRATIONS.append(fn)
    return fn


def applied(store: MigratingStore) -> set[str]:
    """Names of the migrations recorded in the file (empty for a new file)."""
    if not store.catalog.table_exists("nbmemory_migrations"):
        return set()
    return {row[0] for row in store.run("SELECT name FROM nbmemory_migrations")}


def check_file(store: MigratingStore, *, adopt: bool = False) -> None:
    """Refuse, before a byte is written, a file nbmemory must not change.

    Whose file it is, :func:`.ownership.owner` decides: another application's DuckDB
    file is refused (unless ``adopt=True`` asks to add nbmemory's tables beside its
    own, and no name clashes).  Of nbmemory's own, one written by a newer nbmemory is
    refused too.
    """
    if owner(store, adopt=adopt) == "nbmemory":
        _check_version(store)


def check_readable(store: MigratingStore) -> None:
    """A file opened read-only must be nbmemory's, migrated to this version's tables
    (a newer one is readable as far as it goes; an older one cannot be upgraded
    without a write)."""
    if owner(store, read_only=True) == "new":
        return
    missing = [fn.__name__ for fn in MIGRATIONS if fn.__name__ not in applied(store)]
    if missing:
        raise StoreError(
            f"{store.path} was written by an older nbmemory and needs upgrading"
            f" ({', '.join(missing)}), which read_only=True cannot do; open it once"
            " without read_only (or run `nbmemory status --store PATH`) to upgrade it"
        )
    store.catalog.schema_version()  # a damaged one is refused here, not at the first status()
    check_columns(store)


def _check_version(store: MigratingStore) -> None:
    version = store.catalog.schema_version()
    unknown = sorted(applied(store) - {fn.__name__ for fn in MIGRATIONS})
    if version > SCHEMA_VERSION or unknown:
        raise StoreError(
            f"{store.path} was written by a newer nbmemory (schema version {version}"
            + (f", migrations {', '.join(unknown)}" if unknown else "")
            + f"; this nbmemory reads version {SCHEMA_VERSION} and older); nothing was "
            "changed. Upgrade nbmemory (pip install -U nbmemory), or open it with "
            "read_only=True to read what this version understands."
        )


def migrate(store: MigratingStore, *, adopt: bool = False) -> list[str]:
    """Apply the migrations the file lacks, in one transaction; returns their names.

    The file is checked first (:func:`check_file`): one that is not nbmemory's,
    or is newer, is refused without a write.  The transaction commits straight into
    the file (:meth:`Store.schema_changes`): DuckDB 1.x cannot replay some schema
    statements from its write-ahead log, so they never wait there.
    """
    check_file(store, adopt=adopt)
    done = applied(store)
    pending = [fn for fn in MIGRATIONS if fn.__name__ not in done]
    if not pending and _meta_current(store):
        check_columns(store)
        return []  # nothing to write: an up-to-date file opens without a write
    with store.schema_changes(), store.transaction():
        store.run(
            "CREATE TABLE IF NOT EXISTS nbmemory_migrations ("
            " name VARCHAR PRIMARY KEY, applied_at TIMESTAMP DEFAULT current_timestamp)"
        )
        for fn in pending:
            _apply(store, fn)
            store.run("INSERT INTO nbmemory_migrations (name) VALUES (?)", [fn.__name__])
        check_columns(store)  # a foreign table refuses the file: the transaction rolls back
        for key, value in (("schema_version", str(SCHEMA_VERSION)), ("format", FORMAT)):
            store.run(
                "INSERT INTO nbmemory_meta VALUES (?, ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                [key, value],
            )
    return [fn.__name__ for fn in pending]


def _apply(store: MigratingStore, fn: Migration) -> None:
    """Run one migration; a DuckDB error (a table that is not what it should be) is a
    :class:`StoreError` naming the file and the migration (the transaction rolls back)."""
    try:
        fn(store)
    except duckdb.Error as exc:
        raise StoreError(
            f"{store.path} cannot be upgraded ({fn.__name__}: {str(exc).splitlines()[0][:160]});"
            " nothing was changed. Its tables are not what that nbmemory wrote: restore the "
            "file from a backup, or pass another path."
        ) from None


def _meta_current(store: MigratingStore) -> bool:
    return (
        store.catalog.table_exists("nbmemory_meta")
        and store.meta.get("schema_version") == str(SCHEMA_VERSION)
        and store.meta.get("format") == FORMAT
    )


@migration
def m001_tables(store: MigratingStore) -> None:
    """The tables of schema version 1."""
    for statement in _V1_TABLES:
        store.run(statement)


@migration
def m002_events_seq(store: MigratingStore) -> None:
    """Insertion order of events: breaks created_at ties (rowid is not stable across updates)."""
    store.run("CREATE SEQUENCE IF NOT EXISTS events_seq START 1")
    store.run(
        "ALTER TABLE events ADD COLUMN IF NOT EXISTS seq BIGINT DEFAULT nextval('events_seq')"
    )


@migration
def m003_legacy_messages(store: MigratingStore) -> None:
    """Copy the v0.8 ``messages`` rows into ``events``, then keep the old table renamed
    (a ``messages`` table of another application, in a file adopted, is left alone)."""
    if legacy_messages(store):
        store.migrated_messages = _copy_messages(store)


@migration
def m004_event_vectors(store: MigratingStore) -> None:
    """Vectors move from ``events.embedding`` to the append-only ``event_vectors``.

    Writing a vector back with an ``UPDATE`` of a LIST column on a keyed table is
    DuckDB's slow path (~2-5k rows/s, slower as the table grows); an append is an
    order of magnitude faster.  No key on the new table: an indexed key would make
    every append pay for it, and a lake has none; the writes keep one row per
    (event, model) by deleting before they append, in one transaction.
    """
    store.run(
        """CREATE TABLE IF NOT EXISTS event_vectors (
            id VARCHAR NOT NULL,
            namespace VARCHAR NOT NULL,
            model VARCHAR NOT NULL,
            embedding FLOAT[] NOT NULL
        )"""
    )
    store.run(
        "INSERT INTO event_vectors SELECT id, namespace, embedding_model, embedding FROM events"
        " WHERE embedding IS NOT NULL AND embedding_model IS NOT NULL"
    )
    # the column goes before the UPDATE: DuckDB 1.x cannot commit an ALTER of a table
    # whose rows the same transaction updated ("another transaction has altered this table")
    store.run("ALTER TABLE events DROP COLUMN embedding")
    store.run(
        "UPDATE events SET embedding_model = NULL WHERE embedding_model IS NOT NULL"
        " AND id NOT IN (SELECT id FROM event_vectors)"
    )


@migration
def m005_vector_passages(store: MigratingStore) -> None:
    """A long text has one vector per passage: ``event_vectors`` says which passage and
    which characters of the text it covers (NULL: the whole text, as every vector
    before).  Schema version 3: an older nbmemory would take the passages of one
    event for several vectors of it, so it refuses the file."""
    for column in ("passage", "span_start", "span_stop"):
        store.run(f"ALTER TABLE event_vectors ADD COLUMN IF NOT EXISTS {column} INTEGER")


@migration
def m006_event_archive(store: MigratingStore) -> None:
    """The archive of compacted events, and an index on ``events.session_id``.

    A consolidation that compacts (the Rust agent layer compresses old conversations
    "reducing storage and context-window use") moves the originals it summarised
    out of ``events`` and ``event_vectors`` into these tables, from where
    ``restore`` brings them back until retention removes them.  The Rust agent's
    ``session_id`` is "indexado" (indexed): recency, a session's deletion and its
    working memory all select by it.  Schema version 4: an older nbmemory would
    neither see nor erase the archived rows (a ``forget_user`` would leave them),
    so it refuses the file.
    """
    store.run(
        """CREATE TABLE IF NOT EXISTS event_archive (
            id VARCHAR PRIMARY KEY,
            session_id VARCHAR NOT NULL,
            namespace VARCHAR NOT NULL,
            kind VARCHAR NOT NULL,
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
            importance DOUBLE NOT NULL,
            embedding_model VARCHAR,
            embedding_error VARCHAR,
            consolidated_at TIMESTAMP,
            seq BIGINT,
            summary_id VARCHAR NOT NULL,
            archived_at TIMESTAMP NOT NULL
        )"""
    )
    store.run(
        """CREATE TABLE IF NOT EXISTS event_vector_archive (
            id VARCHAR NOT NULL,
            namespace VARCHAR NOT NULL,
            model VARCHAR NOT NULL,
            embedding FLOAT[] NOT NULL,
            passage INTEGER,
            span_start INTEGER,
            span_stop INTEGER
        )"""
    )
    store.run("CREATE INDEX IF NOT EXISTS events_session_id ON events (session_id)")


_V1_TABLES = [
    """CREATE TABLE IF NOT EXISTS nbmemory_meta (key VARCHAR PRIMARY KEY, value VARCHAR)""",
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


def _utc_timestamp_sql(column: str, column_type: str) -> str:
    """SQL turning a legacy RFC3339 text (or timestamp) column into a UTC TIMESTAMP."""
    if column_type.upper().startswith("TIMESTAMP WITH"):
        return f"timezone('UTC', {column})"
    if column_type.upper().startswith("TIMESTAMP"):
        return column
    return f"timezone('UTC', TRY_CAST({column} AS TIMESTAMPTZ))"


def _copy_messages(store: MigratingStore) -> int:
    """Insert the ``messages`` rows missing from ``events``; returns how many."""
    columns = dict(
        store.run(
            "SELECT column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = 'main' AND table_name = ?",
            [LEGACY_MESSAGES],
        )
    )

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
        FROM {LEGACY_MESSAGES} m
        WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.id = CAST(m.id AS VARCHAR))
        RETURNING id
    """
    copied = len(store.run(sql, [DEFAULT_MODEL]))
    suffix = ""
    if store.catalog.table_exists(LEGACY_RENAMED):
        suffix = "_" + str(store.run("SELECT count(*) FROM duckdb_tables()")[0][0])
    # the old rows stay (renamed) rather than being dropped: nothing is lost
    store.run(f"ALTER TABLE {LEGACY_MESSAGES} RENAME TO {LEGACY_RENAMED}{suffix}")
    return copied


def recorded_version(store: MigratingStore) -> int:
    """The version ``nbmemory_meta`` records (0 before there is one); a value that is
    not a whole number means the file was damaged: :class:`StoreError` says so."""
    if not store.catalog.table_exists("nbmemory_meta"):
        return 0
    value = store.meta.get("schema_version")
    try:
        return int(value) if value else 0
    except ValueError:
        raise StoreError(
            f"{store.path} is damaged: nbmemory_meta holds schema_version {str(value)[:40]!r}, "
            "not a number; nothing was changed. Restore the file from a backup, or, if "
            "only that value is wrong, set it back with DuckDB (UPDATE nbmemory_meta SET "
            f"value = '{SCHEMA_VERSION}' WHERE key = 'schema_version', when "
            "nbmemory_migrations lists every migration of this nbmemory)"
        ) from None
