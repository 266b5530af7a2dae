"""Retrieval evaluation with labels: recall@k, precision@k and MRR per strategy
(the threshold sweep is in :mod:`nbmemory.research.thresholds`).

A *strategy* is any function ``(memory, loaded, question, k) -> ranked ids``; the
built-in ones are registered in :data:`STRATEGIES` and others (keyword/BM25, fused
rankings) join the same table with :func:`register_strategy`::

    @register_strategy("keyword")
    def keyword(memory, loaded, question, k):
        return [...]  # event ids, best first

Questions and their relevant memories come from :class:`~nbmemory.research.datasets.LoadedConversation`
(LoCoMo).  :func:`evaluate_ablation` measures what each signal of the hybrid
ranking contributes, by switching them off one at a time.  Strategies that go
through ``search`` or ``get_context`` use the memory's reranker when it has one.
Nothing here imports plotly: the CLI uses it without the notebook extra.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pandas as pd

from ..config import SIGNALS
from ..errors import InvalidInput
from ..retrieval.hybrid import HybridHit
from ..retrieval.rerank import reranker_name
from .datasets import LoadedConversation, conversations_of

if TYPE_CHECKING:
    from ..config import Settings
    from .subject import MemoryLike as Memory

Strategy = Callable[["Memory", LoadedConversation, str, int], list[str]]

#: name -> strategy, in the order the evaluation table shows them.
STRATEGIES: dict[str, Strategy] = {}


def register_strategy(name: str, fn: Strategy | None = None) -> Any:
    """Add a strategy to :data:`STRATEGIES` (usable as a decorator); returns ``fn``."""

    def add(function: Strategy) -> Strategy:
        if not name or not isinstance(name, str):
            raise InvalidInput("a strategy needs a non-empty name")
        STRATEGIES[name] = function
        return function

    return add(fn) if fn is not None else add


@register_strategy("recency")
def recency(memory: Memory, loaded: LoadedConversation, question: str, k: int) -> list[str]:
    """The ``k`` newest memories of the conversation (what recency alone would give)."""
    return memory.store.events.ids(
        namespace=loaded.namespace, order="created_at DESC, id DESC", limit=k
    )


@register_strategy("salience")
def salience(memory: Memory, loaded: LoadedConversation, question: str, k: int) -> list[str]:
    """Up to ``k`` salient memories (importance >= the store's threshold) in the
    profile's order (closest to the question first in ``hybrid``): what the
    salience strategy of :meth:`Memory.get_context` brings."""
    by_query = memory.settings.salience_order == "query"
    records = memory.core.retriever.salient(
        loaded.namespace,
        memory.embeddings.embed_query(question) if by_query else None,
        threshold=memory.settings.salience_threshold,
        limit=k,
    )
    return [record["id"] for record in records]


@register_strategy("relevance")
def relevance(memory: Memory, loaded: LoadedConversation, question: str, k: int) -> list[str]:
    """Plain cosine top-``k`` (:meth:`Memory.search` in ``vector`` mode, no threshold)."""
    hits = memory.search(question, limit=k, mode="vector", namespace=loaded.namespace)
    return hits["id"].tolist()


@register_strategy("relevance@threshold")
def relevance_at_threshold(
    memory: Memory, loaded: LoadedConversation, question: str, k: int
) -> list[str]:
    """Cosine top-``k`` with similarity ``>`` the store's ``relevance_threshold`` (0.65)."""
    hits = memory.core.retriever.vector_search(
        memory.embeddings.embed_query(question),
        loaded.namespace,
        limit=k,
        threshold=memory.settings.relevance_threshold,
        strict=True,
    )
    return hits["id"].tolist()


@register_strategy("tri-hybrid")
def tri_hybrid(memory: Memory, loaded: LoadedConversation, question: str, k: int) -> list[str]:
    """The whole context (:meth:`Memory.get_context`), best-ranked first.

    The question is asked in the session of the conversation's last turn, as if
    the user asked it right after the conversation: recency then brings that
    session's last turns, salience the important memories, relevance the similar
    ones, all with the store's settings (with ``profile="spec"`` relevance is cosine
    above 0.65, as in the Rust agent layer; with ``"hybrid"`` the fused ranking).
    """
    context = memory.get_context(loaded.last_session, question, namespace=loaded.namespace)
    return context.ids[:k]


@register_strategy("keyword")
def keyword(memory: Memory, loaded: LoadedConversation, question: str, k: int) -> list[str]:
    """BM25 top-``k`` (:meth:`Memory.search` in ``keyword`` mode)."""
    return [hit.id for hit in ranked(memory, loaded, question, k, "keyword")]


@register_strategy("hybrid")
def hybrid(memory: Memory, loaded: LoadedConversation, question: str, k: int) -> list[str]:
    """Cosine fused with BM25 and neighbouring turns (:meth:`Memory.search`, ``hybrid``)."""
    return [hit.id for hit in ranked(memory, loaded, question, k, "hybrid")]


def ranked(
    memory: Memory, loaded: LoadedConversation, question: str, k: int, mode: str
) -> list[HybridHit]:
    """:meth:`Memory.search`'s top ``k`` in ``mode`` (hybrid or keyword), with the
    memory's settings (a :class:`SettingsTrial`'s for a trial), without the rows and
    the frame search builds around them; with a reranker, search's own answer."""
    if memory.reranker is not None:
        hits = memory.search(question, limit=k, mode=mode, namespace=loaded.namespace)
        return [
            HybridHit(
                row.id, row.score, row.similarity, row.keyword_score, str(row.signals).split(", ")
            )
            for row in hits.itertuples()
        ]
    settings = memory.settings if isinstance(memory, SettingsTrial) else None
    return memory.core.retriever.ranked(
        question, limit=k, mode=mode, namespace=loaded.namespace, settings=settings
    )


#: Strategies whose answer depends on the store's retrieval profile (the others don't).
PROFILE_DEPENDENT = frozenset({"salience", "relevance@threshold", "tri-hybrid"})


def parse_ks(text: str | int | Iterable[int]) -> list[int]:
    """``"5,10"`` (or one int, or an iterable of ints) -> sorted distinct positive cut-offs."""
    if isinstance(text, str):
        parts: list[Any] = text.split(",")
    elif isinstance(text, int):
        parts = [text]
    else:
        parts = list(text)
    try:
        ks = sorted({int(p) for p in parts if str(p).strip()})
    except ValueError:
        raise InvalidInput(f"k must be whole numbers separated by commas, got {text!r}") from None
    if not ks or ks[0] < 1:
        raise InvalidInput(f"k must be positive whole numbers (e.g. 5,10), got {text!r}")
    return ks


def _chosen(strategies: Mapping[str, Strategy] | Sequence[str] | None) -> dict[str, Strategy]:
    if strategies is None:
        return dict(STRATEGIES)
    if isinstance(strategies, Mapping):
        return dict(strategies)
    unknown = [s for s in strategies if s not in STRATEGIES]
    if unknown:
        raise InvalidInput(f"unknown strategy {', '.join(unknown)}; known: {', '.join(STRATEGIES)}")
    return {name: STRATEGIES[name] for name in strategies}


def evaluate_queries(
    memory: Memory,
    loaded: LoadedConversation | Sequence[LoadedConversation],
    *,
    k: Iterable[int] | int | str = (5, 10),
    strategies: Mapping[str, Strategy] | Sequence[str] | None = None,
) -> pd.DataFrame:
    """One row per (strategy, question): what was retrieved and how it scored.

    Columns: strategy, conversation, question, category, relevant (count),
    retrieved (ids, best first, at most max k); for each k ``hits@k`` (how many
    evidence memories are in the top k), ``recall@k``, ``precision@k``,
    ``hit@k`` (1 when any evidence is in the top k) and ``all@k`` (1 when all of
    it is); ``rr`` (reciprocal rank of the first relevant memory within max k, 0
    if none) and ``empty`` (nothing retrieved).
    """
    ks = parse_ks(k)
    top = ks[-1]
    chosen = _chosen(strategies)
    conversations = conversations_of(loaded)
    # each question asked of every strategy in turn (its vector is embedded once,
    # then cached), the rows kept by conversation, then strategy, then question
    by_strategy: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for index, conv in enumerate(conversations):
        queries = conv.queries()
        for q in queries.itertuples(index=False):
            for name, strategy in chosen.items():
                relevant = set(q.relevant_ids)
                retrieved = list(strategy(memory, conv, q.question, top))[:top]
                row: dict[str, Any] = {
                    "strategy": name,
                    "conversation": conv.conversation.conversation_id,
                    "question": q.question,
                    "category": q.category,
                    "relevant": len(relevant),
                    "retrieved": retrieved,
                }
                for cut in ks:
                    hits = len(relevant.intersection(retrieved[:cut]))
                    row[f"hits@{cut}"] = hits
                    row[f"recall@{cut}"] = hits / len(relevant)
                    row[f"precision@{cut}"] = hits / cut
                    row[f"hit@{cut}"] = float(hits > 0)
                    row[f"all@{cut}"] = float(hits == len(relevant))
                first = next((i for i, x in enumerate(retrieved) if x in relevant), None)
                row["rr"] = 0.0 if first is None else 1.0 / (first + 1)
                row["empty"] = not retrieved
                by_strategy.setdefault((index, name), []).append(row)
    return pd.DataFrame([row for rows in by_strategy.values() for row in rows])


def summarize(
    per_query: pd.DataFrame, metrics: Sequence[str] = ("recall", "precision")
) -> pd.DataFrame:
    """The strategies x metrics table: means over questions (macro), one row per strategy.

    ``recall@k`` is the share of a question's evidence in the top k, ``precision@k``
    the share of the top k that is evidence (over k, as trec_eval's P@k), ``hit@k``
    the share of questions with any evidence in the top k; ``metrics`` picks
    which of them (and ``all@k``) show, for every k.  ``MRR`` is the mean
    reciprocal rank of the first evidence turn, ``no hit`` the share of questions
    for which the strategy returned nothing at all.
    """
    if per_query.empty:
        raise InvalidInput("no questions to evaluate (no answerable question with evidence)")
    unknown = [m for m in metrics if m not in CATEGORY_METRICS]
    if unknown:
        raise InvalidInput(
            f"unknown metric {', '.join(unknown)}; metrics: {', '.join(CATEGORY_METRICS)}"
        )
    ks = sorted({int(c.split("@")[1]) for c in per_query.columns if c.startswith("recall@")})
    metric_cols = [f"{metric}@{cut}" for cut in ks for metric in metrics]
    order = list(dict.fromkeys(per_query["strategy"]))
    grouped = per_query.groupby("strategy", sort=False)
    table = grouped[metric_cols].mean()
    table["MRR"] = grouped["rr"].mean()
    table["no hit"] = grouped["empty"].mean()
    table["questions"] = grouped.size()
    table = table.loc[order]
    table.index.name = "strategy"
    return table


#: LoCoMo's question categories (5, adversarial, has no evidence and is left out).
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}

