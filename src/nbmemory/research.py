"""Research methods of :class:`~nbmemory.Memory` (issue 4): importing an agent's
SQLite memory, the vectors behind every similarity, and applying tuned thresholds.

Nothing here imports plotly or ipywidgets: :mod:`nbmemory.analysis` and
:mod:`nbmemory.widgets` build on these methods for the notebook.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import sqlite3
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow as pa

from . import events as ev
from .config import Settings, check_unit_interval
from .errors import InvalidInput
from .store import ARROW_EVENT_SCHEMA

if TYPE_CHECKING:
    from .store import Store

#: Columns of a memory row returned with its vector by :meth:`ResearchMixin.memory_vectors`.
VECTOR_FRAME_COLUMNS = [
    "id",
    "session_id",
    "role",
    "kind",
    "content",
    "importance",
    "created_at",
]

#: Settings :meth:`ResearchMixin.apply_thresholds` may change.
THRESHOLD_SETTINGS = ("relevance_threshold", "salience_threshold", "similarity_threshold")

_FRACTION_RE = re.compile(r"(\.\d{6})\d+")

_FACTS_SCHEMA = pa.schema(
    [
        ("id", pa.int32()),
        ("namespace", pa.string()),
        ("category", pa.string()),
        ("key", pa.string()),
        ("value", pa.string()),
        ("source", pa.string()),
        ("created_at", pa.timestamp("us")),
        ("updated_at", pa.timestamp("us")),
    ]
)
_MACROS_SCHEMA = pa.schema(
    [
        ("id", pa.int32()),
        ("namespace", pa.string()),
        ("trigger_tool", pa.string()),
        ("trigger_args_pattern", pa.string()),
        ("next_tool", pa.string()),
        ("next_args", pa.string()),
        ("confidence", pa.float64()),
        ("used_count", pa.int32()),
        ("created_at", pa.timestamp("us")),
        ("updated_at", pa.timestamp("us")),
    ]
)
_TASKS_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("namespace", pa.string()),
        ("name", pa.string()),
        ("cron_expr", pa.string()),
        ("original_schedule", pa.string()),
        ("prompt", pa.string()),
        ("source", pa.string()),
        ("is_oneshot", pa.bool_()),
        ("is_paused", pa.bool_()),
        ("is_trusted", pa.bool_()),
        ("next_run_at", pa.timestamp("us")),
        ("last_run_at", pa.timestamp("us")),
        ("created_at", pa.timestamp("us")),
        ("updated_at", pa.timestamp("us")),
    ]
)
_PREFIXES_SCHEMA = pa.schema([("prefix", pa.string()), ("created_at", pa.timestamp("us"))])


@dataclass
class ImportReport:
    """What :meth:`ResearchMixin.import_sqlite` did, table by table."""

    path: str
    namespace: str
    #: Source tables of the events (``events``, ``messages`` or both).
    sources: list[str] = field(default_factory=list)
    events: int = 0
    #: Embeddings stored in the file whose dimension matched the store's model: kept.
    embeddings_kept: int = 0
    #: Events queued for a fresh embedding, with the reason.
    recomputed_dimension: int = 0
    recomputed_missing: int = 0
    recomputed_unreadable: int = 0
    #: Events that arrived with an ``embedding_error`` (kept; ``retry_failed_embeddings()``).
    embedding_errors: int = 0
    facts: int = 0
    macros: int = 0
    scheduled_tasks: int = 0
    terminal_allowed_prefixes: int = 0
    #: Rows already in the store (same id / key), left as they were, per table.
    skipped_existing: dict[str, int] = field(default_factory=dict)
    #: Dimension of the file's embeddings (the most common one) and of the store's model.
    source_dim: int | None = None
    store_dim: int | None = None

    @property
    def recomputed(self) -> int:
        """Events whose embedding will be computed by the store's model."""
        return self.recomputed_dimension + self.recomputed_missing + self.recomputed_unreadable

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["recomputed"] = self.recomputed
        return out

    def summary(self) -> str:
        """A few lines for a person: counts per table and what happened to the vectors."""
        lines = [
            f"imported {self.path} into namespace {self.namespace!r} "
            f"(events from {', '.join(self.sources) or 'no table'})",
            f"  events: {self.events}  facts: {self.facts}  macros: {self.macros}  "
            f"scheduled_tasks: {self.scheduled_tasks}  "
            f"terminal_allowed_prefixes: {self.terminal_allowed_prefixes}",
            f"  embeddings: {self.embeddings_kept} kept, {self.recomputed} re-computed "
            f"({self.recomputed_dimension} of dimension {self.source_dim} != {self.store_dim}, "
            f"{self.recomputed_missing} missing, {self.recomputed_unreadable} unreadable), "
            f"{self.embedding_errors} with embedding_error kept",
        ]
        skipped = {k: v for k, v in self.skipped_existing.items() if v}
        if skipped:
            lines.append(
                "  already in the store, left unchanged: "
                + ", ".join(f"{v} {k}" for k, v in skipped.items())
            )
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


