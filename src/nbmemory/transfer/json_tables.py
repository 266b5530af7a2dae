"""Facts, macros, scheduled tasks and allowed prefixes in an export (format version 2).

An export of a whole namespace carries its facts (current values; their history
and their vectors, a cache, stay behind), macros and scheduled tasks, and the
store's allowed terminal prefixes (which belong to no namespace); an export of one
session carries none of them.  Each row keeps every column, times as UTC text
like the events'.

Import: every row is checked as the API that makes it checks it (one bad row
refuses the whole file, naming it, e.g. ``facts[2]: key must be ...``); text goes
through redaction.  A row already in the target is left as it is, so importing
twice adds nothing: a fact with the same category and key in the namespace, a
macro with the same trigger and next step, a task with the same id in the
namespace, a prefix already allowed.  A fact or macro whose integer id the
target store uses already gets the next free one; a task id used by another
namespace gets a derived one, as an event's does.  A task keeps ``is_trusted`` and
an allowed prefix lets a command run without approval: import only files you
would have written yourself (see docs/reliability.md).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from ..core import Core
from ..errors import InvalidInput
from ..store.schema import FACTS, MACROS, SCHEDULED_TASKS, TERMINAL_ALLOWED_PREFIXES
from ..store.writer import Tx
from ..validation import (
    check_cron,
    check_name,
    check_text,
    check_unit_interval,
    is_missing,
    shown,
    to_utc,
)

#: The four tables, in the order they appear in the file.
TABLES = ("facts", "macros", "scheduled_tasks", "terminal_allowed_prefixes")
#: Columns exported per table (a fact's vector is a cache, recomputed when needed).
COLUMNS = {
    "facts": tuple(c for c in FACTS.names if c not in ("embedding", "embedding_model")),
    "macros": MACROS.names,
    "scheduled_tasks": SCHEDULED_TASKS.names,
    "terminal_allowed_prefixes": TERMINAL_ALLOWED_PREFIXES.names,
}
FACT_SOURCES = ("", "agent", "user", "consolidation")
TASK_SOURCES = ("tool", "config")
_TIMES = ("created_at", "updated_at", "next_run_at", "last_run_at")


def _out(value: Any, column: str) -> Any:
    if is_missing(value):
        return None
    if column in _TIMES:
        return str(value.isoformat(timespec="microseconds")) + "Z"
    return value.item() if hasattr(value, "item") else value


def export_tables(core: Core, namespace: str) -> dict[str, list[dict[str, Any]]]:
    """The rows of the four tables an export of ``namespace`` carries."""
    store = core.store
    sources = {
        "facts": store.facts.all_rows(namespace, COLUMNS["facts"]),
        "macros": store.macros.all_rows(namespace),
        "scheduled_tasks": store.tasks.all_rows(namespace),
        "terminal_allowed_prefixes": store.prefixes.all_rows(),
    }
    return {
        table: [{c: _out(row[c], c) for c in COLUMNS[table]} for row in rows]
        for table, rows in sources.items()
    }


# -- checks: each row as the API that makes it checks it -----------------------------------
def _time(item: dict[str, Any], name: str, *, required: bool = True) -> dt.datetime | None:
    value = item.get(name)
    if value is None:
        if required:
            raise InvalidInput(f"{name} is required")
        return None
    if not isinstance(value, (str, dt.datetime)):  # (a datetime: read from SQLite)
        raise InvalidInput(f"{name} must be ISO-8601 text, got {shown(value)}")
    return to_utc(value, name)


def _int(item: dict[str, Any], name: str) -> int:
    value = item.get(name)
    if type(value) is not int or value < 0 or value >= 2**31:
        raise InvalidInput(f"{name} must be a whole number from 0 to 2**31-1, got {shown(value)}")
    return value


def _unit(item: dict[str, Any], name: str) -> float:
    return check_unit_interval(item.get(name), name)  # 10**400 too (JSON has no limit)


def _flag(item: dict[str, Any], name: str) -> bool:
    value = item.get(name)
    if not isinstance(value, bool):
        raise InvalidInput(f"{name} must be true or false, got {shown(value)}")
    return value


def _text(item: dict[str, Any], name: str, max_bytes: int | None = None) -> str:
    return check_text(item.get(name), name, allow_empty=True, max_bytes=max_bytes)


def _fact(item: dict[str, Any], core: Core) -> dict[str, Any]:
    source = item.get("source")
    if source not in FACT_SOURCES:
        raise InvalidInput(f"source must be one of {FACT_SOURCES}, got {shown(source)}")
    return {
        "id": _int(item, "id"),
        "category": check_name(item.get("category"), "category"),
        "key": check_name(item.get("key"), "key"),
        "value": check_text(item.get("value"), "value", max_bytes=100_000),
        "source": source,
        "created_at": _time(item, "created_at"),
        "updated_at": _time(item, "updated_at"),
    }


def _macro(item: dict[str, Any], core: Core) -> dict[str, Any]:
    pattern = item.get("trigger_args_pattern")
    return {
        "id": _int(item, "id"),
        "trigger_tool": check_name(item.get("trigger_tool"), "trigger_tool"),
        "trigger_args_pattern": None
        if pattern is None
        else check_name(pattern, "trigger_args_pattern"),
        "next_tool": check_name(item.get("next_tool"), "next_tool"),
        "next_args": _text(item, "next_args", core.settings.max_content_bytes),
        "confidence": _unit(item, "confidence"),
        "used_count": _int(item, "used_count"),
        "created_at": _time(item, "created_at"),
        "updated_at": _time(item, "updated_at"),
    }


def _task(item: dict[str, Any], core: Core) -> dict[str, Any]:
    cron = check_cron(item.get("cron_expr"), "cron_expr")
    source = item.get("source")
    if source not in TASK_SOURCES:
        raise InvalidInput(f"source must be one of {TASK_SOURCES}, got {shown(source)}")
    return {
        "id": check_name(item.get("id"), "id"),
        "name": check_name(item.get("name"), "name"),
        "cron_expr": cron,
        "original_schedule": _text(item, "original_schedule", 4096),
        "prompt": check_text(
            item.get("prompt"), "prompt", max_bytes=core.settings.max_content_bytes
        ),
        "source": source,
        "is_oneshot": _flag(item, "is_oneshot"),
        "is_paused": _flag(item, "is_paused"),
        "is_trusted": _flag(item, "is_trusted"),
        "next_run_at": _time(item, "next_run_at"),
        "last_run_at": _time(item, "last_run_at", required=False),
        "created_at": _time(item, "created_at"),
        "updated_at": _time(item, "updated_at"),
    }


def _prefix(item: dict[str, Any], core: Core) -> dict[str, Any]:
    prefix = item.get("prefix")
    if not isinstance(prefix, str) or " ".join(prefix.split()) != prefix or not prefix:
        raise InvalidInput(f"prefix must be non-empty text with single spaces, got {shown(prefix)}")
    return {
        "prefix": check_text(prefix, "prefix", max_bytes=4096),
        "created_at": _time(item, "created_at", required=False),
    }


_CHECKS: dict[str, Callable[[dict[str, Any], Core], dict[str, Any]]] = {
    "facts": _fact,
    "macros": _macro,
    "scheduled_tasks": _task,
    "terminal_allowed_prefixes": _prefix,
}


def check_row(table: str, item: dict[str, Any], core: Core) -> dict[str, Any]:
    """One row of ``table`` (one of :data:`TABLES`) checked as the API that makes it
    checks it, its namespace aside; an export's or another agent's database's."""
    return _CHECKS[table](item, core)


