"""Seed 004's memory methods: add/get/search/list/update/delete/generate/clear."""

from __future__ import annotations

import datetime as dt
import json

import numpy as np
import pytest

from nbmemory import InvalidInput, Memory, MemoryNotFound
from nbmemory.log.memories import DEFAULT_MEMORY_SESSION


def test_add_memory_stores_a_scoped_memory(mem):
    m = mem.add_memory(
        "Important project information: Budget is $50k",
        {"type": "project", "category": "budget"},
        graph_id="project-123",
        task_id="task-456",
        session_id="session-789",
    )
    got = mem.get_memory(m.id)
    assert got.content == "Important project information: Budget is $50k"
    assert got.metadata == {"type": "project", "category": "budget"}
    assert (got.graph_id, got.task_id, got.session_id) == ("project-123", "task-456", "session-789")
    assert got.kind == "memory"
    assert mem.audit_log(action="add")["target_ids"].map(list).iloc[0] == [m.id]


def test_memory_without_session_goes_to_the_default_session(mem):
    m = mem.add_memory("User prefers dark mode")
    assert m.session_id == DEFAULT_MEMORY_SESSION == "memories"


def test_remember_conversation_keeps_role_and_role_importance(mem):
    m = mem.remember_conversation("I prefer TypeScript over JavaScript", "user")
    t = mem.remember_conversation("ran the linter", "tool")
    assert mem.get_memory(m.id).role == "user"
    assert mem.get_memory(m.id).metadata["type"] == "conversation"
    assert mem.get_memory(t.id).importance == pytest.approx(0.3)
    with pytest.raises(InvalidInput, match="unknown role"):
        mem.remember_conversation("hi", "robot")


def test_messages_are_not_memories(mem):
    msg = mem.add_event("s1", "user", "a plain conversation message")
    with pytest.raises(MemoryNotFound):
        mem.get_memory(msg.id)
    assert mem.delete_memory(msg.id) is False
    assert mem.list_memories().empty
    mem.add_memory("a memory")
    assert mem.clear_memories() == 1
    assert mem.get_event(msg.id).content == "a plain conversation message"


def test_get_memory_unknown_and_bad_ids(mem):
    with pytest.raises(MemoryNotFound, match="nope"):
        mem.get_memory("nope")
    for bad in (None, 42, "", "  "):
        with pytest.raises(InvalidInput):
            mem.get_memory(bad)


def test_namespaces_isolate_memories(mem):
    a = mem.add_memory("secret of namespace a", namespace="a")
    with pytest.raises(MemoryNotFound):
        mem.get_memory(a.id)
    assert mem.get_memory(a.id, namespace="a").content == "secret of namespace a"
    mem.flush()
    assert mem.search_memories_by_similarity("secret of namespace a").empty
    hits = mem.search_memories_by_similarity("secret of namespace a", filters={"namespace": "a"})
    assert list(hits["id"]) == [a.id]


def _scoped(mem):
    ids = {}
    for session in ("s1", "s2"):
        for task in ("t1", "t2"):
            m = mem.add_memory(
                f"budget note for {session} {task}",
                session_id=session,
                task_id=task,
                graph_id="g1" if task == "t1" else "g2",
            )
            ids[(session, task)] = m.id
    mem.flush()
    return ids


def test_similarity_search_honours_every_scope_filter(mem):
    ids = _scoped(mem)
    hits = mem.search_memories_by_similarity(
        "budget note", similarity_threshold=0.0, filters={"session_id": "s2", "task_id": "t1"}
    )
    assert list(hits["id"]) == [ids[("s2", "t1")]]
    hits = mem.search_memories_by_similarity(
        "budget note", similarity_threshold=0.0, filters={"graphId": "g2"}
    )
    assert set(hits["id"]) == {ids[("s1", "t2")], ids[("s2", "t2")]}
    hits = mem.search_memories_by_similarity(
        "budget note", similarity_threshold=0.0, filters={"session_id": ["s1", "s2"]}
    )
    assert len(hits) == 4
    assert mem.search_memories("budget", filters={"task_id": "t2"})["task_id"].eq("t2").all()
    listed = mem.list_memories(filters={"session_id": "s1", "graph_id": "g1"})
    assert list(listed["id"]) == [ids[("s1", "t1")]]


