"""The store's writes on DuckLake: ``RETURNING`` and ``ON CONFLICT`` done by key.

DuckLake (extension 1.5) refuses ``RETURNING`` on inserts, updates and deletes,
and has no keys for ``ON CONFLICT`` nor sequences for ids.  So a lake runs each
write of :class:`~..statements.Statements` as a short sequence in the caller's
transaction: pick the keys of the rows it touches (with its own ``WHERE``),
change exactly those rows, and read back the columns asked for.  The keys are
those :data:`..schema.TABLES` declares.  New ``facts``/``macros`` ids come from
the lake's counter and ``events.seq`` from :meth:`LakeStore.next_seq`, so an
insert usually knows what it returns without reading it back.

A lake reads ``events`` through a view that adds each event's vector model
(:mod:`.store`); every write here goes to the table itself, ``lake.main.<table>``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pyarrow as pa

from ..schema import TABLES
from ..statements import ARROW_VIEW, Register, Rows, Run, update_sql, values_sql


class LakeStatements:
    """:class:`~..statements.Statements` on a lake (see the module's docstring)."""

    def __init__(
        self,
        run: Run,
        register: Register,
        lake: str,
        small_id: Callable[[], int],
        next_seq: Callable[[], int],
    ) -> None:
        self._run = run
        self._register = register
        self._lake = lake
        #: Columns a lake fills in itself: table -> column -> where the value comes from.
        self._generated: dict[str, dict[str, Callable[[], int]]] = {
            "facts": {"id": small_id},
            "macros": {"id": small_id},
            "events": {"seq": next_seq},
        }

    def target(self, table: str) -> str:
        """The table itself (``events`` read by name is the lake's view)."""
        return f"{self._lake}.main.{table}"

    def insert(
        self,
        table: str,
        row: Mapping[str, Any],
        *,
        returning: Sequence[str] = (),
        if_absent: bool = False,
        placeholders: Mapping[str, str] | None = None,
    ) -> Rows:
        values = dict(row)
        for column, make in self._generated.get(table, {}).items():
            if column not in values:
                values[column] = make()
        keys = TABLES[table].key
        insert_sql = f"INSERT INTO {self.target(table)} {values_sql(list(values), placeholders)}"
        if not keys or not all(k in values for k in keys):  # no key, or one the DDL defaults
            if if_absent or returning:
                raise ValueError(f"internal: an insert into {table} needs its key {keys}")
            self._run(insert_sql, list(values.values()))
            return []
        match, match_params = _by_keys(table, [tuple(values[k] for k in keys)])
        if if_absent and self._run(f"SELECT 1 FROM {table} WHERE {match}", match_params):
            return []
        self._run(insert_sql, list(values.values()))
        if not returning:
            return []
        computed = placeholders or {}
        if all(c in values and c not in computed for c in returning):  # known: no read back
            return [tuple(values[c] for c in returning)]
        return self._run(f"SELECT {', '.join(returning)} FROM {table} WHERE {match}", match_params)

    def insert_arrow(self, table: str, data: pa.Table, *, returning: Sequence[str] = ()) -> Rows:
        with self._register(ARROW_VIEW, data) as view:
            self._run(f"INSERT INTO {self.target(table)} BY NAME SELECT * FROM {view}", [])
        if not returning or data.num_rows == 0:
            return []
        keys = TABLES[table].key
        chosen = list(zip(*(data.column(k).to_pylist() for k in keys), strict=True))
        match, match_params = _by_keys(table, chosen)
        return self._run(f"SELECT {', '.join(returning)} FROM {table} WHERE {match}", match_params)

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
        if not returning:
            sql = update_sql(self.target(table), set_sql, from_, where_sql)
            self._run(sql, [*set_params, *where_params])
            return []
        chosen = self._keys_of(table, where_sql, where_params, from_)
        if not chosen:
            return []
        match, match_params = _by_keys(table, chosen)
        if from_:  # the joined rows give the new values: join them again, on these keys
            condition = f"({where_sql}) AND {match}" if where_sql else match
            params = [*set_params, *where_params, *match_params]
        else:
            condition, params = match, [*set_params, *match_params]
        self._run(update_sql(self.target(table), set_sql, from_, condition), params)
        return self._run(f"SELECT {', '.join(returning)} FROM {table} WHERE {match}", match_params)

    def delete(
        self,
        table: str,
        where_sql: str,
        where_params: Sequence[Any] = (),
        *,
        returning: Sequence[str] = (),
    ) -> Rows:
        if not returning:
            self._run(f"DELETE FROM {self.target(table)} WHERE {where_sql}", where_params)
            return []
        chosen = self._keys_of(table, where_sql, where_params, None)
        if not chosen:
            return []
        match, match_params = _by_keys(table, chosen)
        rows = self._run(f"SELECT {', '.join(returning)} FROM {table} WHERE {match}", match_params)
        self._run(f"DELETE FROM {self.target(table)} WHERE {match}", match_params)
        return rows

    def _keys_of(
        self, table: str, where_sql: str, where_params: Sequence[Any], from_: str | None
    ) -> Rows:
        """The keys of the rows ``WHERE where_sql`` touches (``from_`` joined as UPDATE
        ... FROM joins it)."""
        keys = ", ".join(f"{table}.{k}" for k in TABLES[table].key)
        source = table + (f", {from_}" if from_ else "")
        where = f" WHERE {where_sql}" if where_sql else ""
        return self._run(f"SELECT DISTINCT {keys} FROM {source}{where}", list(where_params))


def _by_keys(table: str, chosen: Sequence[tuple[Any, ...]]) -> tuple[str, list[Any]]:
    """A condition matching exactly the rows with these keys, and its one parameter."""
    keys = TABLES[table].key
    if len(keys) == 1:
        column = TABLES[table].columns[TABLES[table].names.index(keys[0])]
        sql_type = "BIGINT" if str(column.type).startswith("int") else "VARCHAR"
        return f"{table}.{keys[0]} IN (SELECT unnest(?::{sql_type}[]))", [[r[0] for r in chosen]]
    joined = " || chr(31) || ".join(f"{table}.{k}" for k in keys)
    return f"({joined}) IN (SELECT unnest(?::VARCHAR[]))", [
        ["\x1f".join(str(v) for v in r) for r in chosen]
    ]
