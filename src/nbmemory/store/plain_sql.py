"""The escape hatch: plain SQL on a store, for tests, research and the curious.

``store.execute``/``fetchall``/``fetchone``/``df``/``records`` run one statement
under the store's lock.  SQL that DuckDB parses as anything but ``SELECT`` may
have changed any row: it waits for a write beside the caller's (the rows lock),
and every cache is told that anything may have changed (it rebuilds).  On a
lake the SQL runs as written (``events`` by name is a view there: write to
``lake.main.events``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import duckdb
import pandas as pd

Params = Sequence[Any] | dict[str, Any] | None


class PlainSQL:
    """Plain SQL on the store this is mixed into (its ``run``, locks and ``mark_stale``)."""

    _lock: Any

    def run(self, sql: str, params: Params = None, fetch: str = "rows") -> Any:
        raise NotImplementedError

    def mark_stale(self) -> None:
        raise NotImplementedError

    def _rows_held(self) -> contextlib.AbstractContextManager[Any]:
        raise NotImplementedError

    def _raw(self, sql: str, params: Params, fetch: str) -> Any:
        reads = _reads_only(sql)
        # plain SQL that writes may change any row: it waits for a write beside (rows lock)
        with contextlib.nullcontext() if reads else self._rows_held(), self._lock:
            result = self.run(sql, params, fetch)
            if not reads:
                self.mark_stale()
            return result

    def execute(self, sql: str, params: Params = None) -> None:
        """Run one statement, discarding any result (plain SQL for tests and research)."""
        self._raw(sql, params, "rows")

    def fetchall(self, sql: str, params: Params = None) -> list[tuple]:
        """Run one statement and return every row."""
        rows: list[tuple] = self._raw(sql, params, "rows")
        return rows

    def fetchone(self, sql: str, params: Params = None) -> Any:
        rows = self.fetchall(sql, params)
        return rows[0] if rows else None

    def df(self, sql: str, params: Params = None) -> pd.DataFrame:
        """Run one statement and return a pandas DataFrame."""
        frame: pd.DataFrame = self._raw(sql, params, "df")
        return frame

    def records(self, sql: str, params: Params = None) -> list[dict[str, Any]]:
        """Rows as dicts (column name -> Python value)."""
        rows: list[dict[str, Any]] = self._raw(sql, params, "records")
        return rows


def _reads_only(sql: str) -> bool:
    """Whether DuckDB parses ``sql`` as nothing but SELECT statements."""
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error:
        return False
    return all(s.type == duckdb.StatementType.SELECT for s in statements)


def fetched(cursor: duckdb.DuckDBPyConnection, fetch: str) -> Any:
    """The whole result on ``cursor`` as ``fetch`` asks: rows, records (dicts) or a DataFrame."""
    if fetch == "df":
        return cursor.df()
    rows = cursor.fetchall()
    if fetch == "records":
        names = [d[0] for d in cursor.description or []]
        return [dict(zip(names, row, strict=True)) for row in rows]
    return rows
