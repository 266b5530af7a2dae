"""The one write path: every change to a store goes through :meth:`Writer.transaction`.

What holds for every write, written once here and in the table objects:

* **one call, one transaction**: the rows, their audit row and the session's
  ``last_activity`` commit together or not at all (in shared mode: in one turn
  on the file);
* **redacted before stored**: the table objects pass every column the schema
  marks as user text through the store's redactor (and so before the text can
  reach the embedding model, which only sees stored text);
* **audited**: :meth:`Tx.audit` appends the row in the same transaction, with
  the actor and how many secrets were redacted;
* **caches in step**: the store announces the committed change to the indexes,
  working memory and the embedding queue.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import duckdb

from ..errors import InvalidInput, StoreError
from ..validation import shown, utcnow
from .changes import Change
from .connection import Store

T = TypeVar("T")

#: ``last_activity`` is written at most this often per session by ordinary writes and reads.
TOUCH_INTERVAL = dt.timedelta(seconds=1)


class Tx:
    """An open write transaction: the store's tables, the audit trail, session touches."""

    def __init__(self, writer: Writer, change: Change) -> None:
        self._writer = writer
        self.change = change
        store = writer.store
        self.events = store.events
        self.archive = store.archive
        self.vectors = store.vectors
        self.facts = store.facts
        self.macros = store.macros
        self.tasks = store.tasks
        self.prefixes = store.prefixes
        self.sessions = store.sessions
        self.store = store

    def audit(
        self,
        action: str,
        target_ids: Sequence[str] = (),
        namespace: str | None = None,
        details: dict[str, Any] | None = None,
        *,
        at: dt.datetime | None = None,
    ) -> None:
        """Append an audit row; it says how many secrets this transaction redacted there."""
        details = dict(details or {})
        redacted = self.change.redacted.pop(namespace, 0)
        if not self._writer.audit_enabled and action not in ALWAYS_AUDITED:
            return
        if redacted:
            details["redacted"] = details.get("redacted", 0) + redacted
        self._writer.store.audit.append(
            action,
            actor=self._writer.actor,
            namespace=namespace,
            target_ids=target_ids,
            details=details,
            at=at or utcnow(),
        )

    def touch(self, namespace: str, session_id: str, *, at: dt.datetime | None = None) -> None:
        """Mark a started session as used now (no SQL for sessions never started, nor
        within a second of the last touch); ``at``: at that moment, whatever the last
        touch (a resume).  The only way ``last_activity`` moves on use."""
        self._writer._touch(self, namespace, session_id, at)


#: Audit rows written even with the audit trail off: whom a session was started for
#: (``forget_user`` finds a user's sessions by them, long after the session row).
ALWAYS_AUDITED = frozenset({"session_start", "session_evicted"})


class Writer:
    """Opens write transactions on a store for one actor (``api``, ``magic``, ``cli`` ...)."""

    def __init__(
        self, store: Store, *, actor: str = "api", clock: Callable[[], dt.datetime] = utcnow
    ) -> None:
        self.store = store
        #: Who the audit trail says made the changes.
        self.actor = actor
        #: The time sessions are touched with (tests move it).
        self.clock = clock
        #: False (``Settings.audit_enabled``): no audit rows but :data:`ALWAYS_AUDITED`.
        self.audit_enabled = True
        self._active: dict[tuple[str, str], dt.datetime] | None = None
        store.actor = actor  # a lake names it in each snapshot's commit message
        store.listen(self._follow_sessions)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Tx]:
        """``with writer.transaction() as tx:`` one atomic, audited, announced change."""
        if self.store.read_only:
            raise _read_only(self.store)
        with self.store.transaction() as change:
            yield Tx(self, change)

    def write_beside(self, block: Callable[[Tx], T]) -> T:
        """``block(tx)`` as one transaction beside the caller's appends (the embedding
        worker's vectors: see :meth:`Store.beside`)."""
        if self.store.read_only:
            raise _read_only(self.store)
        return self.store.beside(lambda change: block(Tx(self, change)))

    # -- the common writes ------------------------------------------------------------
    def add_events(
        self, rows: Sequence[dict[str, Any]], *, bulk: bool = False, action: str = "add"
    ) -> list[dict[str, Any]]:
        """Insert validated event rows; one audit row per namespace; sessions touched.

        Only appends (and session touches): it may run while vectors are written beside it.
        An id already stored (one ``add_events`` was given) refuses the whole call with
        :class:`InvalidInput` naming it: the transaction is rolled back, nothing is written.
        """
        try:
            with self.store.appending(len(rows)), self.transaction() as tx:
                records = tx.events.insert(rows, bulk=bulk)
                for namespace in sorted({r["namespace"] for r in records}):
                    chosen = [r for r in records if r["namespace"] == namespace]
                    details: dict[str, Any] = (
                        {"session_id": chosen[0]["session_id"]}
                        if len(records) == 1 and not bulk
                        else {"count": len(chosen)}
                    )
                    tx.audit(action, [r["id"] for r in chosen], namespace, details)
                for key in sorted({(r["namespace"], r["session_id"]) for r in records}):
                    tx.touch(*key)
        except duckdb.ConstraintException:
            taken = sorted(self.store.events.namespaces_of(r["id"] for r in rows))
            if not taken:
                raise
            more = f" and {len(taken) - 5} more" if len(taken) > 5 else ""
            one = len(taken) == 1
            raise InvalidInput(
                f"{'id' if one else 'ids'} {', '.join(shown(t) for t in taken[:5])}{more} "
                f"{'is' if one else 'are'} already stored; nothing was written. Leave the id "
                "out to get a new one (import_json skips rows already present)"
            ) from None
        return records

    def audit(
        self,
        action: str,
        target_ids: Sequence[str] = (),
        namespace: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        """An audit row on its own (a change with no rows: settings, an export)."""
        with self.transaction() as tx:
            tx.audit(action, target_ids, namespace, details)

    def touch_session(self, namespace: str, session_id: str) -> None:
        """Mark a started session as used (a read such as get_context counts as use)."""
        if self.store.read_only or not self._due(namespace, session_id):
            return
        with self.store.appending(), self.transaction() as tx:  # no event row is touched
            tx.touch(namespace, session_id)

    # -- session touches --------------------------------------------------------------
    def active_sessions(self) -> dict[tuple[str, str], dt.datetime]:
        """(namespace, session_id) -> last touch of every active session (cached)."""
        if self._active is None:
            self._active = self.store.sessions.active_keys()
        return self._active

    def _due(self, namespace: str, session_id: str) -> bool:
        last = self.active_sessions().get((namespace, session_id))
        return last is not None and self.clock() - last >= TOUCH_INTERVAL

    def _touch(self, tx: Tx, namespace: str, session_id: str, at: dt.datetime | None) -> None:
        if at is None and not self._due(namespace, session_id):
            return
        now = self.clock() if at is None else at
        tx.sessions.touch(namespace, session_id, now)
        self.active_sessions()[(namespace, session_id)] = now

    def _follow_sessions(self, change: Change) -> None:
        if change.unknown:
            self._active = None
            return
        if self._active is None:
            return
        for key in change.sessions_inactive:
            self._active.pop(key, None)
        self._active.update(change.sessions_active)


def _read_only(store: Store) -> Exception:
    return StoreError(f"the store {store.path} is open read-only; open it without read_only=True")
