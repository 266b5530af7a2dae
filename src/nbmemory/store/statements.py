"""The writes whose SQL differs between backends, as structured calls, not SQL text.

A table object never writes ``RETURNING``, ``ON CONFLICT`` or ``INSERT ... BY
NAME`` itself: it hands the parts of the statement (the table, the row, the
``SET`` and ``WHERE`` fragments with their parameters, the columns it wants
back) to its store's :class:`Statements`.  Each backend implements them once:

* :class:`FileStatements` (a DuckDB file, shared or not, and any plain DuckDB):
  one native statement each, ``... RETURNING`` and ``ON CONFLICT DO NOTHING``;
* :class:`~.lake.keyed_writes.LakeStatements` (DuckLake, which has neither, nor
  keys or sequences): pick the keys of the rows touched with the same ``WHERE``,
  change exactly those rows, read back the returned columns.

The fragments are our own SQL with ``?`` placeholders (the same on every
backend); what differs is only how the statement around them is made.  Every
call runs inside the caller's transaction and returns the returned columns as
rows of tuples (``[]`` when nothing was asked back).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import pyarrow as pa

Rows = list[tuple[Any, ...]]
#: Runs one parameterised statement and fetches its rows (the store's ``run``).
Run = Callable[[str, Sequence[Any]], Rows]
#: Makes an Arrow table visible to SQL under a name while a block runs.
Register = Callable[[str, pa.Table], Any]

#: The view an Arrow insert reads its rows from.
ARROW_VIEW = "_nbmemory_rows"


class Statements(Protocol):
    """The writes a backend runs its own way (all in the caller's transaction)."""

    def insert(
        self,
        table: str,
        row: Mapping[str, Any],
        *,
        returning: Sequence[str] = (),
        if_absent: bool = False,
        placeholders: Mapping[str, str] | None = None,
    ) -> Rows:
        """Insert one row (column -> value); returns the ``returning`` columns of it.

        ``if_absent``: when a row with the same key is there, insert nothing and
        return ``[]``.  ``placeholders`` gives a column's value as an expression
        of one ``?`` (e.g. ``make_timestamp(?)`` for epoch microseconds)."""
        ...

    def insert_arrow(self, table: str, data: pa.Table, *, returning: Sequence[str] = ()) -> Rows:
        """Insert the rows of ``data`` by column name; returns their ``returning`` columns."""
        ...

    def update(
        self,
        table: str,
        set_sql: str,
        set_params: Sequence[Any] = (),
        where_sql: str = "",
        where_params: Sequence[Any] = (),
        *,
        returning: Sequence[str] = (),
        from_: str | None = None,
    ) -> Rows:
        """``UPDATE table SET set_sql [FROM from_] [WHERE where_sql]``; returns the
        ``returning`` columns of the rows changed (as they are after the change)."""
        ...

    def delete(
        self,
        table: str,
        where_sql: str,
        where_params: Sequence[Any] = (),
        *,
        returning: Sequence[str] = (),
    ) -> Rows:
        """``DELETE FROM table WHERE where_sql``; returns the ``returning`` columns of
        the rows deleted (as they were)."""
        ...


def values_sql(columns: Sequence[str], placeholders: Mapping[str, str] | None) -> str:
    """``(a, b) VALUES (?, make_timestamp(?))`` for ``columns``."""
    shown = placeholders or {}
    return f"({', '.join(columns)}) VALUES ({', '.join(shown.get(c, '?') for c in columns)})"


def update_sql(target: str, set_sql: str, from_: str | None, where_sql: str) -> str:
    """``UPDATE target SET set_sql [FROM from_] [WHERE where_sql]``."""
    sql = f"UPDATE {target} SET {set_sql}"
    if from_:
        sql += f" FROM {from_}"
    return sql + (f" WHERE {where_sql}" if where_sql else "")


def returning_sql(returning: Sequence[str]) -> str:
    return f" RETURNING {', '.join(returning)}" if returning else ""


class FileStatements:
    """:class:`Statements` in DuckDB's own SQL: one statement each."""

    def __init__(self, run: Run, register: Register) -> None:
        self._run = run
        self._register = register

    def insert(
        self,
        table: str,
        row: Mapping[str, Any],
        *,
        returning: Sequence[str] = (),
        if_absent: bool = False,
        placeholders: Mapping[str, str] | None = None,
    ) -> Rows:
        sql = f"INSERT INTO {table} {values_sql(list(row), placeholders)}"
        if if_absent:
            sql += " ON CONFLICT DO NOTHING"
        return self._rows(self._run(sql + returning_sql(returning), list(row.values())), returning)

    def insert_arrow(self, table: str, data: pa.Table, *, returning: Sequence[str] = ()) -> Rows:
        with self._register(ARROW_VIEW, data) as view:
            sql = f"INSERT INTO {table} BY NAME SELECT * FROM {view}" + returning_sql(returning)
            return self._rows(self._run(sql, []), returning)

    def update(
        self,
        table: str,
        set_sql: str,
        set_params: Sequence[Any] = (),
        where_sql: str = "",
        where_params: Sequence[Any] = (),
        *,
        returning: Sequence[str] = (),
        from_: str | None = None,
    ) -> Rows:
        sql = update_sql(table, set_sql, from_, where_sql) + returning_sql(returning)
        rows = self._run(sql, [*set_params, *where_params])
        return self._rows(rows, returning)

    def delete(
        self,
        table: str,
        where_sql: str,
        where_params: Sequence[Any] = (),
        *,
        returning: Sequence[str] = (),
    ) -> Rows:
        sql = f"DELETE FROM {table} WHERE {where_sql}" + returning_sql(returning)
        return self._rows(self._run(sql, list(where_params)), returning)

    @staticmethod
    def _rows(rows: Rows, returning: Sequence[str]) -> Rows:
        """The returned rows; ``[]`` when none were asked for (not DuckDB's row count)."""
        return rows if returning else []