@pytest.mark.slow
def test_similarity_search_is_the_exact_global_top_k(store_path):
    rng = np.random.default_rng(7)
    vectors = {}

    def embed(texts):
        out = []
        for text in texts:
            if text not in vectors:
                vectors[text] = rng.normal(size=16).astype(np.float32)
            out.append(vectors[text])
        return np.stack(out)

    with Memory(store_path, embedder=embed) as m:
        ids = [m.add_memory(f"memory number {i}", session_id=f"s{i % 7}").id for i in range(300)]
        m.flush()
        query = "the query"
        got = m.search_memories_by_similarity(query, similarity_threshold=-1.0, limit=10)
        q = embed([query])[0]
        matrix = np.stack([vectors[f"memory number {i}"] for i in range(300)])
        cosine = matrix @ q / (np.linalg.norm(matrix, axis=1) * np.linalg.norm(q))
        expected = [ids[i] for i in np.argsort(-cosine)[:10]]
        assert list(got["id"]) == expected
        np.testing.assert_allclose(got["similarity"], np.sort(cosine)[::-1][:10], rtol=1e-4)
        distance = np.linalg.norm(matrix - q, axis=1)
        by_id = dict(zip(ids, 1 / (1 + distance), strict=True))
        np.testing.assert_allclose(got["distance_score"], [by_id[i] for i in got["id"]], rtol=1e-4)
        # ranking by the distance score is the exact top-k of that score
        top = m.search_memories_by_similarity(query, similarity_threshold=0.0, metric="distance")
        assert list(top["id"]) == [ids[i] for i in np.argsort(-(1 / (1 + distance)))[:10]]


def test_similarity_threshold_defaults_to_0_7_and_filters(mem):
    same = mem.add_memory("joyful moments at the beach with family")
    mem.add_memory("quarterly tax filing deadline")
    mem.flush()
    hits = mem.search_memories_by_similarity("joyful moments at the beach with family")
    assert list(hits["id"]) == [same.id]
    assert (hits["similarity"] >= 0.7).all()
    assert hits.attrs["threshold"] == 0.7
    assert mem.search_memories_by_similarity("zzz qqq", similarity_threshold=0.99).empty


def test_search_memories_ranks_offsets_and_dates(mem):
    old = mem.add_memory("budget for 2023", session_id="a")
    mem.store.execute(
        "UPDATE events SET created_at = ? WHERE id = ?", [dt.datetime(2023, 6, 1), old.id]
    )
    new = mem.add_memory("budget for this year", session_id="a")
    mem.add_memory("holiday plans", session_id="a")
    mem.flush()
    # (the hash test embedder scores far below the Astreus default of 0.7: 0 keeps all)
    ranked = mem.search_memories("budget", limit=2, similarity_threshold=0)
    assert set(ranked["id"]) == {old.id, new.id}
    assert ranked["similarity"].is_monotonic_decreasing
    second = mem.search_memories("budget", limit=1, offset=1, similarity_threshold=0)
    assert list(second["id"]) == [ranked["id"].iloc[1]]
    recent = mem.search_memories("budget", start_date="2024-01-01", similarity_threshold=0)
    assert old.id not in set(recent["id"])
    early = mem.search_memories("budget", end_date=dt.date(2024, 1, 1), similarity_threshold=0)
    assert list(early["id"]) == [old.id]
    words = mem.search_memories("BUDGET for", use_embedding=False)
    assert set(words["id"]) == {old.id, new.id}
    assert mem.search_memories("100%", use_embedding=False).empty


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"start_date": "yesterday"}, "start_date"),
        ({"end_date": 20240101}, "end_date"),
        ({"start_date": "2024-02-01", "end_date": "2024-01-01"}, "after end_date"),
        ({"limit": -1}, "limit"),
        ({"limit": "5"}, "limit"),
        ({"offset": 1.5}, "offset"),
        ({"filters": {"user": "x"}}, "cannot filter"),
        ({"filters": "s1"}, "filters must be a dict"),
        ({"filters": {"session_id": 3}}, "session_id"),
        ({"filters": {"kind": "message"}}, "memories are of kind"),
        ({"similarity_threshold": 2}, "similarity_threshold"),
        ({"use_embedding": "no"}, "use_embedding"),
    ],
)
def test_search_memories_bad_inputs(mem, kwargs, message):
    with pytest.raises(InvalidInput, match=message):
        mem.search_memories("budget", **kwargs)


