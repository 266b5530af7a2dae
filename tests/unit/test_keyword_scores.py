"""Lazy BM25: common terms added only where they can change the answer give exactly
the answer of adding them everywhere (same ids, same floats, same tie-breaks)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nbmemory.retrieval.keywords import KeywordIndex
from nbmemory.retrieval.keywords import index as keyword_index

#: a Zipf-like vocabulary: the first words are in most documents (the deferred terms)
WORDS = [f"w{i}" for i in range(40)]


def corpus(seed: int, n: int, namespaces: int) -> list[tuple]:
    rng = np.random.default_rng(seed)
    ranks = np.minimum(rng.zipf(1.3, size=(n, 8)), len(WORDS)) - 1
    return [
        (f"e{i}", f"ns{i % namespaces}", f"s{i % 7}", " ".join(WORDS[r] for r in row), i, i)
        for i, row in enumerate(ranks)
    ]


def build(rows: list[tuple], removed: list[str]) -> KeywordIndex:
    index = KeywordIndex()
    index.rebuild(rows[: len(rows) // 2])
    index.add(rows[len(rows) // 2 :])  # half frozen, half in the new tier
    index.remove(removed)
    return index


@pytest.mark.slow
@given(
    seed=st.integers(0, 10_000),
    namespaces=st.sampled_from([1, 2]),
    dead=st.sampled_from([0, 5]),
    limit=st.sampled_from([1, 3, 10, 50]),
    words=st.lists(st.sampled_from(WORDS[:12]), min_size=1, max_size=5),
    filtered=st.booleans(),
)
@settings(max_examples=120, deadline=None)
def test_lazy_common_terms_give_exactly_the_eager_answer(
    seed, namespaces, dead, limit, words, filtered
):
    rows = corpus(seed, 400, namespaces)
    removed = [f"e{i}" for i in range(0, 400, 400 // dead)] if dead else []
    index = build(rows, removed)
    query = " ".join(words)
    allowed = {f"e{i}" for i in range(0, 400, 3)} if filtered else None
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(keyword_index, "DEFER_POSTINGS", 10**9)  # everything added eagerly
        eager = index.score_array(query, "ns0", allowed=allowed)
        assert not eager._deferred
    patch_lazy = pytest.MonkeyPatch()
    patch_lazy.setattr(keyword_index, "DEFER_POSTINGS", 20)
    try:
        lazy = index.score_array(query, "ns0", allowed=allowed, top=limit)
    finally:
        patch_lazy.undo()
    assert lazy.top(limit) == eager.top(limit)
    assert lazy.max == eager.max
    for i in range(0, 400, 17):
        assert lazy.get(f"e{i}") == eager.get(f"e{i}")
    assert lazy.top(None) == eager.top(None)


def test_common_terms_are_deferred_on_a_large_index_and_the_answer_holds():
    rows = corpus(1, 3000, 1)
    index = KeywordIndex()
    index.rebuild(rows)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(keyword_index, "DEFER_POSTINGS", 200)
        lazy = index.score_array("w0 w1 w2 w17 w30", "ns0", top=10)
        assert lazy._deferred  # w0, w1 are in most documents
        top = lazy.top(10)
    eager = index.score_array("w0 w1 w2 w17 w30", "ns0")
    assert top == eager.top(10)


def test_scores_kept_while_the_index_grows_stay_valid():
    """A query's scores outlive the lock: the index may take new documents meanwhile."""
    index = KeywordIndex()
    index.rebuild([])
    index.add([(f"e{i}", "ns", "s", "lake boat", i, i) for i in range(50)])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(keyword_index, "DEFER_POSTINGS", 10)
        scores = index.score_array("lake", "ns")
        index.add([(f"f{i}", "ns", "s", "lake", 100 + i, 100 + i) for i in range(50)])
        assert len(scores.top(5)) == 5


def test_prefetched_scores_are_the_scores():
    rows = corpus(2, 2000, 1)
    index = KeywordIndex()
    index.rebuild(rows)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(keyword_index, "DEFER_POSTINGS", 100)
        lazy = index.score_array("w0 w1 w9 w22", "ns0", top=5)
        assert lazy._deferred
        asked = [f"e{i}" for i in range(0, 2000, 7)] + ["unknown", None]
        lazy.prefetch(asked)
    eager = index.score_array("w0 w1 w9 w22", "ns0")
    for event_id in asked:
        assert lazy.get(event_id) == eager.get(event_id)


@pytest.mark.slow
@given(
    seed=st.integers(0, 10_000),
    steps=st.lists(st.sampled_from(["add short", "add long", "remove", "query"]), max_size=8),
    words=st.lists(st.sampled_from(WORDS[:12]), min_size=1, max_size=4),
)
@settings(max_examples=150, deadline=None)
def test_the_bound_kept_for_a_common_term_holds_as_documents_come_and_go(seed, steps, words):
    """How much a common term can add is computed once and kept; documents added
    since (short ones raise it, long ones move the average length) and removed ones
    never make the lazy answer differ from the eager one."""
    rng = np.random.default_rng(seed)
    index = KeywordIndex()
    index.rebuild(corpus(seed, 300, 1))
    query = " ".join(words)
    added = 0

    def bounds_hold() -> None:
        """Each kept bound is at least the true largest tf / (tf + norm) now."""
        norms = index._length_norms(0)
        for (tid, code), _ in list(index._ratios.items()):
            positions, tfs = index._term_postings(tid)
            keep = index._alive[positions]
            positions, tfs = positions[keep], tfs[keep]
            if positions.size:
                true = float((tfs.astype(np.float64) / (tfs + norms[positions])).max())
                assert index._ratio_bound(tid, code, positions, tfs, norms) >= true

    def answers_agree() -> None:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(keyword_index, "DEFER_POSTINGS", 10**9)
            eager = index.score_array(query, "ns0")
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(keyword_index, "DEFER_POSTINGS", 20)
            lazy = index.score_array(query, "ns0", top=5)
        assert lazy.top(5) == eager.top(5)
        assert lazy.max == eager.max
        bounds_hold()

    answers_agree()  # keeps the bounds of the query's common terms
    for step in steps:
        if step == "query":
            answers_agree()
        elif step == "remove":
            index.remove([f"e{i}" for i in rng.integers(0, 300, size=20)])
        else:
            rows = []
            for _ in range(10):
                if step == "add short":  # one common word, many times: the largest tf / norm
                    text = " ".join([WORDS[int(rng.integers(0, 3))]] * int(rng.integers(1, 16)))
                else:
                    text = " ".join(WORDS[r] for r in rng.integers(0, 40, size=40))
                rows.append((f"n{added}", "ns0", "s0", text, 1000 + added, 1000 + added))
                added += 1
            index.add(rows)
        bounds_hold()
    answers_agree()