def read_tables(
    core: Core, document: dict[str, Any], namespace: str | None
) -> dict[str, list[dict[str, Any]]]:
    """The four tables' rows of an export, checked (absent in version 1: none); rows of
    a namespace go to ``namespace`` when given, else to the one they name."""
    out: dict[str, list[dict[str, Any]]] = {}
    for table in TABLES:
        items = document.get(table, [])
        if not isinstance(items, list):
            raise InvalidInput(f"{table!r} must be a list")
        rows = []
        for index, item in enumerate(items):
            where = f"{table}[{index}]"
            if not isinstance(item, dict):
                raise InvalidInput(f"{where} is not an object")
            try:
                row = check_row(table, item, core)
                if table != "terminal_allowed_prefixes":
                    row["namespace"] = namespace or check_name(item.get("namespace"), "namespace")
            except (InvalidInput, ValueError) as exc:
                raise InvalidInput(f"{where}: {exc}") from None
            rows.append(row)
        out[table] = rows
    _no_repeats(out)
    return out


def _no_repeats(tables: dict[str, list[dict[str, Any]]]) -> None:
    keys: dict[str, Callable[[dict[str, Any]], Any]] = {
        "facts": lambda r: (r["namespace"], r["category"], r["key"]),
        "macros": lambda r: r["id"],
        "scheduled_tasks": lambda r: r["id"],
        "terminal_allowed_prefixes": lambda r: r["prefix"],
    }
    for table, key in keys.items():
        seen = [key(r) for r in tables[table]]
        if len(set(seen)) != len(seen):
            raise InvalidInput(f"the file repeats rows of {table}; it was not made by export")


