"""Our SQL as DuckLake runs it: ``RETURNING`` and ``ON CONFLICT`` done by hand.

DuckLake (extension 1.5) refuses ``RETURNING`` on inserts, updates and deletes,
and has no keys for ``ON CONFLICT``.  The store's statements are few and of a
fixed shape, so a lake runs each as a short sequence in one transaction: pick
the keys of the rows the statement touches (with its own ``WHERE``), change
exactly those rows, and read back the columns it returned.  The keys are those
:data:`..schema.TABLES` declares.

A lake also reads ``events`` through a view that adds each event's vector model
(:mod:`.store`); writes go to the table itself, ``lake.main.events``.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Sequence
from typing import Any

from ..schema import TABLES

#: The one statement of ours of each verb, in the parts that matter here.
_STATEMENT = re.compile(
    r"^\s*(?P<verb>INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+(?P<table>\w+)\b(?P<body>.*?)"
    r"(?:\s+ON\s+CONFLICT\s+DO\s+NOTHING)?(?P<nothing>)"
    r"(?:\s+RETURNING\s+(?P<returning>.+?))?\s*$",
    re.S | re.I,
)
_ON_CONFLICT_NOTHING = re.compile(r"\s+ON\s+CONFLICT\s+DO\s+NOTHING\b", re.I)
_WHERE = re.compile(r"\sWHERE\s", re.I)
_COLUMNS = re.compile(r"^\s*\((?P<columns>[^)]*)\)\s*VALUES\s*\(", re.S | re.I)

Run = Callable[[str, Sequence[Any]], list[tuple]]


class Translated:
    """What :func:`run` needs from the store: how to run SQL, the lake's name, new ids."""

    def __init__(
        self, run: Run, lake: str, small_id: Callable[[], int], next_seq: Callable[[], int]
    ) -> None:
        self.run = run
        self.lake = lake
        self.small_id = small_id
        self.next_seq = next_seq


def target(lake: str, table: str) -> str:
    """The table itself (``events`` read by name is the lake's view)."""
    return f"{lake}.main.{table}"


def needs_translation(sql: str) -> bool:
    head = sql.lstrip()[:12].upper()
    return head.startswith(("INSERT", "UPDATE", "DELETE"))


def run(t: Translated, sql: str, params: Sequence[Any]) -> list[tuple]:
    """Run one of our write statements on a lake (inside the caller's transaction)."""
    found = _STATEMENT.match(sql)
    if found is None or found.group("table") not in TABLES:
        return t.run(sql, params)
    verb = found.group("verb").split()[0].upper()
    table = TABLES[found.group("table")]
    body = found.group("body")
    returning = found.group("returning")
    do_nothing = bool(_ON_CONFLICT_NOTHING.search(sql))
    name = target(t.lake, table.name)
    if verb == "INSERT":
        return _insert(t, table.name, name, body, list(params), returning, do_nothing)
    if not returning:
        return t.run(f"{'UPDATE' if verb == 'UPDATE' else 'DELETE FROM'} {name}{body}", params)
    keys = list(TABLES[table.name].key)
    where = _WHERE.search(body)
    if where is None:
        head, condition, tail_params = body, "", []
        head_params = list(params)
    else:
        head, condition = body[: where.start()], body[where.end() :]
        split = head.count("?")
        head_params, tail_params = list(params[:split]), list(params[split:])
    key_sql = ", ".join(f"{table.name}.{k}" for k in keys)
    source = table.name
    set_part = ""
    if verb == "UPDATE":
        set_part, _, from_part = _split_from(head)
        if from_part:
            source += ", " + from_part
    chosen = t.run(
        f"SELECT DISTINCT {key_sql} FROM {source}" + (f" WHERE {condition}" if condition else ""),
        tail_params,
    )
    if not chosen:
        return []
    match, match_params = _by_keys(table.name, keys, chosen)
    if verb == "DELETE":
        rows = t.run(f"SELECT {returning} FROM {table.name} WHERE {match}", match_params)
        t.run(f"DELETE FROM {name} WHERE {match}", match_params)
        return rows
    t.run(f"UPDATE {name}{set_part} WHERE {match}", [*head_params, *match_params])
    return t.run(f"SELECT {returning} FROM {table.name} WHERE {match}", match_params)


