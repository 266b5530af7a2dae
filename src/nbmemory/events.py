"""Events (the rows of the ``events`` table) and the validation of what users pass in.

Everything a caller gives is checked here, before any SQL runs, so a refused
input never leaves a half-written store behind.
"""

from __future__ import annotations

import datetime as dt
import html
import json
import math
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from .config import Settings, check_unit_interval
from .errors import InvalidInput
from .store import ARROW_EVENT_SCHEMA

#: Kinds of event nbmemory itself writes; users may add their own.
KINDS = ("message", "memory", "summary", "fact", "agents_md")


@dataclass(frozen=True)
class Event:
    """One stored event: a message of a conversation or a memory."""

    id: str
    session_id: str
    role: str
    content: str | None
    created_at: dt.datetime
    importance: float
    namespace: str = "default"
    kind: str = "message"
    metadata: dict[str, Any] = field(default_factory=dict)
    tool_call_id: str | None = None
    tool_name: str | None = None
    tool_calls_json: str | None = None
    graph_id: str | None = None
    task_id: str | None = None
    updated_at: dt.datetime | None = None
    embedding_model: str | None = None
    embedding_error: str | None = None
    consolidated_at: dt.datetime | None = None

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Event:
        """Build from a store row (dict of column -> value)."""
        known = {f for f in cls.__dataclass_fields__}
        values = {k: _plain(v) for k, v in record.items() if k in known}
        values["metadata"] = parse_metadata(record.get("metadata"))
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        """One line: id, session, role, importance (what ``%%remember`` displays)."""
        return (
            f"remembered {self.id} · session {self.session_id!r} · {self.role} · "
            f"importance {self.importance:.2f}"
        )

    def _repr_html_(self) -> str:
        text = self.content if self.content is not None else ""
        preview = text if len(text) <= 200 else text[:200] + "…"
        return (
            f"<div><code>{html.escape(self.id)}</code> · session "
            f"<b>{html.escape(self.session_id)}</b> · {html.escape(self.role)} · "
            f"importance {self.importance:.2f}<br><span>{html.escape(preview)}</span></div>"
        )


def _plain(value: Any) -> Any:
    if isinstance(value, pd.Timestamp):
        return value.to_pydatetime()
    if isinstance(value, np.generic):
        return value.item()
    if value is pd.NaT:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def parse_metadata(raw: Any) -> dict[str, Any]:
    if raw is None or (isinstance(raw, float) and math.isnan(raw)):
        return {}
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw)
    except (TypeError, ValueError):
        return {"_raw": raw}
    return value if isinstance(value, dict) else {"_value": value}


def new_id() -> str:
    """A new event id (a UUID, as seed 000's primary key)."""
    return str(uuid.uuid4())


def utcnow() -> dt.datetime:
    """The current UTC time as a naive datetime (the store keeps UTC)."""
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


def to_utc(value: Any, name: str = "created_at") -> dt.datetime:
    """A naive UTC datetime from a datetime, date, pandas Timestamp or ISO-8601 text.

    Naive inputs are taken as UTC; aware ones are converted.
    """
    if value is pd.NaT or (isinstance(value, np.datetime64) and np.isnat(value)):
        raise InvalidInput(f"{name} must be a date-time, got NaT")
    if isinstance(value, (pd.Timestamp, np.datetime64)):
        value = pd.Timestamp(value)
        if value is pd.NaT:
            raise InvalidInput(f"{name} must be a date-time, got NaT")
        value = value.to_pydatetime()
    elif isinstance(value, str):
        text = value.strip()
        try:
            parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise InvalidInput(
                f"{name} {value!r} is not an ISO-8601 date-time (e.g. 2024-05-08T13:56:00Z)"
            ) from None
        value = parsed
    elif isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        value = dt.datetime(value.year, value.month, value.day)
    if not isinstance(value, dt.datetime):
        raise InvalidInput(f"{name} must be a datetime or ISO-8601 text, got {value!r}")
    if value.tzinfo is not None:
        value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return value


def check_text(value: Any, name: str, *, max_bytes: int | None = None, allow_empty=False) -> str:
    """A str that encodes as UTF-8 (no lone surrogates) and, unless allowed, is not blank."""
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be text (str), got {type(value).__name__}")
    if not allow_empty and not value.strip():
        what = "nothing to remember" if name == "content" else f"pass a non-blank {name}"
        raise InvalidInput(f"{name} is empty; {what}")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidInput(
            f"{name} is not valid Unicode: lone surrogate {value[exc.start]!r} at position "
            f"{exc.start}; decode the source with errors='replace' first"
        ) from None
    if max_bytes is not None and size > max_bytes:
        raise InvalidInput(
            f"{name} is {size / 1e6:.1f} MB, over the {max_bytes / 1e6:.1f} MB limit "
            "(Settings.max_content_bytes); split it into smaller memories"
        )
    return value


