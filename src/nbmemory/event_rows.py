"""Events: the rows of the ``events`` table, and the one validator every event passes.

An event is a message of a conversation or a memory.  :func:`build_row` is the
only way a row for ``events`` is made: ``add_event``, ``add_events``,
``mem.memories.add``, imports, AGENTS.md sync and consolidation all call it, so the
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
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .config import Settings
from .errors import InvalidInput
from .event_columns import frame_rows
from .importance import estimate_importance
from .validation import (
    JsonLimits,
    check_name,
    check_text,
    check_unit_interval,
    dump_json_arg,
    dump_metadata,
    is_missing,
    load_json,
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
        text = turn_text(self.content, self.tool_calls_json)
        preview = text if len(text) <= 200 else text[:200] + "…"
        return (
            f"<div><code>{html.escape(self.id)}</code> · session "
            f"<b>{html.escape(self.session_id)}</b> · {html.escape(self.role)} · "
            f"importance {self.importance:.2f}<br><span>{html.escape(preview)}</span></div>"
        )


def _call_text(call: Any) -> str:
    """One tool call as ``name(arguments)``: OpenAI's ``{"function": {"name",
    "arguments"}}``, Anthropic's ``{"name", "input"}`` or a plain ``{"name", "args"}``;
    anything else as its JSON."""
    if isinstance(call, Mapping):
        function = call.get("function")
        spec: Mapping[str, Any] = function if isinstance(function, Mapping) else call
        name = spec.get("name")
        if isinstance(name, str) and name:
            args = next(
                (spec[k] for k in ("arguments", "args", "input", "parameters") if k in spec), ""
            )
            if not isinstance(args, str):
                args = json.dumps(args, ensure_ascii=False)
            return f"{name}({args})"
    return call if isinstance(call, str) else json.dumps(call, ensure_ascii=False)


def tool_calls_text(tool_calls_json: Any) -> str:
    """Stored tool-call JSON as one line a person or a model reads:
    ``called get_weather({"city": "Paris"})`` (empty when there are no calls).

    It is made from the stored JSON, so what redaction removed stays removed.
    """
    if not isinstance(tool_calls_json, str) or not has_tool_calls(tool_calls_json):
        return ""
    try:
        calls = json.loads(tool_calls_json)
    except (ValueError, RecursionError):
        return f"called {tool_calls_json}"
    if isinstance(calls, Mapping) and isinstance(calls.get("tool_calls"), list):
        calls = calls["tool_calls"]
    if not isinstance(calls, list):
        calls = [calls]
    return "called " + ", ".join(_call_text(call) for call in calls)


def turn_text(content: Any, tool_calls_json: Any = None) -> str:
    """What a turn says, as text: its content, then its tool calls (a tool-call turn
    with no content is its calls alone)."""
    text = content if isinstance(content, str) else ""
    calls = tool_calls_text(tool_calls_json)
    if not calls:
        return text
    return f"{text} [{calls}]" if text else calls


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


class _Counter:
    """The ids this process made in the current millisecond, counted (RFC 9562's
    method 1): a version 7 UUID holds the millisecond, then this counter in its
    next 26 bits, then 48 random bits, so the ids of one process sort in the order
    they were made.  Turns written in one millisecond (``add_events`` stamps a batch
    with one clock reading) or given one ``created_at`` (a transcript logged to the
    minute) were listed by ``(created_at, id)``, and random ids scrambled them: an
    agent's prompt read "turn 4, turn 0, turn 5 …".  A clock that steps back keeps
    the last millisecond (the ids still increase); 2**26 ids in one millisecond
    move on to the next."""

    BITS = 26

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.millis = -1
        self.next = 0

    def take(self, count: int) -> tuple[int, int]:
        """(millisecond, first counter value) for ``count`` new ids."""
        now = time.time_ns() // 1_000_000
        with self.lock:
            if now > self.millis:
                self.millis, self.next = now, 0
            if self.next + count > 1 << self.BITS:  # (a million a second for a minute)
                self.millis, self.next = self.millis + 1, 0
            first = self.next
            self.next += count
            return self.millis, first


_counter = _Counter()


def _fresh_counter() -> None:  # a forked child counts on its own (its random bits differ)
    global _counter
    _counter = _Counter()


os.register_at_fork(after_in_child=_fresh_counter)


def new_id() -> str:
    """A new event id: a version 7 UUID (RFC 9562).

    Its first 48 bits are the Unix time in milliseconds, the next 26 (after the
    version) count the ids this process made in that millisecond (:class:`_Counter`)
    and the last 48 are random, so ids made later sort later, within a millisecond
    too.  DuckDB keeps ``events``' key in an adaptive radix tree, and ids that share
    a prefix land in the same few nodes: at a million events, committing every
    1,000 rows runs about a third faster than with random (version 4) ids, which
    touch nodes all over the tree.  An id therefore tells the millisecond it was
    made, as ``created_at`` and the audit log do.
    """
    millis, count = _counter.take(1)
    random48 = int.from_bytes(_random_bytes.take(6), "big")
    high = millis << 80 | 0x7 << 76 | (count >> 14) << 64  # time, version, counter
    return str(uuid.UUID(int=high | 0b10 << 62 | (count & 0x3FFF) << 48 | random48))


def new_ids(count: int) -> list[str]:
    """``count`` new event ids, in the order :func:`new_id` would make them one by
    one, from one read of ``6 * count`` random bytes."""
    if count <= 0:
        return []
    millis, first = _counter.take(count)
    block = np.zeros((count, 16), dtype=np.uint8)
    block[:, :6] = np.frombuffer(millis.to_bytes(6, "big"), dtype=np.uint8)
    counts = np.arange(first, first + count, dtype=np.uint32)
    block[:, 6] = 0x70 | (counts >> 22)  # version 7, then the counter's top 4 bits
    block[:, 7] = (counts >> 14) & 0xFF
    block[:, 8] = 0x80 | ((counts >> 8) & 0x3F)  # RFC 9562 variant, 6 more bits
    block[:, 9] = counts & 0xFF
    block[:, 10:] = np.frombuffer(os.urandom(6 * count), dtype=np.uint8).reshape(count, 6)
    digits = np.stack([_HEX[block >> 4], _HEX[block & 0x0F]], axis=2).reshape(count, 32)
    chars = np.full((count, 36), ord("-"), dtype=np.uint8)
    chars[:, _DIGIT_PLACES] = digits
    text = chars.tobytes().decode("ascii")
    return [text[i : i + 36] for i in range(0, 36 * count, 36)]


#: Hexadecimal digits as bytes, and where the 32 digits of a UUID go in its 36 characters.
_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
_DIGIT_PLACES = np.array([i for i in range(36) if i not in (8, 13, 18, 23)])


def importance_for(
    role: str, importance: Any, settings: Settings, content: str | None = None
) -> float:
    """The explicit importance when given (validated), else the role's default, raised
    to the estimate from ``content`` (:mod:`nbmemory.importance`) when
    ``settings.estimate_importance`` is on and a content is given.

    None is "not given"; a NaN is refused: outside a DataFrame it is a number gone
    wrong, not a missing value (a DataFrame's empty cells arrive here as None).
    """
    if isinstance(importance, float) and math.isnan(importance):
        raise InvalidInput(
            "importance is NaN, not a number between 0 and 1; leave it out (or None) "
            "for the role's default"
        )
    if importance is not None:
        return check_unit_interval(importance, "importance")
    default = float(settings.importance_by_role.get(role, 0.5))
    if content is None or not settings.estimate_importance:
        return default
    return max(default, estimate_importance(content, role))


def _stored_metadata(metadata: Any, limits: JsonLimits) -> str | None:
    """Metadata as stored JSON text: a dict is dumped; text must already be a JSON object."""
    if not isinstance(metadata, str):
        return dump_metadata(metadata, limits)
    try:
        value = load_json(metadata, "metadata", limits)
    except json.JSONDecodeError:
        raise InvalidInput(f"metadata is not JSON: {metadata[:60]!r}") from None
    if not isinstance(value, dict):
        raise InvalidInput(f"metadata must be a JSON object, got {metadata[:60]!r}")
    return metadata


#: JSON texts of "no tool calls".
_NO_CALLS = frozenset({"", "[]", "{}", "null", '""'})


def has_tool_calls(tool_calls_json: str | None) -> bool:
    """Whether stored tool-call JSON holds any call (``[]``, ``{}``, ``null`` do not)."""
    return tool_calls_json is not None and tool_calls_json.strip() not in _NO_CALLS


def check_content(content: Any, tool_calls_json: str | None, settings: Settings) -> str | None:
    """The content to store: text, or None for a tool-call turn.

    A turn that calls tools may have no text (OpenAI-style agents log
    ``content=None`` or ``""`` with ``tool_calls=[...]``): its content is stored as
    NULL, whatever blank it came as, and it is never embedded.  A turn with neither
    text nor tool calls is refused, whatever the door: an import too, since no call
    of the API stores one.
    """
    if content is None or (isinstance(content, str) and not content.strip()):
        if has_tool_calls(tool_calls_json):
            return None
        if content is None:
            raise InvalidInput(
                "content is missing and there are no tool_calls; nothing to remember "
                "(a turn that only calls tools passes content=None with tool_calls=[...])"
            )
    checked: str = check_text(content, "content", max_bytes=settings.max_content_bytes)
    return checked


def build_row(
    settings: Settings,
    *,
    session_id: Any = None,
    role: Any = None,
    content: Any = None,
    namespace: Any = None,
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

    None in an optional field means "not given": its default applies.  A turn with
    ``tool_calls`` may have no content (stored as NULL, never embedded).
    ``stored=True`` is for rows that existed elsewhere (an export, another
    agent's database): their metadata may be JSON text, and their times and
    embedding error are kept.
    """
    session_id = check_name(session_id, "session_id")
    namespace = check_name(namespace, "namespace")
    role = check_name(role, "role")
    if role not in settings.importance_by_role:
        raise InvalidInput(
            f"unknown role {role!r}; roles: {', '.join(settings.importance_by_role)} "
            "(add one with Settings(importance_by_role={...}))"
        )
    kind = "message" if kind is None else check_name(kind, "kind")
    tool_calls_json = dump_json_arg(tool_calls, "tool_calls", settings.payload_limits)
    content = check_content(content, tool_calls_json, settings)
    _check_optional_names(
        tool_call_id=tool_call_id, tool_name=tool_name, graph_id=graph_id, task_id=task_id
    )
    limits = settings.metadata_limits
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
        "tool_calls_json": tool_calls_json,
        "metadata": (
            _stored_metadata(metadata, limits) if stored else dump_metadata(metadata, limits)
        ),
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
    """Validate the rows of ``add_events``: one bad row refuses them all, naming it.

    A DataFrame is built a column at a time (:func:`~nbmemory.event_columns.frame_rows`);
    other rows are checked a column at a time (:func:`_build_batch`); when that finds
    anything it cannot vouch for, every row goes through :func:`build_row` instead,
    so a refusal names the same row with the same message either way.
    """
    if isinstance(rows, pd.DataFrame):
        try:
            fast = frame_rows(
                settings, rows, namespace=namespace, session_id=session_id, new_ids=new_ids
            )
        except (TypeError, ValueError, LookupError, OverflowError, InvalidInput):
            fast = None  # the rows one by one say which is wrong
        if fast is not None:
            return fast
    raws: list[dict[str, Any]] = []
    try:
        for raw in iter_input_rows(rows):
            raw.setdefault("namespace", namespace)
            if session_id is not None:
                raw.setdefault("session_id", session_id)
            raws.append(raw)
    except InvalidInput:
        _build_each(settings, raws)  # an earlier row's own error comes first
        raise
    built = _build_batch(settings, raws)
    if built is None:
        built = _build_each(settings, raws)
    ids = [row["id"] for row in built]
    if len(set(ids)) != len(ids):
        raise InvalidInput("add_events: duplicate ids in the input")
    return built


def _build_each(settings: Settings, raws: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every row through :func:`build_row`, the first bad one refused by its index."""
    built = []
    for index, raw in enumerate(raws):
        unknown = set(raw) - INPUT_FIELDS
        if unknown:
            raise InvalidInput(f"row {index}: unknown field(s) {', '.join(sorted(unknown))}")
        try:
            built.append(build_row(settings, **raw))
        except (TypeError, InvalidInput) as exc:
            raise InvalidInput(f"row {index}: {exc}") from None
    return built


#: Fields :func:`_build_batch` checks a column at a time (a row with others is built
#: by :func:`build_row` on its own).
_BATCH_FIELDS = frozenset(
    {"session_id", "role", "content", "namespace", "kind", "importance", "created_at", "metadata"}
)
_NAME_FIELDS = ("session_id", "namespace", "role", "kind")


def _build_batch(settings: Settings, raws: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """The rows :func:`build_row` would make of ``raws``, checked a column at a time
    (each distinct name once, the texts' encoding in one pass, ids from one read of
    random bytes, one clock reading for the rows without a time); None when any row
    fails a check or is out of the ordinary, for :func:`_build_each` to say which."""
    try:
        return _batch_rows(settings, raws)
    except (TypeError, ValueError, LookupError, InvalidInput):
        return None


def _batch_rows(settings: Settings, raws: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    simple = [raw.keys() <= _BATCH_FIELDS for raw in raws]
    plain_rows = [raw for raw, ok in zip(raws, simple, strict=True) if ok]
    for raw in raws:
        raw.setdefault("kind", "message")  # build_row's default
    for field_name in _NAME_FIELDS:
        for value in {raw.get(field_name) for raw in plain_rows}:
            check_name(value, field_name)
    if not {raw.get("role") for raw in plain_rows} <= settings.importance_by_role.keys():
        return None
    contents: list[Any] = [raw.get("content") for raw in plain_rows]
    if not {type(c) for c in contents} <= {str} or not all(map(str.strip, contents)):
        return None
    "\x00".join(contents).encode("utf-8")  # a lone surrogate anywhere raises
    limit = settings.max_content_bytes
    limits = settings.metadata_limits
    if limit is not None:
        for text in contents:
            if len(text) * 4 > limit:
                check_text(text, "content", max_bytes=limit)
    ids = new_ids(len(plain_rows))
    now = utcnow()
    built = []
    position = 0
    for raw, ok in zip(raws, simple, strict=True):
        if not ok:
            built.append(build_row(settings, **raw))
            continue
        role = raw["role"]
        content = raw["content"]
        importance = raw.get("importance")
        created_at = raw.get("created_at")
        metadata = raw.get("metadata")
        created = now if created_at is None else to_utc(created_at)
        built.append(
            {
                "id": ids[position],
                "session_id": raw["session_id"],
                "namespace": raw["namespace"],
                "kind": raw["kind"],
                "role": role,
                "content": content,
                "tool_call_id": None,
                "tool_name": None,
                "tool_calls_json": None,
                "metadata": None if metadata is None else dump_metadata(metadata, limits),
                "graph_id": None,
                "task_id": None,
                "created_at": created,
                "updated_at": created,
                "importance": importance_for(role, importance, settings, content),
                "embedding_model": None,
                "embedding_error": None,
                "consolidated_at": None,
            }
        )
        position += 1
    return built


def iter_input_rows(rows: Any) -> Iterable[dict[str, Any]]:
    """Rows from a DataFrame or an iterable of mappings, as plain dicts of the fields
    given.

    One rule for missing values, whatever the form: a field that is None is not
    given (its default applies), and so is a DataFrame's empty cell (NaN, None,
    ``pd.NA``, ``NaT``: how pandas spells a missing value).  So a DataFrame row and
    the dict with its empty cells left out (or None) store the same event.  A NaN
    in a dict is a value, and a bad one: it is refused by the field's check.
    """
    if isinstance(rows, pd.DataFrame):
        for record in rows.to_dict(orient="records"):
            yield {str(k): v for k, v in record.items() if not is_missing(v)}
        return
    if isinstance(rows, (str, bytes, Mapping)) or not isinstance(rows, Iterable):
        raise InvalidInput(
            f"add_events takes a DataFrame or an iterable of dicts, got {type(rows).__name__}"
        )
    for index, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise InvalidInput(f"row {index} is a {type(row).__name__}, not a dict")
        yield {k: v for k, v in row.items() if v is not None}
