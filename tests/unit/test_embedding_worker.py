"""The embedding worker as a unit (batches, held-back writes, stopping) and the loaded
model's ONNX session; ``tests/test_embeddings.py`` checks embedding through ``Memory``."""

from __future__ import annotations

import threading

import numpy as np
from fakes import GatedEmbedder


class _RecordingWrites:
    """The worker's write callbacks, recording each call."""

    def __init__(self) -> None:
        self.vector_writes: list[list[str]] = []

    def vectors(
        self, ids: list[str], texts: list[str], vectors: np.ndarray, spans: object = None
    ) -> None:
        assert len(ids) == len(texts) == len(vectors)
        self.vector_writes.append(list(ids))

    def errors(self, errors: dict[str, str]) -> None:
        raise AssertionError(f"no text should fail: {errors}")


def test_a_backlog_is_written_in_few_transactions_and_every_vector_once():
    from nbmemory.retrieval.worker import EmbeddingWorker

    embedder = GatedEmbedder()
    writes = _RecordingWrites()
    worker = EmbeddingWorker(
        embedder, writes.vectors, writes.errors, batch_size=4, write_rows=1000, hold=60
    )
    try:
        items = [(f"id-{i}", f"text {i}") for i in range(40)]
        worker.submit(items[:1])
        embedder.entered.wait()  # the worker is in the model; the rest queue up behind it
        worker.submit(items[1:])
        embedder.gate.set()
        assert worker.flush(timeout=30)
    finally:
        worker.stop()
    written = [i for call in writes.vector_writes for i in call]
    assert sorted(written) == sorted(i for i, _ in items)  # each once, none lost
    assert embedder.sizes == [1, 39]  # the first alone; the short backlog in one round
    assert len(writes.vector_writes) <= 2  # the first alone, the backlog together


def _backlog(embedder: GatedEmbedder, items: list[tuple[str, str]], batch_size: int) -> None:
    from nbmemory.retrieval.worker import EmbeddingWorker

    writes = _RecordingWrites()
    worker = EmbeddingWorker(
        embedder, writes.vectors, writes.errors, batch_size=batch_size, write_rows=10**6, hold=60
    )
    try:
        worker.submit(items[:1])
        embedder.entered.wait()  # the rest queue up behind the first
        worker.submit(items[1:])
        embedder.gate.set()
        assert worker.flush(timeout=60)
    finally:
        worker.stop()


def test_a_backlog_of_short_texts_is_pooled_up_to_the_limit():
    """Short texts are taken past ``batch_size`` (similar lengths then batch together),
    up to POOL_TEXTS a round."""
    from nbmemory.retrieval.worker import POOL_TEXTS

    embedder = GatedEmbedder()
    _backlog(embedder, [(f"id-{i}", f"turn {i}") for i in range(POOL_TEXTS + 101)], 4)
    assert embedder.sizes == [1, POOL_TEXTS, 100]


def test_a_backlog_of_long_texts_goes_to_the_model_a_call_at_a_time():
    """Long texts fill the pool's characters at once (rounds of ``batch_size``), and a
    round goes to the model in calls of at most ``CALL_CHARS`` characters: here one
    text a call, so a worker told to stop waits for one text, not for a round."""
    from nbmemory.retrieval.worker import CALL_CHARS, POOL_CHARS

    class Recording(GatedEmbedder):
        chars: list[int] = []

        def embed(self, texts: list[str]) -> np.ndarray:
            self.chars.append(sum(map(len, texts)))
            return super().embed(texts)

    embedder = Recording()
    long_text = "word " * (POOL_CHARS // 20)  # four of them fill the pool
    _backlog(embedder, [(f"id-{i}", long_text + str(i)) for i in range(13)], 4)
    assert embedder.sizes == [1] * 13
    assert max(embedder.chars) <= CALL_CHARS


class _SecondCallWaits:
    """Answers at once, except the second call, which waits for ``gate``."""

    name = "test/second-call-waits"
    dim = 8

    def __init__(self) -> None:
        self.calls = 0
        self.in_second = threading.Event()
        self.gate = threading.Event()

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        if self.calls == 2:
            self.in_second.set()
            self.gate.wait()
        return np.ones((len(texts), self.dim), dtype=np.float32)


def test_vectors_held_back_are_written_when_the_worker_stops():
    from nbmemory.retrieval.worker import EmbeddingWorker

    embedder = _SecondCallWaits()
    writes = _RecordingWrites()
    worker = EmbeddingWorker(
        embedder,
        writes.vectors,
        writes.errors,
        batch_size=2,
        write_rows=1000,
        hold=60,
        pool_chars=0,  # rounds of two texts, not one pool of all eight
    )
    worker.submit([(f"id-{i}", f"text {i}") for i in range(8)])
    embedder.in_second.wait()  # the first batch is computed and held: more are queued
    assert writes.vector_writes == []
    worker.stop(timeout=0)  # asks the worker to stop, without waiting for it
    embedder.gate.set()
    worker._thread.join()
    # both computed batches are stored; the texts never embedded stay pending in the store
    assert writes.vector_writes == [["id-0", "id-1", "id-2", "id-3"]]


def test_the_models_threads_sleep_between_runs(real_embedder):
    """ONNX Runtime's threads would spin after each run, taking the CPU the caller
    writes with; the loaded session says they do not, and the swap is undone."""
    import onnxruntime as ort

    session = real_embedder._load().model.model
    options = session.get_session_options()
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert options.get_session_config_entry("session.inter_op.allow_spinning") == "0"
    assert ort.SessionOptions.__name__ == "SessionOptions"
    assert len(real_embedder.embed(["still embeds"])[0]) == 384