def test_search_bad_query_and_metric(mem):
    with pytest.raises(InvalidInput):
        mem.search_memories("")
    with pytest.raises(InvalidInput):
        mem.search_memories_by_similarity(None)
    with pytest.raises(InvalidInput, match="metric"):
        mem.search_memories_by_similarity("x", metric="manhattan")
    with pytest.raises(InvalidInput, match="similarity_threshold"):
        mem.search_memories_by_similarity("x", similarity_threshold="high")


def test_list_memories_orders_and_pages(mem):
    base = dt.datetime(2024, 1, 1)
    made = []
    for i, importance in enumerate([0.2, 0.9, 0.5]):
        m = mem.add_memory(f"memory {i}", importance=importance)
        mem.store.execute(
            "UPDATE events SET created_at = ?, updated_at = ? WHERE id = ?",
            [base + dt.timedelta(days=i), base + dt.timedelta(days=10 - i), m.id],
        )
        made.append(m.id)
    assert list(mem.list_memories()["id"]) == made[::-1]
    assert list(mem.list_memories(order="asc")["id"]) == made
    assert list(mem.list_memories(order_by="updated_at", order="asc")["id"]) == made[::-1]
    assert list(mem.list_memories(order_by="relevance")["id"]) == [made[1], made[2], made[0]]
    assert list(mem.list_memories(limit=1, offset=1, order="asc")["id"]) == [made[1]]
    assert list(mem.list_memories(start_date=base + dt.timedelta(days=1))["id"]) == made[:0:-1]
    assert isinstance(mem.list_memories()["metadata"].iloc[0], dict)
    for bad in ({"order_by": "size"}, {"order": "up"}, {"limit": None}, {"end_date": "soon"}):
        with pytest.raises(InvalidInput):
            mem.list_memories(**bad)


def test_update_memory_reembeds_changed_content(mem):
    m = mem.add_memory("Important project information: Budget is $50k", {"type": "project"})
    mem.flush()
    before = mem.search_memories_by_similarity("Budget is $50k", similarity_threshold=0.0)
    assert m.id in set(before["id"])
    recent_before = mem.recent("memories")
    assert recent_before["content"].iloc[0].endswith("$50k")
    updated = mem.update_memory(
        m.id,
        content="Updated budget: $75k",
        metadata={"type": "project", "category": "budget", "updated": True},
    )
    assert updated.content == "Updated budget: $75k"
    assert updated.metadata["updated"] is True
    assert updated.updated_at >= updated.created_at
    # working memory shows the new text, not a stale copy
    assert mem.recent("memories")["content"].iloc[0] == "Updated budget: $75k"
    mem.flush()
    row = mem.store.fetchone("SELECT embedding FROM event_vectors WHERE id = ?", [m.id])
    expected = mem.embedder.embed(["Updated budget: $75k"])[0]
    np.testing.assert_allclose(row[0], expected, rtol=1e-5)
    top = mem.search_memories_by_similarity("Updated budget: $75k", limit=1)
    assert list(top["id"]) == [m.id]
    assert mem.audit_log(action="update_memory")["details"].map(json.loads).iloc[0] == {
        "fields": ["content", "metadata"]
    }


def test_update_metadata_only_keeps_the_vector(mem):
    m = mem.add_memory("stable content")
    mem.flush()
    mem.update_memory(m.id, metadata={"tag": "x"})
    assert mem.backlog == 0
    assert mem.store.fetchone("SELECT count(*) FROM event_vectors WHERE id = ?", [m.id])[0] == 1


def test_update_memory_bad_inputs(mem):
    m = mem.add_memory("x")
    with pytest.raises(MemoryNotFound):
        mem.update_memory("missing", content="y")
    with pytest.raises(InvalidInput, match="nothing to change"):
        mem.update_memory(m.id)
    with pytest.raises(InvalidInput):
        mem.update_memory(m.id, content="")
    with pytest.raises(InvalidInput, match="metadata"):
        mem.update_memory(m.id, metadata=["not", "a", "dict"])
    with pytest.raises(InvalidInput):
        mem.update_memory(123, content="y")
    assert mem.get_memory(m.id).content == "x"


