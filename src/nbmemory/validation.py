"""Checks on what callers pass in: numbers, names, text, times and metadata.

Every public method validates its arguments with these before any SQL runs, so
a refused input never leaves a half-written store behind.  Each check raises
:class:`~nbmemory.errors.InvalidInput` with a message naming the argument.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import math
import numbers
import os
import reprlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
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
        raise InvalidInput(f"{name} must be a number between {low:g} and 1, got {shown(value)}")
    try:
        number = float(value)
    except OverflowError:  # an int past float's range (10**400): JSON has no limit
        number = math.nan
    if math.isnan(number) or not low <= number <= 1.0:
        raise InvalidInput(f"{name} must be a number between {low:g} and 1, got {shown(value)}")
    return number


#: The longest name of one file or folder most file systems allow (NAME_MAX).
MAX_FILE_NAME_BYTES = 255
#: The largest count a limit or offset may be: DuckDB's BIGINT.
MAX_COUNT = 2**63 - 1


def shown(value: Any) -> str:
    """``repr(value)`` short enough for a one-line error (a nested or long value is
    cut; an object whose repr takes several lines, a pandas Series or DataFrame, is
    named by its type)."""
    text = _REPR.repr(value)
    if "\n" not in text:
        return text
    try:
        size = f" of {len(value)}"
    except Exception:  # no length, or one that fails
        size = ""
    return f"a {type(value).__name__}{size}"


def check_choice(value: Any, choices: Sequence[str], what: str) -> str:
    """``value`` when it is one of ``choices``; else :class:`InvalidInput` listing them."""
    if not is_one_of(value, choices):
        raise InvalidInput(f"unknown {what} {shown(value)}; {what}s: {', '.join(choices)}")
    return str(value)


def is_one_of(value: Any, choices: Any) -> bool:
    """Whether ``value`` is one of the names ``choices``: a string first, so that an
    array or ``pd.NA`` is a wrong value, not an error of the ``in`` test itself."""
    return isinstance(value, str) and value in choices


_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 80


def check_limit(value: Any, name: str, *, allow_zero: bool = True) -> int:
    """``value`` as a non-negative int (positive when ``allow_zero`` is false)."""
    if isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_)):
        value = int(value)
    else:
        raise InvalidInput(f"{name} must be a whole number, got {shown(value)}")
    if value < 0 or (value == 0 and not allow_zero):
        bound = "0 or more" if allow_zero else "1 or more"
        raise InvalidInput(f"{name} must be {bound}, got {value!r}")
    if value > MAX_COUNT:
        raise InvalidInput(f"{name} must be at most {MAX_COUNT:,}, got {value:,}")
    return value


def check_flag(value: Any, name: str) -> bool:
    """An option that must be a real bool: a truthy ``"no"`` erases nothing by mistake."""
    if not isinstance(value, bool):
        raise InvalidInput(f"{name} must be True or False, got {shown(value)}")
    return value


def check_timeout(value: Any, name: str = "timeout") -> float | None:
    """Seconds to wait: a number, 0 or more (``inf`` waits as long as None); None waits
    until done.  A text, a bool, a NaN or a negative number is refused."""
    if value is None:
        return None
    if not is_number(value) or math.isnan(float(value)) or float(value) < 0:
        raise InvalidInput(
            f"{name} must be a number of seconds, 0 or more (None waits until done), "
            f"got {shown(value)}"
        )
    return float(value)


def check_cron(expr: Any, name: str = "cron expression") -> str:
    """A 5-field cron expression (minute hour day-of-month month day-of-week) that
    croniter reads and that fires: ``0 0 30 2 *`` (30 February) never does, and a task
    on it would never run.  Returns its fields joined by single spaces; the error
    names it ``name``.
    """
    if not isinstance(expr, str) or not expr.strip():
        raise InvalidInput(f"{name} must be cron text such as '30 8 * * 1', got {shown(expr)}")
    fields = expr.split()
    if len(fields) != 5:
        raise InvalidInput(
            f"{name} {expr!r} has {len(fields)} field{'' if len(fields) == 1 else 's'}; use 5: "
            "minute hour day-of-month month day-of-week (e.g. '30 8 * * 1')"
        )
    joined = " ".join(fields)
    problem = _cron_problem(joined)
    if problem is not None:
        raise InvalidInput(f"{name} {expr!r} {problem}")
    return joined


def _cron_problem(expr: str) -> str | None:
    """What croniter finds wrong with a 5-field ``expr`` (None: it reads and fires)."""
    # here, not at import: 8 ms that a store without schedules need not pay
    from croniter import CroniterBadDateError, croniter

    try:
        croniter(expr, dt.datetime(2000, 1, 1)).get_next(dt.datetime)
    except CroniterBadDateError:  # (a ValueError: first)
        return (
            "never fires: no date matches it (such as 30 February); "
            "use a day every month of the schedule has"
        )
    except (ValueError, KeyError) as exc:
        return f"is not valid: {exc}"
    return None


def check_path(value: Any, name: str = "path") -> str:
    """A file path given as text or ``os.PathLike``: not blank, no NUL byte."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be a file path (str or pathlib.Path), got {shown(value)}")
    if not value.strip():
        raise InvalidInput(f"{name} is empty; pass a file path")
    if "\x00" in value:
        raise InvalidInput(f"{name} holds a NUL byte: {shown(value)}")
    check_text(value, name)
    for part in value.split(os.sep):
        if len(part.encode("utf-8")) > MAX_FILE_NAME_BYTES:
            raise InvalidInput(
                f"{name} has a file or folder name of {len(part.encode('utf-8')):,} bytes, over "
                f"the {MAX_FILE_NAME_BYTES} file systems allow: {shown(value)}"
            )
    return value


