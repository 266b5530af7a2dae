"""Export and import of a session or a namespace as one JSON file (seed 003 ``state export``).

Format ``nbmemory.export`` version 1 (a JSON object)::

    {
      "format": "nbmemory.export",
      "version": 1,
      "exported_at": "2026-11-30T12:00:00.000000Z",     # UTC
      "nbmemory_version": "0.1.0",
      "scope": {"namespace": "default", "session_id": null},
      "embedding_encoding": "base64-float32-le",
      "counts": {"events": 2, "embedded": 2, "sessions": 1},
      "events": [
        {
          "id": "...", "session_id": "...", "namespace": "...", "kind": "message",
          "role": "user", "content": "...", "tool_call_id": null, "tool_name": null,
          "tool_calls_json": null,          # JSON text as stored, or null
          "metadata": "{\\"k\\": 1}",         # JSON text as stored, or null
          "graph_id": null, "task_id": null,
          "created_at": "2023-05-08T13:56:00.000000Z",
          "updated_at": "2023-05-08T13:56:00.000000Z",
          "consolidated_at": null,
          "importance": 0.5,                # float64, written with repr precision
          "embedding_model": "sentence-transformers/all-MiniLM-L6-v2",
          "embedding_error": null,
          "embedding_dim": 384,             # null when there is no vector
          "embedding": "AAAgQQ..."          # base64 of little-endian float32, or null
        }
      ],
      "sessions": [
        {"namespace": "...", "session_id": "...", "user_id": "", "status": "active",
         "state": "{...}",                  # JSON text as stored
         "created_at": "...Z", "last_activity": "...Z", "closed_at": null}
      ]
    }

Every field of ``events`` and ``sessions`` is kept: timestamps to the microsecond
(DuckDB's precision), floats exactly, vectors bit for bit (raw float32 bytes).

Import rules: a row whose id is already in the target namespace is skipped, so
importing the same file twice adds nothing.  ``namespace=`` moves every row into
that namespace; an id already used in *another* namespace of the store is
replaced by a stable derived id (``uuid5`` of the target namespace and the old
id), so the same file can be imported into several namespaces of one store and
re-importing still adds nothing.  Text goes through redaction like any write; a
row whose text changed loses its vector and is re-embedded.  Vectors of another
model are kept as they are (search only compares vectors of the store's model;
``Memory.reembed`` converts them).  Facts, macros and scheduled tasks are not
part of version 1.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import math
import os
import tempfile
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow as pa

from . import events as ev
from . import sessions as sess
from .errors import InvalidInput
from .store import ARROW_EVENT_SCHEMA, EVENT_COLUMNS

if TYPE_CHECKING:
    from .memory import Memory

FORMAT = "nbmemory.export"
VERSION = 1
EMBEDDING_ENCODING = "base64-float32-le"

_TIME_FIELDS = ("created_at", "updated_at", "consolidated_at")
#: Text columns of ``events`` (every column but the times, importance and the vector).
_TEXT_FIELDS = tuple(f.name for f in ARROW_EVENT_SCHEMA if pa.types.is_string(f.type))
_REQUIRED = ("id", "session_id", "namespace", "kind", "role", "created_at", "updated_at")
_SESSION_TIME_FIELDS = ("created_at", "last_activity", "closed_at")
_ARROW_SESSION_SCHEMA = pa.schema(
    [
        ("namespace", pa.string()),
        ("session_id", pa.string()),
        ("user_id", pa.string()),
        ("status", pa.string()),
        ("state", pa.string()),
        ("created_at", pa.timestamp("us")),
        ("last_activity", pa.timestamp("us")),
        ("closed_at", pa.timestamp("us")),
    ]
)


# -- encoding helpers ------------------------------------------------------------------
def encode_vector(vector: Any) -> tuple[str, int]:
    """base64 of the little-endian float32 bytes, and the dimension."""
    array = np.ascontiguousarray(np.asarray(vector, dtype="<f4"))
    return base64.b64encode(array.tobytes()).decode("ascii"), int(array.shape[0])


def decode_vector(text: str, dim: int) -> np.ndarray:
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError) as exc:
        raise InvalidInput(f"embedding is not valid base64: {exc}") from None
    if len(raw) != 4 * dim:
        raise InvalidInput(f"embedding has {len(raw) // 4} values, embedding_dim says {dim}")
    return np.frombuffer(raw, dtype="<f4").astype(np.float32)


def _time_text(value: Any) -> str | None:
    if _is_null(value):
        return None
    if isinstance(value, pd.Timestamp):
        value = value.to_pydatetime()
    return value.isoformat(timespec="microseconds") + "Z"


def _parse_time(value: Any, name: str) -> dt.datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be ISO-8601 text, got {value!r}")
    return ev.to_utc(value, name)


def _is_null(value: Any) -> bool:
    """None, NaN, NaT or pd.NA: how DuckDB -> pandas may spell SQL NULL."""
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    return isinstance(value, float) and math.isnan(value)


def _value(value: Any) -> Any:
    return None if _is_null(value) else ev._plain(value)


def _progress(iterable: Any, enabled: bool, desc: str, total: int | None = None) -> Any:
    if not enabled:
        return iterable
    from tqdm.auto import tqdm

    # disable=None: no bar when stderr is not a terminal (pipes, CI logs)
    return tqdm(iterable, desc=desc, total=total, unit="row", leave=False, disable=None)


# -- export ----------------------------------------------------------------------------
def export_json(
    memory: Memory,
    path: str | os.PathLike[str],
    *,
    namespace: str,
    session_id: str | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """Write one namespace (or one session of it) to ``path``; returns a summary."""
    target = Path(path).expanduser()
    if not target.parent.is_dir():
        raise InvalidInput(f"cannot write {target}: the folder {target.parent} does not exist")
    where = {"session_id": session_id} if session_id is not None else None
    frame = memory.store.events(namespace=namespace, where=where, with_embedding=True)
    session_rows = memory.store.records(
        f"SELECT {', '.join(sess.SESSION_COLUMNS)} FROM sessions WHERE namespace = ?"
        + (" AND session_id = ?" if session_id is not None else "")
        + " ORDER BY session_id",
        [namespace] + ([session_id] if session_id is not None else []),
    )
    if session_id is not None and frame.empty and not session_rows:
        raise sess.SessionNotFound(session_id, namespace, "has no events or state")
    events_out = []
    embedded = 0
    for record in _progress(frame.to_dict(orient="records"), progress, "export", total=len(frame)):
        item: dict[str, Any] = {}
        for column in EVENT_COLUMNS:
            if column == "embedding":
                continue
            value = _value(record[column])
            item[column] = _time_text(value) if column in _TIME_FIELDS else value
        vector = record["embedding"]
        if _is_null(vector):
            item["embedding_dim"] = None
            item["embedding"] = None
        else:
            item["embedding"], item["embedding_dim"] = encode_vector(vector)
            embedded += 1
        item["importance"] = float(item["importance"])
        events_out.append(item)
    sessions_out = []
    for row in session_rows:
        item = {k: _value(row[k]) for k in sess.SESSION_COLUMNS}
        for name in _SESSION_TIME_FIELDS:
            item[name] = _time_text(item[name])
        sessions_out.append(item)
    from . import __version__

    document = {
        "format": FORMAT,
        "version": VERSION,
        "exported_at": _time_text(ev.utcnow()),
        "nbmemory_version": __version__,
        "scope": {"namespace": namespace, "session_id": session_id},
        "embedding_encoding": EMBEDDING_ENCODING,
        "counts": {"events": len(events_out), "embedded": embedded, "sessions": len(sessions_out)},
        "events": events_out,
        "sessions": sessions_out,
    }
    _write_atomically(target, document)
    summary = {
        "path": str(target),
        "namespace": namespace,
        "session_id": session_id,
        "events": len(events_out),
        "embedded": embedded,
        "sessions": len(sessions_out),
        "bytes": target.stat().st_size,
        "version": VERSION,
    }
    if not memory.store.read_only:  # reading a store read-only leaves no trace
        memory._audit(
            "export", [], namespace, {k: summary[k] for k in ("path", "session_id", "events")}
        )
    return summary


def _write_atomically(target: Path, document: dict[str, Any]) -> None:
    handle, temp = tempfile.mkstemp(prefix=".nbmemory-export-", dir=target.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            json.dump(document, stream, ensure_ascii=False, allow_nan=False, indent=1)
            stream.write("\n")
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


# -- import ----------------------------------------------------------------------------
def read_export(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Load and check the envelope of an export file."""
    source = Path(path).expanduser()
    try:
        text = source.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidInput(f"no export file {source}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"cannot read {source}: {exc}") from None
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise InvalidInput(f"{source} is not JSON ({exc}); pass a file made by export") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise InvalidInput(f"{source} is not an nbmemory export (format {FORMAT!r} missing)")
    version = document.get("version")
    if not isinstance(version, int) or version < 1:
        raise InvalidInput(f"{source}: bad export version {version!r}")
    if version > VERSION:
        raise InvalidInput(
            f"{source} is export version {version}, newer than this nbmemory reads ({VERSION}); "
            "upgrade nbmemory"
        )
    if document.get("embedding_encoding", EMBEDDING_ENCODING) != EMBEDDING_ENCODING:
        raise InvalidInput(f"{source}: unknown embedding_encoding {document['embedding_encoding']}")
    for key in ("events", "sessions"):
        if not isinstance(document.get(key, []), list):
            raise InvalidInput(f"{source}: {key!r} must be a list")
    return document


def _event_row(item: Any, index: int) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise InvalidInput(f"events[{index}] is not an object")
    missing = [k for k in _REQUIRED if item.get(k) is None]
    if missing:
        raise InvalidInput(f"events[{index}] lacks {', '.join(missing)}")
    row: dict[str, Any] = {}
    try:
        for name in _TEXT_FIELDS:
            value = item.get(name)
            if value is not None and not isinstance(value, str):
                raise InvalidInput(f"{name} must be text or null, got {value!r}")
            row[name] = value
        for name in _TIME_FIELDS:
            row[name] = _parse_time(item.get(name), name)
        importance = item.get("importance", 0.5)
        if isinstance(importance, bool) or not isinstance(importance, (int, float)):
            raise InvalidInput(f"importance must be a number, got {importance!r}")
        row["importance"] = float(importance)
        vector = item.get("embedding")
        if vector is None:
            row["embedding"] = None
        else:
            dim = item.get("embedding_dim")
            if not isinstance(dim, int) or dim <= 0 or not isinstance(vector, str):
                raise InvalidInput("embedding must be base64 text with a positive embedding_dim")
            row["embedding"] = decode_vector(vector, dim)
    except InvalidInput as exc:
        raise InvalidInput(f"events[{index}] ({item.get('id')!r}): {exc}") from None
    return row


def _session_row(item: Any, index: int) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise InvalidInput(f"sessions[{index}] is not an object")
    row: dict[str, Any] = {}
    try:
        for name in ("namespace", "session_id", "user_id", "status", "state"):
            value = item.get(name)
            if not isinstance(value, str):
                raise InvalidInput(f"{name} must be text, got {value!r}")
            row[name] = value
        sess.parse_state(row["state"])
        for name in _SESSION_TIME_FIELDS:
            row[name] = _parse_time(item.get(name), name)
        if row["created_at"] is None or row["last_activity"] is None:
            raise InvalidInput("created_at and last_activity are required")
    except (InvalidInput, ValueError) as exc:
        raise InvalidInput(f"sessions[{index}]: {exc}") from None
    return row


def derived_id(namespace: str, old_id: str) -> str:
    """The id a row gets when its own id is taken by another namespace of the store."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"nbmemory:{namespace}:{old_id}"))


def import_json(
    memory: Memory,
    path: str | os.PathLike[str],
    *,
    namespace: str | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """Load an export into the store (see the module doc for the rules); returns a summary."""
    document = read_export(path)
    rows = [
        _event_row(item, i)
        for i, item in enumerate(
            _progress(document.get("events", []), progress, "read", len(document["events"]))
        )
    ]
    session_rows = [_session_row(item, i) for i, item in enumerate(document.get("sessions", []))]
    ids = [r["id"] for r in rows]
    if len(set(ids)) != len(ids):
        raise InvalidInput(f"{path}: the file repeats event ids; it was not made by export")
    for row in rows:
        if namespace is not None:
            row["namespace"] = namespace
        ev.check_name(row["namespace"], "namespace")
    for row in session_rows:
        if namespace is not None:
            row["namespace"] = namespace
        ev.check_name(row["namespace"], "namespace")
        ev.check_name(row["session_id"], "session_id")
    added: list[dict[str, Any]] = []
    skipped = 0
    redacted = 0
    with memory._lock:
        candidates = sorted(
            {r["id"] for r in rows} | {derived_id(r["namespace"], r["id"]) for r in rows}
        )
        taken: dict[str, str] = dict(
            memory.store.fetchall(
                "SELECT id, namespace FROM events WHERE id IN (SELECT unnest(?::VARCHAR[]))",
                [candidates],
            )
        )
        for row in _progress(rows, progress, "import", len(rows)):
            ns = row["namespace"]
            alternative = derived_id(ns, row["id"])
            if taken.get(row["id"]) == ns or taken.get(alternative) == ns:
                skipped += 1
                continue
            if row["id"] in taken:
                row["id"] = alternative
            safe, count = memory._prepare_content(row["content"])
            if count:
                redacted += count
                row["content"] = safe
                row["embedding"] = None
                row["embedding_model"] = None
            taken[row["id"]] = ns
            added.append(row)
        existing_sessions = {
            (r[0], r[1])
            for r in memory.store.fetchall("SELECT namespace, session_id FROM sessions")
        }
        new_sessions = []
        for row in session_rows:
            key = (row["namespace"], row["session_id"])
            if key not in existing_sessions:
                existing_sessions.add(key)
                new_sessions.append(row)
        with memory.store.transaction():
            if added:
                memory.store.insert_events(_events_table(added))
            if new_sessions:
                memory.store.insert_arrow(
                    "sessions", pa.Table.from_pylist(new_sessions, schema=_ARROW_SESSION_SCHEMA)
                )
        for row in new_sessions:
            if row["status"] == sess.ACTIVE:
                memory._session_cache()[(row["namespace"], row["session_id"])] = row[
                    "last_activity"
                ]
    memory.working.invalidate({(r["namespace"], r["session_id"]) for r in added})
    queued = [
        (r["id"], r["content"])
        for r in added
        if r["embedding"] is None and r["content"] and r["embedding_error"] is None
    ]
    if memory.worker is not None and queued:
        memory.worker.submit(queued)
    namespaces = sorted({r["namespace"] for r in added} | {r["namespace"] for r in new_sessions})
    for ns in namespaces or [namespace or memory.namespace]:
        chosen = [r["id"] for r in added if r["namespace"] == ns]
        memory._audit(
            "import",
            chosen,
            ns,
            {
                "file": str(Path(path).name),
                "events_added": len(chosen),
                "sessions_added": sum(1 for r in new_sessions if r["namespace"] == ns),
                **({"redacted": redacted} if redacted else {}),
            },
        )
    return {
        "path": str(path),
        "version": document["version"],
        "events_added": len(added),
        "events_skipped": skipped,
        "sessions_added": len(new_sessions),
        "sessions_skipped": len(session_rows) - len(new_sessions),
        "namespaces": namespaces,
        "redacted": redacted,
        "queued_for_embedding": len(queued),
    }


def _events_table(rows: list[dict[str, Any]]) -> pa.Table:
    columns: dict[str, pa.Array] = {}
    for field in ARROW_EVENT_SCHEMA:
        if field.name == "embedding":
            columns["embedding"] = pa.array(
                [None if r["embedding"] is None else r["embedding"] for r in rows],
                type=pa.list_(pa.float32()),
            )
        else:
            columns[field.name] = pa.array([r[field.name] for r in rows], type=field.type)
    return pa.table(columns, schema=ARROW_EVENT_SCHEMA)
