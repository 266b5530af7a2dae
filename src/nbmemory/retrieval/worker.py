"""The background worker that embeds stored events, so adding a memory never waits
for the model.

Texts arrive as ``(id, text)`` pairs (the store announces every event that waits
for a vector); the worker embeds them in batches on a daemon thread and writes
the vectors back through the writer, which stores each only if the event still
holds that exact text.  While a backlog waits, several batches are written in
one transaction.  A text longer than the model's window is cut into passages
(:mod:`.passages`) and each is embedded; every passage of an event is written
in the same transaction, or none.

Two kinds of failure are told apart.  A text the model fails on is recorded on its
event (``embedding_error``).  A model that cannot load at all
(:class:`~nbmemory.retrieval.embedders.ModelUnavailable`) says nothing about the
texts: they are set aside, left pending in the store, re-queued as soon as the
model works again in this process (and queued again at the next open), and
``flush`` raises the load error instead of pretending they were embedded.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import EmbedderError
from .embedders import Embedder, ModelUnavailable, check_vectors, model_unavailable

log = logging.getLogger(__name__)

#: A backlog is taken in rounds of ``batch_size`` texts, and then more while the
#: round holds at most POOL_TEXTS texts of POOL_CHARS characters in all (~32k
#: word-pieces): short texts sorted by length in a larger pool pad less.
POOL_TEXTS = 1024
POOL_CHARS = 131_072
#: A round's texts go to the model in calls of at most this many characters (~8k
#: word-pieces, two of the embedder's token batches), shortest first: a worker told
#: to stop (``close()``, the end of the process) stops after the call in hand, not
#: after a round of 64 long texts, which took minutes on a busy machine while
#: ``close()`` waited 10 s, then freed the model and the file under it (the process
#: aborted in ONNX Runtime at exit).
CALL_CHARS = 32_768

#: Per event, the character spans of its passages, or None for its whole text.
Spans = list[list[tuple[int, int]] | None]
#: ``write_vectors(ids, texts, vectors, spans)``: store the vectors of these texts (one
#: row per passage of each text that has passages, in order).
WriteVectors = Callable[[list[str], list[str], np.ndarray, Spans], None]
#: ``split(text)``: the character spans of the text's passages (one span: whole).
Split = Callable[[str], list[tuple[int, int]]]


class EmbeddingWorker:
    """Embeds queued (id, text) pairs in batches on a daemon thread.

    ``submit`` never blocks on the model.  A batch that fails as a whole is retried
    text by text, so one bad text marks only its own event with ``embedding_error``;
    unless the model cannot load, in which case the batch is set aside (see the
    module's docstring) without one more model call.
    """

    def __init__(
        self,
        embedder: Embedder,
        write_vectors: WriteVectors,
        write_errors: Callable[[dict[str, str]], None],
        *,
        batch_size: int = 64,
        dim: int | None = None,
        linger: float = 0.05,
        write_rows: int = 16384,
        hold: float = 0.5,
        split: Split | None = None,
        pool_chars: int = POOL_CHARS,
    ) -> None:
        self.embedder = embedder
        #: A backlog round takes more short texts while they hold this many characters
        #: in all (0: every round is ``batch_size`` texts).
        self.pool_chars = pool_chars
        #: Cuts a long text into passages (None: every text is embedded whole).
        self.split = split
        #: Texts queued again to replace a whole-text vector by passages (see
        #: :meth:`submit_for_passages`): those not yet looked at, and those found long.
        self._to_check: set[str] = set()
        self.passage_requeued: list[str] = []
        self.write_vectors = write_vectors
        self.write_errors = write_errors
        self.batch_size = batch_size
        #: Expected vector dimension; learnt from the first good batch when None.
        self.dim = dim
        #: Seconds to wait for a batch to fill once a text arrives (0 = embed at once).
        self.linger = linger
        #: While a backlog waits, vectors of several batches are written together, up
        #: to ``write_rows`` of them or ``hold`` seconds: each write is a transaction
        #: whose fixed cost (a scan of the events to check the texts, a commit) would
        #: otherwise bound ingest with a fast model.  With nothing queued, vectors are
        #: written at once.
        self.write_rows = write_rows
        self.hold = hold
        self._held: list[tuple[list[str], list[str], np.ndarray, Spans]] = []
        self._held_rows = 0
        self._held_since = 0.0
        #: Texts taken from the queue whose vectors (or failure) are not yet written.
        self._in_hand = 0
        #: Texts waiting to be taken (one lock per ``submit``, not one per text).
        self._queue: deque[tuple[str, str]] = deque()
        #: The batch taken and not yet embedded (read by :meth:`holding`).
        self._batch: list[tuple[str, str]] = []
        #: Texts a stop left unembedded (queued, or taken after the stop): :meth:`leftovers`.
        self._left: list[tuple[str, str]] = []
        self._arrived = threading.Condition()
        self._stop_signal = False
        self._idle = threading.Condition()
        self._pending = 0
        self._stopping = False
        self._stopped = threading.Event()
        self.last_error: str | None = None
        self.embedded = 0
        self.failed = 0
        #: Writes tried again after the store was busy (shared mode) or unavailable.
        self.retries = 0
        #: (id -> text) set aside because the model cannot load; they stay pending.
        self._aside: dict[str, str] = {}
        #: Why the model cannot load (the last :class:`ModelUnavailable`), or None.
        self.unavailable: ModelUnavailable | None = None
        self._thread = threading.Thread(target=self._run, name="nbmemory-embedder", daemon=True)
        self._thread.start()

    @property
    def stopped(self) -> bool:
        return self._stopping

    @property
    def backlog(self) -> int:
        """Texts submitted and not yet written (embedded or failed)."""
        with self._idle:
            return self._pending

    @property
    def set_aside(self) -> int:
        """Texts waiting for a model that cannot load (pending in the store)."""
        with self._idle:
            return len(self._aside)

    def submit(self, items: Sequence[tuple[str, str]]) -> None:
        """Queue (id, text) pairs; returns at once."""
        if self._stopping:
            raise EmbedderError("the embedding worker is stopped (the Memory was closed)")
        if not items:
            return
        with self._idle:
            self._pending += len(items)
        with self._arrived:
            self._queue.extend(items)
            self._arrived.notify()

    def submit_for_passages(self, items: Sequence[tuple[str, str]]) -> None:
        """Queue texts stored with one whole-text vector; on the worker's thread (not the
        caller's: cutting thousands of texts takes seconds) each is cut, and only those
        longer than the window are embedded, as passages, the others dropped."""
        if self.split is None or not items:
            return
        with self._idle:
            self._to_check.update(event_id for event_id, _ in items)
        self.submit(items)

    @property
    def passages_unchecked(self) -> int:
        """Texts of :meth:`submit_for_passages` not yet looked at."""
        with self._idle:
            return len(self._to_check)

    def _only_long(self, batch: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """``batch`` without the re-queued texts that fit the window (their vector stays)."""
        if not self._to_check:
            return batch
        kept = []
        for event_id, text in batch:
            with self._idle:
                checking = event_id in self._to_check
                self._to_check.discard(event_id)
            if checking:
                if self.split is None or len(self.split(text)) < 2:
                    continue
                with self._idle:
                    self.passage_requeued.append(event_id)
            kept.append((event_id, text))
        return kept

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every submitted text is written; False if ``timeout`` ran out.

        Texts set aside because the model cannot load are tried once more (the model
        may load now: a model path was set); if it still cannot, raises its
        :class:`ModelUnavailable` (the texts stay pending in the store).  A load
        failure is remembered, so that second try costs nothing when nothing changed.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        retried = False
        with self._idle:
            while True:
                while self._pending:
                    if not self._thread.is_alive():
                        raise EmbedderError("the embedding worker stopped with texts still queued")
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        return False
                    self._idle.wait(timeout=0.5 if remaining is None else min(remaining, 0.5))
                if not self._aside:
                    return True
                if retried or self._stopping:
                    error = self.unavailable
                    if error is None:  # (set aside by a stopping worker)
                        raise EmbedderError("the embedding worker stopped with texts set aside")
                    raise ModelUnavailable(error.model, error.reason, error.advice)
                retried = True
                self._requeue_locked()

    def _requeue_locked(self) -> None:
        """Queue the texts set aside again (the caller holds ``_idle``)."""
        items = list(self._aside.items())
        self._aside.clear()
        self._pending += len(items)
        with self._arrived:
            self._queue.extend(items)
            self._arrived.notify()

    def holding(self) -> set[str]:
        """The ids of the texts this worker will embed: queued, taken, embedded and not
        yet written, or set aside.  Another worker of the same file skips them
        (:func:`nbmemory.core.submit_pending`)."""
        with self._arrived:
            ids = {event_id for event_id, _ in self._queue}
        ids.update(event_id for event_id, _ in list(self._batch))
        with self._idle:
            ids.update(self._aside)
        for held in list(self._held):
            ids.update(held[0])
        return ids

    def leftovers(self) -> list[tuple[str, str]]:
        """After :meth:`stop`: the texts left unembedded (pending in the store), which
        another worker of the same file may take (:func:`nbmemory.core.stop_worker`).
        Texts queued only to be re-cut into passages are not among them."""
        with self._idle:
            left = self._left + list(self._aside.items())
            return [item for item in left if item[0] not in self._to_check]

    def stop(self, timeout: float = 10.0) -> None:
        """Finish the batch in hand and stop; what is still queued stays pending in the
        store (:meth:`leftovers` lists it)."""
        if self._stopping:
            return
        self._stopping = True
        self._stopped.set()
        with self._arrived:
            self._stop_signal = True
            self._arrived.notify()
        self._thread.join(timeout)

    def _take_batch(self) -> list[tuple[str, str]] | None:
        """The next batch of texts, or None once the worker is told to stop (what is
        still queued is then counted as done: it stays pending in the store)."""
        with self._arrived:
            while not self._queue and not self._stop_signal:
                self._arrived.wait()
            # Linger briefly for more texts: a stream of add_event calls is embedded in
            # full batches instead of one model call (and one write) per event, which
            # keeps the worker off the GIL and the caller's add_event fast.
            deadline = time.monotonic() + self.linger
            while len(self._queue) < self.batch_size and not self._stop_signal:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._arrived.wait(remaining)
            if self._stop_signal:
                self._in_hand += len(self._queue)
                with self._idle:
                    self._left.extend(self._queue)
                self._queue.clear()
                return None
            count = min(self.batch_size, len(self._queue))
            batch = [self._queue.popleft() for _ in range(count)]
            # a backlog of short texts: take more of them while they fit the pool, so
            # the embedder groups texts of similar length and pads little (2,000 short
            # turns embedded 64 at a time took 1.7x as long as 512 at a time)
            chars = sum(len(text) for _, text in batch)
            while (
                self._queue
                and len(batch) < POOL_TEXTS
                and chars + len(self._queue[0][1]) <= self.pool_chars
            ):
                item = self._queue.popleft()
                chars += len(item[1])
                batch.append(item)
            return batch

    def _run(self) -> None:
        while True:
            batch = self._take_batch()
            if batch is None:
                self._write_held()  # vectors computed before the stop are kept
                return
            self._batch = batch
            try:
                if not self._stopping:
                    self._process(batch)
                else:
                    with self._idle:
                        self._left.extend(batch)
            except Exception as exc:  # never let the thread die silently
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.exception("nbmemory embedding worker failed on a batch")
            self._batch = []
            self._in_hand += len(batch)
            if (
                self._held_rows >= self.write_rows
                or not self._queue
                or time.monotonic() - self._held_since >= self.hold
            ):
                self._write_held()

    def _write_held(self) -> None:
        """Write the vectors held back, then count their texts as done."""
        try:
            if self._held:
                ids = [i for held in self._held for i in held[0]]
                texts = [t for held in self._held for t in held[1]]
                vectors = np.concatenate([held[2] for held in self._held])
                spans = [s for held in self._held for s in held[3]]
                self._write(self.write_vectors, ids, texts, vectors, spans)
                self.embedded += len(ids)
        except Exception as exc:  # the texts stay pending in the store
            self.last_error = f"{type(exc).__name__}: {exc}"
            log.exception("nbmemory embedding worker could not write vectors")
        finally:
            self._held, self._held_rows = [], 0
            with self._idle:
                self._pending -= self._in_hand
                self._in_hand = 0
                self._idle.notify_all()

    def _pieces(self, texts: list[str]) -> tuple[list[str], Spans, list[int]]:
        """(what to embed, each text's passage spans or None, each text's first piece)."""
        pieces: list[str] = []
        spans: Spans = []
        first: list[int] = []
        for text in texts:
            first.append(len(pieces))
            cut = self.split(text) if self.split is not None else None
            if cut is None or len(cut) < 2:
                spans.append(None)
                pieces.append(text)
            else:
                spans.append(cut)
                pieces += [text[start:stop] for start, stop in cut]
        return pieces, spans, first

    def _process(self, batch: list[tuple[str, str]]) -> None:
        try:
            batch = self._only_long(batch)  # (cutting reads the model's tokenizer)
        except Exception as exc:
            unavailable = model_unavailable(exc)
            if unavailable is None:
                raise
            self._set_aside(batch, unavailable)
            return
        if not batch:
            return
        ids = [item[0] for item in batch]
        texts = [item[1] for item in batch]
        try:
            pieces, spans, first = self._pieces(texts)
            embedded = self._embed(pieces)
        except Exception as exc:
            unavailable = model_unavailable(exc)
            if unavailable is not None:  # the model, not these texts: they stay pending
                self._set_aside(batch, unavailable)
                return
            self._isolate(batch, ids)
            return
        if embedded is None:  # told to stop between two calls: the texts stay pending
            with self._idle:
                self._left.extend(batch)
            return
        vectors, piece_errors = embedded
        ends = [*first[1:], len(pieces)]
        errors: dict[int, str] = {}
        for i in range(len(batch)):  # a text fails when one of its passages does
            for piece in range(first[i], ends[i]):
                if piece in piece_errors:
                    errors[i] = piece_errors[piece]
                    break
        good = [i for i in range(len(batch)) if i not in errors]
        if good and self.dim is None:
            self.dim = int(vectors.shape[1])
        if good:
            if not self._held:
                self._held_since = time.monotonic()
            rows = [row for i in good for row in range(first[i], ends[i])]
            self._held.append(
                (
                    [ids[i] for i in good],
                    [texts[i] for i in good],
                    vectors[rows],
                    [spans[i] for i in good],
                )
            )
            self._held_rows += len(rows)
        if errors:
            self._write(self.write_errors, {ids[i]: message for i, message in errors.items()})
            self.failed += len(errors)

    def _embed(self, pieces: list[str]) -> tuple[np.ndarray, dict[int, str]] | None:
        """The checked vectors of ``pieces`` and {piece: error}, embedded shortest first
        in calls of at most :data:`CALL_CHARS` characters; None when the worker was
        told to stop between two calls."""
        order = sorted(range(len(pieces)), key=lambda i: len(pieces[i]))
        calls: list[list[int]] = [[]]
        chars = 0
        for i in order:
            if calls[-1] and chars + len(pieces[i]) > CALL_CHARS:
                calls.append([])
                chars = 0
            calls[-1].append(i)
            chars += len(pieces[i])
        vectors: np.ndarray | None = None
        errors: dict[int, str] = {}
        for call in calls:
            if vectors is not None and self._stopping:
                return None
            raw = self.embedder.embed([pieces[i] for i in call])
            self._model_works()
            dim = self.dim if vectors is None else vectors.shape[1]
            part, failed = check_vectors(raw, len(call), dim)
            if vectors is None:
                vectors = np.empty((len(pieces), part.shape[1]), dtype=np.float32)
            vectors[call] = part
            errors.update((call[row], message) for row, message in failed.items())
        assert vectors is not None
        return vectors, errors

    def _isolate(self, batch: list[tuple[str, str]], ids: list[str]) -> None:
        """A batch failed as a whole: record one text's error, or try them one by one."""
        if len(batch) == 1:
            self._write(self.write_errors, {ids[0]: _describe_failure()})
            self.failed += 1
        else:  # isolate the texts that fail
            for item in batch:
                self._process([item])

    def _set_aside(self, batch: list[tuple[str, str]], error: ModelUnavailable) -> None:
        """Keep texts the model could not even load for; no ``embedding_error`` is written."""
        with self._idle:
            self._aside.update(batch)
            self.unavailable = error
        self.last_error = str(error)
        log.info("%d text(s) left pending: %s", len(batch), error)

    def _model_works(self) -> None:
        """The model answered: what was set aside while it could not load goes back in."""
        with self._idle:
            if self._stopping:  # what is set aside stays pending in the store
                return
            self.unavailable = None
            if self._aside:
                self._requeue_locked()

    def _write(self, write: Callable[..., None], *args: Any) -> None:
        """Write, trying again while the store is busy (another kernel's turn) until it
        succeeds or the worker stops: a computed batch is never dropped for a busy file."""
        delay = 0.05
        while True:
            try:
                write(*args)
                return
            except Exception as exc:
                if not getattr(exc, "retryable", False) or self._stopping:
                    raise
                self.last_error = f"{type(exc).__name__}: {exc}"
                self.retries += 1
                self._stopped.wait(delay)  # returns at once when the store closes
                delay = min(delay * 2, 2.0)


def _describe_failure() -> str:
    exc = sys.exc_info()[1]
    text = f"{type(exc).__name__}: {exc}" if exc else "embedding failed"
    return text[:500]
