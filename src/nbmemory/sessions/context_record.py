"""A session's last built context, recorded in its stored state so that it survives a
restart: an agent resumes in a new process.

003 expects a continued session to reuse its context cache (``context_cache_reused:
true``), and the cache (:mod:`.context_cache`) lives in one process.  So when the agent
builds a context in a session, what rebuilds it is written to the session's ``state``
under ``last_context``: the question, the parameters, the ordered event ids (at most
:data:`MAX_IDS`) with the strategies that found each, ``built_at``, the namespace's
*freshness* read before it was built (last insertion seq, event count, last
``updated_at``, events waiting for a vector) and a digest of the items' stored rows.
Never a text: the texts stay in the events (already redacted), and deleting an event
takes its id out of every recorded context (``store.sessions.forget_context_ids``).

A resumed session whose process has no cached context reads it back: one fetch of the
recorded ids.  When the namespace's freshness and the items' digest are what they were,
the context is *restored* as it was built (same items, same order; the per-strategy
scores are not kept); otherwise it is *rebuilt* by running ``get_context`` again with
the recorded question and parameters.  Nothing is written when the record would not
change, nothing in a read-only store, and a failed write is logged, never raised into
the caller's ``get_context``.  Settings, the reranker and plain-SQL changes are not part
of the check (the in-process cache follows those).
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

from ..core import Core
from ..retrieval.context import STRATEGIES, Context, ContextItem
from ..store.sessions import LAST_CONTEXT
from ..validation import dump_json

log = logging.getLogger(__name__)

#: Ids recorded per context at most (a context past it is rebuilt on resume).
MAX_IDS = 200
#: The parameters of ``get_context`` a record keeps, in the order its cache key uses.
OPTIONS = (
    "recency_limit",
    "salience_threshold",
    "salience_limit",
    "relevance_threshold",
    "relevance_limit",
    "max_tokens",
    "explain",
)


def _digest(rows: list[tuple[Any, ...]]) -> str:
    """A digest of what the items show (id, content, tool calls, importance, kind)."""
    text = repr([tuple("" if v is None else str(v) for v in row) for row in rows])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def _item_row(item: ContextItem) -> tuple[Any, ...]:
    return (item.id, item.content, item.tool_calls, float(item.importance), item.kind)


def _record_row(row: dict[str, Any]) -> tuple[Any, ...]:
    content = row.get("content")
    calls = row.get("tool_calls_json")
    return (
        row["id"],
        content if isinstance(content, str) and content else None,
        calls if isinstance(calls, str) and calls else None,
        float(row["importance"]),
        row.get("kind") or "message",
    )


class ContextRecords:
    """Write a session's last context into its state, and read it back on resume."""

    def __init__(self, core: Core) -> None:
        self.core = core
        #: (namespace, session) -> the record this process last wrote or found stored
        self._written: dict[tuple[str, str], dict[str, Any]] = {}

    def freshness(self, namespace: str, session_id: str) -> list[Any] | None:
        """The namespace's freshness before a build, when the build will be recorded
        (an active session of a writable store), else None."""
        store = self.core.store
        if store.read_only or (namespace, session_id) not in self.core.writer.active_sessions():
            return None
        try:
            return store.sessions.context_freshness(namespace)
        except Exception as exc:  # a record is a convenience: never fail the build
            log.warning("nbmemory: could not read the namespace's freshness: %s", exc)
            return None

    def record(
        self,
        namespace: str,
        session_id: str,
        query: Any,
        options: dict[str, Any],
        context: Context,
        freshness: list[Any] | None,
    ) -> bool:
        """Write what rebuilds ``context`` into the session's state (True when written)."""
        if freshness is None or not (query is None or isinstance(query, str)):
            return False
        items = context.items[:MAX_IDS]
        entry: dict[str, Any] = {
            "query": query,
            "parameters": {name: options.get(name) for name in OPTIONS},
            "ids": [item.id for item in items],
            "strategies": ["+".join(item.strategies) for item in items],
            "complete": len(context.items) <= MAX_IDS,
            "max_tokens": context.max_tokens,
            "freshness": freshness,
            "digest": _digest([_item_row(item) for item in items]),
        }
        where = (namespace, session_id)
        if self._written.get(where) == entry:
            return False
        try:
            with self.core.writer.transaction() as tx:
                row = tx.sessions.get(namespace, session_id)
                if row is None:
                    return False
                state = _parse(row.get("state"))
                stored = state.get(LAST_CONTEXT)
                if isinstance(stored, dict) and {**stored, "built_at": None} == {
                    **entry,
                    "built_at": None,
                }:
                    self._written[where] = entry
                    return False
                state[LAST_CONTEXT] = {**entry, "built_at": self.core.clock().isoformat()}
                text = dump_json(
                    state, "session state", self.core.settings.payload_limits, sort_keys=True
                )
                tx.sessions.save_state(namespace, session_id, text, self.core.clock())
        except Exception as exc:  # the caller asked for a context, not for this write
            log.warning("nbmemory: could not record session %r's context: %s", session_id, exc)
            return False
        if len(self._written) > 4096:  # of sessions long gone: start again
            self._written.clear()
        self._written[where] = entry
        return True

    def stored(self, namespace: str, session_id: str) -> dict[str, Any] | None:
        """The recorded last context of a session (None when it has none)."""
        row = self.core.store.sessions.get(namespace, session_id)
        entry = None if row is None else _parse(row.get("state")).get(LAST_CONTEXT)
        if not isinstance(entry, dict) or not isinstance(entry.get("ids"), list):
            return None
        if not isinstance(entry.get("parameters"), dict):
            return None
        return entry

    def restore(self, namespace: str, session_id: str, entry: dict[str, Any]) -> Context | None:
        """The recorded context as it was built, or None when something it depends on
        changed since (then the caller builds it again)."""
        if entry.get("complete") is not True or entry["parameters"].get("explain"):
            return None
        store = self.core.store
        if store.sessions.context_freshness(namespace) != entry.get("freshness"):
            return None
        ids = [str(i) for i in entry["ids"]]
        rows = {row["id"]: row for row in store.events.rows(ids)}
        if len(rows) < len(ids) or any(rows[i]["namespace"] != namespace for i in ids):
            return None
        if entry.get("digest") != _digest([_record_row(rows[i]) for i in ids]):
            return None
        strategies = entry.get("strategies")
        found = strategies if isinstance(strategies, list) and len(strategies) == len(ids) else []
        items = []
        for rank, event_id in enumerate(ids, start=1):
            row = rows[event_id]
            names = [s for s in str(found[rank - 1] if found else "").split("+") if s in STRATEGIES]
            items.append(
                ContextItem(
                    id=event_id,
                    role=row["role"],
                    content=_record_row(row)[1],
                    created_at=row["created_at"],
                    importance=float(row["importance"]),
                    session_id=row["session_id"],
                    kind=row.get("kind") or "message",
                    tool_calls=_record_row(row)[2],
                    strategies=names,
                    positions={name: rank - 1 for name in names} or {"recency": rank - 1},
                    rank=rank,
                )
            )
        counter = self.core.retriever.token_counter
        return Context(
            session_id=session_id,
            query=entry.get("query"),
            namespace=namespace,
            items=items,
            parameters=dict(entry["parameters"]),
            max_tokens=int(entry.get("max_tokens") or self.core.settings.max_memory_tokens),
            **({"token_counter": counter} if counter else {}),
        )


def _parse(raw: Any) -> dict[str, Any]:
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return {}
    return dict(value) if isinstance(value, dict) else {}