#: The metrics :func:`by_category` can show, per k.
CATEGORY_METRICS = ("recall", "precision", "hit", "all")


def by_category(per_query: pd.DataFrame, metric: str = "recall@10") -> pd.DataFrame:
    """One metric as strategies x question categories (and ``all``), means over
    the questions of each category; the header says how many questions each has.

    ``metric`` is any per-question column: ``recall@k``, ``precision@k``,
    ``hit@k`` (share of questions with some evidence in the top k, the "hit rate"
    other systems report) or ``all@k`` (share with all of their evidence).
    """
    if metric not in per_query.columns:
        known = [c for c in per_query.columns if c.split("@")[0] in CATEGORY_METRICS]
        raise InvalidInput(f"unknown metric {metric!r}; evaluated: {', '.join(known)}")
    order = list(dict.fromkeys(per_query["strategy"]))
    table = per_query.pivot_table(
        index="strategy", columns="category", values=metric, aggfunc="mean", sort=True
    )
    table["all"] = per_query.groupby("strategy")[metric].mean()
    counts = per_query.drop_duplicates(["conversation", "question"])["category"].value_counts()
    table.columns = [
        f"all ({int(counts.sum())})"
        if c == "all"
        else f"{c} {CATEGORIES.get(int(c), '')} ({int(counts.get(c, 0))})".replace("  ", " ")
        for c in table.columns
    ]
    table = table.loc[order]
    table.index.name = f"{metric} by category"
    return table


