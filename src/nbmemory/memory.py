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
import os
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import config_file
from .automation.allowed_prefixes import Prefixes
from .automation.scheduler import Scheduler
from .automation.tool_macros import Macros
from .config import DEFAULT_MODEL, DEFAULT_NAMESPACE, Settings, default_store_path
from .config_file import ConfigFile
from .core import Core
from .errors import InvalidInput
from .facade.aliases import AstreusNames, OlderNames
from .facade.calls import Gate, delegate
from .facade.groups import (
    AgentsMdGroup,
    AuditGroup,
    ConsolidationGroup,
    EmbeddingsGroup,
    FactsGroup,
    MacrosGroup,
    MemoriesGroup,
    PrefixesGroup,
    SessionsGroup,
    TasksGroup,
    TransferGroup,
)
from .facade.research_group import ResearchGroup
from .facade.upkeep import Upkeep
from .knowledge.agents_md import KIND as AGENTS_MD_KIND
from .knowledge.agents_md import AgentsMd
from .knowledge.consolidation import Consolidation
from .knowledge.fact_book import Facts
from .knowledge.learnings import Learnings
from .log.embeddings import Embeddings
from .log.event_log import EventLog
from .log.memories import Memories
from .redaction import Redactor
from .retrieval import Embedder, Retriever, estimate_tokens, resolve_embedder
from .retrieval.embedders import close_embedder
from .retrieval.model_pool import give_back_memory
from .retrieval.rerank import Reranker, as_reranker
from .sessions.audit_trail import Audit
from .sessions.contexts import SessionContexts
from .sessions.lifecycle import Sessions
from .store import Store, open_store
from .transfer.json_files import Transfer
from .transfer.sqlite_import import SqliteImport
from .validation import (
    check_flag,
    check_name,
    check_timeout,
    check_unit_interval,
    shown,
    store_address,
)

_OPEN: weakref.WeakSet[Memory] = weakref.WeakSet()


