"""Export and import of a session or a namespace as one JSON file.

Format ``nbmemory.export`` version 2 (a JSON object)::

    {
      "format": "nbmemory.export",
      "version": 2,
      "exported_at": "2026-11-30T12:00:00.000000Z",     # UTC
      "nbmemory_version": "0.1.0",
      "scope": {"namespace": "default", "session_id": null},
      "embedding_encoding": "base64-float32-le",
      "counts": {"events": 2, "embedded": 2, "sessions": 1, "facts": 1, "macros": 0,
                 "scheduled_tasks": 0, "terminal_allowed_prefixes": 0},
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
          "embedding": "AAAgQQ...",         # base64 of little-endian float32, or null
          "passages": null                  # or, for a long text stored as passages:
          # [{"start": 0, "stop": 812, "embedding": "..."}, ...]  one per passage, in
          # order: its characters [start, stop) of content, and its vector
        }
      ],
      "sessions": [
        {"namespace": "...", "session_id": "...", "user_id": "", "status": "active",
         "state": "{...}",                  # JSON text as stored
         "created_at": "...Z", "last_activity": "...Z", "closed_at": null}
      ],
      "facts": [{"id": 1, "namespace": "...", "category": "...", "key": "...",
                 "value": "...", "source": "", "created_at": "...Z", "updated_at": "...Z"}],
      "macros": [...], "scheduled_tasks": [...],      # every column, as stored
      "terminal_allowed_prefixes": [{"prefix": "git status", "created_at": "...Z"}]
    }

Facts, macros, scheduled tasks and allowed prefixes come with an export of a
whole namespace (not of one session); :mod:`.json_tables` says how they are
checked and merged.  Version 1 (events and sessions only) is still read.

Every field of ``events`` and ``sessions`` is kept: timestamps to the microsecond
(DuckDB's precision), floats exactly, vectors bit for bit (raw float32 bytes).
Events are listed in the order they were stored (time, then insertion order) and
imported in the file's order, so turns of one time (``add_events`` stamps a batch
with one clock reading) keep their order.
A long text stored as passages (see :mod:`nbmemory.retrieval.passages`) carries
every passage's span and vector under ``passages``; ``embedding`` is then its first
passage's (what a reader that ignores ``passages``, such as an nbmemory before
them, keeps as the vector of the whole text, to be re-embedded as passages).

Import rules: every row passes the same validation as ``add_event`` (one bad
row refuses the whole file, naming it); a row whose id is already in the target
namespace is skipped, so importing the same file twice adds nothing.  ``namespace=`` moves every row into
that namespace; an id already used in *another* namespace of the store is
replaced by a stable derived id (``uuid5`` of the target namespace and the old
id), so the same file can be imported into several namespaces of one store and
re-importing still adds nothing.  Text goes through redaction like any write; a
row whose text changed loses its vector(s) and is re-embedded.  Passages come in
as they were exported, so a fact in a long text's tail is found by vector search
at once; a long text with one vector (a file made before passages) is re-embedded
as passages in the background after the import.  Vectors of another
model are kept as they are (search only compares vectors of the store's model;
``Memory.reembed`` converts them).
"""

from __future__ import annotations

import base64
import json
import os
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..core import Core
from ..errors import InvalidInput, SessionNotFound
from ..event_rows import build_row, plain
from ..store.schema import EVENTS, SESSIONS
from ..store.sessions import ACTIVE, CLOSED
from ..validation import (
    MAX_NAME_BYTES,
    JsonLimits,
    check_flag,
    check_name,
    check_path,
    check_text,
    is_missing,
    load_json,
    shown,
    to_utc,
    utcnow,
    vector_problem,
)
from ..version import __version__
from .export_target import check_export_target, write_export
from .json_tables import TABLES, export_tables, insert_tables, read_tables

FORMAT = "nbmemory.export"
VERSION = 2
EMBEDDING_ENCODING = "base64-float32-le"

_TIME_FIELDS = ("created_at", "updated_at", "consolidated_at")
_REQUIRED = ("id", "session_id", "namespace", "kind", "role", "created_at", "updated_at")
_SESSION_TIME_FIELDS = ("created_at", "last_activity", "closed_at")


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
    if is_missing(value):
        return None
    if isinstance(value, pd.Timestamp):
        value = value.to_pydatetime()
    return str(value.isoformat(timespec="microseconds")) + "Z"