@dataclass(repr=False)
class Evaluation:
    """What :func:`evaluate` returns: the table, every question's row, and the settings."""

    table: pd.DataFrame
    per_query: pd.DataFrame
    parameters: dict[str, Any]

    def to_markdown(self, digits: int = 3) -> str:
        """The table as GitHub markdown (for a README or a report)."""
        return frame_to_markdown(self.table.reset_index(), digits=digits)

    def by_category(self, metric: str | None = None) -> pd.DataFrame:
        """``metric`` (default ``recall@<largest k>``) per question category: see
        :func:`by_category`."""
        if metric is None:
            metric = f"recall@{max(parse_ks(str(self.parameters.get('k', '10'))))}"
        return by_category(self.per_query, metric)

    def __str__(self) -> str:
        return self.table.to_string(float_format=lambda v: f"{v:.3f}")

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v}" for k, v in self.parameters.items())
        return f"retrieval evaluation ({params})\n{self}"

    def _repr_html_(self) -> str:
        params = ", ".join(f"{k}={v}" for k, v in self.parameters.items())
        body = self.table.to_html(float_format=lambda v: f"{v:.3f}")
        return f"<p>retrieval evaluation ({params})</p>{body}"


def evaluate(
    memory: Memory,
    loaded: LoadedConversation | Sequence[LoadedConversation],
    *,
    k: Iterable[int] | int | str = (5, 10),
    strategies: Mapping[str, Strategy] | Sequence[str] | None = None,
    settings: Settings | None = None,
) -> Evaluation:
    """recall@k, precision@k and MRR of every strategy on labelled questions.

    Thresholds, limits and the retrieval profile are the store's settings, or
    ``settings`` for this evaluation only (``mem.settings.replace(profile="spec")``):
    a trial that changes nothing in the store.
    """
    if settings is not None:
        memory = cast("Memory", SettingsTrial(memory, settings))
    per_query = evaluate_queries(memory, loaded, k=k, strategies=strategies)
    s = memory.settings
    parameters = {
        "k": ",".join(str(x) for x in parse_ks(k)),
        "relevance_threshold": s.relevance_threshold,
        "salience_threshold": s.salience_threshold,
        "profile": s.profile,
        "model": memory.model_name,
        **_reranker_parameter(memory),
    }
    return Evaluation(summarize(per_query), per_query, parameters)


