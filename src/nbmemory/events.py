"""Events: the rows of the ``events`` table, and the one validator every event passes.

An event is a message of a conversation or a memory.  :func:`build_row` is the
only way a row for ``events`` is made: ``add_event``, ``add_events``,
``add_memory``, imports, AGENTS.md sync and consolidation all call it, so the
same rules (known role, importance in 0..1, text that is valid Unicode and under
the size limit, JSON metadata) hold whatever the door.  Without an explicit
importance a new event gets its role's default, raised to the text's estimate
(``Settings.estimate_importance``); imported rows keep the importance they had.
"""

from __future__ import annotations

import datetime as dt
import html
import json
import math
import os
import threading
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .config import Settings
from .errors import InvalidInput
from .importance import estimate_importance
from .validation import (
    check_name,
    check_text,
    check_unit_interval,
    dump_json_arg,
    dump_metadata,
    is_missing,
    parse_metadata,
    to_utc,
    utcnow,
)

#: Arguments of ``add_event`` a row of ``add_events`` may carry.
INPUT_FIELDS = frozenset(
    {
        "id",
        "session_id",
        "role",
        "content",
        "namespace",
        "kind",
        "metadata",
        "importance",
        "tool_call_id",
        "tool_name",
        "tool_calls",
        "created_at",
        "graph_id",
        "task_id",
    }
)


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
        known = set(cls.__dataclass_fields__)
        values = {k: plain(v) for k, v in record.items() if k in known}
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


def plain(value: Any) -> Any:
    """A value read from DuckDB/pandas as a plain Python value (None for NaN/NaT)."""
    if isinstance(value, pd.Timestamp):
        return value.to_pydatetime()
    if isinstance(value, np.generic):
        return value.item()
    if value is pd.NaT:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


class _RandomBytes(threading.local):
    """Random bytes read from the OS 4 KiB at a time, per thread: ``uuid4`` reads 16
    bytes per call, and that system call was a fifth of ``add_events``' time."""

    def __init__(self) -> None:
        self.buffer = b""
        self.position = 0

    def take(self, size: int) -> bytes:
        if self.position + size > len(self.buffer):
            self.buffer, self.position = os.urandom(4096), 0
        chunk = self.buffer[self.position : self.position + size]
        self.position += size
        return chunk


_random_bytes = _RandomBytes()


def _fresh_random_bytes() -> None:  # a forked child must not reuse its parent's bytes
    global _random_bytes
    _random_bytes = _RandomBytes()


os.register_at_fork(after_in_child=_fresh_random_bytes)


def new_id() -> str:
    """A new event id: a random (version 4) UUID."""
    return str(uuid.UUID(bytes=_random_bytes.take(16), version=4))


def importance_for(
    role: str, importance: Any, settings: Settings, content: str | None = None
) -> float:
    """The explicit importance when given (validated), else the role's default, raised
    to the estimate from ``content`` (:mod:`nbmemory.importance`) when
    ``settings.estimate_importance`` is on and a content is given."""
    if importance is not None:
        return check_unit_interval(importance, "importance")
    default = float(settings.importance_by_role.get(role, 0.5))
    if content is None or not settings.estimate_importance:
        return default
    return max(default, estimate_importance(content, role))


def _stored_metadata(metadata: Any) -> str | None:
    """Metadata as stored JSON text: a dict is dumped; text must already be a JSON object."""
    if not isinstance(metadata, str):
        return dump_metadata(metadata)
    try:
        value = json.loads(metadata)
    except ValueError:
        raise InvalidInput(f"metadata is not JSON: {metadata[:60]!r}") from None
    if not isinstance(value, dict):
        raise InvalidInput(f"metadata must be a JSON object, got {metadata[:60]!r}")
    return check_text(metadata, "metadata", allow_empty=True)


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
    updated_at: Any = None,
    consolidated_at: Any = None,
    embedding_error: Any = None,
    stored: bool = False,
) -> dict[str, Any]:
    """Validate one event's fields and return the row to insert (no vector yet).

    ``stored=True`` is for rows that existed elsewhere (an export, another
    agent's database): their content may be missing (a tool call with no text),
    metadata may be JSON text, and their times and embedding error are kept.
    """
    session_id = check_name(session_id, "session_id")
    namespace = check_name(namespace, "namespace")
    role = check_name(role, "role")
    if role not in settings.importance_by_role:
        raise InvalidInput(
            f"unknown role {role!r}; roles: {', '.join(settings.importance_by_role)} "
            "(add one with Settings(importance_by_role={...}))"
        )
    kind = check_name(kind, "kind")
    if not (stored and content is None):
        content = check_text(
            content, "content", max_bytes=settings.max_content_bytes, allow_empty=stored
        )
    _check_optional_names(
        tool_call_id=tool_call_id, tool_name=tool_name, graph_id=graph_id, task_id=task_id
    )
    created = utcnow() if created_at is None else to_utc(created_at)
    return {
        "id": new_id() if id is None else check_name(id, "id"),
        "session_id": session_id,
        "namespace": namespace,
        "kind": kind,
        "role": role,
        "content": content,
        "tool_call_id": tool_call_id,
        "tool_name": tool_name,
        "tool_calls_json": dump_json_arg(tool_calls, "tool_calls"),
        "metadata": _stored_metadata(metadata) if stored else dump_metadata(metadata),
        "graph_id": graph_id,
        "task_id": task_id,
        "created_at": created,
        "updated_at": created if updated_at is None else to_utc(updated_at, "updated_at"),
        # stored rows keep the file's importance (or the role default): never estimated
        "importance": importance_for(role, importance, settings, None if stored else content),
        "embedding_model": None,
        "embedding_error": None if embedding_error is None else str(embedding_error),
        "consolidated_at": (
            None if consolidated_at is None else to_utc(consolidated_at, "consolidated_at")
        ),
    }


def _check_optional_names(**names: Any) -> None:
    for label, value in names.items():
        if value is not None:
            check_name(value, label)


def build_rows(
    settings: Settings,
    rows: Any,
    *,
    namespace: str,
    session_id: str | None = None,
) -> list[dict[str, Any]]:
    """Validate the rows of ``add_events``: one bad row refuses them all, naming it."""
    built = []
    for index, raw in enumerate(iter_input_rows(rows)):
        raw.setdefault("namespace", namespace)
        if session_id is not None:
            raw.setdefault("session_id", session_id)
        unknown = set(raw) - INPUT_FIELDS
        if unknown:
            raise InvalidInput(f"row {index}: unknown field(s) {', '.join(sorted(unknown))}")
        try:
            built.append(build_row(settings, **raw))
        except (TypeError, InvalidInput) as exc:
            raise InvalidInput(f"row {index}: {exc}") from None
    ids = [row["id"] for row in built]
    if len(set(ids)) != len(ids):
        raise InvalidInput("add_events: duplicate ids in the input")
    return built


def iter_input_rows(rows: Any) -> Iterable[dict[str, Any]]:
    """Rows from a DataFrame or an iterable of mappings, as plain dicts without NaN."""
    if isinstance(rows, pd.DataFrame):
        for record in rows.to_dict(orient="records"):
            yield {str(k): (None if is_missing(v) else v) for k, v in record.items()}
        return
    if isinstance(rows, (str, bytes, Mapping)):
        raise InvalidInput("add_events takes a DataFrame or an iterable of dicts")
    for index, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise InvalidInput(f"row {index} is a {type(row).__name__}, not a dict")
        yield dict(row)