class ResearchMixin:
    """Mixed into :class:`nbmemory.Memory`; uses its store, namespace and audit hook."""

    # -- vectors -----------------------------------------------------------------------
    def memory_vectors(self, *, namespace: str | None = None) -> tuple[pd.DataFrame, np.ndarray]:
        """Every memory embedded by the current model, and its unit-length vector.

        Returns ``(frame, matrix)``: one row of ``frame`` (id, session_id, role, kind,
        content, importance, created_at; oldest first) per row of the float32
        ``matrix``.  Cosine similarity of any query against every memory is then one
        matrix product (``matrix @ q``), ~15x faster than SQL for a whole sweep.
        """
        self._check_open()
        ns = self._ns(namespace)
        frame = self.store.df(
            f"SELECT {', '.join(VECTOR_FRAME_COLUMNS)}, embedding FROM events"
            " WHERE namespace = ? AND embedding_model = ? AND embedding IS NOT NULL"
            " ORDER BY created_at, id",
            [ns, self.model_name],
        )
        if frame.empty:
            return frame[VECTOR_FRAME_COLUMNS], np.zeros((0, 0), dtype=np.float32)
        matrix = normalise(np.stack(frame["embedding"].to_numpy()))
        return frame[VECTOR_FRAME_COLUMNS].reset_index(drop=True), matrix

    def embed_queries(self, queries: list[str]) -> np.ndarray:
        """Unit-length vectors of ``queries`` (one batch through the store's model)."""
        self._check_open()
        texts = [ev.check_text(q, "query") for q in queries]
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return normalise(np.asarray(self.embedder.embed(texts), dtype=np.float32))

    # -- settings ----------------------------------------------------------------------
    def apply_thresholds(
        self,
        *,
        relevance_threshold: float | None = None,
        salience_threshold: float | None = None,
        similarity_threshold: float | None = None,
        source: str = "api",
    ) -> Settings:
        """Apply tuned thresholds to this store's settings, with an audit row.

        What the threshold tuner's *Apply* button calls.  Only the values given
        change; the audit row (action ``settings``) keeps the old and new values.
        """
        self._check_open()
        changes = {
            name: check_unit_interval(value, name, low=-1.0)
            for name, value in (
                ("relevance_threshold", relevance_threshold),
                ("salience_threshold", salience_threshold),
                ("similarity_threshold", similarity_threshold),
            )
            if value is not None
        }
        if not changes:
            raise InvalidInput(
                "nothing to apply: pass relevance_threshold=, salience_threshold= "
                "or similarity_threshold="
            )
        if "salience_threshold" in changes:
            check_unit_interval(changes["salience_threshold"], "salience_threshold")
        before = {name: getattr(self.settings, name) for name in changes}
        settings = self.configure(**changes)
        self._audit("settings", [], None, {"before": before, "after": changes, "source": source})
        return settings

    # -- importing an agent's SQLite memory --------------------------------------------
    def import_sqlite(self, path: str | Path, *, namespace: str | None = None) -> ImportReport:
        """Read a seed 000 SQLite database (a running agent's memory) into this store.

        Tables read when present: ``events`` and/or the older ``messages``, ``facts``,
        ``macros``, ``scheduled_tasks``, ``terminal_allowed_prefixes``.  Rows keep
        their ids, timestamps (RFC 3339 text) and importance; ``embedding_error`` and
        ``consolidated_at`` come along.  Embeddings (JSON arrays of floats in BLOBs)
        are kept when their dimension matches the store's model and queued for
        re-computation otherwise; the report says how many of each.  Rows whose id
        (or fact category/key) is already in the store are left alone, so importing
        twice adds nothing.  The file is opened read-only and never changed; one bad
        row stores nothing and the error names it.
        """
        self._check_open()
        ns = self._ns(namespace)
        source = _open_sqlite(path)
        report = ImportReport(path=str(path), namespace=ns)
        try:
            tables = _sqlite_tables(source)
            event_tables = [t for t in ("events", "messages") if t in tables]
            if not event_tables and not tables & {"facts", "macros", "scheduled_tasks"}:
                raise InvalidInput(
                    f"{path} has none of seed 000's tables (events or messages, facts, macros, "
                    f"scheduled_tasks); tables found: {', '.join(sorted(tables)) or 'none'}"
                )
            report.sources = event_tables
            raw_events: dict[str, dict[str, Any]] = {}
            for table in reversed(event_tables):  # `events` wins over `messages`
                for row in _rows(source, table):
                    raw_events[str(row.get("id"))] = row
            facts = _rows(source, "facts") if "facts" in tables else []
            macros = _rows(source, "macros") if "macros" in tables else []
            tasks = _rows(source, "scheduled_tasks") if "scheduled_tasks" in tables else []
            prefixes = (
                _rows(source, "terminal_allowed_prefixes")
                if "terminal_allowed_prefixes" in tables
                else []
            )
        finally:
            source.close()

        store_dim = int(self.embedder.dim)
        report.store_dim = store_dim
        event_rows, to_embed, reasons = self._imported_events(raw_events, ns, store_dim, report)
        fact_rows = [_fact_row(r, ns) for r in facts]
        macro_rows = [_macro_row(r, ns) for r in macros]
        task_rows = [_task_row(r, ns) for r in tasks]
        prefix_rows = [_prefix_row(r) for r in prefixes]

        store = self.store
        with store.transaction():
            event_rows = _drop_existing(store, report, "events", event_rows, "id")
            fact_rows = _drop_existing_facts(store, report, fact_rows)
            macro_rows = _drop_existing(store, report, "macros", macro_rows, "id")
            task_rows = _drop_existing(store, report, "scheduled_tasks", task_rows, "id")
            prefix_rows = _drop_existing(
                store, report, "terminal_allowed_prefixes", prefix_rows, "prefix"
            )
            if event_rows:
                store.insert_events(pa.Table.from_pylist(event_rows, schema=ARROW_EVENT_SCHEMA))
            if fact_rows:
                store.insert_arrow("facts", pa.Table.from_pylist(fact_rows, schema=_FACTS_SCHEMA))
                _advance_sequence(store, "facts_id_seq", max(r["id"] for r in fact_rows))
            if macro_rows:
                store.insert_arrow(
                    "macros", pa.Table.from_pylist(macro_rows, schema=_MACROS_SCHEMA)
                )
                _advance_sequence(store, "macros_id_seq", max(r["id"] for r in macro_rows))
            if task_rows:
                store.insert_arrow(
                    "scheduled_tasks", pa.Table.from_pylist(task_rows, schema=_TASKS_SCHEMA)
                )
            if prefix_rows:
                store.insert_arrow(
                    "terminal_allowed_prefixes",
                    pa.Table.from_pylist(prefix_rows, schema=_PREFIXES_SCHEMA),
                )
            _count_imported(report, event_rows, reasons)
            report.facts = len(fact_rows)
            report.macros = len(macro_rows)
            report.scheduled_tasks = len(task_rows)
            report.terminal_allowed_prefixes = len(prefix_rows)
            self._audit(
                "import_sqlite",
                [r["id"] for r in event_rows],
                ns,
                {k: v for k, v in report.to_dict().items() if k not in ("namespace",)},
            )
        self.working.invalidate({(ns, r["session_id"]) for r in event_rows})
        queued = {r["id"] for r in event_rows}
        pending = [(i, text) for i, text in to_embed.items() if i in queued]
        if self.worker is not None and pending:
            self.worker.submit(pending)
        return report

    def _imported_events(
        self, raw: dict[str, dict[str, Any]], ns: str, store_dim: int, report: ImportReport
    ) -> tuple[list[dict[str, Any]], dict[str, str], dict[str, str]]:
        """Validated event rows, {id: text} of those needing a fresh embedding, and why."""
        rows: list[dict[str, Any]] = []
        to_embed: dict[str, str] = {}
        dims: dict[int, int] = {}
        reasons: dict[str, str] = {}
        for source_row in raw.values():
            row = _event_row(source_row, ns, self.settings)
            vector, error = _decode_embedding(source_row.get("embedding"))
            if vector is not None:
                dims[len(vector)] = dims.get(len(vector), 0) + 1
            if row["embedding_error"] is not None and vector is None:
                reasons[row["id"]] = "error"
            elif vector is not None and len(vector) == store_dim:
                row["embedding"] = vector.tolist()
                row["embedding_model"] = self.model_name
                reasons[row["id"]] = "kept"
            elif row["content"] is not None:
                row["embedding_error"] = None
                to_embed[row["id"]] = row["content"]
                if vector is not None:
                    reasons[row["id"]] = "dimension"
                elif error:
                    reasons[row["id"]] = "unreadable"
                else:
                    reasons[row["id"]] = "missing"
            rows.append(row)
        report.source_dim = max(dims, key=dims.__getitem__) if dims else None
        return rows, to_embed, reasons


