"""The rows of ``add_events(DataFrame)`` built a column at a time.

:func:`frame_rows` makes, from an ordinary DataFrame (the columns ``session_id``,
``role``, ``content`` and the optional ``namespace``, ``kind``, ``importance``,
``created_at``, ``metadata``), the same rows :func:`~nbmemory.event_rows.build_row`
would make of each of its rows, plus the columns they were made of, so the insert
does not convert the rows back into columns.  Each distinct name and time is checked
once, the times of a datetime column are converted in one step, the ids come from
one read of random bytes.  Anything it cannot vouch for (a missing name, a value of
another type, a number out of range) makes it return None: the caller then builds
every row on its own, which names the bad row.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from .config import Settings
from .importance import estimate_importances
from .validation import check_name, check_text, dump_metadata, is_missing, to_utc, utcnow

#: The columns of a frame :func:`frame_rows` builds (others: row by row).
FRAME_FIELDS = frozenset(
    {"session_id", "role", "content", "namespace", "kind", "importance", "created_at", "metadata"}
)
#: The keys of a built row, in :func:`~nbmemory.event_rows.build_row`'s order (the
#: ``events`` columns).
ROW_KEYS = (
    "id",
    "session_id",
    "namespace",
    "kind",
    "role",
    "content",
    "tool_call_id",
    "tool_name",
    "tool_calls_json",
    "metadata",
    "graph_id",
    "task_id",
    "created_at",
    "updated_at",
    "importance",
    "embedding_model",
    "embedding_error",
    "consolidated_at",
)


class BuiltRows(list[dict[str, Any]]):
    """Built rows (dicts) that also carry themselves as columns (``columns``: key ->
    one value per row; a key of :data:`ROW_KEYS` not there is NULL in every row), for
    the insert to make its Arrow table of without reading the rows again."""

    columns: dict[str, list[Any]]


def frame_rows(
    settings: Settings,
    frame: pd.DataFrame,
    *,
    namespace: str,
    session_id: str | None,
    new_ids: Callable[[int], list[str]],
) -> BuiltRows | None:
    """The rows of ``frame`` as :func:`~nbmemory.event_rows.build_rows` makes them,
    or None when any cell needs the row-by-row path (to be refused or to be read
    as that path reads it)."""
    names = [str(c) for c in frame.columns]
    if not len(frame) or len(set(names)) != len(names) or not set(names) <= FRAME_FIELDS:
        return None
    if not all(isinstance(c, str) for c in frame.columns):
        return None
    count = len(frame)
    defaults = {"namespace": namespace, "session_id": session_id, "kind": "message"}
    columns: dict[str, Any] = {}
    for name in ("session_id", "namespace", "kind", "role", "content"):
        if name not in frame.columns:
            value = defaults.get(name)
            if value is None:
                return None
            columns[name] = [value] * count
            continue
        series = frame[name]
        if series.isna().any():
            return None
        values = series.tolist()
        if name != "content":
            for value in set(values):
                check_name(value, name)
        columns[name] = values
    roles = settings.importance_by_role
    if not set(columns["role"]) <= roles.keys():
        return None
    contents: list[Any] = columns["content"]
    if not {type(c) for c in contents} <= {str} or not all(map(str.strip, contents)):
        return None
    "\x00".join(contents).encode("utf-8")  # a lone surrogate anywhere raises
    limit = settings.max_content_bytes
    if limit is not None:
        for text in contents:
            if len(text) * 4 > limit:
                check_text(text, "content", max_bytes=limit)
    importance = _importance(settings, frame, columns["role"], contents)
    created = _created(frame, count)
    if importance is None or created is None:
        return None
    metadata: list[str | None] = [None] * count
    if "metadata" in frame.columns:
        limits = settings.metadata_limits
        metadata = [
            None if is_missing(m) else dump_metadata(m, limits) for m in frame["metadata"].tolist()
        ]
    columns.update(
        id=new_ids(count),
        metadata=metadata,
        created_at=created,
        updated_at=created,
        importance=importance,
    )
    return _rows(columns, count)


def _rows(columns: dict[str, list[Any]], count: int) -> BuiltRows:
    """One dict per row of ``columns``: a copy of the values every row shares, then
    the columns that vary set a column at a time."""
    template: dict[str, Any] = dict.fromkeys(ROW_KEYS)
    varying = []
    for key in ROW_KEYS:
        values = columns.get(key)
        if values is None:
            continue
        if values.count(values[0]) == count:
            template[key] = values[0]
        else:
            varying.append(key)
    rows = BuiltRows(template.copy() for _ in range(count))
    for key in varying:
        for row, value in zip(rows, columns[key], strict=True):
            row[key] = value
    rows.columns = columns
    return rows


def _importance(
    settings: Settings, frame: pd.DataFrame, roles: list[str], contents: list[str]
) -> list[float] | None:
    """Each row's importance: the column's (0..1) where given, else the role's default
    raised to the text's estimate; None when a given value is not a number in 0..1."""
    given: np.ndarray | None = None
    if "importance" in frame.columns:
        series = frame["importance"]
        if not pd.api.types.is_numeric_dtype(series) or pd.api.types.is_bool_dtype(series):
            return None
        given = series.to_numpy(dtype=np.float64, na_value=np.nan)
        present = given[~np.isnan(given)]
        if ((present < 0.0) | (present > 1.0)).any():
            return None
    by_role = {role: float(settings.importance_by_role.get(role, 0.5)) for role in set(roles)}
    defaults = [by_role[role] for role in roles]
    if settings.estimate_importance:
        defaults = list(map(max, defaults, estimate_importances(contents, roles)))
    if given is None:
        return defaults
    return [
        default if np.isnan(value) else float(value)
        for default, value in zip(defaults, given.tolist(), strict=True)
    ]


def _created(frame: pd.DataFrame, count: int) -> list[dt.datetime] | None:
    """Each row's ``created_at`` as a naive UTC datetime (one clock reading for the
    rows without one); None when a cell is not a time ``to_utc`` reads."""
    now = utcnow()
    if "created_at" not in frame.columns:
        return [now] * count
    series = frame["created_at"]
    if pd.api.types.is_datetime64_any_dtype(series):
        if getattr(series.dt, "tz", None) is not None:
            series = series.dt.tz_convert("UTC").dt.tz_localize(None)
        missing = series.isna().to_numpy()
        stamps = series.astype("datetime64[us]").dt.to_pydatetime()
        return [now if gone else stamp for stamp, gone in zip(stamps, missing, strict=True)]
    seen: dict[Any, dt.datetime] = {}
    out: list[dt.datetime] = []
    for value in series.tolist():
        if is_missing(value):
            out.append(now)
            continue
        key = (type(value), value)
        if key not in seen:
            seen[key] = to_utc(value)
        out.append(seen[key])
    return out
