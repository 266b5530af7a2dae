"""The hybrid ranking's session spread as a unit: with a cost for a third hit from one
session, a new session's hit is picked first.  ``tests/test_fusion.py`` checks what a
question asking for several things gets from a search."""

from __future__ import annotations

import numpy as np

from nbmemory.retrieval.hybrid import spread


def test_diversity_picks_from_a_new_session_before_a_third_from_the_same():
    scores = np.array([3.0, 2.9, 2.8, 2.5, 1.0])
    sessions = np.array([0, 0, 0, 1, 2])
    order = [0, 1, 2, 3, 4]
    assert spread(order, scores, sessions, cost=0.0, limit=3) == order
    assert spread(order, scores, sessions, cost=0.5, limit=3) == [0, 3, 1, 2, 4]
    assert spread(order, scores, sessions, cost=5.0, limit=3) == [0, 3, 4, 1, 2]
