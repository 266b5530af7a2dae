"""The Astreus memory API's search options (004: ``MemorySearchOptions``,
"Matemática da Busca por Similaridade", ``clearMemories({syncWithContext})``)."""

from __future__ import annotations

import numpy as np
import pytest

from nbmemory import Memory
from nbmemory.errors import InvalidInput


class Axes:
    """An embedder whose vectors the test chooses: the text names its direction."""

    name = "test/axes-4"
    dim = 4
    _AXES = {
        "budget": [1.0, 0.0, 0.0, 0.0],
        "budget-ish": [0.8, 0.6, 0.0, 0.0],  # cosine 0.8 to "budget"
        "near-budget": [0.65, 0.76, 0.0, 0.0],  # cosine ~0.65
        "holiday": [0.0, 0.0, 1.0, 0.0],
        "anti-budget": [-1.0, 0.0, 0.0, 0.0],  # cosine -1
    }

    def embed(self, texts):
        out = []
        for text in texts:
            key = text.split(":")[0]
            vector = np.asarray(self._AXES.get(key, [0.0, 0.0, 0.0, 1.0]), dtype=np.float32)
            out.append(vector / np.linalg.norm(vector))
        return np.stack(out)


@pytest.fixture
def mem(tmp_path):
    with Memory(str(tmp_path / "m.duckdb"), embedder=Axes(), config=False) as m:
        yield m


def _add(mem, text, **scope):
    return mem.memories.add(text, session_id=scope.pop("session_id", "s"), **scope).id


def test_the_default_threshold_is_astreus_0_7_and_similarity_is_in_0_1(mem):
    """004: "similarityThreshold?: number; // Similarity threshold (0-1, default: 0.7)",
    "similarity ... ∈ [0, 1]"."""
    exact, close, near = (_add(mem, t) for t in ("budget: a", "budget-ish: b", "near-budget: c"))
    _add(mem, "anti-budget: d")
    mem.flush()
    found = mem.memories.search("budget")
    assert list(found["id"]) == [exact, close]  # 0.65 is below 0.7
    everything = mem.memories.search("budget", similarity_threshold=0)
    assert set(everything["id"]) >= {exact, close, near}
    assert everything["similarity"].between(0, 1).all()  # the -1 clamped to 0
    with pytest.raises(InvalidInput, match="similarity_threshold"):
        mem.memories.search("budget", similarity_threshold=-0.5)


def test_an_empty_result_says_how_many_were_just_below(mem):
    _add(mem, "near-budget: c")
    _add(mem, "holiday: x")
    mem.flush()
    found = mem.memories.search("budget")
    assert found.empty
    assert found.attrs["near_misses"] == 1  # 0.65 is within 0.1 of 0.7
    assert found.attrs["best_similarity"] == pytest.approx(0.65, abs=0.01)


def test_order_by_and_order(mem):
    """004: "orderBy?: 'createdAt' | 'updatedAt' | 'relevance'", "order?: 'asc' | 'desc'"."""
    first = _add(mem, "budget-ish: first")
    second = _add(mem, "budget: second")
    third = _add(mem, "budget-ish: third")
    mem.flush()
    assert list(mem.memories.search("budget")["id"])[0] == second  # relevance, desc
    by_time = mem.memories.search("budget", order_by="created_at", order="asc")
    assert list(by_time["id"]) == [first, second, third]
    newest = mem.memories.search("budget", order_by="createdAt")
    assert list(newest["id"]) == [third, second, first]
    weakest = mem.memories.search("budget", order="asc")
    assert list(weakest["id"])[-1] == second
    mem.memories.update(first, content="budget-ish: first, changed")
    mem.flush()
    touched = mem.memories.search("budget", order_by="updated_at")
    assert list(touched["id"])[0] == first
    with pytest.raises(InvalidInput, match="order_by"):
        mem.memories.search("budget", order_by="similarity")


def test_scope_arguments_and_pages(mem):
    """004: "graphId?", "taskId?", "sessionId?" and "pageSize?: number; // Pagination
    size for large result sets"."""
    ids = [
        _add(mem, f"budget: {i}", session_id="s", task_id="t1" if i % 2 else "t2") for i in range(7)
    ]
    mem.flush()
    odd = mem.memories.search("budget", task_id="t1")
    assert set(odd["id"]) == set(ids[1::2])
    assert mem.memories.search("budget", session_id="other").empty
    with pytest.raises(InvalidInput, match="given twice"):
        mem.memories.search("budget", task_id="t1", filters={"taskId": "t1"})
    pages = list(mem.memories.pages("budget", page_size=3, order_by="created_at", order="asc"))
    assert [len(p) for p in pages] == [3, 3, 1]
    assert [i for p in pages for i in p["id"]] == ids
    listed = list(mem.memories.pages(page_size=4, limit=6))
    assert [len(p) for p in listed] == [4, 2]
    with pytest.raises(InvalidInput, match="page_size"):
        next(mem.memories.pages("budget", page_size=0))


def test_embedding_on_request_and_the_owning_agent(mem):
    """004: ``interface Memory { agentId: string; ... embedding?: number[] }``."""
    memory = _add(mem, "budget: with vector")
    mem.flush()
    plain = mem.memories.search("budget")
    assert "embedding" not in plain and list(plain["agent_id"]) == ["default"]
    full = mem.memories.search("budget", include_embedding=True)
    assert full.loc[0, "embedding"] == pytest.approx([1.0, 0.0, 0.0, 0.0])
    listed = mem.memories.list(include_embedding=True)
    assert listed.set_index("id").loc[memory, "embedding"] == pytest.approx([1.0, 0, 0, 0])


def test_clear_memories_syncs_the_context_unless_told_not_to(mem):
    """004: "clearMemories({ syncWithContext: false // Prevent context synchronization
    (default: true) })"."""
    kept = _add(mem, "budget: in the session", session_id="work")
    mem.flush()
    assert kept in {r["id"] for r in mem._core.working.recent("default", "work")}
    assert mem.memories.clear({"session_id": "work"}, sync_with_context=False) == 1
    assert kept in {r["id"] for r in mem._core.working.recent("default", "work")}
    again = _add(mem, "budget: again", session_id="work")
    mem.flush()
    assert mem.memories.clear({"session_id": "work"}) == 1
    assert again not in {r["id"] for r in mem._core.working.recent("default", "work")}
