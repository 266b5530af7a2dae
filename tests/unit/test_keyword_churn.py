"""The keyword index under churn: its arrays follow the live rows, not every row ever
added, and it answers as an index built fresh from those rows."""

from __future__ import annotations

import numpy as np
import pytest

from nbmemory.retrieval.keywords import KeywordIndex


def test_keyword_churn_compacts_and_matches_a_fresh_index():
    rng = np.random.default_rng(5)
    words = [f"word{i}" for i in range(300)]
    index = KeywordIndex()
    index.rebuild([])
    live = {}
    for round_ in range(5):
        rows = []
        for i in range(1000):
            text = " ".join(rng.choice(words, size=8))
            rows.append((f"r{round_}-{i}", "ns", f"s{i % 7}", text, round_ * 1000 + i, None))
        index.add(rows)
        live.update({r[0]: r for r in rows})
        doomed = [k for k in list(live) if rng.random() < 0.8]
        index.remove(doomed)
        for k in doomed:
            del live[k]
    assert len(index) == len(live) and index._size < 2 * len(live) + 1024
    fresh = KeywordIndex()
    fresh.rebuild(
        sorted(live.values(), key=lambda r: r[4]),
    )
    for query in ["word1 word2", "word42", "word7 word99 word250"]:
        assert index.scores(query, "ns") == pytest.approx(fresh.scores(query, "ns"))
    some = next(iter(live))
    assert index.neighbours(some) == fresh.neighbours(some)
