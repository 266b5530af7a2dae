"""A vector budget: the same answers whether a namespace's vectors are in memory or not.

``vector_budget_mb`` bounds the memory one model's vectors take.  Over it, each
namespace searched gets an index of its own while it is among the most recently
used that fit, and the rest is searched in DuckDB, rescored exactly as the index
scores.  Every mode, filter and threshold is compared here against a store with no
budget, on namespaces held in memory and on namespaces searched in DuckDB, with
long texts stored as passages among them.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_index_cache import WORDS

from nbmemory import Memory
from nbmemory.errors import InvalidInput
from nbmemory.retrieval.vector_budget import SqlVectors
from nbmemory.retrieval.vector_index import VectorIndex

SIZES = {"big": 120, "mid": 60, "small": 30}
ROW_MB = 384 * 4 / 2**20


def texts(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    out = [" ".join(rng.choice(WORDS, size=8)) + f" note {i}" for i in range(n)]
    for i in range(0, n, 25):  # long texts: several passages each, a detail at the end
        out[i] = " ".join(rng.choice(WORDS, size=900)) + f" the port is now {8000 + i}"
    return out


@pytest.fixture
def store(tmp_path) -> str:
    path = str(tmp_path / "budget.duckdb")
    with Memory(path, embedder="hash", index_cache=False) as mem:
        for seed, (namespace, n) in enumerate(SIZES.items()):
            mem.add_events(
                [
                    {"session_id": f"s{i % 4}", "role": "user", "content": text}
                    for i, text in enumerate(texts(n, seed))
                ],
                namespace=namespace,
            )
        assert mem.flush(timeout=120)
    return path


QUERIES = ["greyhound comet", "what is the port now", "tram to alfama at sunrise", "budget"]


def answers(mem: Memory, namespace: str) -> list:
    out = []
    for query in QUERIES:
        for mode in ("vector", "hybrid", "keyword"):
            for kwargs in ({}, {"session_id": "s1"}, {"threshold": 0.2}):
                hits = mem.search(query, mode=mode, limit=7, namespace=namespace, **kwargs)
                out.append((query, mode, str(kwargs), list(hits["id"]), list(hits["score"])))
        out.append(("context", mem.get_context(query, namespace=namespace), [], []))
    return out


def same(got: list, expected: list) -> None:
    """The same answers: ids in the same order, scores equal to 1e-6 (a matrix-vector
    product over other rows rounds float32 sums differently in the last bits)."""
    assert len(got) == len(expected)
    for mine, theirs in zip(got, expected, strict=True):
        assert mine[:-1] == theirs[:-1], mine[:3]
        assert np.allclose(mine[-1], theirs[-1], rtol=1e-6, atol=1e-6), (mine, theirs)


def rows(store: str) -> dict[str, int]:
    """Vector rows per namespace (passages included)."""
    with Memory(store, embedder="hash", index_cache=False) as mem:
        return mem.indexes._budget.scan.namespace_sizes(mem.model_name)[1]


def test_answers_are_the_same_in_memory_in_a_namespace_index_and_in_duckdb(store):
    with Memory(store, embedder="hash", index_cache=False) as mem:
        expected = {ns: answers(mem, ns) for ns in SIZES}
        assert mem.indexes.vectors(mem.model_name).passage_rows > 0  # passages are searched
    # a budget that holds "mid" or "small" but not "big"
    budget = (rows(store)["mid"] + 5) * ROW_MB
    with Memory(store, embedder="hash", index_cache=False, vector_budget_mb=budget) as mem:
        for namespace in SIZES:
            same(answers(mem, namespace), expected[namespace])
            searcher = mem.indexes.searcher(mem.model_name, namespace)
            kind = SqlVectors if namespace == "big" else VectorIndex
            assert isinstance(searcher, kind), namespace
    with Memory(store, embedder="hash", index_cache=False, vector_budget_mb=0) as mem:
        for namespace in SIZES:  # everything from DuckDB
            same(answers(mem, namespace), expected[namespace])
            assert isinstance(mem.indexes.searcher(mem.model_name, namespace), SqlVectors)


def test_the_least_recently_used_namespace_leaves_memory_first(store):
    sizes = rows(store)
    budget = (sizes["mid"] + sizes["small"] + 5) * ROW_MB  # both fit; "big" never does
    with Memory(store, embedder="hash", index_cache=False, vector_budget_mb=budget) as mem:
        held = mem.indexes._budget.namespaces.held
        mem.search("comet", namespace="small")
        assert not held  # searched once: answered by DuckDB
        mem.search("comet", namespace="small")  # again: read into memory
        mem.search("comet", namespace="mid")
        mem.search("comet", namespace="mid")
        assert [ns for _, ns in held] == ["small", "mid"]
        mem.search("comet", namespace="small")  # now the most recent
        assert [ns for _, ns in held] == ["mid", "small"]
        mem.configure(vector_budget_mb=(sizes["mid"] + 5) * ROW_MB)  # room for one
        mem.search("comet", namespace="mid")
        assert [ns for _, ns in held] == ["mid"]
        assert mem.indexes._budget.namespaces.nbytes() <= (sizes["mid"] + 5) * 384 * 4
        mem.search("comet", namespace="big")
        assert [ns for _, ns in held] == ["mid"]  # "big" is searched in DuckDB
        assert mem.indexes.whole(mem.model_name) is None  # never held whole


def test_a_namespace_index_follows_new_and_forgotten_memories(store):
    budget = (rows(store)["mid"] + 5) * ROW_MB
    with Memory(store, embedder="hash", index_cache=False, vector_budget_mb=budget) as mem:
        mem.search("comet", namespace="mid", mode="vector")
        mem.search("comet", namespace="mid", mode="vector")
        index = mem.indexes.searcher(mem.model_name, "mid")
        assert isinstance(index, VectorIndex)
        new = mem.add_event("s9", "user", "an unmistakable zeppelin over porto", namespace="mid")
        mem.flush()
        assert mem.indexes.searcher(mem.model_name, "mid") is index  # followed, not rebuilt
        top = mem.search("an unmistakable zeppelin over porto", namespace="mid", mode="vector")
        assert top["id"].iloc[0] == new.id
        mem.delete(new.id, namespace="mid")
        again = mem.search("an unmistakable zeppelin over porto", namespace="mid", mode="vector")
        assert new.id not in set(again["id"])


def test_without_a_budget_nothing_changes_and_a_bad_budget_is_refused(store):
    with Memory(store, embedder="hash", index_cache=False) as mem:
        assert mem.indexes.searcher(mem.model_name, "big") is mem.indexes.vectors(mem.model_name)
    for bad in (-1, "10", float("nan"), True):
        with pytest.raises(InvalidInput, match="vector_budget_mb"):
            Memory(store, embedder="hash", vector_budget_mb=bad)