def test_delete_memory_returns_a_boolean(mem):
    m = mem.add_memory("to be deleted", session_id="s")
    assert len(mem.recent("s")) == 1
    assert mem.delete_memory(m.id) is True
    assert mem.delete_memory(m.id) is False
    assert mem.recent("s").empty
    with pytest.raises(MemoryNotFound):
        mem.get_memory(m.id)
    with pytest.raises(InvalidInput):
        mem.delete_memory(None)
    assert len(mem.audit_log(action="delete_memory")) == 1


def test_generate_embedding_for_memory_messages(store_path):
    calls = []

    def embed(texts):
        calls.append(list(texts))
        if any("poison" in t for t in texts):
            raise RuntimeError("model exploded")
        return np.ones((len(texts), 8), dtype=np.float32)

    with Memory(store_path, embedder=embed) as m:
        assert m.generate_embedding_for_memory("missing") == {
            "success": False,
            "message": "Memory not found",
        }
        good = m.add_memory("fine text")
        m.flush()
        assert m.generate_embedding_for_memory(good.id) == {
            "success": False,
            "message": "Memory already has embedding",
        }
        # an event the worker could not embed gets repaired on demand
        bad = m.add_memory("poison pill")
        m.flush()
        assert m.get_memory(bad.id).embedding_error
        result = m.generate_embedding_for_memory(bad.id)
        assert result["success"] is False
        assert result["message"] == "Failed to generate embedding"
        assert "model exploded" in result["error"]
        m.store.execute("UPDATE events SET content = 'cured' WHERE id = ?", [bad.id])
        result = m.generate_embedding_for_memory(bad.id)
        assert result == {
            "success": True,
            "message": "Embedding generated successfully",
            "embedding": [1.0] * 8,
        }
        assert m.get_memory(bad.id).embedding_error is None
        with pytest.raises(InvalidInput):
            m.generate_embedding_for_memory(7)


class _Named:
    """An embedder with a given name (a model), every vector alike."""

    def __init__(self, name: str, value: float) -> None:
        self.name, self.value, self.dim = name, value, 8

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.full((len(texts), 8), self.value, dtype=np.float32)


def test_generate_embedding_replaces_another_models_vector(store_path):
    with Memory(store_path, embedder=_Named("test/model-a", 1.0)) as m:
        memory = m.add_memory("written under model a")
        m.flush()
    with Memory(store_path, embedder=_Named("test/model-b", 2.0)) as m:
        result = m.generate_embedding_for_memory(memory.id)
        assert result["success"] is True and result["embedding"] == [2.0] * 8
        stored = m.store.fetchall(
            "SELECT model, embedding FROM event_vectors WHERE id = ?", [memory.id]
        )
        assert [(model, list(vector)) for model, vector in stored] == [("test/model-b", [2.0] * 8)]
        hits = m.search_memories_by_similarity("anything", similarity_threshold=0.5)
        assert list(hits["id"]) == [memory.id]


def test_clear_memories_counts_and_respects_filters(mem):
    _scoped(mem)
    mem.add_memory("other namespace", namespace="b")
    assert mem.clear_memories({"session_id": "s1", "task_id": "t1"}) == 1
    assert mem.clear_memories({"session_id": "s1"}) == 1
    assert mem.clear_memories() == 2
    assert mem.clear_memories() == 0
    assert len(mem.list_memories(namespace="b")) == 1
    assert mem.clear_memories(filters={"namespace": "b"}) == 1
    with pytest.raises(InvalidInput):
        mem.clear_memories({"colour": "red"})
    assert len(mem.audit_log(action="clear_memories")) == 4


def test_memories_survive_reopen(store_path):
    with Memory(store_path, embedder="hash") as m:
        kept = m.add_memory("persistent memory about TypeScript", {"k": 1})
        m.flush()
    with Memory(store_path, embedder="hash") as m:
        assert m.get_memory(kept.id).metadata == {"k": 1}
        hits = m.search_memories_by_similarity("persistent memory about TypeScript")
        assert list(hits["id"]) == [kept.id]


