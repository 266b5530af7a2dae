"""Retrieval evaluation with labels: recall@k, precision@k and MRR per strategy,
and the threshold sweep that turns the spec's guessed thresholds into measured ones.

A *strategy* is any function ``(memory, loaded, question, k) -> ranked ids``; the
built-in ones are registered in :data:`STRATEGIES` and others (keyword/BM25, fused
rankings) join the same table with :func:`register_strategy`::

    @register_strategy("keyword")
    def keyword(memory, loaded, question, k):
        return [...]  # event ids, best first

Questions and their relevant memories come from :class:`~nbmemory.datasets.LoadedConversation`
(LoCoMo).  Nothing here imports plotly: the CLI uses it without the notebook extra.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .datasets import LoadedConversation
from .errors import InvalidInput

if TYPE_CHECKING:
    from .memory import Memory

Strategy = Callable[["Memory", LoadedConversation, str, int], list[str]]

#: name -> strategy, in the order the evaluation table shows them.
STRATEGIES: dict[str, Strategy] = {}

#: Thresholds of the spec drawn on every figure: relevance (seed 000) and search (seed 004).
SPEC_THRESHOLDS = {"relevance 0.65 (seed 000)": 0.65, "search 0.7 (seed 004)": 0.7}

#: Thresholds a sweep visits by default: 0.00, 0.01, ... 1.00.
DEFAULT_THRESHOLDS = np.round(np.linspace(0.0, 1.0, 101), 2)


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
    rows = memory.store.fetchall(
        "SELECT id FROM events WHERE namespace = ? ORDER BY created_at DESC, id DESC LIMIT ?",
        [loaded.namespace, int(k)],
    )
    return [r[0] for r in rows]


@register_strategy("salience")
def salience(memory: Memory, loaded: LoadedConversation, question: str, k: int) -> list[str]:
    """The ``k`` most important memories (ties: newest first), whatever the question."""
    rows = memory.store.fetchall(
        "SELECT id FROM events WHERE namespace = ?"
        " ORDER BY importance DESC, created_at DESC, id DESC LIMIT ?",
        [loaded.namespace, int(k)],
    )
    return [r[0] for r in rows]


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
    hits = memory.store.similarity_search(
        memory.embed_query(question),
        memory.model_name,
        limit=k,
        namespace=loaded.namespace,
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
    ones, all with the store's settings (with ``profile="spec"`` this is seed
    000's tri-hybrid context; with ``"hybrid"`` relevance is the fused ranking).
    """
    context = memory.get_context(loaded.last_session, question, namespace=loaded.namespace)
    return context.ids[:k]


@register_strategy("keyword")
def keyword(memory: Memory, loaded: LoadedConversation, question: str, k: int) -> list[str]:
    """BM25 top-``k`` (:meth:`Memory.search` in ``keyword`` mode)."""
    hits = memory.search(question, limit=k, mode="keyword", namespace=loaded.namespace)
    return hits["id"].tolist()


@register_strategy("hybrid")
def hybrid(memory: Memory, loaded: LoadedConversation, question: str, k: int) -> list[str]:
    """Cosine fused with BM25 and neighbouring turns (:meth:`Memory.search`, ``hybrid``)."""
    hits = memory.search(question, limit=k, mode="hybrid", namespace=loaded.namespace)
    return hits["id"].tolist()


