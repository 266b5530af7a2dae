"""Checks on what callers pass in: numbers, names, text, times and metadata.

Every public method validates its arguments with these before any SQL runs, so
a refused input never leaves a half-written store behind.  Each check raises
:class:`~nbmemory.errors.InvalidInput` with a message naming the argument.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from .errors import InvalidInput

#: Longest name (session, namespace, role, id ...) accepted, in UTF-8 bytes.
MAX_NAME_BYTES = 4096


def is_number(value: Any) -> bool:
    """A real number (int, float, numpy scalar), but not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def check_unit_interval(value: Any, name: str, *, low: float = 0.0) -> float:
    """``value`` as a float in ``[low, 1]``; NaN, inf, strings and bools are refused."""
    if not is_number(value):
        raise InvalidInput(f"{name} must be a number between {low:g} and 1, got {value!r}")
    number = float(value)
    if math.isnan(number) or not low <= number <= 1.0:
        raise InvalidInput(f"{name} must be a number between {low:g} and 1, got {value!r}")
    return number


def check_limit(value: Any, name: str, *, allow_zero: bool = True) -> int:
    """``value`` as a non-negative int (positive when ``allow_zero`` is false)."""
    if isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_)):
        value = int(value)
    else:
        raise InvalidInput(f"{name} must be a whole number, got {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        bound = "0 or more" if allow_zero else "1 or more"
        raise InvalidInput(f"{name} must be {bound}, got {value!r}")
    return value


def check_text(
    value: Any, name: str, *, max_bytes: int | None = None, allow_empty: bool = False
) -> str:
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
        hint = " (Settings.max_content_bytes); split it into smaller memories"
        raise InvalidInput(
            f"{name} is {_size(size)}, over the {_size(max_bytes)} limit"
            + (hint if name == "content" else "; shorten it")
        )
    return value


def _size(count: int) -> str:
    """A byte count a person reads at a glance: 4,097 bytes, 1.2 MB."""
    return f"{count:,} bytes" if count < 100_000 else f"{count / 1e6:.1f} MB"


def check_name(value: Any, name: str) -> str:
    """A non-empty identifier-like string (session, namespace, role): any text is allowed."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"{name} must be a non-empty string, got {value!r}")
    return check_text(value, name, max_bytes=MAX_NAME_BYTES)


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
        try:
            value = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise InvalidInput(
                f"{name} {value!r} is not an ISO-8601 date-time (e.g. 2024-05-08T13:56:00Z)"
            ) from None
    elif isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        value = dt.datetime(value.year, value.month, value.day)
    if not isinstance(value, dt.datetime):
        raise InvalidInput(f"{name} must be a datetime or ISO-8601 text, got {value!r}")
    if value.tzinfo is not None:
        try:
            value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
        except OverflowError:
            raise InvalidInput(f"{name} {value.isoformat()} is outside the years 1-9999") from None
    return value


def utcnow() -> dt.datetime:
    """The current UTC time as a naive datetime (the store keeps UTC)."""
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


def date_range(
    start: Any, end: Any, names: tuple[str, str] = ("since", "until")
) -> tuple[dt.datetime | None, dt.datetime | None]:
    """Validated ``(since, until)`` as naive UTC; either may be None; start <= end."""
    since = None if start is None else to_utc(start, names[0])
    until = None if end is None else to_utc(end, names[1])
    if since is not None and until is not None and since > until:
        raise InvalidInput(
            f"{names[0]} {since:%Y-%m-%d %H:%M} is after {names[1]} {until:%Y-%m-%d %H:%M}"
        )
    return since, until


def dump_metadata(metadata: Any) -> str | None:
    """Metadata as the JSON text stored with an event (None stays None)."""
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


def parse_metadata(raw: Any) -> dict[str, Any]:
    """Stored metadata JSON as a dict (``{"_raw": text}`` when it is not JSON)."""
    if raw is None or (isinstance(raw, float) and math.isnan(raw)):
        return {}
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw)
    except (TypeError, ValueError):
        return {"_raw": raw}
    return value if isinstance(value, dict) else {"_value": value}


def dump_json_arg(value: Any, name: str) -> str | None:
    """``value`` as JSON text (text is kept as given); None stays None."""
    if value is None:
        return None
    if not isinstance(value, str):
        try:
            value = json.dumps(value, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise InvalidInput(f"{name} must be JSON-serialisable: {exc}") from None
    return check_text(value, name, allow_empty=True)


def vector_problem(vector: np.ndarray) -> str | None:
    """What makes a vector unusable for cosine similarity (None when it is fine)."""
    if vector.ndim != 1 or not len(vector):
        return "not a flat list of numbers"
    if not np.isfinite(vector).all():
        return "NaN or infinite values"
    if not np.any(vector):
        return "the zero vector"
    return None


def is_missing(value: Any) -> bool:
    """None, NaN, NaT or pd.NA: how pandas may spell SQL NULL."""
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    return isinstance(value, float) and math.isnan(value)


def scope_filters(filters: dict[str, Any] | None, **named: Any) -> dict[str, Any]:
    """Equality filters from ``filters=`` plus the named ones (session_id=, role= ...)."""
    result = dict(filters or {})
    if "namespace" in result:
        raise InvalidInput("pass namespace=... rather than a namespace filter")
    for key, value in named.items():
        if value is not None:
            result[key] = check_name(value, key)
    return result