def _count_imported(
    report: ImportReport, rows: list[dict[str, Any]], reasons: dict[str, str]
) -> None:
    """Fill the report's event and embedding counts for the rows actually inserted."""
    report.events = len(rows)
    counters = {
        "kept": "embeddings_kept",
        "error": "embedding_errors",
        "dimension": "recomputed_dimension",
        "unreadable": "recomputed_unreadable",
        "missing": "recomputed_missing",
    }
    for row in rows:
        reason = reasons.get(row["id"])
        if reason in counters:
            setattr(report, counters[reason], getattr(report, counters[reason]) + 1)


def normalise(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero), as float32."""
    matrix = np.asarray(matrix, dtype=np.float32)
    if matrix.ndim == 1:
        matrix = matrix.reshape(1, -1)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)


# -- reading SQLite ---------------------------------------------------------------------
def _open_sqlite(path: str | Path) -> sqlite3.Connection:
    file = Path(path).expanduser()
    if not file.is_file():
        raise InvalidInput(f"no SQLite database at {file}; pass the path of the agent's .db file")
    try:
        con = sqlite3.connect(f"{file.resolve().as_uri()}?mode=ro", uri=True)
        con.row_factory = sqlite3.Row
        con.execute("SELECT count(*) FROM sqlite_master").fetchall()
    except sqlite3.DatabaseError as exc:
        raise InvalidInput(f"{file} is not a readable SQLite database ({exc})") from None
    return con


def _sqlite_tables(con: sqlite3.Connection) -> set[str]:
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _rows(con: sqlite3.Connection, table: str) -> list[dict[str, Any]]:
    # table names come from the fixed set above, never from the file
    if table not in {
        "events",
        "messages",
        "facts",
        "macros",
        "scheduled_tasks",
        "terminal_allowed_prefixes",
    }:
        raise ValueError(table)
    return [dict(r) for r in con.execute(f"SELECT * FROM {table}").fetchall()]


def _time(value: Any, what: str, *, required: bool = True) -> dt.datetime | None:
    """RFC 3339 text (any fraction length), unix seconds, or None when allowed."""
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            raise InvalidInput(f"{what} is missing")
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return dt.datetime.fromtimestamp(float(value), dt.timezone.utc).replace(tzinfo=None)
    if isinstance(value, str):
        value = _FRACTION_RE.sub(r"\1", value.strip().replace(" ", "T", 1))
    try:
        return ev.to_utc(value, what)
    except InvalidInput:
        raise InvalidInput(f"{what} {value!r} is not an RFC 3339 timestamp") from None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def _decode_embedding(blob: Any) -> tuple[np.ndarray | None, bool]:
    """(vector, unreadable): a JSON array of floats in a BLOB (or text) -> float32."""
    if blob is None:
        return None, False
    try:
        text = bytes(blob).decode("utf-8") if not isinstance(blob, str) else blob
        values = json.loads(text)
        vector = np.asarray(values, dtype=np.float32)
    except (TypeError, ValueError, UnicodeDecodeError):
        return None, True
    if vector.ndim != 1 or not len(vector) or not np.isfinite(vector).all():
        return None, True
    if not float(np.linalg.norm(vector)):
        return None, True
    return vector, False


def _event_row(raw: dict[str, Any], ns: str, settings: Settings) -> dict[str, Any]:
    ident = _text(raw.get("id"))
    where = f"events row {ident!r}"
    if not ident:
        raise InvalidInput("an events/messages row has no id; every seed 000 row has one")
    role = _text(raw.get("role")) or "user"
    importance = raw.get("importance")
    if importance is None or (isinstance(importance, float) and math.isnan(importance)):
        importance = settings.importance_by_role.get(role, 0.5)
    importance = check_unit_interval(importance, f"{where}: importance")
    content = _text(raw.get("content"))
    if content is not None:
        content = ev.check_text(content, f"{where}: content", allow_empty=True)
    created = _time(raw.get("created_at"), f"{where}: created_at")
    metadata = raw.get("metadata")
    return {
        "id": ident,
        "session_id": _text(raw.get("session_id")) or "default",
        "namespace": ns,
        "kind": _text(raw.get("kind")) or "message",
        "role": role,
        "content": content,
        "tool_call_id": _text(raw.get("tool_call_id")),
        "tool_name": _text(raw.get("tool_name")),
        "tool_calls_json": _text(raw.get("tool_calls_json")),
        "metadata": _text(metadata) if metadata is not None else None,
        "graph_id": _text(raw.get("graph_id")),
        "task_id": _text(raw.get("task_id")),
        "created_at": created,
        "updated_at": _time(raw.get("updated_at"), f"{where}: updated_at", required=False)
        or created,
        "importance": importance,
        "embedding": None,
        "embedding_model": None,
        "embedding_error": _text(raw.get("embedding_error")),
        "consolidated_at": _time(
            raw.get("consolidated_at"), f"{where}: consolidated_at", required=False
        ),
    }


def _int_id(raw: dict[str, Any], table: str) -> int:
    try:
        return int(raw["id"])
    except (KeyError, TypeError, ValueError):
        raise InvalidInput(f"{table} row without an integer id: {raw!r}") from None


def _fact_row(raw: dict[str, Any], ns: str) -> dict[str, Any]:
    ident = _int_id(raw, "facts")
    where = f"facts row {ident}"
    created = _time(raw.get("created_at"), f"{where}: created_at")
    return {
        "id": ident,
        "namespace": ns,
        "category": _text(raw.get("category")) or "",
        "key": _text(raw.get("key")) or "",
        "value": _text(raw.get("value")) or "",
        "source": _text(raw.get("source")) or "",
        "created_at": created,
        "updated_at": _time(raw.get("updated_at"), f"{where}: updated_at", required=False)
        or created,
    }


def _macro_row(raw: dict[str, Any], ns: str) -> dict[str, Any]:
    ident = _int_id(raw, "macros")
    where = f"macros row {ident}"
    created = _time(raw.get("created_at"), f"{where}: created_at")
    return {
        "id": ident,
        "namespace": ns,
        "trigger_tool": _text(raw.get("trigger_tool")) or "",
        "trigger_args_pattern": _text(raw.get("trigger_args_pattern")),
        "next_tool": _text(raw.get("next_tool")) or "",
        "next_args": _text(raw.get("next_args")) or "",
        "confidence": float(raw.get("confidence") or 0.0),
        "used_count": int(raw.get("used_count") or 0),
        "created_at": created,
        "updated_at": _time(raw.get("updated_at"), f"{where}: updated_at", required=False)
        or created,
    }


def _task_row(raw: dict[str, Any], ns: str) -> dict[str, Any]:
    ident = _text(raw.get("id"))
    if not ident:
        raise InvalidInput("a scheduled_tasks row has no id")
    where = f"scheduled_tasks row {ident!r}"
    created = _time(raw.get("created_at"), f"{where}: created_at")
    return {
        "id": ident,
        "namespace": ns,
        "name": _text(raw.get("name")) or "",
        "cron_expr": _text(raw.get("cron_expr")) or "",
        "original_schedule": _text(raw.get("original_schedule")) or "",
        "prompt": _text(raw.get("prompt")) or "",
        "source": _text(raw.get("source")) or "tool",
        "is_oneshot": bool(raw.get("is_oneshot") or 0),
        "is_paused": bool(raw.get("is_paused") or 0),
        "is_trusted": bool(raw.get("is_trusted") or 0),
        "next_run_at": _time(raw.get("next_run_at"), f"{where}: next_run_at"),
        "last_run_at": _time(raw.get("last_run_at"), f"{where}: last_run_at", required=False),
        "created_at": created,
        "updated_at": _time(raw.get("updated_at"), f"{where}: updated_at", required=False)
        or created,
    }


def _prefix_row(raw: dict[str, Any]) -> dict[str, Any]:
    prefix = _text(raw.get("prefix"))
    if not prefix:
        raise InvalidInput("a terminal_allowed_prefixes row has no prefix")
    return {
        "prefix": prefix,
        "created_at": _time(raw.get("created_at"), "terminal_allowed_prefixes", required=False),
    }


_KEY_COLUMNS = {
    "events": ("id", "VARCHAR"),
    "macros": ("id", "INTEGER"),
    "scheduled_tasks": ("id", "VARCHAR"),
    "terminal_allowed_prefixes": ("prefix", "VARCHAR"),
}


def _drop_existing(
    store: Store, report: ImportReport, table: str, rows: list[dict[str, Any]], key: str
) -> list[dict[str, Any]]:
    """``rows`` without those whose key is already in ``table`` (counted in the report)."""
    report.skipped_existing[table] = 0
    if not rows:
        return rows
    column, sql_type = _KEY_COLUMNS[table]
    found = {
        r[0]
        for r in store.fetchall(
            f"SELECT {column} FROM {table} WHERE {column} IN (SELECT unnest(?::{sql_type}[]))",
            [[r[key] for r in rows]],
        )
    }
    kept = [r for r in rows if r[key] not in found]
    report.skipped_existing[table] = len(rows) - len(kept)
    return kept


def _drop_existing_facts(
    store: Store, report: ImportReport, rows: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    report.skipped_existing["facts"] = 0
    if not rows:
        return rows
    existing = store.fetchall("SELECT id, namespace, category, key FROM facts")
    ids = {r[0] for r in existing}
    keys = {(r[1], r[2], r[3]) for r in existing}
    kept = [
        r
        for r in rows
        if r["id"] not in ids and (r["namespace"], r["category"], r["key"]) not in keys
    ]
    report.skipped_existing["facts"] = len(rows) - len(kept)
    return kept


def _advance_sequence(store: Store, sequence: str, at_least: int) -> None:
    """Move ``sequence`` past ``at_least`` so later inserts never reuse an imported id."""
    if sequence not in ("facts_id_seq", "macros_id_seq"):
        raise ValueError(sequence)
    current = int(store.fetchone(f"SELECT nextval('{sequence}')")[0])
    if current < at_least:
        store.fetchall(
            f"SELECT max(nextval('{sequence}')) FROM range(?)", [int(at_least - current)]
        )
