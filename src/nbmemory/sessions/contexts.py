"""A session's context: AGENTS.md first when the session asked for it, the contexts it
built kept while they hold, and the next plan step's context prefetched.

``mem.get_context`` comes here.  It builds the tri-hybrid context
(:meth:`nbmemory.retrieval.Retriever.get_context`) and then:

* in a session started with ``load_agents_md=True`` (Vectora's state persistence,
  003: the harness's ``load_agents_md: true``; "O conteúdo do AGENTS.md recebe maior
  prioridade durante a construção do contexto"), puts the namespace's AGENTS.md
  sections before every other memory: those the query found first, then the rest
  in the file's order.  ``Context.to_prompt`` keeps items best-first within its
  token budget (``max_memory_tokens``, 4096), so ordinary memories are dropped
  before any AGENTS.md section is;
* keeps the context in the session's context cache (:mod:`.context_cache`): the same
  call again, with nothing it depends on changed, returns the same object without
  building it again;
* :meth:`SessionContexts.prefetch` builds a context on a background thread (the
  resumed session's next plan step: 003's "Prefetching: Carrega contexto
  provavelmente necessário baseado na etapa atual do plano"), into the same cache.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

from ..config import Settings
from ..core import Core
from ..retrieval.context import Context, ContextItem, context_parameters, merge
from ..store.changes import Change
from ..validation import check_flag, check_name, check_text
from .context_cache import ContextCache
from .context_record import OPTIONS, ContextRecords

log = logging.getLogger(__name__)

#: Prefetches waiting for the background thread at most; more are dropped, never queued.
PREFETCH_QUEUE = 4

Runner = Callable[[Callable[[], Any]], Any]


def agents_md_flag(state: dict[str, Any]) -> bool:
    """Whether a session's state asks for AGENTS.md in its context (``context.load_agents_md``)."""
    context = state.get("context")
    return isinstance(context, dict) and context.get("load_agents_md") is True


def _state(raw: Any) -> dict[str, Any]:
    """A stored session state as a dict (anything else holds no flag)."""
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