class Memory(AstreusNames, OlderNames):
    """An agent's memory in one DuckDB file.

    >>> mem = Memory(":memory:", embedder="hash")
    >>> _ = mem.add_event("s1", "user", "My name is John and I love TypeScript")
    >>> mem.flush()
    True
    >>> mem.search("What language do I love?", limit=1)["content"].iloc[0]
    'My name is John and I love TypeScript'
    >>> _ = mem.facts.set("user", "language", "TypeScript")
    >>> mem.facts.get("user", "language")["value"]
    'TypeScript'

    ``path`` (a ``str``, ``pathlib.Path`` or ``bytes``; a leading ``~`` is the home
    folder) defaults to ``$NBMEMORY_PATH`` or ``./nbmemory.duckdb``.  ``embedder``
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
    ``config``: the project's configuration file (``nbmemory.toml`` or
    ``[tool.nbmemory]`` in ``pyproject.toml``, :mod:`nbmemory.config_file`): None finds
    it beside the store or in the working folder, a path names it, False reads none.
    Arguments given here win over the file.

    The event log's verbs are methods of the Memory itself (``add_event(s)``,
    ``get``, ``update``, ``delete``, ``events``, ``recent``, ``search``,
    ``get_context``, ``flush``, ``status``, ``purge``); the rest is grouped:
    ``mem.facts``, ``mem.tasks``, ``mem.macros``, ``mem.prefixes``,
    ``mem.sessions``, ``mem.audit``, ``mem.agents_md``, ``mem.memories`` (the
    Astreus API), ``mem.consolidation``, ``mem.embeddings``, ``mem.transfer``
    and ``mem.research``.  The older flat names (``set_fact``, ``audit_log`` ...)
    and the Astreus API's (``add_memory`` ...) still work: see
    :mod:`nbmemory.facade.aliases`.

    Which search is for what:

    =====================================  ==========================================
    ``search(query)``                      the best memories for a question: hybrid
                                           (cosine + keywords + neighbours) by
                                           default, ``mode="vector"`` or
                                           ``"keyword"``; every kind of event
    ``get_context(session, query)``        what an agent's next prompt should hold:
                                           recency + salience + relevance
    ``memories.search(text)``              Astreus API: memories only (not
                                           messages), exact cosine, paged, or a
                                           substring match
    ``memories.search_by_similarity(q)``   Astreus API: memories over a similarity
                                           threshold (0.7), cosine or distance
    ``facts.relevant(query)``              facts (category, key, value) by similarity
    =====================================  ==========================================
    """

    #: Facts: ``(category, key) -> value`` with history (:class:`~.facade.groups.FactsGroup`).
    facts: FactsGroup
    #: Scheduled tasks (:class:`~.facade.groups.TasksGroup`).
    tasks: TasksGroup
    #: Learnt and hand-written tool macros (:class:`~.facade.groups.MacrosGroup`).
    macros: MacrosGroup
    #: Allowed command prefixes (:class:`~.facade.groups.PrefixesGroup`).
    prefixes: PrefixesGroup
    #: Sessions, and forgetting a user (:class:`~.facade.groups.SessionsGroup`).
    sessions: SessionsGroup
    #: The audit trail (:class:`~.facade.groups.AuditGroup`).
    audit: AuditGroup
    #: AGENTS.md sync, watch and learnings (:class:`~.facade.groups.AgentsMdGroup`).
    agents_md: AgentsMdGroup
    #: The Astreus memory API (:class:`~.facade.groups.MemoriesGroup`).
    memories: MemoriesGroup
    #: Consolidation now or in the background (:class:`~.facade.groups.ConsolidationGroup`).
    consolidation: ConsolidationGroup
    #: The events' vectors (:class:`~.facade.groups.EmbeddingsGroup`).
    embeddings: EmbeddingsGroup
    #: JSON export/import and the SQLite import (:class:`~.facade.groups.TransferGroup`).
    transfer: TransferGroup

    def __init__(
        self,
        path: str | os.PathLike[str] | bytes | None = None,
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
        config: str | os.PathLike[str] | bool | None = None,
        **overrides: Any,
    ) -> None:
        _check_options(settings, read_only, shared, adopt, token_counter)
        actor = check_name(actor, "actor")
        store_path = store_address(default_store_path() if path is None else path)
        self._config: ConfigFile | None = _config_file(config, store_path)
        settings = config_file.merged(self._config, settings, overrides)
        rerank = as_reranker(reranker)
        namespace = check_name(namespace, "namespace")
        model = _embedder(embedder, settings)
        #: An embedder made here (not passed in) is this store's: close() lets go of its model.
        self._owns_embedder = embedder is None or isinstance(embedder, str)
        self._path = store_path
        self._redactor_cache: tuple[Any, Redactor | None] | None = None
        store = open_store(
            self._path,
            read_only=read_only,
            shared=shared,
            adopt=adopt,
            data_path=data_path,
            snapshot=snapshot,
        )
        self._gate = Gate(store)
        try:
            store.redactor = self._redact
            store.redaction_suspects = self._redaction_suspects
            self._core = core = Core(
                store, model, settings, namespace, actor, token_counter, reranker=rerank
            )
            self._retriever: Retriever = core.retriever
            self._events = EventLog(core)
            self._embeddings = Embeddings(core)
            self._consolidation = Consolidation(core)
            self._agents_md = AgentsMd(core)
            gate = self._gate
            self.facts = FactsGroup(gate, Facts(core))
            self.tasks = TasksGroup(gate, Scheduler(core))
            self.macros = MacrosGroup(gate, Macros(core))
            self.prefixes = PrefixesGroup(gate, Prefixes(core))
            self._contexts = SessionContexts(
                core, agents_kind=AGENTS_MD_KIND, run=lambda call: gate.run(call, one_turn=False)
            )
            self._sessions = Sessions(core, self._contexts)
            self._audit = Audit(core)
            self.sessions = SessionsGroup(gate, self._sessions)
            self.audit = AuditGroup(gate, self._audit)
            self.agents_md = AgentsMdGroup(gate, self._agents_md, Learnings(core))
            self.memories = MemoriesGroup(gate, Memories(core))
            self.consolidation = ConsolidationGroup(gate, self._consolidation)
            self.embeddings = EmbeddingsGroup(gate, self._embeddings)
            self.transfer = TransferGroup(gate, Transfer(core), SqliteImport(core))
            if core.worker is not None:
                core.submit_pending(store.vectors.pending())  # left without a vector by a crash
                self._embeddings.requeue_for_passages()  # long texts of an older store
                if settings.background_consolidation:  # first run after one interval
                    self._consolidation.start()
            if settings.agents_file is not None and not read_only and snapshot is None:
                self._open_agents_file(settings)
            self._upkeep: Upkeep | None = None
            if settings.upkeep and not store.read_only:
                self._upkeep = Upkeep(
                    core, self._sessions, self._audit, self._consolidation, self._gate.run
                )
        except BaseException:  # a store that cannot be used is let go at once
            self._abandon(store)
            raise
        _OPEN.add(self)

    def _open_agents_file(self, settings: Settings) -> None:
        """Sync the configured AGENTS.md (and watch it, with ``agents_auto_update``)."""
        path = str(settings.agents_file)
        where = "" if self._config is None else f" (set in {self._config.where('agents_file')})"
        try:
            if settings.agents_auto_update:
                self._agents_md.watch(path)
            else:
                self._agents_md.sync(path)
        except InvalidInput as exc:
            raise InvalidInput(f"agents_file {path}{where}: {exc}") from None

    @property
    def config_file(self) -> Path | None:
        """The configuration file this store read at open, or None."""
        return None if self._config is None else self._config.path

    def _abandon(self, store: Store) -> None:
        """Stop what an open that failed half-way started, and close its file."""
        core = getattr(self, "_core", None)
        with contextlib.suppress(Exception):
            if core is not None:
                core.stop_worker()
            consolidation = getattr(self, "_consolidation", None)
            if consolidation is not None:
                consolidation.stop()
            contexts = getattr(self, "_contexts", None)
            if contexts is not None:
                contexts.stop()
            if self._owns_embedder and core is not None:
                close_embedder(core.embedder)
        store.close()

    # -- what it is ------------------------------------------------------------------------
    @property
    def path(self) -> str:
        """The store: a file path, ``":memory:"`` or a ``ducklake:`` address."""
        return self._path

    @property
    def namespace(self) -> str:
        """The namespace every call uses unless given ``namespace=``."""
        return self._core.namespace

    @property
    def store(self) -> Store:
        """The store: tables, transactions, plain SQL (``mem.store.execute``)."""
        return self._core.store

    @property
    def core(self) -> Core:
        """The parts the features share: store, writer, indexes, working memory,
        embedder and its worker, retriever (for tests, benchmarks and research)."""
        return self._core

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

    @property
    def research(self) -> ResearchGroup:
        """The research toolkit on this store: frames, similarities, LoCoMo, evaluation,
        figures (:class:`~.facade.research_group.ResearchGroup`)."""
        return ResearchGroup(self, self._gate.check_open)

    # -- settings -----------------------------------------------------------------------
    @property
    def settings(self) -> Settings:
        return self._core.settings

    def configure(self, **changes: Any) -> Settings:
        """Change settings of this open store (validated, audited); returns the new settings."""
        self._gate.check_open()
        if (
            "embedding_model" in changes
            and changes["embedding_model"] != self.settings.embedding_model
        ):
            raise InvalidInput(
                "embedding_model is chosen when the store opens (the model is loaded then); "
                "open it again with Memory(path, embedding_model=...) and re-embed what it holds "
                "with mem.embeddings.reembed()"
            )
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
        self._gate.check_open()
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
        core.apply_batch_tokens()
        # the change that turns the audit trail off (or on) is itself recorded
        core.writer.audit_enabled = core.writer.audit_enabled or core.settings.audit_enabled
        if not core.store.read_only:
            core.writer.audit(action, [], None, details)
        core.writer.audit_enabled = core.settings.audit_enabled
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
        if self._gate.closed:
            return
        self._gate.closed = True
        self._agents_md.stop()  # watchers write through the store
        self._contexts.stop()
        upkeep = getattr(self, "_upkeep", None)
        if upkeep is not None:
            upkeep.stop()
        self._consolidation.stop()
        self._core.stop_worker()
        if self._owns_embedder:  # the last store using the model frees it
            close_embedder(self._core.embedder)
        store, indexes = self._core.store, self._core.indexes
        indexes.wait_for_saves()  # a refresh after a bulk ingest reads under the store's lock
        if indexes.cache is not None and store.sole_writer():
            # where the rows the saved indexes lack are, for the next process (no hashing)
            record = store.close_after(indexes.closing_record)
            if record is not None:
                indexes.record_closed(record)
        else:
            store.close()
        indexes.clear()
        _OPEN.discard(self)
        if not _OPEN:  # the last store of the process: its indexes' memory goes back
            give_back_memory(collect=False)  # the model's release collected, if it went

    @property
    def closed(self) -> bool:
        return self._gate.closed

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._gate.closed else "open"
        return f"<Memory {self.store.path!r} namespace={self.namespace!r} model={self.model_name!r} {state}>"

    # -- the event log, search and context ------------------------------------------------
    # no turn held for it: in shared mode it appends to the journal (store/journal.py)
    add_event = delegate("_events", EventLog.add_event, one_turn=False)
    add_events = delegate("_events", EventLog.add_events)
    get = delegate("_events", EventLog.get)
    update = delegate("_events", EventLog.update)
    delete = delegate("_events", EventLog.delete)
    events = delegate("_events", EventLog.events)
    recent = delegate("_events", EventLog.recent)
    search = delegate("_retriever", Retriever.search)
    get_context = delegate("_contexts", SessionContexts.get_context)
    _flush_vectors = delegate("_embeddings", Embeddings.flush, one_turn=False)

    def flush(self, timeout: float | None = None) -> bool:
        timeout = check_timeout(timeout)  # refused before the journal is written
        # shared mode: the rows add_event journalled are written (and queued) first
        self._gate.run(self._core.store.refresh, one_turn=False)
        return self._flush_vectors(timeout)

    flush.__doc__ = Embeddings.flush.__doc__

    def status(self) -> dict[str, Any]:
        """Path, model, counts per namespace/session/kind, the embedding backlog, and
        ``embedder``: the model's footprint in this process (loaded, shared by how
        many embedders, resident MiB its load added, ``max_tokens``, ``batch_tokens``;
        ``{}`` for an embedder that cannot say).

        ``without_text`` counts the events with no text (tool-call turns): they are
        never embedded, so they are neither pending nor failed.
        """
        info = self._gate.run(self._events.status)
        footprint = getattr(self._core.embedder, "footprint", None)
        info["embedder"] = footprint() if callable(footprint) else {}
        info["upkeep"] = None if self._upkeep is None else self._upkeep.status()
        return info

    purge = delegate("_events", EventLog.purge)