def store_address(value: Any) -> str:
    """Where a store is, as ``Memory`` or ``--store`` is given it: a file path (``str``,
    ``os.PathLike`` or ``bytes``), ``":memory:"`` or a backend's address
    (``ducklake:...``), as the one ``str`` every later step uses.

    A leading ``~`` is expanded here, once, as the shell would: DuckDB expands it when
    it opens the file, but nbmemory's checks and the files it makes beside the store
    go through ``os.path``, which does not (``Memory('~/agent.duckdb')`` raised a raw
    ``FileNotFoundError`` after leaving ``$HOME/agent.duckdb`` and a temporary file
    there).  A ``~name`` that is no user's stays a folder of that name, made absolute
    (DuckDB would read ``~name/...`` as ``$HOME`` followed by ``name``).
    Bytes are decoded as the file system names them (:func:`os.fsdecode`).  A name
    that is not valid Unicode (a lone surrogate, as an undecodable byte decodes to)
    is refused: DuckDB cannot open it.  Empty paths, NUL bytes and the like are
    refused when the store opens (:func:`nbmemory.store.files.check_store_path`).
    """
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if isinstance(value, bytes):
        value = os.fsdecode(value)
    if not isinstance(value, str):
        raise InvalidInput(
            "the store must be a file path (str, pathlib.Path or bytes), ':memory:' or a "
            f"ducklake: address, got {shown(value)}"
        )
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput(
            f"the store path {value!r} is not valid Unicode (a lone surrogate at position "
            f"{exc.start}, as a byte the file system cannot decode becomes); DuckDB cannot "
            "open it: rename the file, or pass another path"
        ) from None
    if value.startswith("~"):
        expanded = os.path.expanduser(value)
        value = os.path.abspath(value) if expanded.startswith("~") else expanded
    return value


def check_names(values: Any, name: str) -> list[str]:
    """A list of names (ids, queries ...): one str is refused, so is a non-list."""
    if isinstance(values, (str, bytes)) or not isinstance(values, (list, tuple, set, frozenset)):
        raise InvalidInput(f"{name} must be a list of strings, got {shown(values)}")
    return [check_name(v, f"{name}[{i}]") for i, v in enumerate(values)]


def check_text(
    value: Any,
    name: str,
    *,
    max_bytes: int | None = None,
    allow_empty: bool = False,
    setting: str | None = None,
) -> str:
    """A str that encodes as UTF-8 (no lone surrogates) and, unless allowed, is not blank.

    Over ``max_bytes``, the error names ``setting`` (the one to raise), if any.
    """
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
        if name == "content":
            hint = " (Settings.max_content_bytes); split it into smaller memories"
        elif setting is not None:
            hint = f" (Settings.{setting}); shorten it, or raise the setting"
        else:
            hint = "; shorten it"
        given, limit = _size(size), _size(max_bytes)
        if given == limit:  # 1.0 MB over a 1.0 MB limit: the bytes say by how much
            given, limit = f"{size:,} bytes", f"{max_bytes:,}"
        raise InvalidInput(f"{name} is {given}, over the {limit} limit{hint}")
    return value