class SessionContexts:
    """``get_context`` for every session, with AGENTS.md priority, the cache and prefetch."""

    def __init__(self, core: Core, *, agents_kind: str, run: Runner | None = None) -> None:
        self.core = core
        self.agents_kind = agents_kind
        self.cache = ContextCache(core.store)
        self.records = ContextRecords(core)
        self._run: Runner = run or (lambda call: call())
        self._flags: dict[tuple[str, str], bool] = {}
        self._flags_lock = threading.Lock()
        self._prefetcher: Prefetcher | None = None
        core.store.listen(self._follow_sessions)

    # -- which sessions load AGENTS.md -------------------------------------------------
    def set_flag(self, namespace: str, session_id: str, load_agents_md: bool) -> None:
        """Note what a session's state says (Sessions calls this when it reads or writes it)."""
        with self._flags_lock:
            self._flags[(namespace, session_id)] = load_agents_md

    def _flag(self, namespace: str, session_id: str) -> bool:
        where = (namespace, session_id)
        with self._flags_lock:
            known = self._flags.get(where)
        if known is not None:
            return known
        if where not in self.core.writer.active_sessions():  # never started: no SQL
            return False
        record = self.core.store.sessions.get(namespace, session_id)
        flag = record is not None and agents_md_flag(_state(record.get("state")))
        self.set_flag(namespace, session_id, flag)
        return flag

    def _follow_sessions(self, change: Change) -> None:
        """A session closed, deleted or changed by another process: read its flag again."""
        with self._flags_lock:
            if change.unknown:
                self._flags.clear()
            for where in change.sessions_inactive:
                self._flags.pop(where, None)

    # -- the context --------------------------------------------------------------------
    def get_context(
        self,
        session_id: str,
        query: str | None = None,
        *,
        namespace: str | None = None,
        recency_limit: int | None = None,
        salience_threshold: float | None = None,
        salience_limit: int | None = None,
        relevance_threshold: float | None = None,
        relevance_limit: int | None = None,
        max_tokens: int | None = None,
        explain: bool = False,
        settings: Settings | None = None,
    ) -> Context:
        """The tri-hybrid context for a session: what an agent's next prompt should hold.

        recency: the session's last ``recency_limit`` (10) events, from working memory;
        salience: memories of the namespace with importance >= ``salience_threshold``
        (0.8), up to ``salience_limit`` (5): in the ``hybrid`` profile those closest
        to ``query``, in ``spec`` the most important; relevance: similarity to ``query`` >
        ``relevance_threshold`` (the profile's: 0.65 spec, 0.2 hybrid), up to
        ``relevance_limit`` (5), re-ordered by the reranker when there is one (its
        best ``relevance_limit`` of the first ``rerank_top_n``).  Deduplicated by id.
        ``explain=True`` also collects the near misses (candidates just under a
        threshold) in ``context.near_misses``.

        In a session started with ``load_agents_md=True`` the namespace's AGENTS.md
        sections come first.  The same call again while nothing it depends on changed
        (no event added, changed, deleted or embedded in the namespace; same question,
        parameters and settings) returns the same context from the session's cache: treat
        a context as read-only.  Inside an open transaction nothing is cached.
        """
        ns = self.core.ns(namespace)
        session_id = check_name(session_id, "session_id")
        options: dict[str, Any] = {
            "recency_limit": recency_limit,
            "salience_threshold": salience_threshold,
            "salience_limit": salience_limit,
            "relevance_threshold": relevance_threshold,
            "relevance_limit": relevance_limit,
            "max_tokens": max_tokens,
            "explain": explain,
        }
        # checked before the cache is looked up: a key compared with an array or
        # pd.NA in it raised the comparison's own error, not the option's
        context_parameters(self.core.retriever.settings_of(settings), **options)
        check_flag(explain, "explain")
        if query is not None:
            check_text(query, "query")
        if self.core.store.in_transaction:  # it sees rows not committed (nor announced) yet
            context = self.core.retriever.get_context(
                session_id, query, namespace=ns, settings=settings, **options
            )
            return self._agents_first(context) if self._flag(ns, session_id) else context
        self.core.store.refresh()  # another writer's commits make contexts stale too
        key = self._key(ns, session_id, query, options, settings)
        cached = self.cache.get(ns, session_id, key)
        if cached is not None:
            self.core.writer.touch_session(ns, session_id)  # a read in the session is use
            return cached
        return self._build(ns, session_id, query, options, settings, key, last=True)

    def _key(
        self,
        namespace: str,
        session_id: str,
        query: Any,
        options: dict[str, Any],
        settings: Settings | None,
    ) -> tuple[Any, ...]:
        """Everything besides the store's rows that a context depends on: the store's
        day too, since a question's "yesterday" is read against it (a context cached
        yesterday answered today's "yesterday" with the day before)."""
        return (
            query,
            tuple(options.items()),
            self.core.clock().date(),
            settings if settings is not None else self.core.settings,
            id(self.core.retriever.reranker),
            self._flag(namespace, session_id),
        )

    def _build(
        self,
        namespace: str,
        session_id: str,
        query: Any,
        options: dict[str, Any],
        settings: Settings | None,
        key: tuple[Any, ...],
        *,
        last: bool,
    ) -> Context:
        stamp = self.cache.stamp(namespace)  # before: a change made meanwhile makes it stale
        fresh = self.records.freshness(namespace, session_id) if last else None
        context = self.core.retriever.get_context(
            session_id, query, namespace=namespace, settings=settings, **options
        )
        if key[-1]:
            context = self._agents_first(context)
        self.cache.put(namespace, session_id, key, stamp, context, last=last)
        if settings is None:  # a context built with other settings is not recorded
            self.records.record(namespace, session_id, query, options, context, fresh)
        return context

    def _agents_first(self, context: Context) -> Context:
        """The context with the namespace's AGENTS.md sections before everything else."""
        store = self.core.store
        ids = store.events.ids(
            namespace=context.namespace,
            filters={"kind": self.agents_kind},
            order="created_at, seq",
        )
        if not ids:
            return context
        rows = {row["id"]: row for row in store.events.rows(ids)}
        found = [item for item in context.items if item.id in rows]
        taken = {item.id for item in found}
        rest = merge([], [rows[i] for i in ids if i in rows and i not in taken], [])
        others = [item for item in context.items if item.id not in rows]
        items: list[ContextItem] = found + rest + others
        for rank, item in enumerate(items, start=1):
            item.rank = rank
        context.items = items
        return context

    def last_context(self, namespace: str, session_id: str) -> Context | None:
        """The context the session last asked for (see :meth:`resume_context`)."""
        return self.resume_context(namespace, session_id)[0]

    def resume_context(self, namespace: str, session_id: str) -> tuple[Context | None, str | None]:
        """The context the session last asked for and where it came from: ``"cache"``
        (this process built it and nothing it depends on changed), ``"restored"`` (read
        back from the session's stored state, :mod:`.context_record`, nothing changed
        since it was built in an earlier process) or ``"rebuilt"`` (built again with the
        same question and parameters); ``(None, None)`` when the session never built one."""
        key = self.cache.last(namespace, session_id)
        if key is not None:
            query, options = key[0], dict(key[1])
        else:
            self.core.store.refresh()
            entry = self.records.stored(namespace, session_id)
            if entry is None:
                return None, None
            query = entry.get("query")
            options = {name: entry["parameters"].get(name) for name in OPTIONS}
            stamp = self.cache.stamp(namespace)  # before the check, as a build reads it
            try:
                context = self.records.restore(namespace, session_id, entry)
            except Exception as exc:  # a record that cannot be read back is built again
                log.warning("nbmemory: could not restore session %r's context: %s", session_id, exc)
                context = None
            if context is not None:
                key = self._key(namespace, session_id, query, options, None)
                self.cache.put(namespace, session_id, key, stamp, context)
                self.core.writer.touch_session(namespace, session_id)
                return context, "restored"
        hits = self.cache.hits
        try:
            context = self.get_context(session_id, query, namespace=namespace, **options)
        except Exception as exc:
            if key is not None:  # this process's own question: its error is the caller's
                raise
            log.warning("nbmemory: session %r's recorded context is unusable: %s", session_id, exc)
            return None, None
        return context, "cache" if self.cache.hits > hits else "rebuilt"

    # -- prefetch -----------------------------------------------------------------------
    def prefetch(self, session_id: str, query: str, *, namespace: str | None = None) -> bool:
        """Build the context of ``query`` for the session on the background thread, into
        the cache the next ``get_context(session_id, query)`` reads.

        Never waits: at most :data:`PREFETCH_QUEUE` builds wait for the one thread, and
        one more is dropped (returns False).  Nothing is written but the session's
        ``last_activity`` (as any read in it does).
        """
        ns = self.core.ns(namespace)
        if self._prefetcher is None:
            self._prefetcher = Prefetcher(self._prefetch_one)
        return self._prefetcher.submit((ns, check_name(session_id, "session_id"), query))

    def _prefetch_one(self, job: tuple[str, str, str]) -> None:
        namespace, session_id, query = job
        options: dict[str, Any] = {
            "recency_limit": None,
            "salience_threshold": None,
            "salience_limit": None,
            "relevance_threshold": None,
            "relevance_limit": None,
            "max_tokens": None,
            "explain": False,
        }

        def build() -> None:
            self.core.store.refresh()
            key = self._key(namespace, session_id, query, options, None)
            if self.cache.get(namespace, session_id, key, last=False) is None:
                self._build(namespace, session_id, query, options, None, key, last=False)

        self._run(build)

    def wait_prefetched(self, timeout: float = 30.0) -> bool:
        """Block until every prefetch asked for so far has finished (False on timeout)."""
        return self._prefetcher is None or self._prefetcher.wait_idle(timeout)

    def stop(self) -> None:
        """Stop the prefetch thread (the store is closing)."""
        if self._prefetcher is not None:
            self._prefetcher.stop()


