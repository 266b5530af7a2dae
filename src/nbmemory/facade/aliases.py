"""Every other name a Memory answers to, in one place: the Astreus API's names and
the older flat names.

* :class:`AstreusNames` — the Astreus memory API's method names (``add_memory``,
  ``search_memories`` ...), kept for code written against that API: each is
  ``mem.memories.<method>`` under its Astreus name, same arguments, same result.
* :class:`OlderNames` — the flat names ``Memory`` had before its methods were
  grouped (``set_fact`` is ``mem.facts.set``, ``audit_log`` is ``mem.audit.log``
  ...).  They keep working, with no warning (a notebook is not the place for
  one); the documentation lists them under "Older names" and new code uses the
  groups.

:data:`ALIASES` maps every name here to the form it stands for; a test checks
that the documentation's table says the same.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from ..log.event_log import EventLog
from .groups import (
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

if TYPE_CHECKING:
    from ..core import Core
    from ..knowledge.consolidation import Consolidator
    from ..retrieval import Embedder, EmbeddingWorker, Indexes, Retriever, WorkingMemory
    from ..store import Writer

P = ParamSpec("P")
R = TypeVar("R")


def alias(
    group: str, method: Callable[Concatenate[Any, P], R], *, kind: str = "Older name"
) -> Callable[Concatenate[Any, P], R]:
    """A method of ``Memory`` calling ``mem.<group>.<method>`` (``mem.<method>`` when
    ``group`` is empty), with the same signature."""
    name = method.__name__
    stands_for = f"{group}.{name}" if group else name

    @functools.wraps(method)
    def call(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> R:
        result: R = getattr(getattr(self, group) if group else self, name)(*args, **kwargs)
        return result

    call.__doc__ = f"{kind} of ``mem.{stands_for}``.\n\n{method.__doc__ or ''}"
    call._stands_for = stands_for  # type: ignore[attr-defined]
    return call


class AstreusNames:
    """The Astreus memory API's names: ``mem.memories`` under the names that API uses."""

    add_memory = alias("memories", MemoriesGroup.add, kind="Astreus name")
    remember_conversation = alias(
        "memories", MemoriesGroup.remember_conversation, kind="Astreus name"
    )
    get_memory = alias("memories", MemoriesGroup.get, kind="Astreus name")
    search_memories = alias("memories", MemoriesGroup.search, kind="Astreus name")
    search_memories_by_similarity = alias(
        "memories", MemoriesGroup.search_by_similarity, kind="Astreus name"
    )
    list_memories = alias("memories", MemoriesGroup.list, kind="Astreus name")
    update_memory = alias("memories", MemoriesGroup.update, kind="Astreus name")
    delete_memory = alias("memories", MemoriesGroup.delete, kind="Astreus name")
    clear_memories = alias("memories", MemoriesGroup.clear, kind="Astreus name")
    generate_embedding_for_memory = alias(
        "memories", MemoriesGroup.generate_embedding, kind="Astreus name"
    )


