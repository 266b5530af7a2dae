"""The context cache of Vectora's state persistence: a session's built contexts, kept
while nothing they depend on changed.

003 puts a *context cache* in a session's working memory ("plano atual, histórico de
ferramentas, cache de contexto") and expects a continued session to reuse it
(``context_cache_reused: true``).  A context depends on the question, the parameters
and settings it was built with, and the rows of its namespace: the session's recent
events, the salient and relevant memories, their vectors.  The cache follows the
store's announcements of committed changes (:mod:`nbmemory.store.changes`), the
way the indexes and working memory do:

* events added, re-texted or given vectors in a namespace make every context of
  that namespace stale;
* events updated, deleted or losing their vector (announced by id only) and any
  change the store cannot describe (another process, plain SQL) make every context
  of every namespace stale; a context holding a deleted event, and every context
  after a change the store cannot describe, is dropped at once (no deleted text is
  kept here);
* session touches, opens and closes change no context and are ignored.

A context is kept with the *stamp* (change counters) read before it was built, so
a change that commits while it is being built makes it stale at once.  It lives
in this process only (a restart starts empty; a session's last context is read
back from its state, :mod:`.context_record`).  Facts, scheduled tasks and macros
are not part of a context and do not make one stale.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from ..retrieval.context import Context
from ..store import Store
from ..store.changes import Change

#: Sessions whose contexts are kept (least recently used dropped first).
MAX_SESSIONS = 256
#: Contexts kept per session (its last ones: other questions, the prefetched step).
PER_SESSION = 4

Stamp = tuple[int, int]


@dataclass
class Entry:
    """One built context, what it was built for and the stamp it was built at."""

    key: tuple[Any, ...]
    stamp: Stamp
    context: Context


class ContextCache:
    """Built contexts by (namespace, session), made stale by the store's changes."""

    def __init__(self, store: Store) -> None:
        self._lock = threading.Lock()
        self._everywhere = 0
        self._by_namespace: dict[str, int] = {}
        self._sessions: OrderedDict[tuple[str, str], list[Entry]] = OrderedDict()
        #: (namespace, session) -> the key of the context last asked for by the agent
        self._last: dict[tuple[str, str], tuple[Any, ...]] = {}
        self.hits = 0
        self.misses = 0
        store.listen(self.follow)

    def follow(self, change: Change) -> None:
        """Count a committed change against what it can make stale (see module doc)."""
        namespaces = {record["namespace"] for record in change.added}
        namespaces |= {row[1] for row in change.retexted}
        for vectors in change.vectors:
            namespaces |= set(vectors.namespaces)
        everywhere = change.unknown or bool(change.updated or change.deleted or change.unvectored)
        if not namespaces and not everywhere:
            return
        with self._lock:
            if everywhere:
                self._everywhere += 1
            for namespace in namespaces:
                self._by_namespace[namespace] = self._by_namespace.get(namespace, 0) + 1
            if change.unknown or change.deleted:  # no deleted text stays in memory here
                self._forget(None if change.unknown else set(change.deleted))

    def _forget(self, ids: set[str] | None) -> None:
        """Drop the contexts holding any of ``ids`` (every context: None)."""
        for where, entries in list(self._sessions.items()):
            kept = [] if ids is None else [e for e in entries if ids.isdisjoint(e.context.ids)]
            if kept:
                self._sessions[where] = kept
            else:
                del self._sessions[where]

    def stamp(self, namespace: str) -> Stamp:
        """The change counters a context of ``namespace`` built now is valid for."""
        with self._lock:
            return (self._everywhere, self._by_namespace.get(namespace, 0))

    def get(
        self, namespace: str, session_id: str, key: tuple[Any, ...], *, last: bool = True
    ) -> Context | None:
        """The context built for ``key`` if nothing it depends on changed since; ``last``:
        the agent asked for it (a prefetch looking first does not)."""
        where = (namespace, session_id)
        with self._lock:
            now = (self._everywhere, self._by_namespace.get(namespace, 0))
            for entry in self._sessions.get(where, []):
                if entry.key == key and entry.stamp == now:
                    self._sessions.move_to_end(where)
                    if last:
                        self._last[where] = key
                        self.hits += 1
                    return entry.context
            if last:
                self.misses += 1
            return None

    def put(
        self,
        namespace: str,
        session_id: str,
        key: tuple[Any, ...],
        stamp: Stamp,
        context: Context,
        *,
        last: bool = True,
    ) -> None:
        """Keep ``context`` (built for ``key`` at ``stamp``); ``last``: the agent asked for
        it (a prefetch is kept without becoming the session's last context)."""
        where = (namespace, session_id)
        with self._lock:
            entries = [e for e in self._sessions.pop(where, []) if e.key != key]
            entries.append(Entry(key, stamp, context))
            self._sessions[where] = entries[-PER_SESSION:]
            if last:
                self._last[where] = key
            while len(self._sessions) > MAX_SESSIONS:
                gone, _ = self._sessions.popitem(last=False)
                self._last.pop(gone, None)
            while len(self._last) > 4 * MAX_SESSIONS:  # of sessions whose contexts were dropped
                self._last.pop(next(iter(self._last)))

    def last(self, namespace: str, session_id: str) -> tuple[Any, ...] | None:
        """The key of the context the session last asked for (kept even when the context
        itself was dropped), or None."""
        with self._lock:
            return self._last.get((namespace, session_id))

    def kept(self, namespace: str, session_id: str) -> list[Context]:
        """The contexts kept for a session, oldest first (fresh or stale)."""
        with self._lock:
            return [entry.context for entry in self._sessions.get((namespace, session_id), [])]

    def drop(self, namespace: str, session_id: str) -> None:
        """Forget a session's contexts and its last question (the session was deleted)."""
        with self._lock:
            self._sessions.pop((namespace, session_id), None)
            self._last.pop((namespace, session_id), None)
