"""Per-session recent history kept in process memory (seed 000's working memory).

A bounded deque per (namespace, session) holding the last ``cap`` events, oldest
first.  Recency reads are served from it without touching the database; a
session not seen yet in this process is loaded once from the store (so the cache
is rebuilt after a restart), and a session whose order cannot be kept cheaply
(an event inserted in the past, a bulk load) is simply dropped and reloaded.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

Key = tuple[str, str]
Loader = Callable[[str, str, int], list[dict[str, Any]]]


class WorkingMemory:
    def __init__(self, cap: int, loader: Loader) -> None:
        self.cap = cap
        self._loader = loader
        self._sessions: dict[Key, deque[dict[str, Any]]] = {}
        self._lock = threading.RLock()
        #: How many times a session was (re)loaded from the store.
        self.loads = 0

    def __contains__(self, key: Key) -> bool:
        return key in self._sessions

    def _load(self, key: Key) -> deque[dict[str, Any]]:
        records = self._loader(key[0], key[1], self.cap)
        self.loads += 1
        window: deque[dict[str, Any]] = deque(records, maxlen=self.cap)
        self._sessions[key] = window
        return window

    def recent(self, namespace: str, session_id: str, limit: int | None = None) -> list[dict]:
        """The last ``limit`` events of the session (at most ``cap``), newest first."""
        key = (namespace, session_id)
        with self._lock:
            window = self._sessions.get(key)
            if window is None:
                window = self._load(key)
            items = list(window)
        items.reverse()
        return items if limit is None else items[: max(0, limit)]

    def appended(self, record: dict[str, Any]) -> None:
        """Record a newly stored event; loads the session first if it is not cached."""
        key = (record["namespace"], record["session_id"])
        with self._lock:
            window = self._sessions.get(key)
            if window is None:
                self._load(key)  # the new row is already in the store
                return
            if window and _order(record) < _order(window[-1]):
                del self._sessions[key]  # out of order: reload lazily
                return
            window.append(record)

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


def _order(record: dict[str, Any]) -> Any:
    return record["created_at"]