def _split_from(head: str) -> tuple[str, str, str]:
    """``SET ... FROM v`` -> (" SET ...", " FROM ", "v")."""
    found = re.search(r"\sFROM\s", head, re.I)
    if found is None:
        return head, "", ""
    return head[: found.start()], found.group(0), head[found.end() :].strip()


def _by_keys(table: str, keys: list[str], chosen: list[tuple]) -> tuple[str, list[Any]]:
    if len(keys) == 1:
        column = TABLES[table].columns[TABLES[table].names.index(keys[0])]
        sql_type = "BIGINT" if str(column.type).startswith("int") else "VARCHAR"
        return f"{table}.{keys[0]} IN (SELECT unnest(?::{sql_type}[]))", [[r[0] for r in chosen]]
    joined = " || chr(31) || ".join(f"{table}.{k}" for k in keys)
    return f"({joined}) IN (SELECT unnest(?::VARCHAR[]))", [
        ["\x1f".join(str(v) for v in r) for r in chosen]
    ]


_TIMESTAMP_PARAM = "make_timestamp(?)"


def _known_values(body: str, columns: list[str], params: list[Any]) -> dict[str, Any] | None:
    """column -> value of a one-row ``VALUES`` of plain ``?`` (and epoch-microsecond
    ``make_timestamp(?)``) placeholders; None for anything else."""
    inner = body[body.upper().index("VALUES") + len("VALUES") :].strip()
    if not (inner.startswith("(") and inner.endswith(")")):
        return None
    items = [i.strip() for i in inner[1:-1].split(",")]
    if len(items) != len(columns) or len(params) != len(columns):
        return None
    known: dict[str, Any] = {}
    for column, item, value in zip(columns, items, params, strict=True):
        if item == "?":
            known[column] = value
        elif item == _TIMESTAMP_PARAM and (value is None or isinstance(value, int)):
            known[column] = None if value is None else _EPOCH + dt.timedelta(microseconds=value)
        else:
            return None
    return known


_EPOCH = dt.datetime(1970, 1, 1)


def _insert(
    t: Translated,
    table: str,
    name: str,
    body: str,
    params: list[Any],
    returning: str | None,
    do_nothing: bool,
) -> list[tuple]:
    body = _ON_CONFLICT_NOTHING.sub("", body)
    keys = list(TABLES[table].key)
    values = _COLUMNS.match(body)
    if values is None and re.match(r"\s*VALUES\s*\(", body, re.I):  # every column, in order
        body = f" ({', '.join(TABLES[table].names)}){body}"
        values = _COLUMNS.match(body)
    if values is None:  # INSERT ... BY NAME SELECT * FROM <view>: its keys come from the view
        view = body.split()[-1]
        t.run(f"INSERT INTO {name}{body}", params)
        if not returning:
            return []
        match, match_params = _by_keys(
            table, keys, t.run(f"SELECT {', '.join(keys)} FROM {view}", [])
        )
        return t.run(f"SELECT {returning} FROM {table} WHERE {match}", match_params)
    columns = [c.strip() for c in values.group("columns").split(",")]
    if table in ("facts", "macros") and "id" not in columns:  # small ids come from a counter
        columns.insert(0, "id")
        params.insert(0, t.small_id())
        body = f" ({', '.join(columns)}) VALUES (?, " + body[values.end() :]
    if table == "events" and "seq" not in columns:  # known here: returned without a read
        columns.append("seq")
        params.append(t.next_seq())
        body = f" ({', '.join(columns)}) VALUES (" + body[values.end() :].rstrip()[:-1] + ", ?)"
    if not all(k in columns for k in keys):
        t.run(f"INSERT INTO {name}{body}", params)
        return []
    known = _known_values(body, columns, params)
    if returning and known is not None and not do_nothing:
        wanted = [c.strip() for c in returning.split(",")]
        if all(c in known for c in wanted):
            t.run(f"INSERT INTO {name}{body}", params)
            return [tuple(known[c] for c in wanted)]
    key_values = [tuple(params[columns.index(k)] for k in keys)]
    match, match_params = _by_keys(table, keys, key_values)
    if do_nothing and t.run(f"SELECT 1 FROM {table} WHERE {match}", match_params):
        return []
    t.run(f"INSERT INTO {name}{body}", params)
    if not returning:
        return []
    return t.run(f"SELECT {returning} FROM {table} WHERE {match}", match_params)
