"""Macros (seed 000): learnt tool -> next-tool chains an agent can replay.

The seed created the ``macros`` table and never filled it; here it is learnt from
the tool events the store holds.  Within each session, the tool events
(``role="tool"`` with a ``tool_name``) in order form pairs *A then B*; a macro
``A -> B`` has ``confidence`` = how often B followed A / how often anything
followed A, and ``next_args`` = the arguments B was last called with (the event's
``metadata["args"]``, else its ``tool_calls_json``).  ``used_count`` counts the
times an agent said it used the suggestion (:meth:`MacrosMixin.record_macro_use`).
Hand-written macros (``add_macro``, optionally with an fnmatch
``trigger_args_pattern``) are kept as given and never relearnt.
"""

from __future__ import annotations

import fnmatch
import json
from typing import Any

import pandas as pd

from . import events as ev
from .config import check_limit, check_unit_interval
from .errors import InvalidInput
from .facts import table_frame

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


def _parse_args(text: str | None) -> Any:
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def _args_text(args: Any) -> str:
    if args is None:
        return ""
    if isinstance(args, str):
        return args
    try:
        return json.dumps(args, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"args must be text or JSON-serialisable: {exc}") from None


class MacrosMixin:
    """Macro methods of :class:`nbmemory.Memory`."""

    def learn_macros(self, *, namespace: str | None = None) -> pd.DataFrame:
        """Relearn every macro from the namespace's tool events; returns :meth:`macros`.

        Idempotent: running it twice changes nothing.  A learnt chain that no longer
        occurs (its events were deleted) keeps its row with confidence 0.
        """
        self._check_open()
        ns = self._ns(namespace)
        learnt = self.store.fetchall(_LEARN_SQL, [ns])
        now = ev.utcnow()
        touched: list[str] = []
        with self.store.transaction():
            existing = {
                (r[1], r[2]): (r[0], r[3], r[4])
                for r in self.store.fetchall(
                    "SELECT id, trigger_tool, next_tool, next_args, confidence FROM macros"
                    " WHERE namespace = ? AND trigger_args_pattern IS NULL",
                    [ns],
                )
            }
            seen = set()
            for trigger, next_tool, _observed, next_args, confidence in learnt:
                seen.add((trigger, next_tool))
                old = existing.get((trigger, next_tool))
                if old is None:
                    row = self.store.fetchone(
                        "INSERT INTO macros (namespace, trigger_tool, next_tool, next_args,"
                        " confidence, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)"
                        " RETURNING id",
                        [ns, trigger, next_tool, next_args, float(confidence), now, now],
                    )
                    touched.append(str(row[0]))
                elif old[1] != next_args or abs(old[2] - float(confidence)) > 1e-12:
                    self.store.execute(
                        "UPDATE macros SET next_args = ?, confidence = ?, updated_at = ?"
                        " WHERE id = ?",
                        [next_args, float(confidence), now, old[0]],
                    )
                    touched.append(str(old[0]))
            for key, (macro_id, _args, confidence) in existing.items():
                if key not in seen and confidence != 0.0:
                    self.store.execute(
                        "UPDATE macros SET confidence = 0.0, updated_at = ? WHERE id = ?",
                        [now, macro_id],
                    )
                    touched.append(str(macro_id))
        if touched:
            self._audit("learn_macros", touched, ns, {"changed": len(touched)})
        self._macro_stamps()[ns] = self._tool_stamp(ns)
        return self.macros(namespace=ns)

    def macros(
        self, trigger_tool: str | None = None, *, namespace: str | None = None
    ) -> pd.DataFrame:
        """Macros as a DataFrame, most confident first (``next_args`` as stored text)."""
        self._check_open()
        return table_frame(
            self.store,
            "macros",
            MACRO_COLUMNS,
            "trigger_tool, confidence DESC, used_count DESC, id",
            self._ns(namespace),
            trigger_tool=trigger_tool,
        )

    def add_macro(
        self,
        trigger_tool: str,
        next_tool: str,
        next_args: Any = None,
        *,
        trigger_args_pattern: str | None = None,
        confidence: float = 1.0,
        namespace: str | None = None,
    ) -> int:
        """Write a macro by hand (kept as given, never relearnt); returns its id.

        ``trigger_args_pattern`` is an fnmatch pattern (``"*.py*"``) the trigger's
        arguments (as text) must match for the macro to be suggested.
        """
        self._check_open()
        ns = self._ns(namespace)
        trigger_tool = ev.check_name(trigger_tool, "trigger_tool")
        next_tool = ev.check_name(next_tool, "next_tool")
        if trigger_args_pattern is None:
            trigger_args_pattern = "*"  # hand-written: distinct from learnt (NULL) rows
        pattern = ev.check_name(trigger_args_pattern, "trigger_args_pattern")
        confidence = check_unit_interval(confidence, "confidence")
        now = ev.utcnow()
        row = self.store.fetchone(
            "INSERT INTO macros (namespace, trigger_tool, trigger_args_pattern, next_tool,"
            " next_args, confidence, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
            " RETURNING id",
            [ns, trigger_tool, pattern, next_tool, _args_text(next_args), confidence, now, now],
        )
        self._audit("add_macro", [str(row[0])], ns, {"trigger_tool": trigger_tool})
        return int(row[0])

    def suggest_next_tool(
        self,
        trigger_tool: str,
        args: Any = None,
        *,
        min_confidence: float = 0.0,
        namespace: str | None = None,
    ) -> dict[str, Any] | None:
        """The most confident next tool after ``trigger_tool`` (called with ``args``).

        Returns ``{"macro_id", "next_tool", "next_args", "confidence", "used_count"}``
        (``next_args`` parsed from JSON when it is JSON) or None.  Macros are relearnt
        first when the namespace's tool events changed since the last learning.
        """
        self._check_open()
        ns = self._ns(namespace)
        trigger_tool = ev.check_name(trigger_tool, "trigger_tool")
        min_confidence = check_unit_interval(min_confidence, "min_confidence")
        args_text = _args_text(args)
        if self._macro_stamps().get(ns) != self._tool_stamp(ns):
            self.learn_macros(namespace=ns)
        rows = self.store.records(
            f"SELECT {', '.join(MACRO_COLUMNS)} FROM macros WHERE namespace = ?"
            " AND trigger_tool = ? AND confidence > 0 AND confidence >= ?"
            " ORDER BY confidence DESC, used_count DESC, updated_at DESC, id",
            [ns, trigger_tool, min_confidence],
        )
        for row in rows:
            pattern = row["trigger_args_pattern"]
            if pattern is None or fnmatch.fnmatchcase(args_text, pattern):
                return {
                    "macro_id": int(row["id"]),
                    "next_tool": row["next_tool"],
                    "next_args": _parse_args(row["next_args"]),
                    "confidence": float(row["confidence"]),
                    "used_count": int(row["used_count"]),
                }
        return None

    def record_macro_use(self, macro_id: int, *, namespace: str | None = None) -> int:
        """Count one use of a suggested macro; returns the new ``used_count``."""
        self._check_open()
        macro_id = check_limit(macro_id, "macro_id", allow_zero=False)
        ns = self._ns(namespace)
        row = self.store.fetchone(
            "UPDATE macros SET used_count = used_count + 1, updated_at = ?"
            " WHERE id = ? AND namespace = ? RETURNING used_count",
            [ev.utcnow(), macro_id, ns],
        )
        if row is None:
            raise InvalidInput(f"no macro with id {macro_id} in namespace {ns!r}; see mem.macros()")
        self._audit("use_macro", [str(macro_id)], ns)
        return int(row[0])

    def delete_macro(self, macro_id: int, *, namespace: str | None = None) -> bool:
        """Remove a macro; True if it existed (a learnt one comes back if still observed)."""
        self._check_open()
        macro_id = check_limit(macro_id, "macro_id", allow_zero=False)
        ns = self._ns(namespace)
        rows = self.store.fetchall(
            "DELETE FROM macros WHERE id = ? AND namespace = ? RETURNING id", [macro_id, ns]
        )
        if rows:
            self._audit("delete_macro", [str(macro_id)], ns)
            self._macro_stamps().pop(ns, None)
        return bool(rows)

    def _macro_stamps(self) -> dict[str, Any]:
        return self.__dict__.setdefault("_nbmemory_macro_stamps", {})

    def _tool_stamp(self, namespace: str) -> tuple:
        """A cheap fingerprint of the namespace's tool events (changes when they do)."""
        return tuple(
            self.store.fetchone(
                "SELECT count(*), max(created_at), bit_xor(hash(id, tool_name, metadata))"
                " FROM events WHERE namespace = ? AND role = 'tool' AND tool_name IS NOT NULL",
                [namespace],
            )
        )