class Prefetcher:
    """One daemon thread running queued jobs; a full queue drops a job rather than wait."""

    def __init__(self, work: Callable[[Any], None]) -> None:
        self._work = work
        self._jobs: queue.Queue[Any] = queue.Queue(maxsize=PREFETCH_QUEUE)
        self._idle = threading.Condition()
        self._pending = 0
        self.done = 0
        self.dropped = 0
        self.failed = 0
        self._stopped = False
        self._thread = threading.Thread(target=self._loop, name="nbmemory-prefetch", daemon=True)
        self._thread.start()

    def submit(self, job: Any) -> bool:
        with self._idle:
            if self._stopped:
                return False
            try:
                self._jobs.put_nowait(job)
            except queue.Full:
                self.dropped += 1
                return False
            self._pending += 1
            return True

    def _loop(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            try:
                self._work(job)
            except Exception as exc:  # a prefetch is a guess: report, never raise
                self.failed += 1
                log.debug("nbmemory: prefetching a context failed: %s", exc)
            with self._idle:
                self._pending -= 1
                self.done += 1
                self._idle.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout)

    def stop(self, timeout: float = 10.0) -> None:
        with self._idle:
            self._stopped = True
        while True:  # make room for the sentinel: queued guesses are not worth waiting for
            try:
                self._jobs.get_nowait()
                with self._idle:
                    self._pending -= 1
                    self._idle.notify_all()
            except queue.Empty:
                break
        self._jobs.put(None)
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)
