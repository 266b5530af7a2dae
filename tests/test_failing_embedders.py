"""Failing models, beyond tests/test_embeddings.py (which covers raise / NaN / wrong
dimension for *some* texts of a batch and the retry).

Here: a model whose dimension changes for a whole batch, infinite and zero
vectors, a model that returns too few rows, a model that fails only the first
time, and a model failing on the *query*.  In every case the events that could
be embedded are stored and searchable, the others carry ``embedding_error``,
nothing is written with a bad vector, and a retry re-embeds them.
"""

from __future__ import annotations

import pytest
from fakes import SwitchableEmbedder as Switchable

from nbmemory import EmbedderError, Memory

#: A deadlock or a hung process fails the test instead of hanging the suite.
pytestmark = pytest.mark.timeout(600)


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("dim", "expected 384-dimensional vectors, got 128"),
        ("inf", "NaN or infinite"),
        ("zero", "zero vector"),
        ("short", "expected"),
        ("raise", "out of memory"),
    ],
)
def test_a_whole_batch_failing_is_recorded_and_retried(store_path, mode, message):
    model = Switchable()
    with Memory(store_path, embedder=model) as mem:
        good = mem.add_event("s", "user", "embedded while the model was fine")
        assert mem.flush()
        model.mode = mode
        ids = mem.add_events(
            [{"session_id": "s", "role": "user", "content": f"batch text {i}"} for i in range(10)]
        )
        assert mem.flush()
        rows = mem.store.fetchall(
            "SELECT e.id, v.embedding, e.embedding_error FROM events e"
            " LEFT JOIN event_vectors v USING (id) WHERE e.id <> ? ORDER BY e.id",
            [good.id],
        )
        assert {r[0] for r in rows} == set(ids)
        for _, vector, error in rows:
            assert vector is None  # no bad vector ever reaches the table
            assert message in error
        assert mem.status()["failed"] == 10
        model.mode = "ok"  # (the query needs a working model too)
        # what was embedded before is still there and still found
        assert mem.search("embedded while the model", limit=1)["id"].iloc[0] == good.id
        assert mem.retry_failed_embeddings() == 10
        assert mem.flush()
        status = mem.status()
        assert status["failed"] == 0 and status["embedded"] == 11
        assert mem.search("batch text 4", limit=1)["content"].iloc[0] == "batch text 4"


def test_failures_survive_a_restart_and_are_not_retried_silently(store_path):
    model = Switchable()
    model.mode = "raise"
    with Memory(store_path, embedder=model) as mem:
        mem.add_event("s", "user", "first try fails")
        assert mem.flush()
    model.mode = "ok"
    calls = model.calls
    with Memory(store_path, embedder=model) as mem:
        assert mem.flush()
        assert model.calls == calls  # a failed event is not re-queued on open ...
        assert mem.status()["failed"] == 1
        assert mem.retry_failed_embeddings() == 1  # ... only when asked
        assert mem.flush()
        assert mem.status()["embedded"] == 1 and mem.status()["failed"] == 0


def test_a_model_failing_on_the_query_is_a_clear_error(store_path):
    model = Switchable()
    with Memory(store_path, embedder=model) as mem:
        mem.add_event("s", "user", "something to find")
        assert mem.flush()
        for mode in ("raise", "inf", "short", "zero", "dim"):
            model.mode = mode
            with pytest.raises(EmbedderError, match="query") as info:
                mem.search(f"a question in mode {mode}")
            assert "\n" not in str(info.value)
            with pytest.raises(EmbedderError, match="query"):
                mem.get_context("s", f"another question in mode {mode}")
        model.mode = "ok"
        assert mem.search("something to find", limit=1)["content"].iloc[0] == "something to find"