def _reranker_parameter(memory: Memory) -> dict[str, Any]:
    """``{"reranker": name}`` when the memory re-scores with one (else nothing)."""
    reranker = memory.reranker
    return {} if reranker is None else {"reranker": reranker_name(reranker)}


class SettingsTrial:
    """A :class:`~nbmemory.Memory` read with other settings: ``search``, ``get_context``
    and ``settings`` answer for the trial; everything else is the memory's own.

    Nothing is changed or audited, and other threads keep the store's settings.
    """

    def __init__(self, memory: Memory, settings: Settings) -> None:
        self._memory = memory
        self.settings = settings

    def search(self, query: str, **kwargs: Any) -> pd.DataFrame:
        return self._memory.core.retriever.search(query, settings=self.settings, **kwargs)

    def get_context(self, session_id: str, query: str | None = None, **kwargs: Any) -> Any:
        return self._memory.core.retriever.get_context(
            session_id, query, settings=self.settings, **kwargs
        )

    def __getattr__(self, name: str) -> Any:
        return getattr(self._memory, name)


def evaluate_profiles(
    memory: Memory,
    loaded: LoadedConversation | Sequence[LoadedConversation],
    profiles: Sequence[str],
    *,
    k: Iterable[int] | int | str = (5, 10),
    strategies: Mapping[str, Strategy] | Sequence[str] | None = None,
    relevance_threshold: float | None = None,
) -> Evaluation:
    """One table for several retrieval profiles (``["spec", "hybrid"]``).

    Strategies that do not depend on the profile (recency, relevance,
    keyword, hybrid) are asked once; the others once per profile, named like
    ``"tri-hybrid [spec]"`` when there is more than one profile.
    ``relevance_threshold`` overrides every profile's own (None: each profile's,
    0.65 for spec and 0.2 for hybrid).  Each profile is a trial of settings for
    the reads of this evaluation: the store's own settings are never changed.
    """
    if not profiles:
        raise InvalidInput("name at least one profile (spec, hybrid)")
    chosen = _chosen(strategies)
    shared = {n: f for n, f in chosen.items() if n not in PROFILE_DEPENDENT}
    dependent = {n: f for n, f in chosen.items() if n in PROFILE_DEPENDENT}
    before = memory.settings
    frames = []
    for index, profile in enumerate(profiles):
        trial = before.replace(profile=profile, relevance_threshold=relevance_threshold)
        asked = {**(shared if index == 0 else {}), **dependent}
        if not asked:
            continue
        view = cast("Memory", SettingsTrial(memory, trial))  # reads like the Memory
        frame = evaluate_queries(view, loaded, k=k, strategies=asked)
        if len(profiles) > 1:
            mask = frame["strategy"].isin(dependent)
            frame.loc[mask, "strategy"] += f" [{profile}]"
        frames.append(frame)
    per_query = pd.concat(frames, ignore_index=True)
    table = summarize(per_query)
    # the strategies in the order asked, each profile's row beside the others
    order = [
        row
        for n in chosen
        for row in ([n] if n in table.index else [f"{n} [{p}]" for p in profiles])
        if row in table.index
    ]
    order += [n for n in table.index if n not in order]
    parameters = {
        "k": ",".join(str(x) for x in parse_ks(k)),
        "profiles": ",".join(profiles),
        "relevance_threshold": (
            "per profile" if relevance_threshold is None else relevance_threshold
        ),
        "salience_threshold": before.salience_threshold,
        "model": memory.model_name,
        **_reranker_parameter(memory),
    }
    return Evaluation(table.loc[order], per_query, parameters)