def test_seed_example_with_the_real_model(store_path, real_embedder):
    """Seed 004's walk-through: the agent recalls the user's language and name."""
    with Memory(store_path, embedder=real_embedder) as m:
        john = m.remember_conversation("My name is John and I love TypeScript", "user")
        m.add_memory("Important project information: Budget is $50k", {"type": "project"})
        m.add_memory("User prefers dark mode", {"type": "preference"})
        m.flush()
        question = "What programming language do I like?"
        strict = m.search_memories(question, limit=1)  # 004's default threshold, 0.7
        assert strict.empty or list(strict["id"]) == [john.id]
        if strict.empty:  # this model scores real questions lower: the result says so
            assert strict.attrs["best_similarity"] < 0.7
        top = m.search_memories(question, limit=1, similarity_threshold=0.3)
        assert list(top["id"]) == [john.id]
        hits = m.search_memories_by_similarity("project budget", similarity_threshold=0.3)
        assert hits["content"].iloc[0].startswith("Important project information")
        assert (hits["similarity"] >= 0.3).all()
        assert ((hits["distance_score"] > 0) & (hits["distance_score"] <= 1)).all()
        assert m.search_memories_by_similarity("quantum chromodynamics lecture").empty


@pytest.mark.parametrize(
    "args, kwargs, message",
    [
        (("",), {}, "content"),
        ((None,), {}, "content"),
        ((42,), {}, "content"),
        (("ok", ["not", "a", "dict"]), {}, "metadata"),
        (("ok", {"f": object()}), {}, "JSON"),
        (("ok",), {"graph_id": 5}, "graph_id"),
        (("ok",), {"task_id": ""}, "task_id"),
        (("ok",), {"session_id": "  "}, "session_id"),
        (("ok",), {"importance": 1.5}, "importance"),
        (("ok",), {"importance": "high"}, "importance"),
        (("ok",), {"namespace": ""}, "namespace"),
    ],
)
def test_add_memory_bad_inputs(mem, args, kwargs, message):
    with pytest.raises(InvalidInput, match=message):
        mem.add_memory(*args, **kwargs)
    assert mem.list_memories().empty


def test_remember_conversation_bad_inputs(mem):
    with pytest.raises(InvalidInput, match="role"):
        mem.remember_conversation("hi", None)
    with pytest.raises(InvalidInput, match="metadata"):
        mem.remember_conversation("hi", "user", metadata="x")
    with pytest.raises(InvalidInput, match="content"):
        mem.remember_conversation("", "user")
    assert mem.list_memories().empty


def test_closed_memory_refuses_every_method(store_path):
    m = Memory(store_path, embedder="hash")
    kept = m.add_memory("x")
    m.close()
    for call in (
        lambda: m.add_memory("y"),
        lambda: m.get_memory(kept.id),
        lambda: m.search_memories("x"),
        lambda: m.list_memories(),
        lambda: m.delete_memory(kept.id),
        lambda: m.clear_memories(),
    ):
        with pytest.raises(InvalidInput, match="closed"):
            call()


@pytest.mark.slow
def test_long_term_methods_work_in_shared_mode(store_path):
    """shared=True opens the file per operation; multi-statement methods must hold it."""
    with Memory(store_path, embedder="hash", shared=True) as m:
        kept = m.add_memory("shared memory about budgets", session_id="s")
        m.flush()
        assert list(m.search_memories_by_similarity("shared memory about budgets")["id"]) == [
            kept.id
        ]
        m.set_fact("user", "city", "Lisbon")
        m.set_fact("user", "city", "Porto")
        assert list(m.relevant_facts("user city Porto", limit=1)["value"]) == ["Porto"]
        assert list(m.fact_history()["value"]) == ["Lisbon"]
        m.add_event("s", "user", "My name is Ana", created_at=dt.datetime(2020, 1, 1))
        assert m.consolidate().consolidated == 1
        assert m.update_memory(kept.id, content="changed").content == "changed"
    with Memory(store_path, embedder="hash", shared=True) as m:
        assert m.get_fact("user", "name")["value"] == "Ana"
        assert len(m.list_memories(filters={"kind": "summary"})) == 1


def test_update_memory_redacts_secrets_like_add_memory(mem):
    secret = "ghp_" + "a" * 36
    m = mem.add_memory("nothing secret yet")
    updated = mem.update_memory(m.id, content=f"the token is {secret}")
    assert secret not in updated.content and "[REDACTED]" in updated.content
    mem.flush()
    stored = mem.store.fetchone("SELECT content FROM events WHERE id = ?", [m.id])[0]
    assert secret not in stored
    details = mem.audit_log(action="update_memory")["details"].map(json.loads).iloc[0]
    assert details["redacted"] == 1
