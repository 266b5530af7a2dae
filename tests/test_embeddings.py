"""Embedders and the background worker."""

from __future__ import annotations

import numpy as np
import pytest
from fakes import FlakyEmbedder, GatedEmbedder

from nbmemory import EmbedderError, InvalidInput, Memory
from nbmemory.event_rows import build_row
from nbmemory.retrieval.embedders import (
    CallableEmbedder,
    Embedder,
    FastEmbedEmbedder,
    HashEmbedder,
    resolve_embedder,
)


def test_add_event_does_not_wait_for_the_model(store_path):
    embedder = GatedEmbedder()
    mem = Memory(store_path, embedder=embedder)
    try:
        event = mem.add_event("s", "user", "returns before the model runs")
        embedder.entered.wait()  # the worker is now inside the model, blocked
        row = mem.store.fetchone("SELECT embedding FROM event_vectors WHERE id = ?", [event.id])
        assert row is None  # the caller got its event back without a vector
        assert mem.flush(timeout=0.05) is False  # still queued behind the gate
        assert mem.backlog == 1
        embedder.gate.set()
        assert mem.flush() is True
        row = mem.store.fetchone("SELECT embedding FROM event_vectors WHERE id = ?", [event.id])
        assert len(row[0]) == 384
    finally:
        embedder.gate.set()
        mem.close()


def test_events_left_without_embedding_are_picked_up_on_reopen(store_path):
    mem = Memory(store_path, embedder="hash")
    # as if the process died between storing the rows and embedding them
    rows = [
        build_row(mem.settings, session_id="s", role="user", content=f"t{i}", namespace="default")
        for i in range(5)
    ]
    mem.worker.stop()  # nothing embeds them in this process
    with mem.writer.transaction() as tx:
        tx.events.insert(rows)
    mem.close()
    with Memory(store_path, embedder="hash") as again:
        assert again.flush() is True
        assert again.status()["pending"] == 0
        assert again.status()["embedded"] == 5


def test_failing_texts_get_embedding_error_and_the_rest_are_searchable(store_path):
    embedder = FlakyEmbedder()
    with Memory(store_path, embedder=embedder) as mem:
        mem.add_events(
            [
                {"session_id": "s", "role": "user", "content": text}
                for text in ["good one", "please raise", "a nan here", "wrongdim text", "good two"]
            ]
        )
        mem.flush()
        errors = dict(mem.store.fetchall("SELECT content, embedding_error FROM events"))
        assert errors["good one"] is None and errors["good two"] is None
        assert "model exploded" in errors["please raise"]
        assert "NaN" in errors["a nan here"]
        assert errors["wrongdim text"]
        assert set(mem.search("good", limit=10, mode="vector")["content"]) == {
            "good one",
            "good two",
        }
        assert mem.status()["failed"] == 3
        embedder.broken = False
        assert mem.retry_failed_embeddings() == 3
        mem.flush()
        assert mem.status()["failed"] == 0 and mem.status()["embedded"] == 5


def test_resolve_embedder_kinds():
    assert isinstance(resolve_embedder("hash"), HashEmbedder)
    assert resolve_embedder("hash:64").dim == 64
    assert isinstance(resolve_embedder(None), FastEmbedEmbedder)
    assert isinstance(resolve_embedder("fastembed"), FastEmbedEmbedder)

    def my_model(texts):
        return np.ones((len(texts), 8))

    wrapped = resolve_embedder(my_model)
    assert isinstance(wrapped, CallableEmbedder) and wrapped.name == "my_model"
    assert wrapped.dim == 8
    assert isinstance(wrapped, Embedder)
    with pytest.raises(InvalidInput, match="embedder must be"):
        resolve_embedder(42)


def test_callable_embedder_is_used_by_memory(store_path):
    seen = []

    def model(texts):
        seen.extend(texts)
        return HashEmbedder(32).embed(texts)

    with Memory(store_path, embedder=model) as mem:
        mem.add_event("s", "user", "through my callable")
        mem.flush()
        assert "through my callable" in seen
        assert mem.search("through my callable")["similarity"].iloc[0] == pytest.approx(1.0)


