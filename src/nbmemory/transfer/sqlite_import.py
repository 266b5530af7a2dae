"""Importing an agent's SQLite memory (the Rust agent's schema) into a store.

Tables read when present: ``events`` and/or the older ``messages``, ``facts``,
``macros``, ``scheduled_tasks``, ``terminal_allowed_prefixes``.  Every event
passes the same validation as ``add_event``.  The source file is opened
read-only and never changed; one bad row stores nothing and the error names it.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..core import Core
from ..errors import InvalidInput
from ..event_rows import build_row
from ..store.sqlite_source import read_sqlite
from ..validation import check_path, to_utc
from .json_tables import check_row

_FRACTION_RE = re.compile(r"(\.\d{6})\d+")


@dataclass
class ImportReport:
    """What :meth:`SqliteImport.import_sqlite` did, table by table."""

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
    #: Events that arrived with an ``embedding_error`` (kept; ``mem.embeddings.retry_failed()``).
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


class SqliteImport:
    """``import_sqlite``."""

    def __init__(self, core: Core) -> None:
        self.core = core

    def import_sqlite(self, path: str | Path, *, namespace: str | None = None) -> ImportReport:
        """Read an agent's SQLite database (the Rust agent's schema) into this store.

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
        core = self.core
        ns = core.ns(namespace)
        source = read_sqlite(check_path(path))
        tables = {row["name"] for row in source.pop("_tables")}
        event_tables: list[str] = [t for t in ("events", "messages") if t in source]
        if not event_tables and not tables & {"facts", "macros", "scheduled_tasks"}:
            raise InvalidInput(
                f"{path} has none of the agent's tables (events or messages, facts, macros, "
                f"scheduled_tasks); tables found: {', '.join(sorted(tables)) or 'none'}"
            )
        report = ImportReport(path=str(path), namespace=ns, sources=event_tables)
        raw_events: dict[str, dict[str, Any]] = {}
        for table in reversed(event_tables):  # `events` wins over `messages`
            for row in source[table]:
                raw_events[str(row.get("id"))] = row
        report.store_dim = int(core.embedder.dim)
        events, vectors, reasons = self._events(raw_events, ns, report)
        facts = [_fact_row(r, ns, core) for r in source.get("facts", [])]
        macros = [_macro_row(r, ns, core) for r in source.get("macros", [])]
        tasks = [_task_row(r, ns, core) for r in source.get("scheduled_tasks", [])]
        prefixes = [_prefix_row(r, core) for r in source.get("terminal_allowed_prefixes", [])]
        with core.writer.transaction() as tx:
            found = tx.events.existing(r["id"] for r in events)
            events = _new(report, "events", events, lambda r: r["id"] in found)
            known = tx.facts.keys()
            fact_ids, fact_keys = {k[0] for k in known}, {k[1:] for k in known}
            facts = _new(
                report,
                "facts",
                facts,
                lambda r: (
                    r["id"] in fact_ids or (r["namespace"], r["category"], r["key"]) in fact_keys
                ),
            )
            macro_ids = tx.macros.existing(r["id"] for r in macros)
            macros = _new(report, "macros", macros, lambda r: r["id"] in macro_ids)
            task_ids = tx.tasks.existing(r["id"] for r in tasks)
            tasks = _new(report, "scheduled_tasks", tasks, lambda r: r["id"] in task_ids)
            allowed = tx.prefixes.existing(r["prefix"] for r in prefixes)
            prefixes = _new(
                report, "terminal_allowed_prefixes", prefixes, lambda r: r["prefix"] in allowed
            )
            if events:
                tx.events.insert(events, vectors=vectors, bulk=True)
            report.facts = tx.facts.insert_rows(facts)
            report.macros = tx.macros.insert_rows(macros)
            report.scheduled_tasks = tx.tasks.insert_rows(tasks)
            report.terminal_allowed_prefixes = tx.prefixes.insert_rows(prefixes)
            _count_imported(report, events, reasons)
            details = {k: v for k, v in report.to_dict().items() if k != "namespace"}
            tx.audit("import_sqlite", [r["id"] for r in events], ns, details)
        return report

    def _events(
        self, raw: dict[str, dict[str, Any]], ns: str, report: ImportReport
    ) -> tuple[list[dict[str, Any]], dict[str, tuple[str, np.ndarray]], dict[str, str]]:
        """Validated event rows, the vectors kept, and what happened to each vector."""
        rows: list[dict[str, Any]] = []
        vectors: dict[str, tuple[str, np.ndarray]] = {}
        dims: dict[int, int] = {}
        reasons: dict[str, str] = {}
        for source_row in raw.values():
            row = _event_row(source_row, ns, self.core)
            vector, unreadable = _decode_embedding(source_row.get("embedding"))
            if vector is not None:
                dims[len(vector)] = dims.get(len(vector), 0) + 1
            if row["embedding_error"] is not None and vector is None:
                reasons[row["id"]] = "error"
            elif vector is not None and len(vector) == report.store_dim:
                vectors[row["id"]] = (self.core.model, vector)
                reasons[row["id"]] = "kept"
            elif row["content"] is not None:
                row["embedding_error"] = None
                reasons[row["id"]] = (
                    "dimension" if vector is not None else "unreadable" if unreadable else "missing"
                )
            rows.append(row)
        report.source_dim = max(dims, key=dims.__getitem__) if dims else None
        return rows, vectors, reasons


