"""``store.vectors`` on a lake: a vector is an append, never an update of its event.

On a file the worker marks the event row (``events.embedding_model``) in the
same transaction as it appends the vector.  On a lake an update of ``events``
would conflict with every other writer's inserts, so the mark is not written:
the lake's ``events`` view reads the model from ``event_vectors`` itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..changes import Change
from ..vectors import EventVectors

#: The tables themselves (``events`` read by name is the lake's view).
LAKE_EVENTS = "lake.main.events"
LAKE_VECTORS = "lake.main.event_vectors"


class LakeEventVectors(EventVectors):
    def _mark(self, view: str, model: str) -> list[tuple[str, str, bool]]:
        """The events of ``view`` that still hold that text and have no vector yet (or,
        split into several passages, only ``model``'s one whole-text vector: replaced).

        Nothing is written on the rows (the view reads the model from the vectors);
        a recorded failure is cleared.  The check reads the transaction's snapshot:
        an edit of the text committed meanwhile deletes from ``event_vectors``,
        which DuckLake reports as a conflict with this append, so a vector of an
        old text is never kept.
        """
        # the tables themselves, not the view: only these ids' vectors are read
        rows = self.store.run(
            "SELECT e.id, e.namespace, e.embedding_error IS NOT NULL, x.n IS NOT NULL"
            f" FROM {LAKE_EVENTS} e JOIN {view} v ON e.id = v.id AND e.content = v.content"
            " LEFT JOIN (SELECT id, count(*) AS n, count(passage) AS split,"
            f" bool_and(model = ?) AS same FROM {LAKE_VECTORS}"
            f" WHERE id IN (SELECT id FROM {view}) GROUP BY id) x ON x.id = e.id"
            " WHERE x.n IS NULL OR (v.passages > 1 AND x.split = 0 AND x.same)",
            [model],
        )
        failed = [r[0] for r in rows if r[2]]
        if failed:
            self.store.statements.update(
                "events",
                "embedding_error = NULL",
                [],
                "id IN (SELECT unnest(?::VARCHAR[]))",
                [failed],
            )
        return [(r[0], r[1], bool(r[3])) for r in rows]

    def forget(self, ids: Sequence[str]) -> None:
        self._write()
        if ids:
            self.drop(ids)
            self.store.changed(Change(unvectored=list(ids)))

    def clear_vectors_not_of(self, model: str, namespace: str | None) -> list[tuple[str, str]]:
        self._write()
        sql = (
            "SELECT id, content FROM events WHERE content IS NOT NULL"
            " AND (embedding_model IS DISTINCT FROM ? OR embedding_error IS NOT NULL)"
        )
        params: list[Any] = [model]
        if namespace is not None:
            sql += " AND namespace = ?"
            params.append(namespace)
        rows = [(r[0], r[1]) for r in self.store.run(sql, params)]
        if rows:
            ids = [r[0] for r in rows]
            self.store.statements.update(
                "events",
                "embedding_error = NULL",
                [],
                "embedding_error IS NOT NULL AND id IN (SELECT unnest(?::VARCHAR[]))",
                [ids],
            )
            self.drop(ids)
            self.store.changed(Change(unvectored=ids, to_embed=rows))
        return rows
