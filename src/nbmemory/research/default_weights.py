"""How :data:`nbmemory.config.DEFAULT_WEIGHTS` were fitted, as code that does it again.

The shipped weights are fitted across every development corpus at once
(:mod:`nbmemory.research.corpora`): the five LoCoMo conversations as they are,
re-shaped into long messages, and stored without the speakers' names, and the
generated technical chat of seeds 0-2.  :data:`RECIPE` says how:

* each question counts 1 / sqrt(its corpus's questions), so a large corpus leads
  without deciding alone; the technical chat's seeds are one corpus, counted twice
  (its 216 questions then weigh about as much as each LoCoMo form's 760);
* features in ``held_at_zero`` are not fitted (``mention``: its sign depends on
  whether the speakers' names are in the text, docs/retrieval.md);
* an L2 penalty, and weights rounded to two decimals.

:func:`judge` ranks each fold of conversations by weights fitted without it (a
LoCoMo conversation always with its other forms, so it is never seen in any
shape), with the search's guard and diversity step, and reports recall@5,
recall@10 and MRR per corpus beside the candidates' own cosine and BM25 orders;
:func:`unseen` ranks technical chats of seeds no fit saw.
``python benchmarks/default_weights.py --locomo PATH`` prints both and the weights.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..config import FEATURES, Settings
from ..retrieval.hybrid import fused_order, rrf_scores
from .corpora import Corpus, build_corpus, load_corpus
from .fitting import Sample, collect_samples, fit_weights

if TYPE_CHECKING:
    from .subject import MemoryLike as Memory


@dataclass(frozen=True)
class Recipe:
    """What :func:`fit` and :func:`judge` do (the shipped weights' values by default)."""

    locomo_corpora: tuple[str, ...] = ("locomo", "locomo-long", "locomo-plain")
    tech_seeds: tuple[int, ...] = (0, 1, 2)
    #: seeds of the technical chat no fit sees, for :func:`unseen`
    unseen_seeds: tuple[int, ...] = (3, 4, 5, 6, 7, 8)
    l2: float = 0.03
    tech_weight: float = 2.0
    held_at_zero: tuple[str, ...] = ("mention",)
    folds: int = 5


RECIPE = Recipe()
TECH = "tech-chat"
_COLUMN = {name: i for i, name in enumerate(FEATURES)}


def tech_corpus(seed: int) -> Corpus:
    """The technical chat of ``seed``, named ``tech-chat-<seed>`` (its own namespaces)."""
    built = build_corpus(TECH, seed=seed)
    return replace(built, name=f"{TECH}-{seed}")


def corpus_samples(memory: Memory, corpus: str, conversations: Sequence[object]) -> list[Sample]:
    """:func:`~nbmemory.research.fitting.collect_samples`, each tagged with ``corpus``."""
    return [replace(s, corpus=corpus) for s in collect_samples(memory, conversations)]  # type: ignore[arg-type]


def recipe_samples(
    memory: Memory,
    *,
    locomo_path: str | os.PathLike[str] | None = None,
    recipe: Recipe = RECIPE,
    seeds: Sequence[int] | None = None,
) -> list[Sample]:
    """Every corpus of ``recipe`` stored in ``memory`` and its questions' candidates
    (the technical chat of ``seeds``, default the recipe's; LoCoMo's corpora only
    when ``seeds`` is None)."""
    samples: list[Sample] = []
    if seeds is None:
        for name in recipe.locomo_corpora:
            corpus = build_corpus(name, locomo_path=locomo_path)
            samples += corpus_samples(memory, name, load_corpus(corpus, memory))
    for seed in recipe.tech_seeds if seeds is None else seeds:
        corpus = tech_corpus(seed)
        samples += corpus_samples(memory, corpus.name, load_corpus(corpus, memory))
    return samples


def _group(corpus: str) -> str:
    return TECH if corpus.startswith(TECH) else corpus


def weighted(samples: Sequence[Sample], recipe: Recipe = RECIPE) -> list[Sample]:
    """``samples`` with the recipe's question weights and held features set to 0."""
    counts: dict[str, int] = {}
    for s in samples:
        counts[_group(s.corpus)] = counts.get(_group(s.corpus), 0) + 1
    held = [_COLUMN[name] for name in recipe.held_at_zero]
    out = []
    for s in samples:
        group = _group(s.corpus)
        weight = 1.0 / np.sqrt(counts[group]) * (recipe.tech_weight if group == TECH else 1.0)
        features = s.features.copy()
        features[:, held] = 0.0
        out.append(replace(s, features=features, weight=float(weight)))
    return out


def fit(samples: Sequence[Sample], recipe: Recipe = RECIPE) -> dict[str, float]:
    """The recipe's weights for ``samples`` (two decimals, held features 0)."""
    weights = fit_weights(weighted(samples, recipe), l2=recipe.l2)
    return {name: round(value, 2) + 0.0 for name, value in weights.items()}


def fold(sample: Sample, recipe: Recipe = RECIPE, *, locomo: Sequence[str] = ()) -> int:
    """The fold of a question: its LoCoMo conversation's (any form: ``conv-26``,
    ``conv-26-long`` and ``conv-26-plain`` together), or its technical chat's project."""
    if sample.corpus.startswith(TECH):
        seed = int(sample.corpus.rsplit("-", 1)[1])
        projects = ("atlas", "beacon", "ledger")
        project = projects.index(sample.conversation) if sample.conversation in projects else 0
        return (seed * len(projects) + project) % recipe.folds
    base = sample.conversation.removesuffix("-long").removesuffix("-plain")
    return sorted(locomo).index(base) % recipe.folds if base in locomo else 0


def ranked(
    sample: Sample, weights: Mapping[str, float], diversity: float | None = None
) -> list[int]:
    """The top 10 candidates of ``sample`` as the hybrid search orders them with
    ``weights`` (:func:`~nbmemory.retrieval.hybrid.fused_order`: the guard, and the
    diversity step on questions asking for several things)."""
    if diversity is None:
        diversity = Settings().diversity_weight
    w = np.array([weights.get(name, 0.0) for name in FEATURES])
    order, _, _ = fused_order(
        sample.features,
        w,
        diversity=diversity if sample.several else 0.0,
        sessions=sample.sessions,
    )
    return order[:10]


def _by_column(sample: Sample, column: str) -> list[int]:
    x = sample.features[:, _COLUMN[column]]
    order = sorted(range(len(x)), key=lambda i: (-x[i], i))
    return [i for i in order if x[i] > 0][:10]


def _scores(sample: Sample, top: list[int]) -> tuple[float, float, float]:
    evidence = max(sample.evidence, int(sample.relevant.sum()), 1)
    first = next((k for k, i in enumerate(top) if sample.relevant[i]), None)
    return (
        float(sample.relevant[top[:5]].sum()) / evidence,
        float(sample.relevant[top[:10]].sum()) / evidence,
        0.0 if first is None else 1.0 / (first + 1),
    )


def _table(rows: list[tuple[str, str, tuple[float, float, float]]]) -> pd.DataFrame:
    frame = pd.DataFrame(
        [(c, r, *v) for c, r, v in rows],
        columns=["corpus", "ranking", "recall@5", "recall@10", "MRR"],
    )
    table = frame.groupby(["corpus", "ranking"], sort=False).mean()
    table["questions"] = frame.groupby(["corpus", "ranking"], sort=False).size()
    return table


def judge(samples: Sequence[Sample], recipe: Recipe = RECIPE) -> pd.DataFrame:
    """Held out: each fold ranked by the recipe's weights fitted on the others;
    per corpus (technical-chat seeds pooled), beside cosine and keywords."""
    locomo = sorted({s.conversation for s in samples if not s.corpus.startswith(TECH)})
    locomo = sorted({c.removesuffix("-long").removesuffix("-plain") for c in locomo})
    rows = []
    for part in range(recipe.folds):
        train = [s for s in samples if fold(s, recipe, locomo=locomo) != part]
        test = [s for s in samples if fold(s, recipe, locomo=locomo) == part]
        if not test or not train:
            continue
        weights = fit(train, recipe)
        for s in test:
            rows.append((_group(s.corpus), "held out", _scores(s, ranked(s, weights))))
    for s in samples:
        for name, column in (("cosine", "cosine_rank"), ("keywords", "keyword_rank")):
            rows.append((_group(s.corpus), name, _scores(s, _by_column(s, column))))
    return _table(rows)


def unseen(samples: Sequence[Sample], weights: Mapping[str, Mapping[str, float]]) -> pd.DataFrame:
    """``samples`` (technical chats of seeds no fit saw) ranked by each named weights."""
    rows = []
    for s in samples:
        for name, w in weights.items():
            rows.append((_group(s.corpus), name, _scores(s, ranked(s, w))))
        for name, column in (("cosine", "cosine_rank"), ("keywords", "keyword_rank")):
            rows.append((_group(s.corpus), name, _scores(s, _by_column(s, column))))
        rows.append((_group(s.corpus), "rrf", _scores(s, _by_column_rrf(s))))
    return _table(rows)


def _by_column_rrf(sample: Sample) -> list[int]:
    scores = rrf_scores(sample.features)
    return sorted(range(len(scores)), key=lambda i: (-scores[i], i))[:10]