def _size(count: int) -> str:
    """A byte count a person reads at a glance: 4,097 bytes, 1.2 MB."""
    return f"{count:,} bytes" if count < 100_000 else f"{count / 1e6:.1f} MB"


def check_name(value: Any, name: str) -> str:
    """A non-empty identifier-like string (session, namespace, role): any text is allowed."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"{name} must be a non-empty string, got {shown(value)}")
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
        raise InvalidInput(f"{name} must be a datetime or ISO-8601 text, got {shown(value)}")
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


#: Largest metadata accepted, as stored JSON in UTF-8 bytes (``Settings.max_metadata_bytes``).
#: Metadata annotates a memory (a source, a speaker, tags): the 2,760 LoCoMo turns
#: the project loads carry 66 bytes of it at the median and 172 at most, so 64 KiB
#: leaves room several hundred times over while refusing a file or a transcript
#: pasted into a dict (that belongs in content, under ``max_content_bytes``).
MAX_METADATA_BYTES = 64 * 1024
#: Longest key of a JSON object a caller hands in (metadata, tool calls, session
#: state, macro arguments), in characters, at every depth (``Settings.max_key_chars``).
MAX_KEY_CHARS = 256
#: Deepest nesting of a JSON value a caller hands in (``Settings.max_json_depth``):
#: .NET's System.Text.Json default; deeper than any agent's metadata or tool call,
#: and far below the depth at which Python's json module runs out of stack.
MAX_JSON_DEPTH = 64


@dataclass(frozen=True)
class JsonLimits:
    """How large a JSON field may be: stored bytes (the setting that says so is named
    in the error), key length in characters and nesting depth."""

    max_bytes: int | None = MAX_METADATA_BYTES
    bytes_setting: str = "max_metadata_bytes"
    max_key_chars: int = MAX_KEY_CHARS
    max_depth: int = MAX_JSON_DEPTH


#: The limits of metadata with the default settings (``Settings.metadata_limits``).
METADATA_LIMITS = JsonLimits()


def check_json_size(text: str, name: str, limits: JsonLimits) -> str:
    """``text`` (JSON as stored) valid Unicode and within ``limits.max_bytes``."""
    check_text(text, name, allow_empty=True)  # e.g. a lone surrogate in a value
    if limits.max_bytes is not None and len(text) * 4 > limits.max_bytes:
        size = len(text.encode("utf-8"))
        if size > limits.max_bytes:
            raise InvalidInput(
                f"{name} is {_size(size)} of JSON, over the {_size(limits.max_bytes)} limit "
                f"(Settings.{limits.bytes_setting}); shorten it, or raise the setting"
            )
    return text


def check_json_shape(value: Any, name: str, limits: JsonLimits, text: str | None = None) -> None:
    """Every key of ``value`` (a JSON-serialisable value) at most ``limits.max_key_chars``
    characters, and no deeper than ``limits.max_depth``.  ``text``, its JSON, skips the
    walk when it is too short to break either limit (most metadata)."""
    if text is not None and len(text) <= min(limits.max_key_chars, 2 * limits.max_depth):
        return
    stack: list[tuple[Any, int, str]] = [(value, 1, name)]
    while stack:
        item, depth, path = stack.pop()
        children: Iterable[tuple[Any, Any]]
        if isinstance(item, Mapping):
            children = item.items()
        elif isinstance(item, (list, tuple)):
            children = enumerate(item)
        else:
            continue
        if depth > limits.max_depth:
            raise InvalidInput(
                f"{name} is nested more than {limits.max_depth} levels deep (at {path}), "
                f"over the limit (Settings.max_json_depth); flatten it"
            )
        for key, child in children:
            if isinstance(key, str) and len(key) > limits.max_key_chars:
                where = "" if path == name else f" in {path}"
                raise InvalidInput(
                    f"{name} key {key[:40]!r}...{where} is {len(key):,} characters, over "
                    f"the {limits.max_key_chars}-character limit (Settings.max_key_chars); "
                    "use a short key and put long text in the value"
                )
            if isinstance(child, (Mapping, list, tuple)):
                stack.append((child, depth + 1, f"{path}[{key!r}]"))


def dump_json(value: Any, name: str, limits: JsonLimits, *, sort_keys: bool = False) -> str:
    """``value`` as the JSON text stored for it, within ``limits``."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, sort_keys=sort_keys)
    except RecursionError:
        raise InvalidInput(
            f"{name} is nested more than {limits.max_depth} levels deep, over the limit "
            "(Settings.max_json_depth); flatten it"
        ) from None
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"{name} must be JSON-serialisable: {exc}") from None
    check_json_size(text, name, limits)
    check_json_shape(value, name, limits, text)
    return text