def check_name(value: Any, name: str) -> str:
    """A non-empty identifier-like string (session, namespace, role): any text is allowed."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"{name} must be a non-empty string, got {value!r}")
    return check_text(value, name, max_bytes=4096)


def dump_metadata(metadata: Any) -> str | None:
    if metadata is None:
        return None
    if not isinstance(metadata, Mapping):
        raise InvalidInput(f"metadata must be a dict, got {type(metadata).__name__}")
    for key in metadata:
        if not isinstance(key, str):
            raise InvalidInput(f"metadata keys must be strings, got {key!r}")
        check_text(key, "metadata key", allow_empty=True)
    try:
        text = json.dumps(dict(metadata), ensure_ascii=False, allow_nan=False, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"metadata must be JSON-serialisable: {exc}") from None
    return check_text(text, "metadata", allow_empty=True)  # e.g. a lone surrogate in a value


def importance_for(role: str, importance: Any, settings: Settings) -> float:
    """The explicit importance when given (validated), else the role's default."""
    if importance is None:
        return float(settings.importance_by_role.get(role, 0.5))
    return check_unit_interval(importance, "importance")


def build_row(
    settings: Settings,
    *,
    session_id: Any,
    role: Any,
    content: Any,
    namespace: Any,
    kind: Any = "message",
    metadata: Any = None,
    importance: Any = None,
    tool_call_id: Any = None,
    tool_name: Any = None,
    tool_calls: Any = None,
    created_at: Any = None,
    graph_id: Any = None,
    task_id: Any = None,
    id: Any = None,
) -> dict[str, Any]:
    """Validate one event's fields and return the row to insert (no embedding yet)."""
    session_id = check_name(session_id, "session_id")
    namespace = check_name(namespace, "namespace")
    role = check_name(role, "role")
    if role not in settings.importance_by_role:
        raise InvalidInput(
            f"unknown role {role!r}; roles: {', '.join(settings.importance_by_role)} "
            "(add one with Settings(importance_by_role={...}))"
        )
    kind = check_name(kind, "kind")
    content = check_text(content, "content", max_bytes=settings.max_content_bytes)
    if tool_calls is not None and not isinstance(tool_calls, str):
        try:
            tool_calls = json.dumps(tool_calls, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise InvalidInput(f"tool_calls must be JSON-serialisable: {exc}") from None
    if tool_calls is not None:
        check_text(tool_calls, "tool_calls", allow_empty=True)
    for label, value in (
        ("tool_call_id", tool_call_id),
        ("tool_name", tool_name),
        ("graph_id", graph_id),
        ("task_id", task_id),
    ):
        if value is not None:
            check_name(value, label)
    if id is not None:
        id = check_name(id, "id")
    created = utcnow() if created_at is None else to_utc(created_at)
    return {
        "id": id or new_id(),
        "session_id": session_id,
        "namespace": namespace,
        "kind": kind,
        "role": role,
        "content": content,
        "tool_call_id": tool_call_id,
        "tool_name": tool_name,
        "tool_calls_json": tool_calls,
        "metadata": dump_metadata(metadata),
        "graph_id": graph_id,
        "task_id": task_id,
        "created_at": created,
        "updated_at": created,
        "importance": importance_for(role, importance, settings),
        "embedding": None,
        "embedding_model": None,
        "embedding_error": None,
        "consolidated_at": None,
    }


def rows_to_arrow(rows: list[dict[str, Any]]) -> pa.Table:
    """Rows built by :func:`build_row` as an Arrow table in the store's column order."""
    return pa.Table.from_pylist(rows, schema=ARROW_EVENT_SCHEMA)


def iter_input_rows(rows: Any) -> Iterable[dict[str, Any]]:
    """Rows from a DataFrame or an iterable of mappings, as plain dicts without NaN."""
    if isinstance(rows, pd.DataFrame):
        for record in rows.to_dict(orient="records"):
            yield {k: (None if _is_missing(v) else v) for k, v in record.items()}
        return
    if isinstance(rows, (str, bytes, Mapping)):
        raise InvalidInput("add_events takes a DataFrame or an iterable of dicts")
    for index, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise InvalidInput(f"row {index} is a {type(row).__name__}, not a dict")
        yield dict(row)


def _is_missing(value: Any) -> bool:
    if value is None or value is pd.NaT:
        return True
    return isinstance(value, float) and math.isnan(value)
