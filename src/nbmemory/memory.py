"""``Memory``: the facade agents, magics, widgets and the CLI all call.

It opens the store, builds the shared :class:`~nbmemory.core.Core` (store,
writer, indexes, working memory, embedder and its worker, retriever), hands it
to the features, and exposes their methods.  Each public method is a one-line
delegator to the feature that implements it; nothing here speaks SQL, and
nothing imports IPython, ipywidgets or plotly, so the same object is an agent's
memory in production.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime as dt
import functools
import random
import time
import weakref
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

from .automation.allowed_prefixes import Prefixes
from .automation.scheduler import Scheduler
from .automation.tool_macros import Macros
from .config import DEFAULT_MODEL, DEFAULT_NAMESPACE, Settings, default_store_path
from .core import build_core
from .errors import InvalidInput, WriteConflict
from .knowledge.agents_md import AgentsMd
from .knowledge.consolidation import Consolidation, Consolidator
from .knowledge.fact_book import Facts
from .log.embeddings import Embeddings
from .log.event_log import EventLog
from .log.memories import Memories
from .redaction import Redactor
from .retrieval import (
    Embedder,
    EmbeddingWorker,
    Indexes,
    Retriever,
    WorkingMemory,
    estimate_tokens,
    resolve_embedder,
)
from .retrieval.rerank import Reranker, as_reranker
from .sessions.audit_trail import Audit
from .sessions.lifecycle import Sessions
from .store import Store, Writer, open_store
from .transfer.json_files import Transfer
from .transfer.sqlite_import import SqliteImport
from .validation import check_name, check_unit_interval

_OPEN: weakref.WeakSet[Memory] = weakref.WeakSet()
#: Times a call that met another lake writer's commit is run in all.
CONFLICT_RETRIES = 30
#: The longest wait (s) between two tries of a conflicting call (jittered, doubling).
CONFLICT_BACKOFF_MAX = 0.5

P = ParamSpec("P")
R = TypeVar("R")


def _delegate(
    component: str, method: Callable[Concatenate[Any, P], R], *, one_turn: bool = True
) -> Callable[Concatenate[Memory, P], R]:
    """A ``Memory`` method that checks the store is open and calls the feature's method.

    In shared mode the whole call is one turn on the file (its statements queue
    once), except for calls that wait on other threads or run the caller's code
    (``one_turn=False``): holding the file then would block those threads.
    """
    name = method.__name__

    @functools.wraps(method)
    def delegator(self: Memory, /, *args: P.args, **kwargs: P.kwargs) -> R:
        self._check_open()
        for attempt in range(CONFLICT_RETRIES):
            committed = self.store.begin_call()
            try:
                with self.store.turn() if one_turn else contextlib.nullcontext():
                    result: R = getattr(getattr(self, component), name)(*args, **kwargs)
                return result
            except WriteConflict:
                # a lake writer met another at once: run the call again, if nothing of it stuck
                if attempt == CONFLICT_RETRIES - 1 or self.store.begin_call() != committed:
                    raise
                wait = min(CONFLICT_BACKOFF_MAX, 0.01 * 2**attempt)
                time.sleep(random.uniform(0, wait))  # back off, not synchronise
        raise AssertionError("unreachable")  # pragma: no cover

    return delegator


class Memory:
    """An agent's memory in one DuckDB file.

    >>> mem = Memory(":memory:", embedder="hash")
    >>> _ = mem.add_event("s1", "user", "My name is John and I love TypeScript")
    >>> mem.flush()
    True
    >>> mem.search("What language do I love?", limit=1)["content"].iloc[0]
    'My name is John and I love TypeScript'

    ``path`` defaults to ``$NBMEMORY_PATH`` or ``./nbmemory.duckdb``.  ``embedder``
    is ``None`` (all-MiniLM-L6-v2 through fastembed, or ``Settings.embedding_model``),
    a model name, ``"hash"`` (the offline test embedder), an
    :class:`~nbmemory.retrieval.Embedder`, or any callable ``list[str] -> array``.
    Keyword settings (``relevance_threshold=0.5``) override
    :class:`~nbmemory.config.Settings` defaults.  ``shared=True`` lets several
    processes use the same file, each holding it only while an operation runs
    (slower; see :mod:`nbmemory.store.shared`); ``None`` reads ``$NBMEMORY_SHARED``.
    A DuckDB file of another application is refused without being changed, unless
    ``adopt=True`` asks to add nbmemory's tables beside its own.
    A ``ducklake:`` address as ``path`` opens a lake that many processes and hosts
    write at once (catalog in PostgreSQL; ``data_path``: the folder of its Parquet
    files, needed when the lake is made); ``snapshot`` (an id or a datetime) opens
    it read-only as it was then.  See ``docs/lake.md``.
    ``reranker`` re-scores the best ``rerank_top_n`` (20) candidates of every
    search and of the context's relevance: a callable ``(query, texts) -> scores``
    or an object with fastembed's ``TextCrossEncoder`` interface (``.rerank``);
    None (the default) keeps the first-stage order.

    Which search is for what:

    =================================  ==============================================
    ``search(query)``                  the best memories for a question: hybrid
                                       (cosine + keywords + neighbours) by default
    ``get_context(session, query)``    what an agent's next prompt should hold:
                                       recency + salience + relevance, deduplicated
    ``search_memories(text)``          Astreus API: memories only (not messages),
                                       cosine ranked and paged, or substring match
    ``search_memories_by_similarity``  Astreus API: memories over a similarity
                                       threshold (0.7), cosine or distance score
    ``relevant_facts(query)``          facts (category, key, value) by similarity
    =================================  ==============================================
    """

    def __init__(
        self,
        path: str | None = None,
        *,
        embedder: Any = None,
        settings: Settings | None = None,
        namespace: str = DEFAULT_NAMESPACE,
        read_only: bool = False,
        shared: bool | None = None,
        adopt: bool = False,
        token_counter: Callable[[str], int] = estimate_tokens,
        actor: str = "api",
        reranker: Any = None,
        data_path: str | None = None,
        snapshot: int | dt.datetime | None = None,
        **overrides: Any,
    ) -> None:
        settings = (settings or Settings()).replace(**overrides)
        rerank = as_reranker(reranker)
        namespace = check_name(namespace, "namespace")
        model = _embedder(embedder, settings)
        self.path = str(path) if path is not None else default_store_path()
        self._closed = False
        self._redactor_cache: tuple[Any, Redactor | None] | None = None
        store = open_store(
            self.path,
            read_only=read_only,
            shared=shared,
            adopt=adopt,
            data_path=data_path,
            snapshot=snapshot,
        )
        try:
            store.redactor = self._redact
            store.redaction_suspects = self._redaction_suspects
            self._core = core = build_core(
                store, model, settings, namespace, actor, token_counter, reranker=rerank
            )
            # the parts, for those who need them (tests, research, the notebook)
            self.store: Store = core.store
            self.writer: Writer = core.writer
            self.retriever: Retriever = core.retriever
            self.indexes: Indexes = core.indexes
            self.working: WorkingMemory = core.working
            self.worker: EmbeddingWorker | None = core.worker
            self.embedder: Embedder = core.embedder
            self.namespace: str = namespace
            self._sessions = Sessions(core)
            self._events = EventLog(core)
            self._embeddings = Embeddings(core)
            self._audit = Audit(core)
            self._agents_md = AgentsMd(core)
            self._transfer = Transfer(core)
            self._sqlite = SqliteImport(core)
            self._memories = Memories(core)
            self._facts = Facts(core)
            self._macros = Macros(core)
            self._prefixes = Prefixes(core)
            self._tasks = Scheduler(core)
            self._consolidation = Consolidation(core)
            if core.worker is not None:
                core.worker.submit(store.vectors.pending())  # left without a vector by a crash
                if settings.background_consolidation:  # first run after one interval
                    self._consolidation.start_consolidation()
        except BaseException:  # a store that cannot be used is let go at once
            self._abandon(store)
            raise
        _OPEN.add(self)

    def _abandon(self, store: Store) -> None:
        """Stop what an open that failed half-way started, and close its file."""
        core = getattr(self, "_core", None)
        with contextlib.suppress(Exception):
            if core is not None and core.worker is not None:
                core.worker.stop()
            consolidation = getattr(self, "_consolidation", None)
            if consolidation is not None:
                consolidation.stop_consolidation()
        store.close()

    @property
    def model_name(self) -> str:
        """Name of the embedding model; vectors of other models are never compared."""
        return self._core.model

    @property
    def reranker(self) -> Reranker | None:
        """What re-scores the best candidates of search and context (None: nothing).

        Set it to a callable ``(query, texts) -> scores``, an object with a
        ``.rerank(query, documents)`` method (fastembed's ``TextCrossEncoder``),
        or None; it applies from the next call on.
        """
        return self._core.retriever.reranker

    @reranker.setter
    def reranker(self, value: Any) -> None:
        self._core.retriever.reranker = as_reranker(value)

    @property
    def actor(self) -> str:
        """Who the audit trail says made the changes through this object."""
        return self._core.writer.actor

    @actor.setter
    def actor(self, value: str) -> None:
        self._core.writer.actor = check_name(value, "actor")

    @property
    def clock(self) -> Callable[[], dt.datetime]:
        """The current naive-UTC time sessions and cleanups use (tests replace it)."""
        return self._core.clock

    @clock.setter
    def clock(self, value: Callable[[], dt.datetime]) -> None:
        self._core.clock = value

    # -- settings -----------------------------------------------------------------------
    @property
    def settings(self) -> Settings:
        return self._core.settings

    def configure(self, **changes: Any) -> Settings:
        """Change settings of this open store (validated, audited); returns the new settings."""
        self._check_open()
        return self._configure(changes, "configure", {"changes": changes})

    def apply_thresholds(
        self,
        *,
        relevance_threshold: float | None = None,
        salience_threshold: float | None = None,
        similarity_threshold: float | None = None,
        source: str = "api",
    ) -> Settings:
        """Apply tuned thresholds (what the threshold tuner's *Apply* calls).

        Only the values given change; one audit row (action ``settings``) keeps the
        old and new values and where they came from.
        """
        self._check_open()
        changes = {
            name: check_unit_interval(
                value, name, low=-1.0 if name != "salience_threshold" else 0.0
            )
            for name, value in (
                ("relevance_threshold", relevance_threshold),
                ("salience_threshold", salience_threshold),
                ("similarity_threshold", similarity_threshold),
            )
            if value is not None
        }
        if not changes:
            raise InvalidInput(
                "nothing to apply: pass relevance_threshold=, salience_threshold= "
                "or similarity_threshold="
            )
        source = check_name(source, "source")
        before = {name: getattr(self.settings, name) for name in changes}
        details = {"before": before, "after": changes, "source": source}
        return self._configure(changes, "settings", details)

    def _configure(self, changes: dict[str, Any], action: str, details: dict) -> Settings:
        core = self._core
        core.settings = core.settings.replace(**changes)
        if "working_memory_cap" in changes:
            core.working.resize(core.settings.working_memory_cap)
        if core.worker is not None:
            core.worker.batch_size = core.settings.embed_batch_size
        if not core.store.read_only:
            core.writer.audit(action, [], None, details)
        return core.settings

    @property
    def redactor(self) -> Redactor | None:
        """The compiled redaction patterns of the current settings (None when disabled)."""
        s = self._core.settings
        key = (s.redaction, s.redact_patterns, s.redact_pii)
        if self._redactor_cache is None or self._redactor_cache[0] != key:
            redactor = Redactor(s.redact_patterns, pii=s.redact_pii) if s.redaction else None
            self._redactor_cache = (key, redactor)
        return self._redactor_cache[1]

    def _redact(self, text: str) -> tuple[str, int]:
        redactor = self.redactor
        if redactor is None:
            return text, 0
        result = redactor.redact(text)
        return result.text, result.count

    def _redaction_suspects(self, texts: list[str]) -> list[int]:
        redactor = self.redactor
        return [] if redactor is None else redactor.suspects(texts)

    # -- lifecycle -----------------------------------------------------------------------
    def close(self) -> None:
        """Stop the background threads (finishing the batch in hand) and close the file."""
        if self._closed:
            return
        self._closed = True
        self._agents_md.stop()  # watchers write through the store
        self._consolidation.stop_consolidation()
        if self._core.worker is not None:
            self._core.worker.stop()
        store, indexes = self._core.store, self._core.indexes
        if indexes.cache is not None and store.sole_writer():
            # where the rows the saved indexes lack are, for the next process (no hashing)
            record = store.close_after(indexes.closing_record)
            if record is not None:
                indexes.record_closed(record)
        else:
            store.close()
        indexes.clear()
        _OPEN.discard(self)

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<Memory {self.store.path!r} namespace={self.namespace!r} model={self.model_name!r} {state}>"

    def _check_open(self) -> None:
        if self._closed:
            raise InvalidInput("this Memory is closed; open a new one with Memory(path)")

    @property
    def consolidator(self) -> Consolidator | None:
        """The running background consolidation, if any."""
        return self._consolidation.consolidator

    @property
    def backlog(self) -> int:
        """Events queued for embedding in this process and not yet written."""
        return self._embeddings.backlog

    # -- events and search ----------------------------------------------------------------
    add_event = _delegate("_events", EventLog.add_event)
    add_events = _delegate("_events", EventLog.add_events)
    get_event = _delegate("_events", EventLog.get_event)
    events = _delegate("_events", EventLog.events)
    recent = _delegate("_events", EventLog.recent)
    delete = _delegate("_events", EventLog.delete)
    purge = _delegate("_events", EventLog.purge)
    status = _delegate("_events", EventLog.status)
    search = _delegate("retriever", Retriever.search)
    get_context = _delegate("retriever", Retriever.get_context)
    embed_query = _delegate("retriever", Retriever.embed_query)
    flush = _delegate("_embeddings", Embeddings.flush, one_turn=False)
    retry_failed_embeddings = _delegate("_embeddings", Embeddings.retry_failed_embeddings)
    reembed = _delegate("_embeddings", Embeddings.reembed)
    memory_vectors = _delegate("_embeddings", Embeddings.memory_vectors)
    embed_queries = _delegate("_embeddings", Embeddings.embed_queries)
    # -- long-term memories, facts, macros, prefixes, tasks, consolidation --------------------
    add_memory = _delegate("_memories", Memories.add_memory)
    remember_conversation = _delegate("_memories", Memories.remember_conversation)
    get_memory = _delegate("_memories", Memories.get_memory)
    search_memories = _delegate("_memories", Memories.search_memories)
    search_memories_by_similarity = _delegate("_memories", Memories.search_memories_by_similarity)
    list_memories = _delegate("_memories", Memories.list_memories)
    update_memory = _delegate("_memories", Memories.update_memory)
    delete_memory = _delegate("_memories", Memories.delete_memory)
    clear_memories = _delegate("_memories", Memories.clear_memories)
    generate_embedding_for_memory = _delegate("_memories", Memories.generate_embedding_for_memory)
    set_fact = _delegate("_facts", Facts.set_fact)
    get_fact = _delegate("_facts", Facts.get_fact)
    facts = _delegate("_facts", Facts.facts)
    fact_history = _delegate("_facts", Facts.fact_history)
    delete_fact = _delegate("_facts", Facts.delete_fact)
    relevant_facts = _delegate("_facts", Facts.relevant_facts)
    learn_macros = _delegate("_macros", Macros.learn_macros)
    macros = _delegate("_macros", Macros.macros)
    add_macro = _delegate("_macros", Macros.add_macro)
    suggest_next_tool = _delegate("_macros", Macros.suggest_next_tool)
    record_macro_use = _delegate("_macros", Macros.record_macro_use)
    delete_macro = _delegate("_macros", Macros.delete_macro)
    add_allowed_prefix = _delegate("_prefixes", Prefixes.add_allowed_prefix)
    allowed_prefixes = _delegate("_prefixes", Prefixes.allowed_prefixes)
    remove_allowed_prefix = _delegate("_prefixes", Prefixes.remove_allowed_prefix)
    is_command_allowed = _delegate("_prefixes", Prefixes.is_command_allowed)
    schedule_task = _delegate("_tasks", Scheduler.schedule_task)
    get_task = _delegate("_tasks", Scheduler.get_task)
    scheduled_tasks = _delegate("_tasks", Scheduler.scheduled_tasks)
    pause_task = _delegate("_tasks", Scheduler.pause_task)
    resume_task = _delegate("_tasks", Scheduler.resume_task)
    delete_task = _delegate("_tasks", Scheduler.delete_task)
    due_tasks = _delegate("_tasks", Scheduler.due_tasks)
    run_due = _delegate("_tasks", Scheduler.run_due, one_turn=False)
    consolidate = _delegate("_consolidation", Consolidation.consolidate, one_turn=False)
    start_consolidation = _delegate(
        "_consolidation", Consolidation.start_consolidation, one_turn=False
    )
    stop_consolidation = _delegate(
        "_consolidation", Consolidation.stop_consolidation, one_turn=False
    )
    # -- sessions, audit, AGENTS.md, export and import -----------------------------------------
    start_session = _delegate("_sessions", Sessions.start_session)
    continue_session = _delegate("_sessions", Sessions.continue_session)
    get_session = _delegate("_sessions", Sessions.get_session)
    save_session_state = _delegate("_sessions", Sessions.save_session_state)
    close_session = _delegate("_sessions", Sessions.close_session)
    delete_session = _delegate("_sessions", Sessions.delete_session)
    forget_user = _delegate("_sessions", Sessions.forget_user)
    sessions = _delegate("_sessions", Sessions.sessions)
    cleanup_sessions = _delegate("_sessions", Sessions.cleanup_sessions)
    audit_log = _delegate("_audit", Audit.audit_log)
    cleanup_audit = _delegate("_audit", Audit.cleanup_audit)
    sync_agents_md = _delegate("_agents_md", AgentsMd.sync_agents_md)
    watch_agents_md = _delegate("_agents_md", AgentsMd.watch_agents_md, one_turn=False)
    export_json = _delegate("_transfer", Transfer.export_json)
    import_json = _delegate("_transfer", Transfer.import_json)
    import_sqlite = _delegate("_sqlite", SqliteImport.import_sqlite)


def _embedder(spec: Any, settings: Settings) -> Embedder:
    """The embedder asked for; ``Settings.embedding_model`` is the default model's name.

    An explicit embedder and a different ``embedding_model`` contradict each other:
    that is refused rather than one of them being silently ignored.
    """
    if spec is None:
        return resolve_embedder(settings.embedding_model)
    embedder = resolve_embedder(spec)
    if settings.embedding_model not in (DEFAULT_MODEL, embedder.name):
        raise InvalidInput(
            f"embedding_model={settings.embedding_model!r} names one model but the embedder "
            f"is {embedder.name!r}; pass one of them (embedding_model= alone picks a fastembed model)"
        )
    return embedder


@atexit.register
def _close_all() -> None:  # stop worker threads so interpreter exit never hangs
    for memory in list(_OPEN):
        with contextlib.suppress(Exception):
            memory.close()