def _new(
    report: ImportReport,
    table: str,
    rows: list[dict[str, Any]],
    present: Callable[[dict[str, Any]], bool],
) -> list[dict[str, Any]]:
    """``rows`` without those already in the store (counted in the report)."""
    kept = [r for r in rows if not present(r)]
    report.skipped_existing[table] = len(rows) - len(kept)
    return kept


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
        return to_utc(value, what)
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


def _event_row(raw: dict[str, Any], ns: str, core: Core) -> dict[str, Any]:
    ident = _text(raw.get("id"))
    where = f"events row {ident!r}"
    if not ident:
        raise InvalidInput("an events/messages row has no id; every row of the agent has one")
    importance = raw.get("importance")
    if isinstance(importance, float) and math.isnan(importance):
        importance = None
    metadata = raw.get("metadata")
    try:
        return build_row(
            core.settings,
            stored=True,
            id=ident,
            session_id=_text(raw.get("session_id")) or "default",
            namespace=ns,
            kind=_text(raw.get("kind")) or "message",
            role=_text(raw.get("role")) or "user",
            content=_text(raw.get("content")),
            metadata=_text(metadata) if metadata is not None else None,
            importance=importance,
            tool_call_id=_text(raw.get("tool_call_id")),
            tool_name=_text(raw.get("tool_name")),
            tool_calls=_text(raw.get("tool_calls_json")),
            created_at=_time(raw.get("created_at"), "created_at"),
            updated_at=_time(raw.get("updated_at"), "updated_at", required=False),
            consolidated_at=_time(raw.get("consolidated_at"), "consolidated_at", required=False),
            embedding_error=_text(raw.get("embedding_error")),
        )
    except InvalidInput as exc:
        raise InvalidInput(f"{where}: {exc}") from None


def _int_id(raw: dict[str, Any], table: str) -> int:
    try:
        return int(raw["id"])
    except (KeyError, TypeError, ValueError):
        raise InvalidInput(f"{table} row without an integer id: {raw!r}") from None


def _checked(table: str, row: dict[str, Any], core: Core, where: str) -> dict[str, Any]:
    """``row`` checked as the API that makes it checks it (what an export's rows pass)."""
    try:
        checked = check_row(table, row, core)
    except InvalidInput as exc:
        raise InvalidInput(f"{where}: {exc}") from None
    if "namespace" in row:
        checked["namespace"] = row["namespace"]
    return checked


def _fact_row(raw: dict[str, Any], ns: str, core: Core) -> dict[str, Any]:
    ident = _int_id(raw, "facts")
    where = f"facts row {ident}"
    created = _time(raw.get("created_at"), f"{where}: created_at")
    row = {
        "id": ident,
        "namespace": ns,
        "category": _text(raw.get("category")),
        "key": _text(raw.get("key")),
        "value": _text(raw.get("value")),
        "source": _text(raw.get("source")) or "",
        "created_at": created,
        "updated_at": _time(raw.get("updated_at"), f"{where}: updated_at", required=False)
        or created,
    }
    return _checked("facts", row, core, where)


def _macro_row(raw: dict[str, Any], ns: str, core: Core) -> dict[str, Any]:
    ident = _int_id(raw, "macros")
    where = f"macros row {ident}"
    created = _time(raw.get("created_at"), f"{where}: created_at")
    confidence, used = raw.get("confidence"), raw.get("used_count")
    row = {
        "id": ident,
        "namespace": ns,
        "trigger_tool": _text(raw.get("trigger_tool")),
        "trigger_args_pattern": _text(raw.get("trigger_args_pattern")),
        "next_tool": _text(raw.get("next_tool")),
        "next_args": _text(raw.get("next_args")) or "",
        "confidence": 0.0 if confidence is None else confidence,
        "used_count": 0 if used is None else used,
        "created_at": created,
        "updated_at": _time(raw.get("updated_at"), f"{where}: updated_at", required=False)
        or created,
    }
    return _checked("macros", row, core, where)


def _task_row(raw: dict[str, Any], ns: str, core: Core) -> dict[str, Any]:
    ident = _text(raw.get("id"))
    if not ident:
        raise InvalidInput("a scheduled_tasks row has no id")
    where = f"scheduled_tasks row {ident!r}"
    created = _time(raw.get("created_at"), f"{where}: created_at")
    row = {
        "id": ident,
        "namespace": ns,
        "name": _text(raw.get("name")),
        "cron_expr": _text(raw.get("cron_expr")),
        "original_schedule": _text(raw.get("original_schedule")) or "",
        "prompt": _text(raw.get("prompt")),
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
    return _checked("scheduled_tasks", row, core, where)


def _prefix_row(raw: dict[str, Any], core: Core) -> dict[str, Any]:
    prefix = _text(raw.get("prefix"))
    if not prefix or not prefix.strip():
        raise InvalidInput("a terminal_allowed_prefixes row has no prefix")
    row = {
        "prefix": " ".join(prefix.split()),  # as mem.prefixes.add keeps it
        "created_at": _time(raw.get("created_at"), "terminal_allowed_prefixes", required=False),
    }
    return _checked(
        "terminal_allowed_prefixes", row, core, f"terminal_allowed_prefixes row {prefix!r}"
    )
