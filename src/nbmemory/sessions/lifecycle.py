"""Sessions: an agent's operational state per user and namespace, with a TTL.

A session row holds what an agent needs to resume work after a restart: its
``state`` (a JSON object: current plan, tool history, anything else) and the
times it was created, last used and closed.

Rules (all of them tested in ``tests/test_sessions.py``):

* ``last_activity`` moves forward on every use: starting/continuing the session,
  saving its state, and every ``add_event`` / ``add_events`` / ``get_context``
  in it (throttled to one write a second, so hot loops stay cheap).
* A session whose ``last_activity`` is older than ``Settings.session_ttl_hours``
  (24 h) is *expired*: it cannot be continued and cleanup lists it (``dry_run``
  shows the list without deleting).  Cleanup removes the session row (its
  operational state), never the memories recorded in it.
* At most ``Settings.max_concurrent_sessions`` (5) sessions are active per
  user + namespace.  Starting one more closes the least recently active one
  first (its state is kept, status ``closed``, audit action ``session_evicted``);
  it is never an error.
* Closing a session persists its final state.
* ``start(..., load_agents_md=True)`` records ``{"context": {"load_agents_md": true}}``
  in the state (003's harness option): the namespace's AGENTS.md sections come first
  in every context of the session (:mod:`.contexts`), and its first context is
  built at once (003: "Carrega o AGENTS.md se presente e atualiza o cache de contexto").
* A resumed session (``resume``, ``start`` with an existing id) comes back with its
  plan (``state["current_plan"]``), its tool history (the tool calls its turns
  recorded, :mod:`.tool_history`) and its last built context (from the context
  cache when nothing it depends on changed, read back from the state's
  ``last_context`` in a new process, :mod:`.context_record`, built again otherwise), and the
  context of its next plan step is prefetched in the background.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ..config import Settings
from ..core import Core
from ..errors import InvalidInput, SessionNotFound
from ..pseudonyms import Pseudonyms, pseudonymise_trail
from ..retrieval.context import Context
from ..store.sessions import ACTIVE, SESSION_COLUMNS
from ..validation import (
    MAX_NAME_BYTES,
    JsonLimits,
    check_flag,
    check_name,
    check_text,
    dump_json,
    shown,
)
from .contexts import SessionContexts, agents_md_flag
from .tool_history import tool_history

_DEFAULT_LIMITS = Settings().payload_limits

#: Columns of :meth:`Sessions.sessions`.
LIST_COLUMNS = [
    "namespace",
    "session_id",
    "user_id",
    "status",
    "events",
    "created_at",
    "last_activity",
    "expires_at",
    "closed_at",
    "state",
]


def default_state() -> dict[str, Any]:
    """The state a new session starts with: a current plan and a tool history."""
    return {"current_plan": [], "tool_history": []}


def new_session_id() -> str:
    return "sess_" + uuid.uuid4().hex[:16]


#: A plan step in one of these states is behind the agent (``{"step": ..., "status": ...}``).
DONE = frozenset({"done", "completed", "complete", "skipped", "finished"})
_STEP_TEXT = ("step", "description", "title", "task", "text", "name")


def next_step(plan: Any) -> str | None:
    """The text of the first step of a plan not marked done, or None.

    A step is a string, or a dict with its text under ``step`` (or ``description``,
    ``title``, ``task``, ``text``, ``name``) and ``done: true`` or a ``status`` in
    :data:`DONE` once it is behind the agent.
    """
    if not isinstance(plan, list):
        return None
    for step in plan:
        if isinstance(step, str):
            if step.strip():
                return step
            continue
        if not isinstance(step, dict) or step.get("done") is True:
            continue
        if str(step.get("status", "")).lower() in DONE:
            continue
        for name in _STEP_TEXT:
            text = step.get(name)
            if isinstance(text, str) and text.strip():
                return text
    return None


@dataclass
class Session:
    """One row of ``sessions``; ``state`` is the parsed JSON object."""

    namespace: str
    session_id: str
    user_id: str
    status: str
    created_at: dt.datetime
    last_activity: dt.datetime
    closed_at: dt.datetime | None = None
    state: dict[str, Any] = field(default_factory=dict)
    #: The tool calls its turns recorded, oldest first (filled when it is resumed).
    tool_history: list[dict[str, Any]] = field(default_factory=list, compare=False, repr=False)
    #: The context it last built (filled when it is resumed or started with AGENTS.md).
    context: Context | None = field(default=None, compare=False, repr=False)
    #: Where ``context`` came from on resume: ``"cache"`` (built in this process, nothing
    #: changed), ``"restored"`` (from the state, built in an earlier process, nothing
    #: changed), ``"rebuilt"`` (something changed: built again), or None.
    context_source: str | None = field(default=None, compare=False, repr=False)

    @property
    def context_cache_reused(self) -> bool:
        """003's ``context_cache_reused``: the last context came back without a rebuild."""
        return self.context_source in ("cache", "restored")

    @property
    def plan(self) -> list[Any]:
        """The current plan (``state["current_plan"]``)."""
        plan = self.state.get("current_plan")
        return plan if isinstance(plan, list) else []

    @property
    def next_step(self) -> str | None:
        """The first step of the plan not marked done (see :func:`next_step`)."""
        return next_step(self.plan)

    @property
    def load_agents_md(self) -> bool:
        """Whether the namespace's AGENTS.md comes first in its contexts."""
        return agents_md_flag(self.state)

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Session:
        values = dict(record)
        values["state"] = parse_state(values.get("state"))
        return cls(**{k: values[k] for k in SESSION_COLUMNS})

    def expires_at(self, ttl_hours: float) -> dt.datetime:
        """When the TTL removes it unless it is used again."""
        return self.last_activity + dt.timedelta(hours=ttl_hours)

    def is_expired(self, now: dt.datetime, ttl_hours: float) -> bool:
        return self.last_activity < now - dt.timedelta(hours=ttl_hours)

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in SESSION_COLUMNS}

    def to_row(self) -> dict[str, Any]:
        """The row as stored (state as JSON text)."""
        return {**self.to_dict(), "state": dump_state(self.state)}