def _check_options(
    settings: Any, read_only: Any, shared: Any, adopt: Any, token_counter: Any
) -> None:
    """Refuse an argument of the wrong type before anything opens: a ``read_only="no"``
    would open the store read-only (a truthy text), a ``settings="x"`` fail half-way
    (the path is :func:`~nbmemory.validation.store_address`'s)."""
    if settings is not None and not isinstance(settings, Settings):
        raise InvalidInput(
            f"settings must be an nbmemory.Settings or None, got {type(settings).__name__}; "
            "pass single settings as keywords (Memory(path, relevance_threshold=0.5))"
        )
    check_flag(read_only, "read_only")
    check_flag(adopt, "adopt")
    if shared is not None and not isinstance(shared, bool):
        raise InvalidInput(
            f"shared must be True, False or None ($NBMEMORY_SHARED), got {shown(shared)}"
        )
    if not callable(token_counter):
        raise InvalidInput(
            f"token_counter must be a callable text -> int, got {type(token_counter).__name__}"
        )


def _config_file(
    config: str | os.PathLike[str] | bool | None, store_path: str
) -> ConfigFile | None:
    """The configuration file ``Memory(config=...)`` asks for (see its docstring)."""
    if config is False:
        return None
    if config is None or config is True:
        found = config_file.find(store_path)
        return None if found is None else config_file.load(found)
    if isinstance(config, (str, os.PathLike)):
        return config_file.load(config)
    raise InvalidInput(
        f"config must be the path of an nbmemory.toml, None (find it) or False (none), "
        f"got {config!r}"
    )


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
