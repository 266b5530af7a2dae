"""Every table of a store, declared once: its columns, their Arrow types, its key.

The SQL that created each table over time lives in :mod:`.migrations` (history
is never rewritten); this module says what the tables are *now*, for the code
that reads and writes them: the columns a read returns, the Arrow schema of a
bulk insert, and which columns hold text a user or agent handed in (``user_text``:
the writer redacts secrets from them before they are stored).  A test checks
that a freshly migrated store has exactly these columns.

Tables and where they come from: ``events`` (it replaced ``messages``; its vectors
live in ``event_vectors``), ``facts``,
``macros``, ``scheduled_tasks``, ``terminal_allowed_prefixes`` are the Rust agent
layer's; ``sessions`` and ``audit_log`` are Vectora's;
``fact_history``, ``nbmemory_meta`` and the archive of compacted events
(``event_archive``, ``event_vector_archive``) are nbmemory's own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import pyarrow as pa

_TS = pa.timestamp("us")


@dataclass(frozen=True)
class Column:
    name: str
    type: pa.DataType
    #: Text a user or agent handed in: redacted before it is stored.  Identifiers
    #: (ids, session ids, namespaces, roles, kinds, tool names, user ids) are stored
    #: as given: other rows point at them, and a redacted key would break lookups.
    user_text: bool = False


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[Column, ...]
    key: tuple[str, ...] = ()

    @cached_property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @cached_property
    def arrow_schema(self) -> pa.Schema:
        return pa.schema([(c.name, c.type) for c in self.columns])

    @cached_property
    def user_text(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns if c.user_text)

    def to_arrow(self, rows: Sequence[Mapping[str, Any]]) -> pa.Table:
        """Rows (dicts; missing keys are NULL) as an Arrow table in this table's order,
        built a column at a time."""
        schema = self.arrow_schema
        return pa.Table.from_arrays(
            [pa.array([row.get(c.name) for row in rows], c.type) for c in self.columns],
            schema=schema,
        )


EVENTS = Table(
    "events",
    (
        Column("id", pa.string()),
        Column("session_id", pa.string()),
        Column("namespace", pa.string()),
        Column("kind", pa.string()),
        Column("role", pa.string()),
        Column("content", pa.string(), user_text=True),
        Column("tool_call_id", pa.string()),
        Column("tool_name", pa.string()),
        Column("tool_calls_json", pa.string(), user_text=True),
        Column("metadata", pa.string(), user_text=True),
        Column("graph_id", pa.string()),
        Column("task_id", pa.string()),
        Column("created_at", _TS),
        Column("updated_at", _TS),
        Column("importance", pa.float64()),
        #: The model whose vector ``event_vectors`` holds for this text (NULL: none yet).
        Column("embedding_model", pa.string()),
        Column("embedding_error", pa.string()),
        Column("consolidated_at", _TS),
    ),
    key=("id",),
)
#: Insertion order of events (breaks created_at ties); filled by a sequence.
EVENT_SEQ = "seq"

#: Columns of ``events`` returned by reads.
READ_COLUMNS = EVENTS.names

#: The vector of each embedded event, apart from the row: written by appends (a
#: LIST column is DuckDB's slow path for UPDATE), one row per (event, model), only
#: for the exact text the event holds; dropped with the text, the event or the model.
#: ``namespace`` is the event's (it never changes), so the index loads without a join.
EVENT_VECTORS = Table(
    "event_vectors",
    (
        Column("id", pa.string()),
        Column("namespace", pa.string()),
        Column("model", pa.string()),
        Column("embedding", pa.list_(pa.float32())),
        #: Which passage of a long text (0, 1 ...; see nbmemory.retrieval.passages), and
        #: its characters ``[span_start, span_stop)`` of the content; all NULL: the
        #: vector of the whole text (a short one, or one embedded before passages).
        Column("passage", pa.int32()),
        Column("span_start", pa.int32()),
        Column("span_stop", pa.int32()),
    ),
    key=("id", "model", "passage"),
)

#: Columns a caller may filter ``events`` on with equality (``filters={...}``).
FILTER_COLUMNS = frozenset(
    {"session_id", "namespace", "kind", "role", "tool_call_id", "tool_name", "graph_id", "task_id"}
)

#: Events a compacting consolidation replaced by their summary (the Rust agent layer
#: compresses old conversations "reducing storage and context-window use"): the event
#: row as it was (``consolidated_at`` set) with its ``seq``, the summary that replaced
#: it and when.  Nothing reads them but :meth:`~.archive.EventArchive.restore`, the
#: listing of the archive, its retention and erasure.
EVENT_ARCHIVE = Table(
    "event_archive",
    (
        *EVENTS.columns,
        Column("seq", pa.int64()),
        Column("summary_id", pa.string()),
        Column("archived_at", _TS),
    ),
    key=("id",),
)

#: The vectors (and passages) of the archived events, as ``event_vectors`` held them.
EVENT_VECTOR_ARCHIVE = Table("event_vector_archive", EVENT_VECTORS.columns, key=EVENT_VECTORS.key)

FACTS = Table(
    "facts",
    (
        Column("id", pa.int32()),
        Column("namespace", pa.string()),
        Column("category", pa.string(), user_text=True),
        Column("key", pa.string(), user_text=True),
        Column("value", pa.string(), user_text=True),
        Column("source", pa.string()),
        Column("created_at", _TS),
        Column("updated_at", _TS),
        Column("embedding", pa.list_(pa.float32())),
        Column("embedding_model", pa.string()),
    ),
    key=("id",),
)

FACT_HISTORY = Table(
    "fact_history",
    (
        Column("fact_id", pa.int32()),
        Column("namespace", pa.string()),
        Column("category", pa.string()),
        Column("key", pa.string()),
        Column("value", pa.string()),
        Column("source", pa.string()),
        Column("valid_from", _TS),
        Column("superseded_at", _TS),
    ),
)

MACROS = Table(
    "macros",
    (
        Column("id", pa.int32()),
        Column("namespace", pa.string()),
        Column("trigger_tool", pa.string()),
        Column("trigger_args_pattern", pa.string()),
        Column("next_tool", pa.string()),
        Column("next_args", pa.string(), user_text=True),
        Column("confidence", pa.float64()),
        Column("used_count", pa.int32()),
        Column("created_at", _TS),
        Column("updated_at", _TS),
    ),
    key=("id",),
)

SCHEDULED_TASKS = Table(
    "scheduled_tasks",
    (
        Column("id", pa.string()),
        Column("namespace", pa.string()),
        Column("name", pa.string(), user_text=True),
        Column("cron_expr", pa.string()),
        Column("original_schedule", pa.string()),
        Column("prompt", pa.string(), user_text=True),
        Column("source", pa.string()),
        Column("is_oneshot", pa.bool_()),
        Column("is_paused", pa.bool_()),
        Column("is_trusted", pa.bool_()),
        Column("next_run_at", _TS),
        Column("last_run_at", _TS),
        Column("created_at", _TS),
        Column("updated_at", _TS),
    ),
    key=("id",),
)

TERMINAL_ALLOWED_PREFIXES = Table(
    "terminal_allowed_prefixes",
    (Column("prefix", pa.string()), Column("created_at", _TS)),
    key=("prefix",),
)

SESSIONS = Table(
    "sessions",
    (
        Column("namespace", pa.string()),
        Column("session_id", pa.string()),
        Column("user_id", pa.string()),
        Column("status", pa.string()),
        Column("state", pa.string(), user_text=True),
        Column("created_at", _TS),
        Column("last_activity", _TS),
        Column("closed_at", _TS),
    ),
    key=("namespace", "session_id"),
)

AUDIT_LOG = Table(
    "audit_log",
    (
        Column("id", pa.int64()),
        Column("logged_at", _TS),
        Column("namespace", pa.string()),
        Column("actor", pa.string()),
        Column("action", pa.string()),
        Column("target_ids", pa.list_(pa.string())),
        Column("details", pa.string(), user_text=True),
    ),
    key=("id",),
)

META = Table(
    "nbmemory_meta", (Column("key", pa.string()), Column("value", pa.string())), key=("key",)
)

TABLES = {
    t.name: t
    for t in (
        EVENTS,
        EVENT_VECTORS,
        EVENT_ARCHIVE,
        EVENT_VECTOR_ARCHIVE,
        FACTS,
        FACT_HISTORY,
        MACROS,
        SCHEDULED_TASKS,
        TERMINAL_ALLOWED_PREFIXES,
        SESSIONS,
        AUDIT_LOG,
        META,
    )
}
