"""The groups of a Memory's methods: ``mem.facts``, ``mem.tasks``, ``mem.sessions`` ...

Each group is a small object over one feature: its methods are the feature's,
run through the Memory's :class:`~.calls.Gate` (open store, one turn, retried
on a lake conflict), with the feature's signatures and docstrings, so
``mem.facts.<TAB>`` and ``help(mem.facts.set)`` show what there is.  Nothing
here holds state of its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import pandas as pd

from ..automation.allowed_prefixes import Prefixes
from ..automation.scheduler import Scheduler
from ..automation.tool_macros import Macros
from ..knowledge.agents_md import AgentsMd
from ..knowledge.consolidation import Consolidation, Consolidator
from ..knowledge.fact_book import Facts
from ..knowledge.learnings import Learnings
from ..log.embeddings import Embeddings
from ..log.memories import Memories
from ..sessions.audit_trail import Audit
from ..sessions.lifecycle import Sessions
from ..transfer.json_files import Transfer
from ..transfer.sqlite_import import SqliteImport
from .calls import Gate, delegate


class Group:
    """A few methods of a Memory over one feature (``mem.facts``, ``mem.tasks`` ...)."""

    #: The attribute of ``Memory`` that holds the group.
    _attribute: ClassVar[str] = ""

    def __init__(self, gate: Gate, feature: Any) -> None:
        self._gate = gate
        self._feature = feature

    def __repr__(self) -> str:
        names = [n for n in dir(type(self)) if not n.startswith("_")]
        store = self._gate.store.path
        return f"<nbmemory {self._attribute} of {store!r}: {', '.join(names)}>"


class FactsGroup(Group):
    """Facts: small named truths an agent keeps, ``(category, key) -> value``.

    ``set`` keeps a replaced value in the history; ``relevant`` ranks facts by
    similarity to a question.  ``mem.facts()`` is ``mem.facts.list()``.
    """

    _attribute = "facts"
    set = delegate("_feature", Facts.set)
    get = delegate("_feature", Facts.get)
    delete = delegate("_feature", Facts.delete)
    history = delegate("_feature", Facts.history)
    relevant = delegate("_feature", Facts.relevant)
    list = delegate("_feature", Facts.list)
    __call__ = list


class TasksGroup(Group):
    """Scheduled tasks: prompts an agent runs on a schedule (cron or plain English).

    Nothing runs by itself: ``run_due(callback)`` fires each due task once.
    """

    _attribute = "tasks"
    schedule = delegate("_feature", Scheduler.schedule)
    get = delegate("_feature", Scheduler.get)
    pause = delegate("_feature", Scheduler.pause)
    resume = delegate("_feature", Scheduler.resume)
    delete = delegate("_feature", Scheduler.delete)
    due = delegate("_feature", Scheduler.due)
    run_due = delegate("_feature", Scheduler.run_due, one_turn=False)
    list = delegate("_feature", Scheduler.list)


class MacrosGroup(Group):
    """Macros: tool -> next-tool chains learnt from the tool events, or written by hand.

    ``mem.macros()`` is ``mem.macros.list()``.
    """

    _attribute = "macros"
    learn = delegate("_feature", Macros.learn)
    add = delegate("_feature", Macros.add)
    suggest_next_tool = delegate("_feature", Macros.suggest_next_tool)
    record_use = delegate("_feature", Macros.record_use)
    delete = delegate("_feature", Macros.delete)
    list = delegate("_feature", Macros.list)
    __call__ = list


class PrefixesGroup(Group):
    """Allowed command prefixes: what a person allowed "always" (global to the store)."""

    _attribute = "prefixes"
    add = delegate("_feature", Prefixes.add)
    remove = delegate("_feature", Prefixes.remove)
    allows = delegate("_feature", Prefixes.allows)
    list = delegate("_feature", Prefixes.list)


class SessionsGroup(Group):
    """Sessions: an agent's operational state per user and namespace, with a TTL.

    ``forget_user`` erases a user (sessions, their events, ids in the audit trail).
    ``mem.sessions(namespace)`` is ``mem.sessions.list(namespace)``.
    """

    _attribute = "sessions"
    start = delegate("_feature", Sessions.start)
    resume = delegate("_feature", Sessions.resume)
    get = delegate("_feature", Sessions.get)
    save_state = delegate("_feature", Sessions.save_state)
    close = delegate("_feature", Sessions.close)
    delete = delegate("_feature", Sessions.delete)
    cleanup = delegate("_feature", Sessions.cleanup)
    forget_user = delegate("_feature", Sessions.forget_user)
    list = delegate("_feature", Sessions.list)
    __call__ = list


class AuditGroup(Group):
    """The audit trail: one row per change (actor, action, namespace, targets, details)."""

    _attribute = "audit"
    log = delegate("_feature", Audit.log)
    cleanup = delegate("_feature", Audit.cleanup)


class AgentsMdGroup(Group):
    """AGENTS.md as memories: each heading section one memory of kind ``agents_md``;
    ``add_learning`` appends what the agent learnt to the file and syncs it."""

    _attribute = "agents_md"

    def __init__(self, gate: Gate, feature: AgentsMd, learnings: Learnings) -> None:
        super().__init__(gate, feature)
        self._learnings = learnings

    sync = delegate("_feature", AgentsMd.sync)
    watch = delegate("_feature", AgentsMd.watch, one_turn=False)
    add_learning = delegate("_learnings", Learnings.add_learning)


class MemoriesGroup(Group):
    """The Astreus memory API's methods over memories (events of kind ``memory`` and
    ``summary``; conversation messages are never listed, changed or deleted here).

    ``mem.search`` is the search for everything; ``search`` and
    ``search_by_similarity`` here are the Astreus API's (memories only, exact
    cosine, paged, with its defaults and columns).
    """

    _attribute = "memories"
    add = delegate("_feature", Memories.add)
    remember_conversation = delegate("_feature", Memories.remember_conversation)
    get = delegate("_feature", Memories.get)
    search = delegate("_feature", Memories.search)
    search_by_similarity = delegate("_feature", Memories.search_by_similarity)
    update = delegate("_feature", Memories.update)
    delete = delegate("_feature", Memories.delete)
    clear = delegate("_feature", Memories.clear)
    generate_embedding = delegate("_feature", Memories.generate_embedding)
    list = delegate("_feature", Memories.list)

    def pages(
        self, text: str | None = None, *, page_size: int = 100, **options: Any
    ) -> Iterator[pd.DataFrame]:
        pages = self._feature.pages(text, page_size=page_size, **options)
        while True:  # each page in its own turn on the store (shared mode), not all at once
            page = self._gate.run(lambda: next(pages, None))
            if page is None:
                return
            yield page

    pages.__doc__ = Memories.pages.__doc__


class ConsolidationGroup(Group):
    """Consolidation: old messages summarised into memories and facts, on demand
    (``run``) or in the background (``start``/``stop``); with ``compact`` the
    originals move to an archive (``archive``, ``restore``, ``cleanup_archive``)."""

    _attribute = "consolidation"
    run = delegate("_feature", Consolidation.run, one_turn=False)
    start = delegate("_feature", Consolidation.start, one_turn=False)
    stop = delegate("_feature", Consolidation.stop, one_turn=False)
    archive = delegate("_feature", Consolidation.archive)
    restore = delegate("_feature", Consolidation.restore)
    cleanup_archive = delegate("_feature", Consolidation.cleanup_archive)

    @property
    def background(self) -> Consolidator | None:
        """The running background consolidation, if any."""
        consolidation: Consolidation = self._feature
        return consolidation.consolidator


class EmbeddingsGroup(Group):
    """The events' vectors: the queue, failures, re-embedding after a model change,
    and the vectors themselves (research).  ``mem.flush()`` waits for the queue."""

    _attribute = "embeddings"
    retry_failed = delegate("_feature", Embeddings.retry_failed)
    reembed = delegate("_feature", Embeddings.reembed)
    vectors = delegate("_feature", Embeddings.vectors)
    embed_query = delegate("_feature", Embeddings.embed_query)
    embed_queries = delegate("_feature", Embeddings.embed_queries)

    @property
    def backlog(self) -> int:
        """Events queued for embedding in this process and not yet written."""
        embeddings: Embeddings = self._feature
        return embeddings.backlog


class TransferGroup(Group):
    """Moving memories in and out: the JSON export and import, the SQLite import."""

    _attribute = "transfer"

    def __init__(self, gate: Gate, feature: Transfer, sqlite: SqliteImport) -> None:
        super().__init__(gate, feature)
        self._sqlite = sqlite

    export_json = delegate("_feature", Transfer.export_json)
    import_json = delegate("_feature", Transfer.import_json)
    import_sqlite = delegate("_sqlite", SqliteImport.import_sqlite)