def _with_agents_md(state: dict[str, Any]) -> dict[str, Any]:
    """``state`` with ``context.load_agents_md`` set (other ``context`` keys kept)."""
    context = state.get("context")
    return {
        **state,
        "context": {**(context if isinstance(context, dict) else {}), "load_agents_md": True},
    }


def parse_state(raw: Any) -> dict[str, Any]:
    if raw is None:
        return {}
    if isinstance(raw, dict):
        return raw
    value = json.loads(raw)
    return value if isinstance(value, dict) else {"_value": value}


def dump_state(state: Any, limits: JsonLimits | None = None) -> str:
    """The state as JSON text; it must be a JSON-serialisable dict within ``limits``
    (by default those of the default settings: ``max_content_bytes``, keys, depth)."""
    if not isinstance(state, dict):
        raise InvalidInput(f"session state must be a dict, got {type(state).__name__}")
    for key in ("current_plan", "tool_history"):
        # read back as lists (Session.plan): a text here would resume as no plan at all
        if key in state and state[key] is not None and not isinstance(state[key], list):
            raise InvalidInput(
                f"session state's {key!r} must be a list (of steps: text, or dicts with "
                f"'done'), got {type(state[key]).__name__}; put a single step in a list: "
                f"{{{key!r}: [...]}}"
            )
    return dump_json(state, "session state", limits or _DEFAULT_LIMITS, sort_keys=True)


