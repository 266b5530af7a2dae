"""The tables of a lake, made from the same declarations as a file's (:mod:`..schema`).

DuckLake has no primary keys, unique constraints or sequences, and rejects
fixed-size arrays.  A lake therefore gets the columns of :data:`..schema.TABLES`
with plain types; ids a file takes from a sequence come from functions each
connection registers (``nbm_seq()``, see :mod:`.store`), or are handed out from
a counter (``facts`` and ``macros`` ids, which are small integers).  Uniqueness
that a file's keys enforce is kept by the writes themselves: event ids are
random, and upserts of small tables run under a claim on ``nbmemory_claims``
(two writers claiming it at once conflict, and one of them is retried).  Claims
have a table of their own: the id counters are updated by side transactions,
which must not conflict with the upsert that asked for an id.
"""

from __future__ import annotations

import pyarrow as pa

from ..migrations import MIGRATIONS, SCHEMA_VERSION
from ..ownership import FORMAT
from ..schema import EVENT_ARCHIVE, EVENT_VECTOR_ARCHIVE, TABLES, Table

_TYPES = {
    pa.string(): "VARCHAR",
    pa.float64(): "DOUBLE",
    pa.int32(): "INTEGER",
    pa.int64(): "BIGINT",
    pa.bool_(): "BOOLEAN",
    pa.timestamp("us"): "TIMESTAMP",
    pa.list_(pa.float32()): "FLOAT[]",
    pa.list_(pa.string()): "VARCHAR[]",
}

#: The defaults a file's DDL declares (migrations m001/m002), and the id functions.
DEFAULTS = {
    ("events", "namespace"): "'default'",
    ("events", "kind"): "'message'",
    ("events", "importance"): "0.5",
    ("facts", "namespace"): "'default'",
    ("facts", "source"): "''",
    ("macros", "namespace"): "'default'",
    ("macros", "next_args"): "''",
    ("macros", "confidence"): "0.0",
    ("macros", "used_count"): "0",
    ("scheduled_tasks", "namespace"): "'default'",
    ("scheduled_tasks", "source"): "'tool'",
    ("scheduled_tasks", "is_oneshot"): "false",
    ("scheduled_tasks", "is_paused"): "false",
    ("scheduled_tasks", "is_trusted"): "false",
    ("sessions", "user_id"): "''",
    ("sessions", "status"): "'active'",
    ("sessions", "state"): "'{}'",
    ("audit_log", "id"): "nbm_seq()",
}
#: Columns a file's migrations added after its first tables.
EXTRA_COLUMNS = {"events": ("seq BIGINT DEFAULT nbm_seq()",)}
#: Names of the counters ``nbmemory_counters`` holds.
COUNTERS = ("small_ids",)


def create_table_sql(table: Table, prefix: str = "") -> str:
    """``CREATE TABLE IF NOT EXISTS`` of ``table`` (``prefix``: e.g. ``lake.main.``)."""
    columns = []
    for column in table.columns:
        sql = f"{column.name} {_TYPES[column.type]}"
        default = DEFAULTS.get((table.name, column.name))
        if default is not None:
            sql += f" DEFAULT {default}"
        columns.append(sql)
    columns += EXTRA_COLUMNS.get(table.name, ())
    return f"CREATE TABLE IF NOT EXISTS {prefix}{table.name} ({', '.join(columns)})"


#: What a lake made by an older nbmemory lacks: schema version -> (migration, statements
#: on the lake's tables), as the file's migration of that name did.
UPGRADES: dict[int, tuple[str, tuple[str, ...]]] = {
    3: (
        "m005_vector_passages",
        tuple(
            f"ALTER TABLE lake.main.event_vectors ADD COLUMN {column} INTEGER"
            for column in ("passage", "span_start", "span_stop")
        ),
    ),
    # the archive of compacted events; a lake has no indexes (the file's m006 also
    # makes one on events.session_id)
    4: (
        "m006_event_archive",
        tuple(
            create_table_sql(table, "lake.main.") for table in (EVENT_ARCHIVE, EVENT_VECTOR_ARCHIVE)
        ),
    ),
}


def upgrade_statements(version: int) -> list[tuple[str, list[object]]]:
    """The statements that bring a lake of schema ``version`` to this one (one
    transaction): the columns, the migrations recorded, the version."""
    statements: list[tuple[str, list[object]]] = []
    for target in sorted(v for v in UPGRADES if v > version):
        name, sqls = UPGRADES[target]
        statements += [(sql, []) for sql in sqls]
        statements.append(
            ("INSERT INTO lake.main.nbmemory_migrations VALUES (?, now()::TIMESTAMP)", [name])
        )
    statements.append(
        (
            "UPDATE lake.main.nbmemory_meta SET value = ? WHERE key = 'schema_version'",
            [str(SCHEMA_VERSION)],
        )
    )
    return statements


def create_statements(lake_id: str) -> list[tuple[str, list[object]]]:
    """Every statement that makes an empty lake an nbmemory store (one transaction)."""
    statements: list[tuple[str, list[object]]] = [
        (create_table_sql(table), []) for table in TABLES.values()
    ]
    statements += [
        ("CREATE TABLE IF NOT EXISTS nbmemory_migrations (name VARCHAR, applied_at TIMESTAMP)", []),
        ("CREATE TABLE IF NOT EXISTS nbmemory_counters (name VARCHAR, value BIGINT)", []),
        ("CREATE TABLE IF NOT EXISTS nbmemory_claims (name VARCHAR, value BIGINT)", []),
        ("INSERT INTO nbmemory_claims VALUES ('upserts', 0)", []),
    ]
    statements += [
        ("INSERT INTO nbmemory_migrations VALUES (?, now()::TIMESTAMP)", [fn.__name__])
        for fn in MIGRATIONS
    ]
    statements += [("INSERT INTO nbmemory_counters VALUES (?, 0)", [name]) for name in COUNTERS]
    statements += [
        ("INSERT INTO nbmemory_meta VALUES (?, ?)", [key, value])
        for key, value in (
            ("schema_version", str(SCHEMA_VERSION)),
            ("format", FORMAT),
            ("backend", "ducklake"),
            ("lake_id", lake_id),
        )
    ]
    return statements
