"""What every feature of a :class:`~nbmemory.Memory` is handed: the shared core.

Features (memories, facts, sessions, export ...) are small classes that receive
one :class:`Core` instead of inheriting from ``Memory``: the store and its
writer, the retriever, the embedder and its worker, the settings, the default
namespace and the clock.  ``Memory`` opens the store and builds the core once;
the core keeps itself current (``configure`` replaces ``core.settings``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from .config import Settings
from .retrieval import Embedder, EmbeddingWorker, Indexes, Retriever, WorkingMemory
from .retrieval.index_cache import IndexCache
from .retrieval.passages import make_splitter
from .retrieval.rerank import Reranker
from .store import Store, Writer
from .validation import check_name, utcnow


class Core:
    """The parts every feature shares, built once per open store.

    The writer's clock and the retriever's settings and namespace are read
    through this object at each call, so ``configure`` (which replaces
    ``settings``) and a test that replaces ``clock`` reach them at once.
    """

    def __init__(
        self,
        store: Store,
        embedder: Embedder,
        settings: Settings,
        namespace: str,
        actor: str,
        token_counter: Callable[[str], int],
        reranker: Reranker | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.settings = settings
        self.namespace = namespace
        #: The current naive-UTC time (tests replace it to move time).
        self.clock: Callable[[], dt.datetime] = utcnow
        self.writer = Writer(store, actor=actor, clock=lambda: self.clock())
        self.writer.audit_enabled = settings.audit_enabled
        cache = None
        if settings.index_cache and store.backend == "file" and store.path != ":memory:":
            cache = IndexCache(
                store.path, min_rows=settings.index_cache_min_rows, read_only=store.read_only
            )
        self.indexes = Indexes(store, cache, lambda: self.settings.vector_budget_mb)
        self.working = WorkingMemory(store, settings.working_memory_cap)
        self.apply_batch_tokens()
        self.worker = None if store.read_only else self._start_worker()
        self.retriever = Retriever(
            store,
            self.indexes,
            self.working,
            embedder,
            lambda: self.settings,
            namespace=self.ns,
            touch=self.writer.touch_session,
            dim=lambda: self.worker.dim if self.worker is not None else None,
            token_counter=token_counter,
            reranker=reranker,
        )
        store.listen(lambda change: self.queue(change.to_embed))

    def _start_worker(self) -> EmbeddingWorker:
        """The background embedder, writing each batch's vectors beside the caller's writes."""
        store, writer, embedder = self.store, self.writer, self.embedder

        def write_vectors(ids: list[str], texts: list[str], vectors: Any, spans: Any) -> None:
            writer.write_beside(
                lambda tx: tx.vectors.write_vectors(ids, vectors, embedder.name, texts, spans)
            )

        def write_errors(errors: dict[str, str]) -> None:
            with writer.transaction() as tx:
                tx.vectors.write_errors(errors)

        return EmbeddingWorker(
            embedder,
            write_vectors,
            write_errors,
            batch_size=self.settings.embed_batch_size,
            dim=store.vectors.vector_dim(embedder.name),
            linger=store.embed_linger,
            split=make_splitter(embedder, self.settings.passage_tokens),
        )

    def apply_batch_tokens(self) -> None:
        """Hand ``settings.embed_batch_tokens`` to an embedder that batches by tokens."""
        if hasattr(self.embedder, "batch_tokens"):
            self.embedder.batch_tokens = self.settings.embed_batch_tokens

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
