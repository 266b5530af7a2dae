"""What every table object shares: its store, its declaration, and the checks of a write.

A table object (``store.events``, ``store.facts`` ...) keeps one table's SQL in
one place, in the spirit of sqlite-utils' ``db["facts"]``.  Reads run anywhere;
writes run only inside a transaction opened by the writer
(:class:`~nbmemory.store.writer.Writer`), which is how "every change is audited
and announced" holds for every write.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa

from .backend import TableHost
from .schema import Table


class TableObject:
    """Base of the table objects: the store, the table declaration, shared helpers."""

    table: Table

    def __init__(self, store: TableHost) -> None:
        self.store = store

    def _write(self) -> None:
        """Refuse a write outside a transaction (writes go through the writer)."""
        if not self.store.in_transaction:
            raise RuntimeError(
                f"internal: a write to {self.table.name} outside a transaction; "
                "writes go through Writer.transaction()"
            )

    def _redact(self, row: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        """``row`` with secrets removed from the columns the schema marks as user text."""
        redactor = self.store.redactor
        if redactor is None:
            return row
        out = dict(row)
        for name in self.table.user_text:
            value = out.get(name)
            if isinstance(value, str):
                out[name], count = redactor(value)
                if count:
                    self.store.count_redactions(namespace or out.get("namespace"), count)
        return out

    def _redact_rows(self, rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """``rows`` with secrets removed from the user-text columns (what :meth:`_redact`
        does to each; a row with nothing to remove is passed on as it is, not copied)."""
        redactor = self.store.redactor
        if redactor is None:
            return list(rows)
        out = list(rows)
        suspects = self.store.redaction_suspects
        for name in self.table.user_text:
            where = [i for i, row in enumerate(out) if isinstance(row.get(name), str)]
            if suspects is not None:  # one search of the batch finds the few to redact
                where = [where[k] for k in suspects([out[i][name] for i in where])]
            for index in where:
                row = out[index]
                value = row[name]
                text, count = redactor(value)
                if count or text != value:
                    if row is rows[index]:
                        row = out[index] = dict(row)
                    row[name] = text
                if count:
                    self.store.count_redactions(row.get("namespace"), count)
        return out

    def insert_rows(self, rows: Sequence[dict[str, Any]]) -> int:
        """Bulk insert through Arrow (by column name); returns the row count."""
        self._write()
        if not rows:
            return 0
        data = self.table.to_arrow([self._redact(r) for r in rows])
        self.store.statements.insert_arrow(self.table.name, data)
        return data.num_rows

    def existing(self, values: Iterable[Any], column: str | None = None) -> set[Any]:
        """Which of ``values`` are already in the key ``column`` (default: the table key)."""
        column = column or self.table.key[0]
        if column not in self.table.names:
            raise ValueError(column)
        wanted = list(values)
        if not wanted:
            return set()
        sql_type = "INTEGER" if pa.types.is_integer(self._type(column)) else "VARCHAR"
        rows = self.store.run(
            f"SELECT {column} FROM {self.table.name}"
            f" WHERE {column} IN (SELECT unnest(?::{sql_type}[]))",
            [wanted],
        )
        return {row[0] for row in rows}

    def all_rows(
        self, namespace: str | None = None, columns: Sequence[str] | None = None
    ) -> list[dict[str, Any]]:
        """Every row (of ``namespace`` when given) as a dict of ``columns`` (default: all
        declared), in key order: what an export writes."""
        names = list(columns or self.table.names)
        if set(names) - set(self.table.names):
            raise ValueError(f"unknown columns {set(names) - set(self.table.names)}")
        sql = f"SELECT {', '.join(names)} FROM {self.table.name}"
        params: list[Any] = []
        if namespace is not None:
            sql += " WHERE namespace = ?"
            params.append(namespace)
        rows: list[dict[str, Any]] = self.store.run(
            f"{sql} ORDER BY {', '.join(self.table.key)}", params, "records"
        )
        return rows

    def max_key(self) -> int:
        """The largest value of the (integer) key, 0 for an empty table: an import
        numbers a row whose id is taken past it."""
        rows = self.store.run(
            f"SELECT coalesce(max({self.table.key[0]}), 0) FROM {self.table.name}"
        )
        return int(rows[0][0])

    def _type(self, column: str) -> pa.DataType:
        return next(c.type for c in self.table.columns if c.name == column)

    def count(self) -> int:
        return int(self.store.run(f"SELECT count(*) FROM {self.table.name}")[0][0])