def load_json(text: str, name: str, limits: JsonLimits) -> Any:
    """JSON ``text`` a caller handed in, parsed after its size is checked
    (``json.JSONDecodeError`` when it is not JSON); its keys and depth are checked like
    a value's."""
    check_json_size(text, name, limits)
    try:
        value = json.loads(text)
    except RecursionError:
        raise InvalidInput(
            f"{name} is nested more than {limits.max_depth} levels deep, over the limit "
            "(Settings.max_json_depth); flatten it"
        ) from None
    check_json_shape(value, name, limits, text)
    return value


def dump_metadata(metadata: Any, limits: JsonLimits = METADATA_LIMITS) -> str | None:
    """Metadata as the JSON text stored with an event (None stays None)."""
    if metadata is None:
        return None
    if not isinstance(metadata, Mapping):
        raise InvalidInput(f"metadata must be a dict, got {type(metadata).__name__}")
    for key in metadata:
        if not isinstance(key, str):
            raise InvalidInput(f"metadata keys must be strings, got {key!r}")
        check_text(key, "metadata key", allow_empty=True)
    return dump_json(dict(metadata), "metadata", limits, sort_keys=True)


def parse_metadata(raw: Any) -> dict[str, Any]:
    """Stored metadata JSON as a dict (``{"_raw": text}`` when it is not JSON)."""
    if raw is None or (isinstance(raw, float) and math.isnan(raw)):
        return {}
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw)
    except (TypeError, ValueError, RecursionError):
        return {"_raw": raw}
    return value if isinstance(value, dict) else {"_value": value}


def dump_json_arg(value: Any, name: str, limits: JsonLimits | None = None) -> str | None:
    """``value`` as JSON text (text is kept as given, and checked when it is JSON);
    None stays None."""
    limits = limits or JsonLimits(None, "max_content_bytes")
    if value is None:
        return None
    if not isinstance(value, str):
        return dump_json(value, name, limits)
    check_json_size(value, name, limits)
    with contextlib.suppress(json.JSONDecodeError):
        load_json(value, name, limits)
    return value


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


def check_filter_value(key: str, value: Any) -> Any:
    """The value of an equality filter on a text column (every column ``filters=``
    reaches is text): a name, a non-empty list of names, or None (SQL NULL).  A number,
    a dict or a date would reach DuckDB as a value it cannot compare with text."""
    if value is None:
        return None
    if isinstance(value, str):
        return check_name(value, key)
    if isinstance(value, (list, tuple, set, frozenset)) and value:
        return [check_name(v, key) for v in value]
    raise InvalidInput(f"filter {key!r} takes a string or a list of strings, got {shown(value)}")


def scope_filters(filters: dict[str, Any] | None, **named: Any) -> dict[str, Any]:
    """Equality filters from ``filters=`` plus the named ones (session_id=, role= ...),
    each value checked by :func:`check_filter_value` (the keys by the store)."""
    if filters is not None and not isinstance(filters, Mapping):
        raise InvalidInput(f"filters must be a dict of column -> value, got {shown(filters)}")
    result = dict(filters or {})
    if "namespace" in result:
        raise InvalidInput("pass namespace=... rather than a namespace filter")
    for key, value in result.items():
        result[key] = check_filter_value(str(key), value)
    for key, value in named.items():
        if value is not None:
            result[key] = check_name(value, key)
    return result
