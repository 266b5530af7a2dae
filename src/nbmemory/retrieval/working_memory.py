"""Per-session recent history kept in process memory (working memory).

A bounded deque per (namespace, session) holding the last ``cap`` events, oldest
first.  Recency reads are served from it without touching the database; a
session not seen yet in this process is loaded once from the store (so the cache
is rebuilt after a restart).  It follows the store's change announcements: a new
event is appended to its session; a session whose order cannot be kept cheaply
(an event inserted in the past, a bulk load), or whose events changed or went,
is dropped and reloaded on its next read.  At most :data:`SESSIONS` sessions are
kept, the least recently used dropped first: a lake's feed hands a reader the rows
of every writer's sessions, and a long-lived process must not keep them all.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Iterable
from typing import Any

from ..store import Change, Store

Key = tuple[str, str]

#: Sessions kept at most (each its last ``cap`` rows); the least recently used goes.
SESSIONS = 256


class WorkingMemory:
    def __init__(self, store: Store, cap: int, sessions: int = SESSIONS) -> None:
        self.store = store
        self.cap = cap
        self.sessions = sessions
        self._sessions: OrderedDict[Key, deque[dict[str, Any]]] = OrderedDict()
        self._lock = threading.RLock()
        #: How many times a session was (re)loaded from the store.
        self.loads = 0
        store.listen(self.follow)

    def __contains__(self, key: Key) -> bool:
        return key in self._sessions

    def _load(self, key: Key) -> deque[dict[str, Any]]:
        records = self.store.events.recent(key[0], key[1], self.cap)
        self.loads += 1
        window: deque[dict[str, Any]] = deque(records, maxlen=self.cap)
        if not self.store.in_transaction:  # uncommitted rows must not stay cached
            self._sessions[key] = window
            while len(self._sessions) > self.sessions:
                self._sessions.popitem(last=False)
        return window

    def recent(self, namespace: str, session_id: str, limit: int | None = None) -> list[dict]:
        """The last ``limit`` events of the session (at most ``cap``), newest first."""
        self.store.refresh()
        key = (namespace, session_id)
        with self._lock:
            window = self._sessions.get(key)
            if window is None:
                window = self._load(key)
            else:
                self._sessions.move_to_end(key)
            items = list(window)
        items.reverse()
        return items if limit is None else items[: max(0, limit)]

    def follow(self, change: Change) -> None:
        """Apply one committed change (the store calls this under its lock)."""
        if change.unknown:
            self.invalidate()
            return
        if change.added and not change.bulk:
            for record in change.added:
                self._appended({k: v for k, v in record.items() if k != "seq"})
        elif change.added:
            self.invalidate({(r["namespace"], r["session_id"]) for r in change.added})
        deleted = [] if change.keep_context else change.deleted
        changed = deleted + change.updated + [row[0] for row in change.retexted]
        if changed:
            self.forget_ids(changed)

    def _appended(self, record: dict[str, Any]) -> None:
        """A new event: appended to its cached session (loaded first if not cached).

        A row the window already holds, or older than all of a full window (outside
        the session's last ``cap`` rows), changes nothing: a lake's feed hands over
        rows committed before the window was loaded, oldest first.
        """
        key = (record["namespace"], record["session_id"])
        with self._lock:
            window = self._sessions.get(key)
            if window is None:
                # the new row is in the store, and any committed after it; with the
                # cache full, loading here would drop a session to make room, and a
                # feed of more sessions than it holds would load one per row: the
                # session is loaded when it is read instead
                if len(self._sessions) < self.sessions:
                    self._load(key)
                return
            if window and record["created_at"] <= window[-1]["created_at"]:
                if any(held["id"] == record["id"] for held in window):
                    return  # loaded with its session already (a lake's feed comes later)
                if len(window) == window.maxlen and record["created_at"] < window[0]["created_at"]:
                    return  # older than the last ``cap`` rows the window holds
                if record["created_at"] < window[-1]["created_at"]:
                    del self._sessions[key]  # out of order: reload lazily
                    return
            window.append(record)
            self._sessions.move_to_end(key)

    def invalidate(self, keys: Iterable[Key] | None = None) -> None:
        """Forget cached sessions (all of them when ``keys`` is None)."""
        with self._lock:
            if keys is None:
                self._sessions.clear()
                return
            for key in keys:
                self._sessions.pop(key, None)

    def forget_ids(self, ids: Iterable[str]) -> None:
        """Drop sessions that hold any of these ids (after a delete or update)."""
        wanted = set(ids)
        with self._lock:
            stale = [
                key
                for key, window in self._sessions.items()
                if any(record["id"] in wanted for record in window)
            ]
            for key in stale:
                del self._sessions[key]

    def resize(self, cap: int) -> None:
        with self._lock:
            self.cap = cap
            self._sessions.clear()
