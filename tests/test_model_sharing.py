"""One model per process: stores share it, closing the last frees it; token batches
and the trained length with the real model (these skip without $NBMEMORY_MODEL_PATH)."""

from __future__ import annotations

import random
import sys
import threading

import numpy as np
import pytest

from nbmemory import Memory
from nbmemory.retrieval import model_pool
from nbmemory.retrieval.embedders import FastEmbedEmbedder


def _words(count: int, seed: int) -> str:
    rng = random.Random(seed)
    vocab = [
        "river",
        "stone",
        "index",
        "cache",
        "agent",
        "query",
        "token",
        "model",
        "budget",
        "window",
        "deploy",
    ]
    return " ".join(rng.choice(vocab) + str(rng.randint(0, 50)) for _ in range(count))


@pytest.fixture
def fresh_pool(model_path: str, monkeypatch: pytest.MonkeyPatch):
    """No model of ours loaded at the start (the session's shared embedder is keyed
    apart by its own cache folder), and none left loaded at the end."""
    monkeypatch.setenv("NBMEMORY_MODEL_PATH", model_path)
    monkeypatch.setenv("FASTEMBED_CACHE_PATH", "/nonexistent/nbmemory-model-sharing")
    ours = [key for key in model_pool.pooled() if "/nonexistent/" in str(key)]
    assert ours == []
    yield
    left = {k: n for k, n in model_pool.pooled().items() if "/nonexistent/" in str(k)}
    assert left == {}


def _ours() -> dict:
    return {k: n for k, n in model_pool.pooled().items() if "/nonexistent/" in str(k)}


def test_two_stores_share_one_model_and_closing_both_frees_it(fresh_pool, tmp_path) -> None:
    first = Memory(str(tmp_path / "a.duckdb"))
    second = Memory(str(tmp_path / "b.duckdb"))
    try:
        first.add_event("s", "user", "the deploy key lives in the vault")
        second.add_event("s", "user", "lunch is at noon on fridays")
        first.flush()
        second.flush()
        assert first.core.embedder is not second.core.embedder
        assert first.core.embedder._load() is second.core.embedder._load()
        assert list(_ours().values()) == [2]
        footprint = first.status()["embedder"]
        assert footprint["loaded"] and footprint["shared_by"] == 2
        assert footprint["max_tokens"] == 254
        first.close()
        assert list(_ours().values()) == [1]
        second.add_event("s", "user", "the standup moved to ten")
        second.flush()
        assert second.status()["embedded"] == 2
        found = second.search("when is lunch", mode="vector", limit=1)
        assert found["content"].tolist() == ["lunch is at noon on fridays"]
    finally:
        first.close()
        second.close()
    assert _ours() == {}  # the last close dropped the model


def test_an_embedder_passed_in_is_not_closed_by_the_store(fresh_pool, tmp_path) -> None:
    embedder = FastEmbedEmbedder()
    with Memory(str(tmp_path / "a.duckdb"), embedder=embedder) as mem:
        mem.add_event("s", "user", "hello")
        mem.flush()
    assert list(_ours().values()) == [1]  # still the caller's
    assert embedder.embed(["still works"]).shape == (1, 384)
    embedder.close()
    embedder.close()  # idempotent
    assert _ours() == {}


_COLLECTIONS = """
import gc, os, sys, tempfile
from nbmemory import Memory
from nbmemory.retrieval import model_pool

seen = []
def record(phase, info):
    if phase == "start" and info["generation"] == 2:
        seen.append(info)

def full_collections_of_close(memory):
    # only a gc.collect() asked for inside close() counts: automatic ones are held off
    seen.clear()
    gc.disable()
    gc.callbacks.append(record)
    try:
        memory.close()
    finally:
        gc.callbacks.remove(record)
        gc.enable()
    return len(seen)

folder = tempfile.mkdtemp()
memory = Memory(os.path.join(folder, "a.duckdb"), embedder="hash")
memory.add_event("s", "user", "hello")
memory.search("hello")
print("hash", full_collections_of_close(memory))
memory = Memory(os.path.join(folder, "b.duckdb"))  # owns the model it loads
memory.add_event("s", "user", "hello")
memory.flush()
print("model", full_collections_of_close(memory), len(model_pool.pooled()))
"""


def test_closing_the_last_store_collects_only_when_a_model_is_dropped(model_path) -> None:
    """A full collection walks every object of the process (about 50 ms in a test
    worker, more in a long-lived notebook kernel); a store's indexes are freed by
    reference counting, so closing the last store pays for it only when a model goes
    with it.  In a process of its own: the last store of this one may not be last."""
    from child_process import spawn

    child = spawn(_COLLECTIONS, NBMEMORY_MODEL_PATH=model_path)
    out, err = child.communicate(timeout=300)
    assert child.returncode == 0, err
    lines = dict(line.split(" ", 1) for line in out.splitlines())
    assert lines["hash"] == "0", out  # one before: every close of the last store
    collected, models_left = map(int, lines["model"].split())
    assert collected >= 1 and models_left == 0, out