def test_callable_embedder_with_wrong_shape_is_reported():
    bad = CallableEmbedder(lambda texts: np.ones((len(texts) + 1, 4)), name="bad")
    with pytest.raises(EmbedderError, match="one vector per text"):
        bad.embed(["a"])


def test_hash_embedder_is_deterministic_and_normalised():
    a = HashEmbedder().embed(["the same text", "other"])
    b = HashEmbedder().embed(["the same text", "other"])
    assert np.array_equal(a, b)
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0)


def test_model_path_that_is_not_a_directory_says_how_to_fix(tmp_path):
    embedder = FastEmbedEmbedder(model_path=str(tmp_path / "missing"))
    with pytest.raises(EmbedderError, match="NBMEMORY_MODEL_PATH.*not a directory"):
        embedder.embed(["x"])


def test_broken_model_directory_says_how_to_fix(tmp_path):
    (tmp_path / "model.onnx").write_bytes(b"not a model")
    embedder = FastEmbedEmbedder(model_path=str(tmp_path))
    with pytest.raises(EmbedderError, match="could not load the embedding model"):
        embedder.embed(["x"])


def test_real_model_loads_from_env_directory(model_path, monkeypatch):
    monkeypatch.setenv("NBMEMORY_MODEL_PATH", model_path)
    embedder = FastEmbedEmbedder()
    assert embedder.model_path == model_path
    vectors = embedder.embed(
        ["My name is John and I love TypeScript", "I really like TypeScript", "Paris weather"]
    )
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-3)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]


def test_real_model_end_to_end(store_path, real_embedder):
    with Memory(store_path, embedder=real_embedder) as mem:
        mem.add_event("s1", "user", "My name is John and I love TypeScript")
        mem.add_event("s1", "user", "The office plants need watering on Fridays")
        mem.flush()
        hits = mem.search("Which programming language does John like?", limit=2)
        assert hits["content"].iloc[0] == "My name is John and I love TypeScript"
        assert mem.status()["model"] == "sentence-transformers/all-MiniLM-L6-v2"


def test_close_while_long_texts_embed_stops_after_the_model_call_in_hand(store_path):
    """A round of 64 texts of 4,000 characters went to the model in one call; on a
    busy machine it took minutes, ``close()`` gave up waiting after 10 s and freed the
    model and the file under the running call (the process aborted at exit).  The
    round now goes in calls of at most ``CALL_CHARS`` characters, and a worker told
    to stop makes no further call: what it had not embedded stays pending."""
    import threading

    from nbmemory.retrieval.worker import CALL_CHARS

    class Counting(GatedEmbedder):
        chars: list[int] = []

        def embed(self, texts: list[str]) -> np.ndarray:
            self.chars.append(sum(len(text) for text in texts))
            return super().embed(texts)

    embedder = Counting()
    texts = [
        f"log {i}: " + "ERROR db timeout after 30s; retrying the request. " * 80 for i in range(64)
    ]
    mem = Memory(store_path, embedder=embedder)
    try:
        mem.add_events([{"session_id": "s", "role": "tool", "content": t} for t in texts])
        embedder.entered.wait()  # the worker is inside its first call to the model
        closing = threading.Thread(target=mem.close)
        closing.start()
        mem.worker._stopped.wait()  # told to stop while the call is in hand
        embedder.gate.set()
        closing.join(timeout=60)
        assert not closing.is_alive()
    finally:
        embedder.gate.set()
        mem.close()
    assert embedder.calls == 1  # no call after the stop
    assert embedder.chars[0] <= CALL_CHARS < sum(map(len, texts))  # a part of the round
    with Memory(store_path, embedder="hash") as again:  # (the same 384 dimensions)
        status = again.status()
        assert status["pending"] + status["embedded"] >= len(texts)
        assert again.flush() is True and again.status()["pending"] == 0