# -- writing ---------------------------------------------------------------------------
def _macro_key(row: dict[str, Any]) -> tuple[Any, ...]:
    return (row["namespace"], row["trigger_tool"], row["trigger_args_pattern"], row["next_tool"],
            row["next_args"])  # fmt: skip


def insert_tables(
    tx: Tx, tables: dict[str, list[dict[str, Any]]], derived_id: Callable[[str, str], str]
) -> dict[str, tuple[int, int]]:
    """Insert the rows not yet in the target (see the module doc); returns per table
    (rows added, rows skipped as already present)."""
    stored = tx.facts.keys()  # (id, namespace, category, key)
    known = {k[1:] for k in stored}
    facts = [r for r in tables["facts"] if (r["namespace"], r["category"], r["key"]) not in known]
    present = {
        _macro_key(r)
        for ns in {r["namespace"] for r in tables["macros"]}
        for r in tx.macros.all_rows(ns)
    }
    macros = [r for r in tables["macros"] if _macro_key(r) not in present]
    _renumber(facts, tx.facts)
    _renumber(macros, tx.macros)
    tasks = _tasks(tx, tables["scheduled_tasks"], derived_id)
    allowed = tx.prefixes.existing(r["prefix"] for r in tables["terminal_allowed_prefixes"])
    prefixes = [r for r in tables["terminal_allowed_prefixes"] if r["prefix"] not in allowed]
    added = {
        "facts": tx.facts.insert_rows(facts),
        "macros": tx.macros.insert_rows(macros),
        "scheduled_tasks": tx.tasks.insert_rows(tasks),
        "terminal_allowed_prefixes": tx.prefixes.insert_rows(prefixes),
    }
    return {t: (added[t], len(tables[t]) - added[t]) for t in TABLES}


def _renumber(rows: list[dict[str, Any]], table: Any) -> None:
    """Give the rows whose id the target uses (or another row of the file) the next
    free ids past both."""
    taken = table.existing(r["id"] for r in rows)
    following = max([table.max_key(), *(r["id"] for r in rows)]) + 1
    for row in rows:
        if row["id"] in taken:
            row["id"] = following
            following += 1
        taken.add(row["id"])


def _tasks(
    tx: Tx, rows: list[dict[str, Any]], derived_id: Callable[[str, str], str]
) -> list[dict[str, Any]]:
    """Tasks not yet in their namespace; an id another namespace uses gets a derived one."""
    candidates = {r["id"] for r in rows} | {derived_id(r["namespace"], r["id"]) for r in rows}
    owners = {
        r["id"]: r["namespace"]
        for r in tx.tasks.all_rows(columns=("id", "namespace"))
        if r["id"] in candidates
    }
    kept = []
    for row in rows:
        alternative = derived_id(row["namespace"], row["id"])
        if row["namespace"] in (owners.get(row["id"]), owners.get(alternative)):
            continue
        if row["id"] in owners:
            row["id"] = alternative
        owners[row["id"]] = row["namespace"]
        kept.append(row)
    return kept
