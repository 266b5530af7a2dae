"""Macros: learnt tool -> next-tool chains an agent can replay.

The Rust agent created the ``macros`` table and never filled it; here it is learnt from
the tool events the store holds.  Within each session, the tool events
(``role="tool"`` with a ``tool_name``) in order form pairs *A then B*; a macro
``A -> B`` has ``confidence`` = how often B followed A / how often anything
followed A, and ``next_args`` = the arguments B was last called with (the event's
``metadata["args"]``, else its ``tool_calls_json``).  ``used_count`` counts the
times an agent said it used the suggestion (:meth:`Macros.record_use`).
Hand-written macros (:meth:`Macros.add`, optionally with an fnmatch
``trigger_args_pattern``) are kept as given and never relearnt.
"""

from __future__ import annotations

import fnmatch
import json
from typing import Any

import pandas as pd

from ..core import Core
from ..errors import MacroNotFound
from ..validation import (
    JsonLimits,
    check_json_size,
    check_limit,
    check_name,
    check_unit_interval,
    dump_json,
    utcnow,
)


def _parse_args(text: str | None) -> Any:
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def _args_text(args: Any, limits: JsonLimits, name: str = "args") -> str:
    """Arguments as the text a macro keeps: text as given, anything else as JSON (both
    within ``limits``: they carry what a tool call carries)."""
    if args is None:
        return ""
    if isinstance(args, str):
        return check_json_size(args, name, limits)
    return dump_json(args, name, limits, sort_keys=True)


#: How far one use moves a hand-written macro's confidence towards 1 (after n uses:
#: 1 - 0.9 ** n from 0.0; ten uses make 0.65).
USE_GROWTH = 0.1


class Macros:
    """Learning, listing, suggesting and counting macros (``mem.macros``)."""

    def __init__(self, core: Core) -> None:
        self.core = core
        self._stamps: dict[str, tuple] = {}

    def learn(self, *, namespace: str | None = None) -> pd.DataFrame:
        """Relearn every macro from the namespace's tool events; returns :meth:`macros`.

        Idempotent: running it twice changes nothing.  A learnt chain that no longer
        occurs (its events were deleted) keeps its row with confidence 0.
        """
        ns = self.core.ns(namespace)
        now = utcnow()
        touched: list[str] = []
        with self.core.writer.transaction() as tx:
            learnt = tx.macros.observed(ns)
            existing = tx.macros.learnt(ns)
            seen = set()
            for trigger, next_tool, _observed, next_args, confidence in learnt:
                seen.add((trigger, next_tool))
                old = existing.get((trigger, next_tool))
                if old is None:
                    macro_id = tx.macros.add(
                        ns, trigger, next_tool, next_args, float(confidence), now
                    )
                    touched.append(str(macro_id))
                elif old[1] != next_args or abs(old[2] - float(confidence)) > 1e-12:
                    tx.macros.relearn(old[0], next_args, confidence, now)
                    touched.append(str(old[0]))
            for key, (macro_id, args, confidence) in existing.items():
                if key not in seen and confidence != 0.0:
                    tx.macros.relearn(macro_id, args, 0.0, now)
                    touched.append(str(macro_id))
            if touched:
                tx.audit("learn_macros", touched, ns, {"changed": len(touched)})
        self._stamps[ns] = self.core.store.macros.tool_stamp(ns)
        return self.list(namespace=ns)

    def list(
        self, trigger_tool: str | None = None, *, namespace: str | None = None
    ) -> pd.DataFrame:
        """Macros as a DataFrame, most confident first (``next_args`` as stored text)."""
        if trigger_tool is not None:
            trigger_tool = check_name(trigger_tool, "trigger_tool")
        return self.core.store.macros.frame(self.core.ns(namespace), trigger_tool)

    def add(
        self,
        trigger_tool: str,
        next_tool: str,
        next_args: Any = None,
        *,
        trigger_args_pattern: str | None = None,
        confidence: float = 0.0,
        namespace: str | None = None,
    ) -> int:
        """Write a macro by hand (never relearnt); returns its id.

        ``trigger_args_pattern`` is an fnmatch pattern (``"*.py*"``) the trigger's
        arguments (as text) must match for the macro to be suggested.  Its
        ``confidence`` starts at 0.0, as in the Rust agent's macros table, and grows
        with use: each :meth:`record_use` moves it :data:`USE_GROWTH` of the way to 1.
        """
        ns = self.core.ns(namespace)
        trigger_tool = check_name(trigger_tool, "trigger_tool")
        next_tool = check_name(next_tool, "next_tool")
        if trigger_args_pattern is None:
            trigger_args_pattern = "*"  # hand-written: distinct from learnt (NULL) rows
        pattern = check_name(trigger_args_pattern, "trigger_args_pattern")
        confidence = check_unit_interval(confidence, "confidence")
        args = _args_text(next_args, self.core.settings.payload_limits, "next_args")
        with self.core.writer.transaction() as tx:
            macro_id = tx.macros.add(
                ns, trigger_tool, next_tool, args, confidence, utcnow(), pattern
            )
            tx.audit("add_macro", [str(macro_id)], ns, {"trigger_tool": trigger_tool})
        return macro_id

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
        ns = self.core.ns(namespace)
        trigger_tool = check_name(trigger_tool, "trigger_tool")
        min_confidence = check_unit_interval(min_confidence, "min_confidence")
        args_text = _args_text(args, self.core.settings.payload_limits)
        if self._stamps.get(ns) != self.core.store.macros.tool_stamp(ns):
            self.learn(namespace=ns)
        for row in self.core.store.macros.candidates(ns, trigger_tool, min_confidence):
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

    def record_use(self, macro_id: int, *, namespace: str | None = None) -> int:
        """Count one use of a suggested macro; returns the new ``used_count``.  A
        hand-written macro's confidence grows with it (a learnt one's stays what
        learning observed)."""
        macro_id = check_limit(macro_id, "macro_id", allow_zero=False)
        ns = self.core.ns(namespace)
        with self.core.writer.transaction() as tx:
            used = tx.macros.use(macro_id, ns, utcnow(), USE_GROWTH)
            if used is None:
                raise MacroNotFound(macro_id, ns)
            tx.audit("use_macro", [str(macro_id)], ns)
        return used

    def delete(self, macro_id: int, *, namespace: str | None = None) -> bool:
        """Remove a macro; True if it existed (a learnt one comes back if still observed)."""
        macro_id = check_limit(macro_id, "macro_id", allow_zero=False)
        ns = self.core.ns(namespace)
        with self.core.writer.transaction() as tx:
            deleted = tx.macros.delete(macro_id, ns)
            if deleted:
                tx.audit("delete_macro", [str(macro_id)], ns)
        if deleted:
            self._stamps.pop(ns, None)
        return deleted
