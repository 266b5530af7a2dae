"""Pieces of SQL every table object builds statements from: conditions, placeholders,
orderings and timestamps as parameters."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Any

from ..errors import InvalidInput
from .schema import FILTER_COLUMNS

_EPOCH = dt.datetime(1970, 1, 1)

#: Orderings a listing may ask for (never formatted from user input).
ORDERINGS = frozenset(
    {
        "created_at, id",
        "created_at DESC, id",
        "created_at DESC, id DESC",
        "created_at ASC, id ASC",
        "updated_at DESC, id DESC",
        "updated_at ASC, id ASC",
        "importance DESC, created_at DESC, id DESC",
        "importance ASC, created_at ASC, id ASC",
        "importance DESC, created_at DESC, id",
        "created_at, seq",
    }
)


def to_epoch_us(value: dt.datetime | None) -> int | None:
    """A naive UTC datetime as microseconds since the epoch (for ``make_timestamp``)."""
    if value is None:
        return None
    return (value - _EPOCH) // dt.timedelta(microseconds=1)


def where_clause(
    *,
    namespace: str | None = None,
    filters: dict[str, Any] | None = None,
    since: Any = None,
    until: Any = None,
    ids: Iterable[str] | None = None,
) -> tuple[list[str], list[Any]]:
    """SQL conditions and parameters for a namespace, equality filters and a date range.

    Filter keys must be known ``events`` columns (``FILTER_COLUMNS``); a value of
    ``None`` matches SQL NULL; a list/tuple/set matches any of its values.
    """
    clauses: list[str] = []
    params: list[Any] = []
    if namespace is not None:
        clauses.append("namespace = ?")
        params.append(namespace)
    for key, value in (filters or {}).items():
        if key not in FILTER_COLUMNS:
            raise InvalidInput(
                f"cannot filter on {key!r}; filterable fields: {', '.join(sorted(FILTER_COLUMNS))}"
            )
        if value is None:
            clauses.append(f"{key} IS NULL")
        elif isinstance(value, (list, tuple, set, frozenset)):
            clauses.append(f"{key} IN (SELECT unnest(?::VARCHAR[]))")
            params.append([str(v) for v in value])
        else:
            clauses.append(f"{key} = ?")
            params.append(value)
    if since is not None:
        clauses.append("created_at >= ?")
        params.append(since)
    if until is not None:
        clauses.append("created_at <= ?")
        params.append(until)
    if ids is not None:
        clauses.append("id IN (SELECT unnest(?::VARCHAR[]))")
        params.append(list(ids))
    return clauses, params


def where(clauses: list[str]) -> str:
    return f" WHERE {' AND '.join(clauses)}" if clauses else ""


def placeholders(values: Sequence[Any]) -> str:
    """``?, ?, ?`` for a VALUES list or an IN list."""
    return ", ".join("?" for _ in values)