#: The rows of :func:`evaluate_ablation`: name -> (strategy, the settings that
#: differ from the hybrid profile's).  Each switches one signal of the hybrid
#: ranking off; the last is plain cosine (``search(mode="vector")``).
ABLATIONS: dict[str, tuple[str, dict[str, Any]]] = {
    "hybrid (all signals)": ("hybrid", {}),
    **{f"without {signal}": ("hybrid", {"signal_weights": {signal: 0.0}}) for signal in SIGNALS},
    "without diversity (diversity_weight=0)": ("hybrid", {"diversity_weight": 0.0}),
    "vector (cosine only)": ("relevance", {}),
}


def evaluate_ablation(
    memory: Memory,
    loaded: LoadedConversation | Sequence[LoadedConversation],
    *,
    k: Iterable[int] | int | str = (5, 10),
    settings: Settings | None = None,
    ablations: Mapping[str, tuple[str, Mapping[str, Any]]] | None = None,
) -> Evaluation:
    """What each signal of the hybrid search contributes: one row per signal
    switched off (:data:`ABLATIONS`), with recall@k, hit@k, MRR and the change of
    recall at the largest k from the first row (``Δ recall@k``).

    Every row reads the same stored memories and vectors (nothing is embedded
    again) with trial settings: the hybrid profile of ``settings`` (default: the
    store's), with the row's changes.  The store's own settings never change.
    ``ablations`` replaces the rows: name -> (strategy name, settings changes).
    """
    ks = parse_ks(k)
    base = (settings or memory.settings).replace(profile="hybrid")
    rows = ABLATIONS if ablations is None else ablations
    if not rows:
        raise InvalidInput("name at least one ablation row")
    strategies = {
        name: _with_settings(_chosen([strategy])[strategy], base.replace(**changes))
        for name, (strategy, changes) in rows.items()
    }
    per_query = evaluate_queries(memory, loaded, k=ks, strategies=strategies)
    table = summarize(per_query, metrics=("recall", "hit")).drop(columns="no hit")
    top = f"recall@{ks[-1]}"
    table.insert(table.columns.get_loc("MRR"), f"Δ {top}", table[top] - table[top].iloc[0])
    parameters = {
        "k": ",".join(str(x) for x in ks),
        "profile": "hybrid",
        "fusion_weights": "fitted on LoCoMo" if not base.fusion_weights else "custom",
        "diversity_weight": base.diversity_weight,
        "model": memory.model_name,
        **_reranker_parameter(memory),
    }
    return Evaluation(table, per_query, parameters)


def _with_settings(strategy: Strategy, settings: Settings) -> Strategy:
    """``strategy`` asked of the memory read with ``settings`` (a :class:`SettingsTrial`)."""

    def trial(memory: Memory, loaded: LoadedConversation, question: str, k: int) -> list[str]:
        return strategy(cast("Memory", SettingsTrial(memory, settings)), loaded, question, k)

    return trial


def frame_to_markdown(frame: pd.DataFrame, *, digits: int = 3) -> str:
    """A DataFrame as a GitHub markdown table (floats rounded to ``digits``)."""

    def cell(value: Any) -> str:
        if isinstance(value, (float, np.floating)):
            return "" if math.isnan(value) else f"{value:.{digits}f}"
        return str(value)

    header = "| " + " | ".join(str(c) for c in frame.columns) + " |"
    rule = "|" + "|".join("---" if i == 0 else "---:" for i in range(len(frame.columns))) + "|"
    lines = [header, rule]
    for row in frame.itertuples(index=False):
        lines.append("| " + " | ".join(cell(v) for v in row) + " |")
    return "\n".join(lines)
