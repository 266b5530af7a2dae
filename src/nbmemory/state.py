"""State-persistence methods of :class:`~nbmemory.Memory` (issue 6, seed 003).

Sessions with TTL, the audit retention, redaction of secrets on the write path,
AGENTS.md sync and its watcher, and export/import live in this mixin so
:mod:`nbmemory.memory` stays the small core.  The heavy lifting is in
:mod:`nbmemory.sessions`, :mod:`nbmemory.redaction`, :mod:`nbmemory.agents_md`
and :mod:`nbmemory.transfer`.
"""

from __future__ import annotations

import datetime as dt
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pandas as pd

from . import audit
from . import events as ev
from . import sessions as sess
from .errors import InvalidInput
from .redaction import Redactor

if TYPE_CHECKING:
    from .agents_md import AgentsWatcher, SyncResult
    from .config import Settings
    from .embeddings import EmbeddingWorker
    from .store import Store
    from .working_memory import WorkingMemory

#: last_activity is written at most this often per session by the add/get_context hook.
TOUCH_INTERVAL = dt.timedelta(seconds=1)


class StateMixin:
    """Mixed into :class:`nbmemory.Memory`; uses its store, namespace and audit hook."""

    if TYPE_CHECKING:  # provided by Memory
        store: Store
        namespace: str
        worker: EmbeddingWorker | None
        working: WorkingMemory
        _settings: Settings
        _lock: threading.RLock

        def _check_open(self) -> None: ...
        def _ns(self, namespace: str | None) -> str: ...
        def _audit(
            self,
            action: str,
            target_ids: Any = (),
            namespace: str | None = None,
            details: dict[str, Any] | None = None,
        ) -> None: ...
        def delete(self, ids: str | list[str], *, namespace: str | None = None) -> int: ...

    # -- clock -------------------------------------------------------------------------
    #: Callable returning the current naive-UTC time; tests replace it to move time.
    clock: Callable[[], dt.datetime] = staticmethod(ev.utcnow)

    # -- redaction (the write-path hook) -------------------------------------------------
    @property
    def redactor(self) -> Redactor | None:
        """The compiled redaction patterns of the current settings (None when disabled)."""
        s = self._settings
        key = (s.redaction, s.redact_patterns)
        cached = getattr(self, "_redactor_cache", None)
        if cached is None or cached[0] != key:
            cached = (key, Redactor(s.redact_patterns) if s.redaction else None)
            self._redactor_cache = cached
        return cached[1]

    def _prepare_content(self, text: str | None) -> tuple[str | None, int]:
        """Text as it may be stored and embedded: secrets replaced; returns (text, count).

        Every write path (``add_event``, ``add_events``, ``update_memory``, import,
        AGENTS.md sync) calls this before the text reaches the store or the model.
        """
        redactor = self.redactor
        if text is None or redactor is None:
            return text, 0
        result = redactor.redact(text)
        return result.text, result.count

    # -- sessions ----------------------------------------------------------------------
    def start_session(
        self,
        user_id: str = "",
        *,
        namespace: str | None = None,
        session_id: str | None = None,
        state: dict[str, Any] | None = None,
    ) -> sess.Session:
        """Create a session for ``user_id`` in the namespace, or continue ``session_id``.

        With an existing ``session_id`` this is :meth:`continue_session` (a closed one
        is reopened with its saved state).  A new session starts with ``state`` (default
        ``{"current_plan": [], "tool_history": []}``).  When the user already has
        ``max_concurrent_sessions`` (5) active sessions in the namespace, the least
        recently active one is closed first (state kept, audit ``session_evicted``).
        """
        self._check_open()
        ns = self._ns(namespace)
        if not isinstance(user_id, str):
            raise InvalidInput(f"user_id must be a string, got {user_id!r}")
        if session_id is not None:
            session_id = ev.check_name(session_id, "session_id")
            existing = sess.get(self.store, ns, session_id)
            if existing is not None:
                if existing.user_id != user_id:
                    raise InvalidInput(
                        f"session {session_id!r} belongs to user {existing.user_id!r}, "
                        f"not {user_id!r}; start a new session instead"
                    )
                return self.continue_session(session_id, namespace=ns, reopen=True)
        initial = sess.default_state() if state is None else dict(state)
        sess.dump_state(initial)  # validate before anything is written
        now = self.clock()
        with self._lock:
            ttl = dt.timedelta(hours=self._settings.session_ttl_hours)
            active = sess.active_for_user(self.store, ns, user_id, now - ttl)
            limit = self._settings.max_concurrent_sessions
            for victim in active[: max(0, len(active) - limit + 1)]:
                sess.close(self.store, ns, victim.session_id, victim.state, now)
                self._session_cache().pop((ns, victim.session_id), None)
                self._audit(
                    "session_evicted",
                    [victim.session_id],
                    ns,
                    {"user_id": user_id, "reason": f"more than {limit} active sessions"},
                )
            session = sess.Session(
                namespace=ns,
                session_id=session_id or sess.new_session_id(),
                user_id=user_id,
                status=sess.ACTIVE,
                created_at=now,
                last_activity=now,
                state=initial,
            )
            sess.insert(self.store, session)
            self._session_cache()[(ns, session.session_id)] = now
            self._audit("session_start", [session.session_id], ns, {"user_id": user_id})
        return session

    def continue_session(
        self, session_id: str, *, namespace: str | None = None, reopen: bool = False
    ) -> sess.Session:
        """Load a session and mark it used now; :class:`SessionNotFound` if gone or expired.

        A closed session is an error unless ``reopen=True`` (then it is active again).
        """
        self._check_open()
        ns = self._ns(namespace)
        session_id = ev.check_name(session_id, "session_id")
        now = self.clock()
        ttl_hours = self._settings.session_ttl_hours
        with self._lock:
            session = sess.get(self.store, ns, session_id)
            if session is None:
                raise sess.SessionNotFound(session_id, ns)
            if session.is_expired(now, ttl_hours):
                raise sess.SessionNotFound(
                    session_id,
                    ns,
                    f"expired at {session.expires_at(ttl_hours):%Y-%m-%d %H:%M} UTC "
                    f"(no activity for {ttl_hours:g} h)",
                )
            if session.status != sess.ACTIVE:
                if not reopen:
                    raise sess.SessionNotFound(session_id, ns, "is closed")
                sess.reopen(self.store, ns, session_id, now)
                self._audit("session_reopen", [session_id], ns)
            else:
                sess.touch(self.store, ns, session_id, now)
            self._session_cache()[(ns, session_id)] = now
            return sess.get(self.store, ns, session_id)

    def get_session(self, session_id: str, *, namespace: str | None = None) -> sess.Session:
        """A session as stored (any status), without touching it."""
        self._check_open()
        ns = self._ns(namespace)
        session = sess.get(self.store, ns, ev.check_name(session_id, "session_id"))
        if session is None:
            raise sess.SessionNotFound(session_id, ns)
        return session

    def save_session_state(
        self,
        session_id: str,
        state: dict[str, Any],
        *,
        namespace: str | None = None,
        merge: bool = True,
    ) -> sess.Session:
        """Persist a session's state (merged into the saved one unless ``merge=False``)."""
        session = self.continue_session(session_id, namespace=namespace)
        new_state = {**session.state, **state} if merge else dict(state)
        sess.dump_state(new_state)
        now = self.clock()
        sess.save_state(self.store, session.namespace, session.session_id, new_state, now)
        self._audit(
            "session_state", [session.session_id], session.namespace, {"keys": sorted(state)}
        )
        return self.get_session(session.session_id, namespace=session.namespace)

    def close_session(
        self,
        session_id: str,
        *,
        namespace: str | None = None,
        state: dict[str, Any] | None = None,
    ) -> sess.Session:
        """Close a session, persisting its final state (``state`` merged in when given)."""
        self._check_open()
        session = self.get_session(session_id, namespace=namespace)
        final = {**session.state, **(state or {})}
        sess.dump_state(final)
        sess.close(self.store, session.namespace, session.session_id, final, self.clock())
        self._session_cache().pop((session.namespace, session.session_id), None)
        self._audit("session_close", [session.session_id], session.namespace)
        return self.get_session(session.session_id, namespace=session.namespace)

    def delete_session(
        self, session_id: str, *, namespace: str | None = None, events: bool = False
    ) -> dict[str, int]:
        """Delete a session's row (its state); with ``events=True`` its memories too.

        Without ``events`` the memories recorded in the session stay: they are
        long-term memory, the session row is only operational state.
        """
        self._check_open()
        ns = self._ns(namespace)
        session_id = ev.check_name(session_id, "session_id")
        removed_events = 0
        if events:
            ids = [
                r[0]
                for r in self.store.fetchall(
                    "SELECT id FROM events WHERE namespace = ? AND session_id = ?",
                    [ns, session_id],
                )
            ]
            removed_events = self.delete(ids, namespace=ns) if ids else 0
        gone = sess.delete(self.store, ns, [session_id])
        if not gone and not removed_events:
            raise sess.SessionNotFound(session_id, ns)
        self._session_cache().pop((ns, session_id), None)
        if gone:
            self._audit("session_delete", gone, ns, {"events_deleted": removed_events})
        return {"sessions": len(gone), "events": removed_events}

    def sessions(
        self,
        namespace: str | None = None,
        *,
        user_id: str | None = None,
        all_namespaces: bool = False,
        include_untracked: bool = True,
    ) -> pd.DataFrame:
        """Sessions of the namespace as a DataFrame, most recently active first.

        Columns: namespace, session_id, user_id, status (``active``, ``expired``,
        ``closed``, or ``untracked`` for session ids that only appear on events),
        events (count), created_at, last_activity, expires_at, closed_at, state.
        """
        self._check_open()
        return sess.listing(
            self.store,
            namespace=None if all_namespaces else self._ns(namespace),
            user_id=user_id,
            ttl_hours=self._settings.session_ttl_hours,
            now=self.clock(),
            include_untracked=include_untracked,
        )

    def cleanup_sessions(
        self,
        *,
        namespace: str | None = None,
        all_namespaces: bool = False,
        dry_run: bool = False,
    ) -> pd.DataFrame:
        """Delete sessions idle for more than ``session_ttl_hours``; returns them.

        ``dry_run=True`` returns the same frame and deletes nothing.  Only session
        rows go; their memories (events) stay.
        """
        self._check_open()
        ns = None if all_namespaces else self._ns(namespace)
        cutoff = self.clock() - dt.timedelta(hours=self._settings.session_ttl_hours)
        with self._lock:
            frame = sess.expired(self.store, cutoff, ns)
            frame.attrs["dry_run"] = dry_run
            if dry_run or frame.empty:
                return frame
            for space, group in frame.groupby("namespace", sort=True):
                ids = sess.delete(self.store, str(space), list(group["session_id"]))
                for sid in ids:
                    self._session_cache().pop((str(space), sid), None)
                self._audit(
                    "cleanup",
                    ids,
                    str(space),
                    {"what": "sessions", "ttl_hours": self._settings.session_ttl_hours},
                )
        return frame

    def cleanup_audit(self, *, dry_run: bool = False) -> int:
        """Apply the audit retention (``audit_retention_days``, 90); returns rows (to be) deleted."""
        self._check_open()
        days = self._settings.audit_retention_days
        now = self.clock()
        if dry_run:
            return audit.count_older(self.store, days, now=now)
        removed = audit.cleanup(self.store, days, now=now)
        self._audit("cleanup", [], None, {"what": "audit_log", "rows": removed, "days": days})
        return removed

    # -- the touch hook (called by add_event / add_events / get_context) ---------------------
    def _session_cache(self) -> dict[tuple[str, str], dt.datetime]:
        cache = getattr(self, "_session_touch_cache", None)
        if cache is None:
            cache = sess.active_keys(self.store)
            self._session_touch_cache = cache
        return cache

    def _touch_session(self, namespace: str, session_id: str) -> None:
        """Mark a started session as used now (no SQL for sessions never started)."""
        if self.store.read_only:
            return
        cache = self._session_cache()
        last = cache.get((namespace, session_id))
        if last is None:
            return
        now = self.clock()
        if now - last < TOUCH_INTERVAL:
            return
        sess.touch(self.store, namespace, session_id, now)
        cache[(namespace, session_id)] = now

    # -- AGENTS.md ---------------------------------------------------------------------
    def sync_agents_md(
        self, path: str | os.PathLike[str] = "AGENTS.md", *, namespace: str | None = None
    ) -> SyncResult:
        """Bring the ``agents_md`` memories of the namespace in line with the file.

        Sections (by heading) whose text changed are updated and re-embedded, new
        ones added, removed ones deleted; the rest is left untouched.
        """
        from .agents_md import sync

        self._check_open()
        return sync(self, path, namespace=self._ns(namespace))

    def watch_agents_md(
        self,
        path: str | os.PathLike[str] = "AGENTS.md",
        *,
        namespace: str | None = None,
        on_sync: Callable[[SyncResult], None] | None = None,
        force_polling: bool = False,
    ) -> AgentsWatcher:
        """Sync now, then again whenever the file changes, until stopped or the store closes."""
        from .agents_md import AgentsWatcher

        self._check_open()
        watcher = AgentsWatcher(
            self,
            path,
            namespace=self._ns(namespace),
            on_sync=on_sync,
            force_polling=force_polling,
        )
        with _WATCHERS_LOCK:
            self._watchers_list().append(watcher)
        return watcher

    def _watchers_list(self) -> list[AgentsWatcher]:
        watchers = getattr(self, "_agents_watchers", None)
        if watchers is None:
            watchers = []
            self._agents_watchers = watchers
        return watchers

    def _stop_state(self) -> None:
        """Called by :meth:`Memory.close`: stop every AGENTS.md watcher of this store."""
        with _WATCHERS_LOCK:
            watchers = list(self._watchers_list())
            self._watchers_list().clear()
        for watcher in watchers:
            watcher.stop()

    # -- export / import ---------------------------------------------------------------
    def export_json(
        self,
        path: str | os.PathLike[str],
        *,
        session_id: str | None = None,
        namespace: str | None = None,
        progress: bool = False,
    ) -> dict[str, Any]:
        """Write a session or a whole namespace (embeddings included) to a JSON file.

        The format is documented in :mod:`nbmemory.transfer`; returns a summary dict.
        """
        from .transfer import export_json

        self._check_open()
        return export_json(
            self,
            path,
            namespace=self._ns(namespace),
            session_id=None if session_id is None else ev.check_name(session_id, "session_id"),
            progress=progress,
        )

    def import_json(
        self,
        path: str | os.PathLike[str],
        *,
        namespace: str | None = None,
        progress: bool = False,
    ) -> dict[str, Any]:
        """Load an export file; rows already present are skipped, so importing twice adds nothing.

        ``namespace`` puts every row in that namespace (default: the namespaces in the file).
        """
        from .transfer import import_json

        self._check_open()
        target = None if namespace is None else ev.check_name(namespace, "namespace")
        return import_json(self, path, namespace=target, progress=progress)


_WATCHERS_LOCK = threading.Lock()
