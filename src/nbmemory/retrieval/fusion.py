"""The learned fusion of hybrid search: which signals, with which weights.

Each candidate memory of a hybrid search is described by the numbers in
:data:`FEATURES` (its cosine similarity, its BM25 score, its neighbours', whether
the question's speaker wrote it, whether it was written in the period the
question names ...), and scored by their weighted sum.  The weights in
:data:`DEFAULT_WEIGHTS` were fitted across the development corpora at once
(:mod:`nbmemory.research.corpora`; :func:`nbmemory.research.fitting.fit_weights`):
a listwise model (softmax over each question's candidates, the evidence turns
as targets), so they are a few numbers, not a model file, and refitting them on
a user's own labelled conversations is a command.

Signals group the features (:data:`SIGNALS`): ``Settings(signal_weights=...)``
scales a whole signal (0 turns it off, which is what the ablation table does),
``Settings(fusion_weights=...)`` replaces single weights.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np

from ..config import DEFAULT_WEIGHTS, FEATURES, SIGNALS
from .dates import DAY_NAMES, MONTH_NAMES

__all__ = ["DEFAULT_WEIGHTS", "FEATURES", "SIGNALS", "asks_for_several", "weights_vector"]

#: How many of the best candidates the diversity step re-orders.
DIVERSITY_POOL = 40
#: The widest period a question may name for the date signals (a year says little).
MAX_PERIOD_DAYS = 62
#: date_after: days after the named period.
AFTER_DAYS = 14
#: The guard at query time: when the fused top GUARD_DEPTH shares fewer than
#: GUARD_OVERLAP of its places with the cosine top GUARD_DEPTH and with the BM25
#: one alike (with 0.1 of 10: nothing at all), the ranking falls back to their
#: reciprocal-rank fusion (constant RRF_K).
GUARD_DEPTH = 10
GUARD_OVERLAP = 0.1
RRF_K = 60


def weights_vector(
    fusion_weights: Mapping[str, float] | None, signal_weights: Mapping[str, float] | None
) -> np.ndarray:
    """The weight of each of :data:`FEATURES`, in order: the defaults, replaced by
    ``fusion_weights``, each signal's features scaled by ``signal_weights``."""
    weights = dict(DEFAULT_WEIGHTS)
    weights.update(fusion_weights or {})
    for signal, scale in (signal_weights or {}).items():
        for name in SIGNALS[signal]:
            weights[name] *= scale
    return np.array([weights[name] for name in FEATURES], dtype=np.float64)


#: A question asking for several things: a plural right after what/which ("What
#: activities ...", "Which books ..."), "how many", "both", "all", "what are".
_SEVERAL_RE = re.compile(
    r"(?i)^\W*(?:what|which)\s+(?:\w+\s+)?"
    r"(?!(?:is|was|does|has|this|its|always|status|ss|yes)\b)\w+s\b(?<!ss)"
    r"|\bhow many\b|\bboth\b|\ball\b|\bwhat are\b"
)


def asks_for_several(question: str) -> bool:
    """Whether a question asks for several things ("What activities does Melanie
    do?", "How many times ...?"): their answers are spread over sessions."""
    return bool(_SEVERAL_RE.search(question))


_NAME_RE = re.compile(r"(?<![.!?]\s)(?<!^)\b([A-Z][a-z]{2,})\b")
_NOT_NAMES = frozenset(
    [*MONTH_NAMES, *DAY_NAMES]
    + [
        "what",
        "when",
        "where",
        "which",
        "who",
        "whom",
        "whose",
        "how",
        "why",
        "would",
        "could",
        "should",
        "did",
        "does",
        "is",
        "are",
        "was",
        "were",
        "the",
    ]
)


def names_mentioned(question: str, speakers: set[str]) -> list[str]:
    """Capitalised words of a question that are not its first word, a speaker's
    name, a month or a weekday: the people, places and titles it names."""
    spoken = {part for name in speakers for part in name.split()}
    return sorted(
        {
            word
            for word in _NAME_RE.findall(question)
            if word.lower() not in _NOT_NAMES and word.lower() not in spoken
        }
    )