class OlderNames:
    """The flat names ``Memory`` had before its methods were grouped; they keep working."""

    if TYPE_CHECKING:

        @property
        def core(self) -> Core: ...

        consolidation: ConsolidationGroup
        embeddings: EmbeddingsGroup

    # -- the event log
    get_event = alias("", EventLog.get)

    # -- embeddings
    embed_query = alias("embeddings", EmbeddingsGroup.embed_query)
    embed_queries = alias("embeddings", EmbeddingsGroup.embed_queries)
    retry_failed_embeddings = alias("embeddings", EmbeddingsGroup.retry_failed)
    reembed = alias("embeddings", EmbeddingsGroup.reembed)
    memory_vectors = alias("embeddings", EmbeddingsGroup.vectors)

    @property
    def backlog(self) -> int:
        """Older name of ``mem.embeddings.backlog``."""
        return self.embeddings.backlog

    # -- facts
    set_fact = alias("facts", FactsGroup.set)
    get_fact = alias("facts", FactsGroup.get)
    fact_history = alias("facts", FactsGroup.history)
    delete_fact = alias("facts", FactsGroup.delete)
    relevant_facts = alias("facts", FactsGroup.relevant)
    # -- macros and allowed prefixes
    learn_macros = alias("macros", MacrosGroup.learn)
    add_macro = alias("macros", MacrosGroup.add)
    suggest_next_tool = alias("macros", MacrosGroup.suggest_next_tool)
    record_macro_use = alias("macros", MacrosGroup.record_use)
    delete_macro = alias("macros", MacrosGroup.delete)
    add_allowed_prefix = alias("prefixes", PrefixesGroup.add)
    allowed_prefixes = alias("prefixes", PrefixesGroup.list)
    remove_allowed_prefix = alias("prefixes", PrefixesGroup.remove)
    is_command_allowed = alias("prefixes", PrefixesGroup.allows)
    # -- scheduled tasks
    schedule_task = alias("tasks", TasksGroup.schedule)
    get_task = alias("tasks", TasksGroup.get)
    scheduled_tasks = alias("tasks", TasksGroup.list)
    pause_task = alias("tasks", TasksGroup.pause)
    resume_task = alias("tasks", TasksGroup.resume)
    delete_task = alias("tasks", TasksGroup.delete)
    due_tasks = alias("tasks", TasksGroup.due)
    run_due = alias("tasks", TasksGroup.run_due)
    # -- consolidation
    consolidate = alias("consolidation", ConsolidationGroup.run)
    start_consolidation = alias("consolidation", ConsolidationGroup.start)
    stop_consolidation = alias("consolidation", ConsolidationGroup.stop)

    @property
    def consolidator(self) -> Consolidator | None:
        """Older name of ``mem.consolidation.background``."""
        return self.consolidation.background

    # -- sessions, audit, AGENTS.md, export and import
    start_session = alias("sessions", SessionsGroup.start)
    continue_session = alias("sessions", SessionsGroup.resume)
    get_session = alias("sessions", SessionsGroup.get)
    save_session_state = alias("sessions", SessionsGroup.save_state)
    close_session = alias("sessions", SessionsGroup.close)
    delete_session = alias("sessions", SessionsGroup.delete)
    forget_user = alias("sessions", SessionsGroup.forget_user)
    cleanup_sessions = alias("sessions", SessionsGroup.cleanup)
    audit_log = alias("audit", AuditGroup.log)
    cleanup_audit = alias("audit", AuditGroup.cleanup)
    sync_agents_md = alias("agents_md", AgentsMdGroup.sync)
    watch_agents_md = alias("agents_md", AgentsMdGroup.watch)
    export_json = alias("transfer", TransferGroup.export_json)
    import_json = alias("transfer", TransferGroup.import_json)
    import_sqlite = alias("transfer", TransferGroup.import_sqlite)

    # -- the parts, now under mem.core
    @property
    def writer(self) -> Writer:
        """Older name of ``mem.core.writer``."""
        return self.core.writer

    @property
    def retriever(self) -> Retriever:
        """Older name of ``mem.core.retriever``."""
        return self.core.retriever

    @property
    def indexes(self) -> Indexes:
        """Older name of ``mem.core.indexes``."""
        return self.core.indexes

    @property
    def working(self) -> WorkingMemory:
        """Older name of ``mem.core.working``."""
        return self.core.working

    @property
    def worker(self) -> EmbeddingWorker | None:
        """Older name of ``mem.core.worker``."""
        return self.core.worker

    @property
    def embedder(self) -> Embedder:
        """Older name of ``mem.core.embedder``."""
        return self.core.embedder


def _stands_for(value: Any) -> str:
    if isinstance(value, property):
        doc = value.__doc__ or ""
        return doc.split("``mem.", 1)[1].split("``", 1)[0]
    return str(value._stands_for)


def _names(cls: type) -> dict[str, str]:
    found = {}
    for name, value in vars(cls).items():
        if name.startswith("_") or not (callable(value) or isinstance(value, property)):
            continue
        if callable(value):
            value.__name__ = name
            value.__qualname__ = f"Memory.{name}"
        found[name] = _stands_for(value)
    return found


#: The Astreus API's names -> what each stands for (``"memories.add"``: ``mem.memories.add``).
ASTREUS_NAMES: dict[str, str] = _names(AstreusNames)
#: The older flat names -> what each stands for (``"facts.set"``: ``mem.facts.set``).
OLDER_NAMES: dict[str, str] = _names(OlderNames)
#: Every alias of ``Memory``.
ALIASES: dict[str, str] = {**ASTREUS_NAMES, **OLDER_NAMES}