#: Strategies whose answer depends on the store's retrieval profile (the others don't).
PROFILE_DEPENDENT = frozenset({"relevance@threshold", "tri-hybrid"})


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
    retrieved (ids, best first, at most max k), ``hits@k``, ``recall@k``,
    ``precision@k`` for each k, ``rr`` (reciprocal rank of the first relevant
    memory within max k, 0 if none) and ``empty`` (nothing retrieved).
    """
    ks = parse_ks(k)
    top = ks[-1]
    chosen = _chosen(strategies)
    conversations = [loaded] if isinstance(loaded, LoadedConversation) else list(loaded)
    rows: list[dict[str, Any]] = []
    for conv in conversations:
        queries = conv.queries()
        for name, strategy in chosen.items():
            for q in queries.itertuples(index=False):
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
                first = next((i for i, x in enumerate(retrieved) if x in relevant), None)
                row["rr"] = 0.0 if first is None else 1.0 / (first + 1)
                row["empty"] = not retrieved
                rows.append(row)
    return pd.DataFrame(rows)


def summarize(per_query: pd.DataFrame) -> pd.DataFrame:
    """The strategies x metrics table: means over questions (macro), one row per strategy.

    ``recall@k`` is the share of a question's evidence in the top k, ``precision@k``
    the share of the top k that is evidence (over k, as trec_eval's P@k), ``MRR``
    the mean reciprocal rank of the first evidence turn, ``no hit`` the share of
    questions for which the strategy returned nothing at all.
    """
    if per_query.empty:
        raise InvalidInput("no questions to evaluate (no answerable question with evidence)")
    metric_cols = [c for c in per_query.columns if c.startswith(("recall@", "precision@"))]
    metric_cols.sort(key=lambda c: (int(c.split("@")[1]), not c.startswith("recall")))
    order = list(dict.fromkeys(per_query["strategy"]))
    grouped = per_query.groupby("strategy", sort=False)
    table = grouped[metric_cols].mean()
    table["MRR"] = grouped["rr"].mean()
    table["no hit"] = grouped["empty"].mean()
    table["questions"] = grouped.size()
    table = table.loc[order]
    table.index.name = "strategy"
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
) -> Evaluation:
    """recall@k, precision@k and MRR of every strategy on labelled questions.

    Thresholds, limits and the retrieval profile are the store's settings
    (``Memory(..., profile="spec", relevance_threshold=0.4)`` or ``mem.configure``
    to try others).
    """
    per_query = evaluate_queries(memory, loaded, k=k, strategies=strategies)
    s = memory.settings
    parameters = {
        "k": ",".join(str(x) for x in parse_ks(k)),
        "relevance_threshold": s.relevance_threshold,
        "salience_threshold": s.salience_threshold,
        "profile": s.profile,
        "model": memory.model_name,
    }
    return Evaluation(summarize(per_query), per_query, parameters)


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

    Strategies that do not depend on the profile (recency, salience, relevance,
    keyword, hybrid) are asked once; the others once per profile, named like
    ``"tri-hybrid [spec]"`` when there is more than one profile.
    ``relevance_threshold`` overrides every profile's own (None: each profile's,
    0.65 for spec and 0.2 for hybrid).  The store's settings are put back after.
    """
    if not profiles:
        raise InvalidInput("name at least one profile (spec, hybrid)")
    chosen = _chosen(strategies)
    shared = {n: f for n, f in chosen.items() if n not in PROFILE_DEPENDENT}
    dependent = {n: f for n, f in chosen.items() if n in PROFILE_DEPENDENT}
    before = memory.settings
    frames = []
    try:
        for index, profile in enumerate(profiles):
            memory._settings = before.replace(
                profile=profile, relevance_threshold=relevance_threshold
            )
            asked = {**(shared if index == 0 else {}), **dependent}
            if not asked:
                continue
            frame = evaluate_queries(memory, loaded, k=k, strategies=asked)
            if len(profiles) > 1:
                mask = frame["strategy"].isin(dependent)
                frame.loc[mask, "strategy"] += f" [{profile}]"
            frames.append(frame)
    finally:
        memory._settings = before  # a trial of settings, not a change to audit
    per_query = pd.concat(frames, ignore_index=True)
    table = summarize(per_query)
    order = [n for n in chosen if n in table.index]
    order += [n for n in table.index if n not in order]
    parameters = {
        "k": ",".join(str(x) for x in parse_ks(k)),
        "profiles": ",".join(profiles),
        "relevance_threshold": (
            "per profile" if relevance_threshold is None else relevance_threshold
        ),
        "salience_threshold": before.salience_threshold,
        "model": memory.model_name,
    }
    return Evaluation(table.loc[order], per_query, parameters)


# -- similarity of questions against every memory, and the threshold sweep --------------
def labelled_similarities(
    memory: Memory, loaded: LoadedConversation | Sequence[LoadedConversation]
) -> pd.DataFrame:
    """Similarity of every answerable question to every memory of its conversation.

    Long format, one row per (question, memory): conversation, query, id,
    similarity and ``relevant`` (the memory is evidence for the question).  This is
    the input of :func:`threshold_sweep` and of the histograms in
    :mod:`nbmemory.analysis`.
    """
    conversations = [loaded] if isinstance(loaded, LoadedConversation) else list(loaded)
    frames = []
    for conv in conversations:
        queries = conv.queries()
        frame = similarity_frame(
            memory, queries["question"].tolist(), namespace=conv.namespace, relevant=queries
        )
        frame.insert(0, "conversation", conv.conversation.conversation_id)
        frames.append(frame)
    if not frames:
        raise InvalidInput("no conversation given")
    return pd.concat(frames, ignore_index=True)


def similarity_frame(
    memory: Memory,
    queries: str | Sequence[str],
    *,
    namespace: str | None = None,
    relevant: pd.DataFrame | Sequence[Iterable[str]] | None = None,
) -> pd.DataFrame:
    """Cosine similarity of one query, or many, against every memory (numpy, exact).

    One row per (query, memory): query_index, query, id, session_id, role, kind,
    content, importance, created_at, similarity; plus ``relevant`` when labels are
    given (``relevant`` is a list of relevant-id collections, one per query, or a
    frame with a ``relevant_ids`` column).  Only vectors of the store's model count.
    """
    texts = [queries] if isinstance(queries, str) else list(queries)
    if not texts:
        raise InvalidInput("give at least one query")
    memories, matrix = memory.memory_vectors(namespace=namespace)
    vectors = memory.embed_queries(texts)
    sims = vectors @ matrix.T if len(memories) else np.zeros((len(texts), 0), dtype=np.float32)
    n = len(memories)
    frame = pd.concat([memories] * len(texts), ignore_index=True)
    frame.insert(0, "query", np.repeat(texts, n))
    frame.insert(0, "query_index", np.repeat(np.arange(len(texts)), n))
    frame["similarity"] = sims.reshape(-1).astype("float64")
    if relevant is not None:
        labels = (
            relevant["relevant_ids"].tolist()
            if isinstance(relevant, pd.DataFrame)
            else list(relevant)
        )
        if len(labels) != len(texts):
            raise InvalidInput(f"{len(labels)} label sets for {len(texts)} queries")
        ids = memories["id"].to_numpy()
        flags = [np.isin(ids, list(label)) for label in labels]
        frame["relevant"] = np.concatenate(flags) if flags else np.zeros(0, dtype=bool)
    return frame


def threshold_sweep(
    similarities: pd.DataFrame,
    thresholds: Iterable[float] | None = None,
    *,
    limit: int | None = None,
) -> pd.DataFrame:
    """Precision, recall, F1 and the share of queries with no hit, per threshold.

    ``similarities`` is a labelled frame from :func:`labelled_similarities` (or
    :func:`similarity_frame` with ``relevant``).  A memory is retrieved for a query
    when its similarity is ``> threshold`` (seed 000's rule), keeping at most
    ``limit`` per query when given (``relevance_limit`` is 5 in the spec).
    Precision and recall are pooled over queries (micro): recall is the share of
    all evidence retrieved, precision the share of retrieved memories that are
    evidence (NaN when nothing is retrieved).  ``no_hit`` is the share of queries
    that retrieve nothing; ``answered`` the share retrieving at least one relevant.
    """
    if "relevant" not in similarities.columns:
        raise InvalidInput("the sweep needs labels: build the frame with relevant=...")
    grid = np.asarray(
        DEFAULT_THRESHOLDS if thresholds is None else sorted(thresholds), dtype=np.float64
    )
    key = ["conversation", "query_index"] if "conversation" in similarities else ["query_index"]
    ordered = similarities.sort_values([*key, "similarity"], ascending=[True] * len(key) + [False])
    retrieved = np.zeros(len(grid))
    hits = np.zeros(len(grid))
    no_hit = np.zeros(len(grid))
    answered = np.zeros(len(grid))
    total_relevant = 0
    queries = 0
    for _, group in ordered.groupby(key, sort=False):
        sims = group["similarity"].to_numpy()
        rel = group["relevant"].to_numpy(dtype=bool)
        queries += 1
        total_relevant += int(rel.sum())
        cumulative = np.concatenate([[0], np.cumsum(rel)])
        # memories with similarity > t: sims are descending, so count via searchsorted
        above = len(sims) - np.searchsorted(sims[::-1], grid, side="right")
        taken = above if limit is None else np.minimum(above, limit)
        found = cumulative[taken]
        retrieved += taken
        hits += found
        no_hit += taken == 0
        answered += found > 0
    if not queries:
        raise InvalidInput("no labelled queries to sweep")
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = np.where(retrieved > 0, hits / retrieved, np.nan)
        recall = hits / total_relevant if total_relevant else np.full(len(grid), np.nan)
        f1 = np.where((precision + recall) > 0, 2 * precision * recall / (precision + recall), 0.0)
    f1 = np.nan_to_num(f1, nan=0.0)
    sweep = pd.DataFrame(
        {
            "threshold": grid,
            "precision": precision,
            "recall": recall,
            "f1": f1,
            "no_hit": no_hit / queries,
            "answered": answered / queries,
            "retrieved_per_query": retrieved / queries,
        }
    )
    sweep.attrs.update({"queries": queries, "relevant": total_relevant, "limit": limit})
    return sweep


@dataclass
class ThresholdSuggestion:
    """A recommended relevance threshold and how it scores on the labelled queries."""

    threshold: float
    rule: str
    precision: float
    recall: float
    f1: float
    no_hit: float

    def __str__(self) -> str:
        return (
            f"relevance_threshold {self.threshold:.2f} ({self.rule}): precision "
            f"{self.precision:.3f}, recall {self.recall:.3f}, F1 {self.f1:.3f}, "
            f"{self.no_hit:.0%} of questions without a hit"
        )


def suggest_threshold(
    sweep: pd.DataFrame, *, target_recall: float | None = None
) -> ThresholdSuggestion:
    """The threshold to use: best F1, or the strictest one still reaching ``target_recall``.

    Recall only falls as the threshold rises, so every threshold below the one
    returned also reaches the target; the returned one is the highest of them
    (the most precise threshold meeting the target).  Ties in F1 go to the lower
    threshold, which recalls more.
    """
    if sweep.empty:
        raise InvalidInput("empty sweep")
    if target_recall is not None:
        if not 0 < target_recall <= 1:
            raise InvalidInput(f"target_recall must be in (0, 1], got {target_recall!r}")
        reaching = sweep[sweep["recall"] >= target_recall]
        if reaching.empty:
            best_recall = float(sweep["recall"].max())
            raise InvalidInput(
                f"no threshold reaches recall {target_recall:.2f} (best {best_recall:.2f} at "
                f"{float(sweep['threshold'].min()):.2f}); lower the target or raise the limit"
            )
        row = reaching.loc[reaching["threshold"].idxmax()]
        rule = f"highest threshold with recall >= {target_recall:.2f}"
    else:
        row = sweep.loc[sweep["f1"].idxmax()]
        rule = "best F1"
    return ThresholdSuggestion(
        threshold=float(row["threshold"]),
        rule=rule,
        precision=float(row["precision"]),
        recall=float(row["recall"]),
        f1=float(row["f1"]),
        no_hit=float(row["no_hit"]),
    )


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