def test_token_batches_keep_the_order_and_the_vectors(real_embedder) -> None:
    texts = [_words(n, seed) for seed, n in enumerate([3, 400, 12, 90, 1, 250, 40, 7, 180, 2])]
    one_by_one = np.vstack([real_embedder.embed([t]) for t in texts])
    before = real_embedder.batch_tokens
    try:
        real_embedder.batch_tokens = 300  # several batches, reordered by length
        batched = real_embedder.embed(texts)
    finally:
        real_embedder.batch_tokens = before
    np.testing.assert_allclose(batched, one_by_one, atol=2e-3)
    assert not np.allclose(batched[0], batched[1], atol=0.05)


def test_a_long_text_embeds_as_its_first_max_tokens_word_pieces(real_embedder) -> None:
    text = _words(600, seed=1)
    spans = real_embedder.token_spans(text)
    assert len(spans) > 600  # numbers split into word-pieces
    window = real_embedder.max_tokens
    assert window == 254  # 256 trained, less [CLS] and [SEP]
    head = text[: spans[window - 1][1]]
    longer = text[: spans[window + 40][1]]
    shorter = text[: spans[window - 40][1]]
    full, cut, more, less = real_embedder.embed([text, head, longer, shorter])
    np.testing.assert_allclose(full, cut, atol=1e-5)
    np.testing.assert_allclose(full, more, atol=1e-5)
    assert float(full @ less) < 0.999  # the last 40 word-pieces of the window count


def test_token_spans_map_back_to_the_text(real_embedder) -> None:
    text = "Déjà vu: ERROR in worker.py line 42 — KeyError('vault_key')"
    spans = real_embedder.token_spans(text)
    assert len(spans) == real_embedder.count_tokens([text])[0]
    assert [a for a, _ in spans] == sorted(a for a, _ in spans)
    pieces = [text[a:b] for a, b in spans]
    assert pieces[0] == "Déjà"[: len(pieces[0])] and "worker" in pieces and "42" in pieces
    assert all(0 <= a < b <= len(text) for a, b in spans)


def test_two_stores_embedding_at_once_get_the_serial_vectors(fresh_pool, tmp_path) -> None:
    texts = [_words(n, seed) for seed, n in enumerate(range(5, 305, 10))]
    first = Memory(str(tmp_path / "a.duckdb"))
    second = Memory(str(tmp_path / "b.duckdb"))
    try:
        serial = first.core.embedder.embed(texts)
        results: dict[int, np.ndarray] = {}
        start = threading.Barrier(2)

        def run(index: int, mem: Memory) -> None:
            start.wait()
            results[index] = np.vstack([mem.core.embedder.embed(texts) for _ in range(3)])

        threads = [threading.Thread(target=run, args=(i, m)) for i, m in enumerate((first, second))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert list(_ours().values()) == [2]
        for index in (0, 1):
            np.testing.assert_allclose(results[index], np.vstack([serial] * 3), atol=1e-5)
    finally:
        first.close()
        second.close()


def test_the_session_plans_no_memory_per_shape(real_embedder) -> None:
    """The memory pattern kept buffers per input shape (886 MB peak instead of 612
    for 200 long messages, docs/performance.md): the loaded session has it off."""
    options = real_embedder._load().model.model.get_session_options()
    assert options.enable_mem_pattern is False
    assert options.enable_cpu_mem_arena is True


_CYCLES = """
import os, sys, tempfile
from nbmemory import Memory
from nbmemory.retrieval import model_pool
if sys.argv[1] == "default":
    model_pool._heap_bound = False  # glibc's own dynamic threshold, as before
def rss():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
after = []
for cycle in range(4):
    memory = Memory(os.path.join(tempfile.mkdtemp(), "m.duckdb"))
    memory.add_events(
        [{"session_id": "s", "role": "user", "content": f"cycle {cycle} {n} " * 300}
         for n in range(25)]
    )
    memory.flush()
    memory.close()
    after.append(rss())
print("RSS", *after)
"""


@pytest.mark.slow
def test_stores_opened_and_closed_in_turn_do_not_pile_up_the_models_heap(model_path) -> None:
    """A notebook that re-runs its cells opens and closes stores over and over: the
    memory the model's buffers used comes back each time, it does not pile up in the
    heaps of the threads that ran it (glibc's dynamic mmap threshold did that)."""
    from child_process import spawn

    child = spawn(_CYCLES, "fixed", NBMEMORY_MODEL_PATH=model_path)
    out, err = child.communicate(timeout=600)
    assert child.returncode == 0, err
    after = [float(v) for v in out.split("RSS", 1)[1].split()]
    assert max(after) - after[0] < 15, after  # glibc's default: +27 to +42 MB (25 messages)


def test_malloc_settings_the_user_chose_are_left_alone() -> None:
    from child_process import spawn

    code = "from nbmemory.retrieval import model_pool; print(model_pool.bound_heap_growth())"
    chosen = spawn(code, MALLOC_ARENA_MAX="2")
    assert chosen.communicate(timeout=60)[0].strip() == "False"
    if sys.platform.startswith("linux"):
        ours = spawn(code)
        assert ours.communicate(timeout=60)[0].strip() == "True"
