"""What every feature of a :class:`~nbmemory.Memory` is handed: the shared core.

Features (long-term memories, facts, sessions, export ...) are small classes
that receive one :class:`Core` instead of inheriting from ``Memory``: the store
and its writer, the retriever, the embedder and its worker, the settings, the
default namespace and the clock.  ``Memory`` builds the core once and keeps it
current (``configure`` replaces ``core.settings``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .config import Settings
from .retrieval import Embedder, EmbeddingWorker, Indexes, Retriever, WorkingMemory
from .retrieval.index_cache import IndexCache
from .retrieval.rerank import Reranker
from .store import Store, Writer
from .validation import check_name, utcnow


@dataclass
class Core:
    store: Store
    writer: Writer
    retriever: Retriever
    indexes: Indexes
    working: WorkingMemory
    embedder: Embedder
    worker: EmbeddingWorker | None
    settings: Settings
    namespace: str
    #: The current naive-UTC time (tests replace it to move time).
    clock: Callable[[], dt.datetime] = field(default=utcnow)

    @property
    def model(self) -> str:
        """Name of the embedding model: vectors of other models are never compared."""
        return self.embedder.name

    def ns(self, namespace: str | None) -> str:
        """``namespace`` validated, or the store's default namespace."""
        return self.namespace if namespace is None else check_name(namespace, "namespace")

    def redact(self, text: str) -> tuple[str, int]:
        """``text`` as it may be stored and embedded, and how many secrets were removed."""
        redactor = self.store.redactor
        return (text, 0) if redactor is None else redactor(text)

    def queue(self, items: list[tuple[str, str]]) -> None:
        """Hand (id, text) pairs to the embedding worker (none on a read-only store).

        A stopped worker (the store is closing) leaves them pending in the store:
        the next process to open it embeds them.
        """
        if self.worker is not None and not self.worker.stopped and items:
            self.worker.submit(items)


def build_core(
    store: Store,
    embedder: Embedder,
    settings: Settings,
    namespace: str,
    actor: str,
    token_counter: Callable[[str], int],
    reranker: Reranker | None = None,
) -> Core:
    """The shared core: writer, caches following the store, worker, retriever."""
    holder: list[Core] = []

    def current() -> Core:
        return holder[0]

    writer = Writer(store, actor=actor, clock=lambda: current().clock())
    cache = None
    if settings.index_cache and store.backend == "file" and store.path != ":memory:":
        cache = IndexCache(
            store.path, min_rows=settings.index_cache_min_rows, read_only=store.read_only
        )
    indexes = Indexes(store, cache)
    working = WorkingMemory(store, settings.working_memory_cap)
    worker = None
    if not store.read_only:

        def write_vectors(ids: list[str], texts: list[str], vectors: Any) -> None:
            writer.write_beside(
                lambda tx: tx.vectors.write_vectors(ids, vectors, embedder.name, texts)
            )

        def write_errors(errors: dict[str, str]) -> None:
            with writer.transaction() as tx:
                tx.vectors.write_errors(errors)

        worker = EmbeddingWorker(
            embedder,
            write_vectors,
            write_errors,
            batch_size=settings.embed_batch_size,
            dim=store.vectors.vector_dim(embedder.name),
            linger=store.embed_linger,
        )
    retriever = Retriever(
        store,
        indexes,
        working,
        embedder,
        lambda: current().settings,
        namespace=lambda ns: current().ns(ns),
        touch=writer.touch_session,
        dim=lambda: worker.dim if worker is not None else None,
        token_counter=token_counter,
        reranker=reranker,
    )
    core = Core(store, writer, retriever, indexes, working, embedder, worker, settings, namespace)
    holder.append(core)
    store.listen(lambda change: core.queue(change.to_embed))
    return core
