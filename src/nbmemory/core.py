"""What every feature of a :class:`~nbmemory.Memory` is handed: the shared core.

Features (memories, facts, sessions, export ...) are small classes that receive
one :class:`Core` instead of inheriting from ``Memory``: the store and its
writer, the retriever, the embedder and its worker, the settings, the default
namespace and the clock.  ``Memory`` opens the store and builds the core once;
the core keeps itself current (``configure`` replaces ``core.settings``).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from .config import Settings
from .errors import EmbedderError
from .retrieval import Embedder, EmbeddingWorker, Indexes, Retriever, WorkingMemory
from .retrieval.index_cache import IndexCache
from .retrieval.passages import make_splitter
from .retrieval.rerank import Reranker
from .store import Store, Writer
from .validation import check_name, utcnow

#: The cores of this process whose embedding worker runs, by their file's real path:
#: :meth:`Core.submit_pending` and :meth:`Core.stop_worker` (taken under the lock).
_WORKING: dict[str, weakref.WeakSet[Core]] = {}
_working_lock = threading.Lock()


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
            clock=lambda: self.clock(),
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

    # -- two objects of one file in this process: one embedding of each text ------------
    def _file_key(self) -> str | None:
        store = self.store
        if store.backend != "file" or store.path == ":memory:":
            return None
        try:
            return os.path.realpath(store.path)
        except (ValueError, OSError):
            return None

    def _same_model_peers(self, key: str) -> list[Core]:
        """The other cores of this process on the file of ``key`` whose worker runs and
        embeds with this core's model (the caller holds the lock)."""
        return [
            peer
            for peer in _WORKING.get(key, ())
            if peer is not self
            and peer.worker is not None
            and not peer.worker.stopped
            and peer.embedder.name == self.embedder.name
        ]

    def submit_pending(self, items: Sequence[tuple[str, str]]) -> None:
        """Hand the worker the texts the store found waiting for a vector at open, but
        those a worker of another ``Memory`` of this process on the same file will
        embed with the same model: a cell that opens the store run again while the
        first object embeds a large ingest embedded all of it a second time, for
        nothing (the second write finds the rows marked)."""
        worker = self.worker
        if worker is None:
            return
        key = self._file_key()
        if key is None:
            worker.submit(items)
            return
        with _working_lock:
            taken: set[str] = set()
            for peer in self._same_model_peers(key):
                assert peer.worker is not None
                taken |= peer.worker.holding()
            _WORKING.setdefault(key, weakref.WeakSet()).add(self)
            worker.submit([item for item in items if item[0] not in taken])

    def stop_worker(self) -> None:
        """Stop the worker (finishing the batch in hand); what it leaves goes to a
        worker of another ``Memory`` of this process on the same file with the same
        model, if one runs (else it stays pending in the store, for the next open)."""
        worker = self.worker
        if worker is None:
            return
        worker.stop()
        key = self._file_key()
        if key is None:
            return
        with _working_lock:
            group = _WORKING.get(key)
            if group is None:
                return
            group.discard(self)
            heirs = self._same_model_peers(key)
            left = worker.leftovers()
            if heirs and left:
                heir = heirs[0].worker
                assert heir is not None
                with contextlib.suppress(EmbedderError):  # it stopped meanwhile: pending
                    heir.submit(left)
            if not group:
                del _WORKING[key]
