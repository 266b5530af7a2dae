"""``store.macros``: learnt and hand-written tool -> next-tool chains."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import pandas as pd

from .schema import MACROS
from .table import TableObject

MACRO_COLUMNS = [
    "id",
    "trigger_tool",
    "trigger_args_pattern",
    "next_tool",
    "next_args",
    "confidence",
    "used_count",
    "created_at",
    "updated_at",
]

# Within each session, tool events in order form pairs "A then B"; a chain's
# confidence is how often B followed A over how often anything followed A, and
# its arguments are the ones B was last called with.
_LEARN_SQL = """
WITH tools AS (
    SELECT session_id, tool_name, created_at, seq,
           COALESCE(json_extract(metadata, '$.args')::VARCHAR, tool_calls_json) AS args
    FROM events WHERE namespace = ? AND role = 'tool' AND tool_name IS NOT NULL
), pairs AS (
    SELECT tool_name AS trigger_tool,
           lead(tool_name) OVER w AS next_tool,
           lead(args) OVER w AS next_args,
           lead(created_at) OVER w AS next_at,
           lead(seq) OVER w AS next_seq
    FROM tools WINDOW w AS (PARTITION BY session_id ORDER BY created_at, seq)
)
SELECT trigger_tool, next_tool, count(*) AS observed,
       COALESCE(arg_max(next_args, (next_at, next_seq)), '') AS next_args,
       count(*) / sum(count(*)) OVER (PARTITION BY trigger_tool) AS confidence
FROM pairs WHERE next_tool IS NOT NULL
GROUP BY trigger_tool, next_tool
ORDER BY trigger_tool, next_tool
"""


class MacrosTable(TableObject):
    table = MACROS

    # -- reads ------------------------------------------------------------------------
    def observed(self, namespace: str) -> list[tuple[str, str, int, str, float]]:
        """(trigger, next tool, times seen, next args, confidence) from the tool events."""
        rows: list[tuple[str, str, int, str, float]] = self.store.run(_LEARN_SQL, [namespace])
        return rows

    def tool_stamp(self, namespace: str) -> tuple:
        """A cheap fingerprint of the namespace's tool events (changes when they do)."""
        return tuple(
            self.store.run(
                "SELECT count(*), max(created_at), bit_xor(hash(id, tool_name, metadata))"
                " FROM events WHERE namespace = ? AND role = 'tool' AND tool_name IS NOT NULL",
                [namespace],
            )[0]
        )

    def learnt(self, namespace: str) -> dict[tuple[str, str], tuple[int, str, float]]:
        """(trigger, next tool) -> (id, next args, confidence) of the learnt macros."""
        return {
            (r[1], r[2]): (r[0], r[3], r[4])
            for r in self.store.run(
                "SELECT id, trigger_tool, next_tool, next_args, confidence FROM macros"
                " WHERE namespace = ? AND trigger_args_pattern IS NULL",
                [namespace],
            )
        }

    def frame(self, namespace: str, trigger_tool: str | None = None) -> pd.DataFrame:
        """Macros, most confident first."""
        sql = f"SELECT {', '.join(MACRO_COLUMNS)} FROM macros WHERE namespace = ?"
        params: list[Any] = [namespace]
        if trigger_tool is not None:
            sql += " AND trigger_tool = ?"
            params.append(trigger_tool)
        frame: pd.DataFrame = self.store.run(
            sql + " ORDER BY trigger_tool, confidence DESC, used_count DESC, id", params, "df"
        )
        return frame

    def candidates(
        self, namespace: str, trigger_tool: str, min_confidence: float
    ) -> list[dict[str, Any]]:
        """Macros for a trigger, most confident (then most used, newest) first: learnt
        ones still observed (confidence above 0) and every hand-written one (whose
        confidence starts at 0 and grows with use)."""
        rows: list[dict[str, Any]] = self.store.run(
            f"SELECT {', '.join(MACRO_COLUMNS)} FROM macros WHERE namespace = ?"
            " AND trigger_tool = ? AND (confidence > 0 OR trigger_args_pattern IS NOT NULL)"
            " AND confidence >= ?"
            " ORDER BY confidence DESC, used_count DESC, updated_at DESC, id",
            [namespace, trigger_tool, min_confidence],
            "records",
        )
        return rows

    # -- writes -----------------------------------------------------------------------
    def add(
        self,
        namespace: str,
        trigger_tool: str,
        next_tool: str,
        next_args: str,
        confidence: float,
        now: dt.datetime,
        trigger_args_pattern: str | None = None,
    ) -> int:
        """Insert one macro; returns its id."""
        self._write()
        next_args = self._redact({"next_args": next_args}, namespace)["next_args"]
        row = {
            "namespace": namespace,
            "trigger_tool": trigger_tool,
            "trigger_args_pattern": trigger_args_pattern,
            "next_tool": next_tool,
            "next_args": next_args,
            "confidence": confidence,
            "created_at": now,
            "updated_at": now,
        }
        rows = self.store.statements.insert("macros", row, returning=("id",))
        return int(rows[0][0])

    def relearn(self, macro_id: int, next_args: str, confidence: float, now: dt.datetime) -> None:
        self._write()
        self.store.statements.update(
            "macros",
            "next_args = ?, confidence = ?, updated_at = ?",
            [next_args, float(confidence), now],
            "id = ?",
            [macro_id],
        )

    def use(self, macro_id: int, namespace: str, now: dt.datetime, growth: float) -> int | None:
        """Count one use; a hand-written macro's confidence moves ``growth`` of the way
        to 1 (a learnt one's is what learning observed).  Returns the new
        ``used_count`` (None: no such macro)."""
        self._write()
        rows = self.store.statements.update(
            "macros",
            "used_count = used_count + 1, updated_at = ?, confidence = CASE WHEN"
            " trigger_args_pattern IS NULL THEN confidence"
            " ELSE confidence + (1.0 - confidence) * ? END",
            [now, float(growth)],
            "id = ? AND namespace = ?",
            [macro_id, namespace],
            returning=("used_count",),
        )
        return int(rows[0][0]) if rows else None

    def delete(self, macro_id: int, namespace: str) -> bool:
        self._write()
        rows = self.store.statements.delete(
            "macros", "id = ? AND namespace = ?", [macro_id, namespace], returning=("id",)
        )
        return bool(rows)

    def insert_rows(self, rows: Sequence[dict[str, Any]]) -> int:
        """Bulk insert with ids (an import); the id sequence moves past them."""
        count = super().insert_rows(rows)
        if rows:
            self.store.advance_ids("macros_id_seq", max(int(r["id"]) for r in rows))
        return count
