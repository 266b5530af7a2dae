"""Does the fused ranking hold on conversations it was not fitted to?

:func:`evaluate_corpora` asks every question of each development corpus
(:mod:`nbmemory.research.corpora`) of four rankings over the same stored
memories and vectors:

* ``default`` — the hybrid search with the store's fusion weights;
* ``cosine`` — cosine similarity only (``search(mode="vector")``);
* ``keywords`` — BM25 only (``search(mode="keyword")``);
* ``rrf`` — plain reciprocal-rank fusion of the two (k = 60, the best
  :data:`RRF_DEPTH` of each): the baseline any fusion should beat.

and reports recall@k, MRR and hit@k per corpus, and per question category, and
how often the default's guard fell back to the RRF (``guard``: the share of
questions whose fused top 10 shared too little with both inputs' tops).  A
default that loses to one of its own inputs on some corpus is fitted to the
others.  :func:`ablate_corpora` runs :func:`~nbmemory.research.evaluation.evaluate_ablation`
on each corpus.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import pandas as pd

from ..errors import InvalidInput
from .corpora import Corpus, build_corpus, load_corpus, parse_corpora
from .datasets import LoadedConversation
from .evaluation import (
    STRATEGIES,
    SettingsTrial,
    Strategy,
    evaluate_ablation,
    evaluate_queries,
    frame_to_markdown,
    parse_ks,
    ranked,
)

if TYPE_CHECKING:
    from ..config import Settings
    from .subject import MemoryLike as Memory

#: RRF's constant (Cormack et al. 2009) and how deep each ranking is read.
RRF_K = 60
RRF_DEPTH = 50


def rrf(memory: Memory, loaded: LoadedConversation, question: str, k: int) -> list[str]:
    """Reciprocal-rank fusion of the cosine and the BM25 rankings: each memory
    scores ``sum 1 / (RRF_K + rank)`` over the rankings that hold it (ties: the
    cosine ranking's order)."""
    depth = max(k, RRF_DEPTH)
    scores: dict[str, float] = {}
    for mode in ("vector", "keyword"):
        hits = memory.search(question, limit=depth, mode=mode, namespace=loaded.namespace)
        for rank, memory_id in enumerate(hits["id"], start=1):
            scores[memory_id] = scores.get(memory_id, 0.0) + 1.0 / (RRF_K + rank)
    return sorted(scores, key=lambda i: -scores[i])[:k]


#: The rankings compared on every corpus (row names of the table).
BASELINES: dict[str, Strategy] = {
    "default": STRATEGIES["hybrid"],
    "cosine": STRATEGIES["relevance"],
    "keywords": STRATEGIES["keyword"],
    "rrf": rrf,
}


def _guarded_default(fired: dict[tuple[str, str], bool]) -> Strategy:
    """The hybrid search, noting per (namespace, question) whether its guard fired."""

    def default(memory: Memory, loaded: LoadedConversation, question: str, k: int) -> list[str]:
        hits = ranked(memory, loaded, question, k, "hybrid")
        fired[(loaded.conversation.conversation_id, question)] = any(
            "fallback" in signal for hit in hits for signal in hit.signals
        )
        return [hit.id for hit in hits]

    return default


@dataclass(repr=False)
class CorporaEvaluation:
    """What :func:`evaluate_corpora` returns: (corpus, ranking) x metrics, every
    question's row (with ``corpus``, ``category_name`` and, where the corpus says,
    ``position``: where the answer sits in its message) and the settings."""

    table: pd.DataFrame
    per_query: pd.DataFrame
    parameters: dict[str, Any]

    def by_category(self, metric: str | None = None, corpus: str | None = None) -> pd.DataFrame:
        """``metric`` (default ``recall@<largest k>``) per question category: rows
        (corpus, ranking), columns the categories (NaN where a corpus has none);
        with ``corpus``, that corpus only, each column naming its question count."""
        metric = metric or f"recall@{parse_ks(self.parameters['k'])[-1]}"
        if metric not in self.per_query.columns:
            raise InvalidInput(f"unknown metric {metric!r}; evaluated: recall@k, hit@k, rr")
        frame = self.per_query
        if corpus is not None:
            if corpus not in set(frame["corpus"]):
                raise InvalidInput(f"corpus {corpus!r} was not evaluated")
            frame = frame[frame["corpus"] == corpus]
        table = frame.pivot_table(
            index=["corpus", "strategy"],
            columns="category_name",
            values=metric,
            aggfunc="mean",
            sort=False,
        )
        # categories in their corpus's order (1, 2, ...), corpora in the table's
        named = frame.drop_duplicates(["corpus", "category"])
        rank = {c: i for i, c in enumerate(dict.fromkeys(frame["corpus"]))}
        named = named.sort_values("category", kind="stable")
        named = named.sort_values("corpus", key=lambda c: c.map(rank), kind="stable")
        table = table[list(dict.fromkeys(named["category_name"]))]
        table["all"] = frame.groupby(["corpus", "strategy"], sort=False)[metric].mean()
        table = table.loc[self.table.index.intersection(table.index, sort=False)]
        if corpus is not None:
            counts = frame.drop_duplicates(["conversation", "question"])["category_name"]
            sizes = counts.value_counts()
            table.columns = [
                f"{c} ({int(sizes.sum()) if c == 'all' else int(sizes.get(c, 0))})"
                for c in table.columns
            ]
            table = table.droplevel("corpus")
        table.index.names = ["corpus", "ranking"][-table.index.nlevels :]
        table.columns.name = f"{metric} by category"
        return table

    def to_markdown(self, digits: int = 3) -> str:
        return frame_to_markdown(self.table.reset_index(), digits=digits)

    def __str__(self) -> str:
        return self.table.to_string(float_format=lambda v: f"{v:.3f}")

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v}" for k, v in self.parameters.items())
        return f"retrieval on development corpora ({params})\n{self}"

    def _repr_html_(self) -> str:
        params = ", ".join(f"{k}={v}" for k, v in self.parameters.items())
        body = self.table.to_html(float_format=lambda v: f"{v:.3f}")
        return f"<p>retrieval on development corpora ({params})</p>{body}"