def _value(value: Any) -> Any:
    return None if is_missing(value) else plain(value)


def _progress(iterable: Any, enabled: bool, desc: str, total: int | None = None) -> Any:
    if not enabled:
        return iterable
    from tqdm.auto import tqdm

    # disable=None: no bar when stderr is not a terminal (pipes, CI logs)
    return tqdm(iterable, desc=desc, total=total, unit="row", leave=False, disable=None)


# -- export ----------------------------------------------------------------------------
def export_json(
    core: Core,
    path: str | os.PathLike[str],
    *,
    namespace: str,
    session_id: str | None = None,
    progress: bool = False,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Write one namespace (or one session of it) to ``path``; returns a summary.
    ``path`` may be a new file or an earlier export (see :mod:`.export_target`)."""
    target = Path(check_path(path)).expanduser()
    if not target.parent.is_dir():
        raise InvalidInput(f"cannot write {target}: the folder {target.parent} does not exist")
    check_export_target(core, target, overwrite=overwrite)
    where = {"session_id": session_id} if session_id is not None else None
    frame = core.store.events.frame(  # in insertion order: import keeps the turns' order
        namespace=namespace, filters=where, order="created_at, seq", with_embedding=True
    )
    session_rows = core.store.sessions.records(namespace, session_id)
    if session_id is not None and frame.empty and not session_rows:
        raise SessionNotFound(session_id, namespace, "has no events or state")
    records = frame.to_dict(orient="records")
    passages = core.store.vectors.passages(namespace=namespace, filters=where)
    events_out = [
        _export_event(r, passages.get(r["id"]))
        for r in _progress(records, progress, "export", len(records))
    ]
    embedded = sum(1 for item in events_out if item["embedding"] is not None)
    sessions_out = []
    for row in session_rows:
        item = {k: _value(row[k]) for k in SESSIONS.names}
        for name in _SESSION_TIME_FIELDS:
            item[name] = _time_text(item[name])
        sessions_out.append(item)
    tables = export_tables(core, namespace) if session_id is None else {t: [] for t in TABLES}
    counts = {"events": len(events_out), "embedded": embedded, "sessions": len(sessions_out)}
    counts.update({table: len(rows) for table, rows in tables.items()})
    document = {
        "format": FORMAT,
        "version": VERSION,
        "exported_at": _time_text(utcnow()),
        "nbmemory_version": __version__,
        "scope": {"namespace": namespace, "session_id": session_id},
        "embedding_encoding": EMBEDDING_ENCODING,
        "counts": counts,
        "events": events_out,
        "sessions": sessions_out,
        **tables,
    }
    write_export(target, document)
    summary = {
        "path": str(target),
        "namespace": namespace,
        "session_id": session_id,
        "events": len(events_out),
        "embedded": embedded,
        "sessions": len(sessions_out),
        **{table: len(rows) for table, rows in tables.items()},
        "bytes": target.stat().st_size,
        "version": VERSION,
    }
    if not core.store.read_only:  # reading a store read-only leaves no trace
        core.writer.audit(
            "export", [], namespace, {k: summary[k] for k in ("path", "session_id", "events")}
        )
    return summary


def _export_event(
    record: dict[str, Any], passages: list[tuple[int, int, np.ndarray]] | None
) -> dict[str, Any]:
    item: dict[str, Any] = {}
    for column in EVENTS.names:
        if column != "embedding":
            value = _value(record[column])
            item[column] = _time_text(value) if column in _TIME_FIELDS else value
    vector = record["embedding"]
    if is_missing(vector):
        item["embedding_dim"] = None
        item["embedding"] = None
    else:
        item["embedding"], item["embedding_dim"] = encode_vector(vector)
    item["passages"] = None
    if passages:
        item["passages"] = [
            {"start": start, "stop": stop, "embedding": encode_vector(values)[0]}
            for start, stop, values in passages
        ]
    item["importance"] = float(item["importance"])
    return item


# -- import ----------------------------------------------------------------------------
def read_export(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Load and check the envelope of an export file."""
    source = Path(check_path(path)).expanduser()
    try:
        text = source.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidInput(f"no export file {source}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"cannot read {source}: {exc}") from None
    try:
        document = json.loads(text)
    except RecursionError:
        raise InvalidInput(f"{source} nests JSON too deep to be an nbmemory export") from None
    except ValueError as exc:
        raise InvalidInput(f"{source} is not JSON ({exc}); pass a file made by export") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise InvalidInput(f"{source} is not an nbmemory export (format {FORMAT!r} missing)")
    version = document.get("version")
    if type(version) is not int or version < 1:  # (true is no version)
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


def _event_row(core: Core, item: Any, index: int, namespace: str | None) -> dict[str, Any]:
    """One exported event validated like ``add_event``; its vector under ``"vector"``."""
    if not isinstance(item, dict):
        raise InvalidInput(f"events[{index}] is not an object")
    missing = [k for k in _REQUIRED if item.get(k) is None]
    if missing:
        raise InvalidInput(f"events[{index}] lacks {', '.join(missing)}")
    try:
        for name in (*_TIME_FIELDS, "metadata", "tool_calls_json", "embedding_error"):
            value = item.get(name)
            if value is not None and not isinstance(value, str):
                raise InvalidInput(f"{name} must be text or null, got {value!r}")
        row = build_row(
            core.settings,
            stored=True,
            id=item["id"],
            session_id=item["session_id"],
            namespace=namespace if namespace is not None else item["namespace"],
            kind=item["kind"],
            role=item["role"],
            content=item.get("content"),
            metadata=item.get("metadata"),
            importance=item.get("importance"),
            tool_call_id=item.get("tool_call_id"),
            tool_name=item.get("tool_name"),
            tool_calls=item.get("tool_calls_json"),
            graph_id=item.get("graph_id"),
            task_id=item.get("task_id"),
            created_at=item["created_at"],
            updated_at=item["updated_at"],
            consolidated_at=item.get("consolidated_at"),
            embedding_error=item.get("embedding_error"),
        )
        row["vector"] = _item_vector(item)
        row["spans"] = None
        if item.get("passages") is not None:
            row["vector"], row["spans"] = _item_passages(item, row["vector"], row["content"])
    except InvalidInput as exc:
        raise InvalidInput(f"events[{index}] ({shown(item.get('id'))}): {exc}") from None
    return row


def _item_vector(item: dict[str, Any]) -> tuple[str, np.ndarray] | None:
    vector = item.get("embedding")
    if vector is None:
        return None
    dim = item.get("embedding_dim")
    model = item.get("embedding_model")
    if not isinstance(dim, int) or dim <= 0 or not isinstance(vector, str):
        raise InvalidInput("embedding must be base64 text with a positive embedding_dim")
    if not isinstance(model, str) or not model:
        raise InvalidInput("an embedding needs its embedding_model")
    values = decode_vector(vector, dim)
    problem = vector_problem(values)
    if problem:
        raise InvalidInput(f"embedding is {problem}")
    return model, values


def _item_passages(
    item: dict[str, Any], vector: tuple[str, np.ndarray] | None, content: str | None
) -> tuple[tuple[str, np.ndarray], list[tuple[int, int]]]:
    """(model, one vector row per passage) and the passages' spans of an exported long
    text: spans inside its text, in order; the first passage's vector is ``embedding``."""
    passages = item["passages"]
    if not isinstance(passages, list) or len(passages) < 2:
        raise InvalidInput("passages must be a list of 2 passages or more, or null")
    if vector is None or content is None:
        raise InvalidInput("passages need the event's text and its embedding")
    model, first = vector
    rows: list[np.ndarray] = []
    spans: list[tuple[int, int]] = []
    for k, passage in enumerate(passages):
        where = f"passages[{k}]"
        if not isinstance(passage, dict):
            raise InvalidInput(f"{where} is not an object")
        start, stop, text = passage.get("start"), passage.get("stop"), passage.get("embedding")
        if type(start) is not int or type(stop) is not int:  # (a bool is no position)
            raise InvalidInput(f"{where}: start and stop must be integers")
        low = spans[-1][0] + 1 if spans else 0
        if not low <= start < stop <= len(content):
            raise InvalidInput(
                f"{where}: span [{start}, {stop}) is not inside the text ({len(content)}"
                " characters) after the previous passage's start"
            )
        if not isinstance(text, str):
            raise InvalidInput(f"{where}: embedding must be base64 text")
        try:
            values = decode_vector(text, len(first))
        except InvalidInput as exc:
            raise InvalidInput(f"{where}: {exc}") from None
        problem = vector_problem(values)
        if problem:
            raise InvalidInput(f"{where}: embedding is {problem}")
        rows.append(values)
        spans.append((start, stop))
    if rows[0].tobytes() != first.tobytes():
        raise InvalidInput("passages[0]: embedding differs from the event's embedding")
    return (model, np.stack(rows)), spans


def _check_dimensions(core: Core, rows: list[dict[str, Any]]) -> None:
    """Vectors of the store's model must have its dimension (others are kept as they are)."""
    mine = [(i, r) for i, r in enumerate(rows) if r["vector"] and r["vector"][0] == core.model]
    if not mine:
        return
    expected = core.store.vectors.vector_dim(core.model) or core.embedder.dim
    for index, row in mine:
        if row["vector"][1].shape[-1] != expected:
            raise InvalidInput(
                f"events[{index}] ({shown(row['id'])}): embedding has {row['vector'][1].shape[-1]} values "
                f"but {core.model} makes {expected}; export it again from a store of that model"
            )


def _session_row(
    item: Any, index: int, namespace: str | None, limits: JsonLimits
) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise InvalidInput(f"sessions[{index}] is not an object")
    row: dict[str, Any] = {}
    try:
        for name in ("namespace", "session_id", "user_id", "status", "state"):
            value = item.get(name)
            if not isinstance(value, str):
                raise InvalidInput(f"{name} must be text, got {value!r}")
            row[name] = value
        if namespace is not None:
            row["namespace"] = namespace
        check_name(row["namespace"], "namespace")
        check_name(row["session_id"], "session_id")
        check_text(row["user_id"], "user_id", allow_empty=True, max_bytes=MAX_NAME_BYTES)
        if row["status"] not in (ACTIVE, CLOSED):
            raise InvalidInput(f"status must be {ACTIVE!r} or {CLOSED!r}, got {row['status']!r}")
        if not isinstance(load_json(row["state"], "state", limits), dict):
            raise InvalidInput(f"state must be a JSON object, got {row['state'][:60]!r}")
        for name in _SESSION_TIME_FIELDS:
            value = item.get(name)
            row[name] = None if value is None else to_utc(value, name)
        if row["created_at"] is None or row["last_activity"] is None:
            raise InvalidInput("created_at and last_activity are required")
    except (InvalidInput, ValueError) as exc:
        raise InvalidInput(f"sessions[{index}]: {exc}") from None
    return row


def derived_id(namespace: str, old_id: str) -> str:
    """The id a row gets when its own id is taken by another namespace of the store."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"nbmemory:{namespace}:{old_id}"))


def import_json(
    core: Core,
    path: str | os.PathLike[str],
    *,
    namespace: str | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """Load an export into the store (see the module doc for the rules); returns a summary."""
    document = read_export(path)
    items = document.get("events", [])
    rows = [
        _event_row(core, item, i, namespace)
        for i, item in enumerate(_progress(items, progress, "read", len(items)))
    ]
    session_rows = [
        _session_row(s, i, namespace, core.settings.payload_limits)
        for i, s in enumerate(document.get("sessions", []))
    ]
    tables = read_tables(core, document, namespace) if document["version"] >= 2 else None
    ids = [r["id"] for r in rows]
    if len(set(ids)) != len(ids):
        raise InvalidInput(f"{path}: the file repeats event ids; it was not made by export")
    _check_dimensions(core, rows)
    with core.writer.transaction() as tx:
        added, skipped = _new_rows(core, rows)
        vectors = {r["id"]: r.pop("vector") for r in rows if r.get("vector") is not None}
        spans = {r["id"]: r.pop("spans") for r in rows if r.get("spans") is not None}
        for row in rows:
            row.pop("vector", None)
            row.pop("spans", None)
        records = tx.events.insert(added, vectors=vectors, spans=spans, bulk=True) if added else []
        existing = tx.sessions.keys()
        new_sessions = []
        for row in session_rows:
            if (row["namespace"], row["session_id"]) not in existing:
                existing.add((row["namespace"], row["session_id"]))
                new_sessions.append(row)
        tx.sessions.insert_rows(new_sessions)
        merged = insert_tables(tx, tables, derived_id) if tables else {t: (0, 0) for t in TABLES}
        redacted = sum(tx.change.redacted.values())
        queued = len(tx.change.to_embed)
        namespaces = sorted(
            {r["namespace"] for r in records}
            | {r["namespace"] for r in new_sessions}
            | {r["namespace"] for t in TABLES[:3] for r in (tables or {}).get(t, [])}
        )
        for ns in namespaces or [namespace or core.namespace]:
            chosen = [r["id"] for r in records if r["namespace"] == ns]
            tx.audit(
                "import",
                chosen,
                ns,
                {
                    "file": str(Path(path).name),
                    "events_added": len(chosen),
                    "sessions_added": sum(1 for r in new_sessions if r["namespace"] == ns),
                    **{f"{t}_added": merged[t][0] for t in TABLES if merged[t][0]},
                },
            )
    _requeue_whole_long(core, records, spans)
    return {
        "path": str(path),
        "version": document["version"],
        "events_added": len(records),
        "events_skipped": skipped,
        "sessions_added": len(new_sessions),
        "sessions_skipped": len(session_rows) - len(new_sessions),
        **{f"{t}_added": merged[t][0] for t in TABLES},
        **{f"{t}_skipped": merged[t][1] for t in TABLES},
        "namespaces": namespaces,
        "redacted": redacted,
        "queued_for_embedding": queued,
    }


def _requeue_whole_long(
    core: Core, records: list[dict[str, Any]], spans: dict[str, list[tuple[int, int]]]
) -> None:
    """Hand the worker the imported long texts that came with one vector of the store's
    model (a file made before passages): it embeds them as passages in the background."""
    worker = core.worker
    if worker is None or worker.split is None:
        return
    window = int(getattr(worker.split, "known_window", 0))
    worker.submit_for_passages(
        [
            (r["id"], r["content"])
            for r in records
            if r["embedding_model"] == core.model
            and r["id"] not in spans
            and len(r["content"] or "") > window
        ]
    )


def _new_rows(core: Core, rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """Rows not yet in their namespace (ids taken elsewhere get a derived id), and how
    many were skipped as already present."""
    candidates = {r["id"] for r in rows} | {derived_id(r["namespace"], r["id"]) for r in rows}
    taken = core.store.events.namespaces_of(sorted(candidates))
    added, skipped = [], 0
    for row in rows:
        ns = row["namespace"]
        alternative = derived_id(ns, row["id"])
        if taken.get(row["id"]) == ns or taken.get(alternative) == ns:
            skipped += 1
            continue
        if row["id"] in taken:
            row["id"] = alternative
        taken[row["id"]] = ns
        added.append(row)
    return added, skipped


class Transfer:
    """``export_json`` and ``import_json``."""

    def __init__(self, core: Core) -> None:
        self.core = core

    def export_json(
        self,
        path: str | os.PathLike[str],
        *,
        session_id: str | None = None,
        namespace: str | None = None,
        progress: bool = False,
        overwrite: bool = False,
    ) -> dict[str, Any]:
        """Write a session or a whole namespace (embeddings included) to a JSON file.

        The format is documented in :mod:`nbmemory.transfer.json_files`; returns a summary dict.
        ``path`` may be a new file or an earlier export; another file is replaced only with
        ``overwrite=True``, and a database (the store's own file above all) never.
        """
        return export_json(
            self.core,
            path,
            namespace=self.core.ns(namespace),
            session_id=None if session_id is None else check_name(session_id, "session_id"),
            progress=check_flag(progress, "progress"),
            overwrite=check_flag(overwrite, "overwrite"),
        )

    def import_json(
        self,
        path: str | os.PathLike[str],
        *,
        namespace: str | None = None,
        progress: bool = False,
    ) -> dict[str, Any]:
        """Load an export file; rows already present are skipped, so importing twice adds nothing.

        ``namespace`` puts every row in that namespace (default: the namespaces in the file).
        """
        target = None if namespace is None else check_name(namespace, "namespace")
        return import_json(
            self.core, path, namespace=target, progress=check_flag(progress, "progress")
        )