class Sessions:
    """Start, continue, save, close, delete, list and clean up sessions."""

    def __init__(self, core: Core, contexts: SessionContexts | None = None) -> None:
        self.core = core
        self.contexts = contexts

    def _get(self, namespace: str, session_id: str) -> Session | None:
        record = self.core.store.sessions.get(namespace, session_id)
        return None if record is None else Session.from_record(record)

    def start(
        self,
        user_id: str = "",
        *,
        namespace: str | None = None,
        session_id: str | None = None,
        state: dict[str, Any] | None = None,
        load_agents_md: bool = False,
    ) -> Session:
        """Create a session for ``user_id`` in the namespace, or continue ``session_id``.

        With an existing ``session_id`` this is :meth:`resume` (a closed one
        is reopened with its saved state).  A new session starts with ``state`` (default
        ``{"current_plan": [], "tool_history": []}``).  When the user already has
        ``max_concurrent_sessions`` (5) active sessions in the namespace, the least
        recently active one is closed first (state kept, audit ``session_evicted``).
        ``load_agents_md=True`` puts the namespace's AGENTS.md sections (synced by
        ``mem.agents_md``) before every other memory in the session's contexts, kept
        in its state as ``{"context": {"load_agents_md": true}}``; the session comes
        back with its first context built (``session.context``).
        """
        load_agents_md = check_flag(load_agents_md, "load_agents_md")
        ns = self.core.ns(namespace)
        if not isinstance(user_id, str):
            raise InvalidInput(f"user_id must be a string, got {shown(user_id)}")
        check_text(user_id, "user_id", allow_empty=True, max_bytes=MAX_NAME_BYTES)
        if session_id is not None:
            session_id = check_name(session_id, "session_id")
            existing = self._get(ns, session_id)
            if existing is not None:
                if existing.user_id != user_id:
                    raise InvalidInput(
                        f"session {session_id!r} belongs to user {existing.user_id!r}, "
                        f"not {user_id!r}; start a new session instead"
                    )
                if load_agents_md and not existing.load_agents_md:  # asked for on a later start
                    self._resume(session_id, namespace=ns, reopen=True)
                    context = _with_agents_md(existing.state)["context"]
                    self.save_state(session_id, {"context": context}, namespace=ns)
                return self.resume(session_id, namespace=ns, reopen=True)
        if state is not None and not isinstance(state, dict):
            raise InvalidInput(f"session state must be a dict, got {type(state).__name__}")
        initial = default_state() if state is None else dict(state)
        if load_agents_md:
            initial = _with_agents_md(initial)
        dump_state(initial, self.core.settings.payload_limits)  # before anything is written
        now = self.core.clock()
        s = self.core.settings
        session = Session(
            ns, session_id or new_session_id(), user_id, ACTIVE, now, now, None, initial
        )
        with self.core.writer.transaction() as tx:
            not_before = now - dt.timedelta(hours=s.session_ttl_hours)
            active = tx.sessions.active_for_user(ns, user_id, not_before)
            for victim in active[: max(0, len(active) - s.max_concurrent_sessions + 1)]:
                tx.sessions.close(ns, victim["session_id"], victim["state"], now)
                tx.audit(
                    "session_evicted",
                    [victim["session_id"]],
                    ns,
                    {
                        "user_id": user_id,
                        "reason": f"more than {s.max_concurrent_sessions} active sessions",
                    },
                )
            tx.sessions.insert(session.to_row())
            details: dict[str, Any] = {"user_id": user_id}
            if load_agents_md:
                details["load_agents_md"] = True
            tx.audit("session_start", [session.session_id], ns, details)
        if self.contexts is not None:
            self.contexts.set_flag(ns, session.session_id, load_agents_md)
            if load_agents_md:
                session.context = self.contexts.get_context(session.session_id, namespace=ns)
        return session

    def resume(
        self, session_id: str, *, namespace: str | None = None, reopen: bool = False
    ) -> Session:
        """Load a session and mark it used now; :class:`SessionNotFound` if gone or expired.

        A closed session is an error (:class:`SessionNotFound`, saying to pass
        ``reopen=True``) unless ``reopen=True``: then it is active again, as
        :meth:`start` with its ``session_id`` makes it.
        The session comes back with its plan (``session.plan``, ``session.next_step``),
        its tool history (``session.tool_history``: the tool calls its turns
        recorded) and its last built context (``session.context``: the cached one
        when nothing it depends on changed, read back from the state when it was built
        in an earlier process and nothing changed since, built again otherwise; None
        when it never built one; ``session.context_source`` says which).  The context of its next plan step is prefetched on a
        background thread, so the agent's ``get_context(session_id, next_step)`` finds it
        built; the call never waits for it.
        """
        session = self._resume(session_id, namespace=namespace, reopen=reopen)
        session.tool_history = tool_history(self.core, session.namespace, session.session_id)
        contexts = self.contexts
        if contexts is not None:
            contexts.set_flag(session.namespace, session.session_id, session.load_agents_md)
            found = contexts.resume_context(session.namespace, session.session_id)
            session.context, session.context_source = found
            step = session.next_step
            if step is not None:
                contexts.prefetch(session.session_id, step, namespace=session.namespace)
        return session

    def _resume(
        self, session_id: str, *, namespace: str | None = None, reopen: bool = False
    ) -> Session:
        """Mark a session used now (reopened with ``reopen``) and return it as stored."""
        reopen = check_flag(reopen, "reopen")
        ns = self.core.ns(namespace)
        session_id = check_name(session_id, "session_id")
        now = self.core.clock()
        ttl_hours = self.core.settings.session_ttl_hours
        with self.core.writer.transaction() as tx:
            session = self._get(ns, session_id)
            if session is None:
                raise SessionNotFound(session_id, ns)
            if session.is_expired(now, ttl_hours):
                raise SessionNotFound(
                    session_id,
                    ns,
                    f"expired at {session.expires_at(ttl_hours):%Y-%m-%d %H:%M} UTC "
                    f"(no activity for {ttl_hours:g} h)",
                )
            if session.status != ACTIVE:
                if not reopen:
                    raise SessionNotFound(
                        session_id, ns, "is closed", "pass reopen=True to continue it"
                    )
                tx.sessions.reopen(ns, session_id, now)
                tx.audit("session_reopen", [session_id], ns)
            else:
                tx.touch(ns, session_id, at=now)
        found = self._get(ns, session_id)
        assert found is not None
        return found

    def get(self, session_id: str, *, namespace: str | None = None) -> Session:
        """A session as stored (any status), without touching it."""
        ns = self.core.ns(namespace)
        session = self._get(ns, check_name(session_id, "session_id"))
        if session is None:
            raise SessionNotFound(session_id, ns)
        return session

    def save_state(
        self,
        session_id: str,
        state: dict[str, Any],
        *,
        namespace: str | None = None,
        merge: bool = True,
    ) -> Session:
        """Persist a session's state (merged into the saved one unless ``merge=False``)."""
        limits = self.core.settings.payload_limits
        merge = check_flag(merge, "merge")
        dump_state(state, limits)  # a refused state changes nothing, not even last_activity
        saved = self.get(session_id, namespace=namespace)
        text = dump_state({**saved.state, **state} if merge else dict(state), limits)
        session = self._resume(session_id, namespace=namespace)
        with self.core.writer.transaction() as tx:
            tx.sessions.save_state(session.namespace, session.session_id, text, self.core.clock())
            tx.audit(
                "session_state", [session.session_id], session.namespace, {"keys": sorted(state)}
            )
        saved = self.get(session.session_id, namespace=session.namespace)
        if self.contexts is not None:
            self.contexts.set_flag(saved.namespace, saved.session_id, saved.load_agents_md)
        return saved

    def close(
        self,
        session_id: str,
        *,
        namespace: str | None = None,
        state: dict[str, Any] | None = None,
    ) -> Session:
        """Close a session, persisting its final state (``state`` merged in when given)."""
        if state is not None and not isinstance(state, dict):
            raise InvalidInput(f"session state must be a dict, got {type(state).__name__}")
        session = self.get(session_id, namespace=namespace)
        final = dump_state({**session.state, **(state or {})}, self.core.settings.payload_limits)
        with self.core.writer.transaction() as tx:
            tx.sessions.close(session.namespace, session.session_id, final, self.core.clock())
            tx.audit("session_close", [session.session_id], session.namespace)
        return self.get(session.session_id, namespace=session.namespace)

    def delete(
        self,
        session_id: str,
        *,
        namespace: str | None = None,
        events: bool = False,
        forget: bool = False,
    ) -> dict[str, int]:
        """Delete a session's row (its state); with ``events=True`` its memories too.

        Without ``events`` the memories recorded in the session stay: they are
        long-term memory, the session row is only operational state.
        ``forget=True`` deletes the events too and replaces the session id by its
        pseudonym in every audit row of the namespace that names it (the rows stay:
        see :mod:`nbmemory.pseudonyms`); it also works for a session whose row and
        events are gone already.  ``purge()`` then erases the old bytes from the file.
        Returns ``{"sessions": rows deleted, "events": events deleted}``, and with
        ``forget`` ``"audit_rows"``: audit rows pseudonymised.
        """
        ns = self.core.ns(namespace)
        session_id = check_name(session_id, "session_id")
        forget = check_flag(forget, "forget")
        events = check_flag(events, "events") or forget
        with self.core.writer.transaction() as tx:
            removed: list[str] = []
            if events:
                removed = tx.events.delete(namespace=ns, filters={"session_id": session_id})
                if removed:
                    tx.audit("delete", removed, ns)
            gone = tx.sessions.delete(ns, [session_id])
            rows = 0
            target = session_id
            if forget:
                pseudonyms = Pseudonyms(tx)
                rows = pseudonymise_trail(tx, [session_id], [ns], pseudonyms)
                target = pseudonyms(session_id)
            if not gone and not removed and not rows:
                raise SessionNotFound(session_id, ns)
            details: dict[str, Any] = {"events_deleted": len(removed)}
            if forget:
                details["audit_rows_pseudonymised"] = rows
            if gone or forget:
                tx.audit("session_delete", [target], ns, details)
        if self.contexts is not None:  # its questions and contexts go with it
            self.contexts.cache.drop(ns, session_id)
        result = {"sessions": len(gone), "events": len(removed)}
        if forget:
            result["audit_rows"] = rows
        return result

    def forget_user(
        self, user_id: str, *, namespace: str | None = None, all_namespaces: bool = False
    ) -> dict[str, Any]:
        """Forget a user: delete their sessions and every event recorded in them, and
        put pseudonyms in place of the user id and those session ids in the audit trail.

        The sessions are those with the user's rows, and those the audit trail says
        were started for the user whose rows are gone (a TTL cleanup keeps the events);
        a session id now used by another user's session is left alone.  In the
        namespace (the Memory's by default) or, with ``all_namespaces=True``, in every
        one.  Audit rows stay, with what happened and when; only the ids change (see
        :mod:`nbmemory.pseudonyms`).  Facts, macros and tasks belong to a namespace,
        not a user, and stay.  ``purge()`` then erases the old bytes from the file.

        Returns ``{"user": the user's pseudonym, "sessions": n, "events": n,
        "audit_rows": n, "namespaces": [...]}`` (zeros when nothing named the user).
        """
        user_id = check_name(user_id, "user_id")
        ns = None if check_flag(all_namespaces, "all_namespaces") else self.core.ns(namespace)
        with self.core.writer.transaction() as tx:
            keys = set(tx.sessions.of_user(user_id, ns))
            started = set(tx.store.audit.sessions_started_for(user_id, ns)) - keys
            taken = tx.sessions.owners(sorted(started))  # by another user since
            keys |= {key for key in started if taken.get(key, user_id) == user_id}
            by_namespace: dict[str, list[str]] = {}
            for space, sid in sorted(keys):
                by_namespace.setdefault(space, []).append(sid)
            counts: dict[str, tuple[int, int]] = {}
            for space, sids in by_namespace.items():
                removed = tx.events.delete(namespace=space, filters={"session_id": sids})
                if removed:
                    tx.audit("delete", removed, space)
                gone = tx.sessions.delete(space, sids)
                counts[space] = (len(gone), len(removed))
            pseudonyms = Pseudonyms(tx)
            ids = [user_id, *(sid for _, sid in keys)]
            scope = None if ns is None else [ns]
            rows = pseudonymise_trail(tx, ids, scope, pseudonyms)
            user = pseudonyms(user_id)
            for space in sorted(counts) or ([ns] if ns is not None and rows else []):
                sessions, events = counts.get(space, (0, 0))
                details = {"sessions": sessions, "events": events, "audit_rows_pseudonymised": rows}
                tx.audit("forget_user", [user], space, details)
            if not counts and ns is None and rows:
                tx.audit("forget_user", [user], None, {"audit_rows_pseudonymised": rows})
        if self.contexts is not None:
            for space, sid in keys:
                self.contexts.cache.drop(space, sid)
        return {
            "user": user,
            "sessions": sum(c[0] for c in counts.values()),
            "events": sum(c[1] for c in counts.values()),
            "audit_rows": rows,
            "namespaces": sorted(counts),
        }

    def list(
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
        all_namespaces = check_flag(all_namespaces, "all_namespaces")
        include_untracked = check_flag(include_untracked, "include_untracked")
        frame = self.core.store.sessions.with_events(
            None if all_namespaces else self.core.ns(namespace)
        )
        if not include_untracked:
            frame = frame[frame["status"] != "untracked"]
        if user_id is not None:
            if not isinstance(user_id, str):
                raise InvalidInput(f"user_id must be a string, got {shown(user_id)}")
            frame = frame[frame["user_id"] == check_text(user_id, "user_id", allow_empty=True)]
        ttl = pd.Timedelta(hours=self.core.settings.session_ttl_hours)
        tracked = frame["status"] != "untracked"
        frame["expires_at"] = (frame["last_activity"] + ttl).where(tracked)
        frame["state"] = [parse_state(s) if isinstance(s, str) else None for s in frame["state"]]
        frame["events"] = frame["events"].astype("int64")
        expired = (frame["status"] == ACTIVE) & (frame["last_activity"] < self.core.clock() - ttl)
        frame.loc[expired, "status"] = "expired"
        frame = frame.sort_values(
            ["namespace", "last_activity", "session_id"], ascending=[True, False, True]
        )
        return frame.reindex(columns=LIST_COLUMNS).reset_index(drop=True)

    def cleanup(
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
        dry_run = check_flag(dry_run, "dry_run")
        ns = None if check_flag(all_namespaces, "all_namespaces") else self.core.ns(namespace)
        ttl_hours = self.core.settings.session_ttl_hours
        cutoff = self.core.clock() - dt.timedelta(hours=ttl_hours)
        frame = self.core.store.sessions.expired(cutoff, ns)
        frame.attrs["dry_run"] = dry_run
        if dry_run or frame.empty:
            return frame
        with self.core.writer.transaction() as tx:
            for space, group in frame.groupby("namespace", sort=True):
                ids = tx.sessions.delete(str(space), list(group["session_id"]))
                tx.audit("cleanup", ids, str(space), {"what": "sessions", "ttl_hours": ttl_hours})
        return frame