def _corpora(
    corpora: str | Sequence[str | Corpus] | None,
    locomo_path: str | os.PathLike[str] | None,
    seed: int,
) -> list[Corpus]:
    if corpora is None or isinstance(corpora, str):
        return [build_corpus(n, locomo_path=locomo_path, seed=seed) for n in parse_corpora(corpora)]
    return [
        c if isinstance(c, Corpus) else build_corpus(c, locomo_path=locomo_path, seed=seed)
        for c in corpora
    ]


def evaluate_corpora(
    memory: Memory,
    corpora: str | Sequence[str | Corpus] | None = None,
    *,
    k: Iterable[int] | int | str = (5, 10),
    locomo_path: str | os.PathLike[str] | None = None,
    seed: int = 0,
    settings: Settings | None = None,
    strategies: dict[str, Strategy] | None = None,
    loaded: dict[str, list[LoadedConversation]] | None = None,
) -> CorporaEvaluation:
    """recall@k, MRR and hit@k of the default hybrid ranking beside cosine only,
    keywords only and their RRF, per corpus (``"locomo,locomo-long,tech-chat"``,
    names or built :class:`~nbmemory.research.corpora.Corpus`; default: all).

    Each corpus is stored in ``memory`` (namespaces ``<corpus>/<conversation>``;
    loading again stores nothing new) unless ``loaded`` already maps its name to
    its loaded conversations.  ``settings`` is a trial for the reads (default:
    the store's, hybrid profile); ``strategies`` replaces :data:`BASELINES`.
    """
    ks = parse_ks(k)
    trial = (settings or memory.settings).replace(profile="hybrid")
    view = cast("Memory", SettingsTrial(memory, trial))
    chosen = dict(BASELINES if strategies is None else strategies)
    if not chosen:
        raise InvalidInput("name at least one ranking to evaluate")
    fired: dict[tuple[str, str], bool] = {}
    if chosen.get("default") is STRATEGIES["hybrid"]:
        chosen["default"] = _guarded_default(fired)
    frames = []
    sizes = {}
    for corpus in _corpora(corpora, locomo_path, seed):
        conversations = (loaded or {}).get(corpus.name) or load_corpus(corpus, memory)
        frame = evaluate_queries(view, conversations, k=ks, strategies=chosen)
        if frame.empty:
            raise InvalidInput(f"corpus {corpus.name} has no answerable question")
        frame.insert(0, "corpus", corpus.name)
        frame = _with_positions(frame, conversations)
        frame["category_name"] = frame["category"].map(
            lambda c, names=corpus.category_names: names.get(int(c), str(c))
        )
        frames.append(frame)
        sizes[corpus.name] = (corpus.messages, corpus.questions)
    per_query = pd.concat(frames, ignore_index=True)
    pairs = zip(per_query["conversation"], per_query["question"], strict=True)
    per_query["guard"] = [float(fired.get(pair, False)) for pair in pairs]
    per_query.loc[per_query["strategy"] != "default", "guard"] = float("nan")
    grouped = per_query.groupby(["corpus", "strategy"], sort=False)
    columns = [f"recall@{cut}" for cut in ks]
    table = grouped[columns].mean()
    table["MRR"] = grouped["rr"].mean()
    table[f"hit@{ks[-1]}"] = grouped[f"hit@{ks[-1]}"].mean()
    table["guard"] = grouped["guard"].mean()
    table["questions"] = grouped.size()
    table["messages"] = [sizes[c][0] for c, _ in table.index]
    table.index.names = ["corpus", "ranking"]
    parameters = {
        "k": ",".join(str(x) for x in ks),
        "corpora": ",".join(sizes),
        "seed": seed,
        "fusion_weights": "default" if not trial.fusion_weights else "custom",
        "model": memory.model_name,
    }
    return CorporaEvaluation(table, per_query, parameters)


def _with_positions(frame: pd.DataFrame, conversations: list[LoadedConversation]) -> pd.DataFrame:
    """``frame`` with a ``position`` column where the corpus says where each answer sits
    (the tech chat: start, middle, end of its message, or a user message)."""
    rows = [
        (c.conversation.conversation_id, q.question, q.position)
        for c in conversations
        if "position" in c.conversation.questions.columns
        for q in c.conversation.questions.itertuples(index=False)
    ]
    if not rows:
        return frame
    where = pd.DataFrame(rows, columns=["conversation", "question", "position"])
    where = where.drop_duplicates(["conversation", "question"])
    return frame.merge(where, on=["conversation", "question"], how="left", validate="m:1")


def ablate_corpora(
    memory: Memory,
    corpora: str | Sequence[str | Corpus] | None = None,
    *,
    k: Iterable[int] | int | str = (5, 10),
    locomo_path: str | os.PathLike[str] | None = None,
    seed: int = 0,
    settings: Settings | None = None,
) -> pd.DataFrame:
    """:func:`~nbmemory.research.evaluation.evaluate_ablation` on each corpus: rows
    (corpus, signal switched off), columns recall@k, hit@k, Δ recall, MRR."""
    tables = {}
    for corpus in _corpora(corpora, locomo_path, seed):
        conversations = load_corpus(corpus, memory)
        tables[corpus.name] = evaluate_ablation(memory, conversations, k=k, settings=settings).table
    table = pd.concat(tables, names=["corpus"])
    table.index.names = ["corpus", "ablation"]
    return table
