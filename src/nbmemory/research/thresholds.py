"""Thresholds measured instead of guessed: the similarity of labelled questions to
every memory, the sweep of precision/recall over thresholds, and a suggestion.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..errors import InvalidInput
from ..log.embeddings import MEMORY_FRAME_COLUMNS
from .datasets import LoadedConversation, conversations_of

if TYPE_CHECKING:
    from .subject import MemoryLike as Memory

#: Thresholds of the spec drawn on every figure: relevance (the agent layer) and search (Astreus).
SPEC_THRESHOLDS = {"relevance 0.65 (spec)": 0.65, "search 0.7 (spec)": 0.7}

#: Thresholds a sweep visits by default: 0.00, 0.01, ... 1.00.
DEFAULT_THRESHOLDS = np.round(np.linspace(0.0, 1.0, 101), 2)


def labelled_similarities(
    memory: Memory, loaded: LoadedConversation | Sequence[LoadedConversation]
) -> pd.DataFrame:
    """Similarity of every answerable question to every memory of its conversation.

    Long format, one row per (question, memory): conversation, query, id,
    similarity and ``relevant`` (the memory is evidence for the question).  This is
    the input of :func:`threshold_sweep` and of the histograms in
    :mod:`nbmemory.research.figures`.
    """
    conversations = conversations_of(loaded)
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
    """Cosine similarity of one query, or many, against every memory, as search scores it.

    One row per (query, memory): query_index, query, id, session_id, role, kind,
    content, importance, created_at, similarity; plus ``relevant`` when labels are
    given (``relevant`` is a list of relevant-id collections, one per query, or a
    frame with a ``relevant_ids`` column).  Only vectors of the store's model count.

    A memory longer than the model's window is stored as passages and scored by its
    best one, by the same index and function search and ``get_context`` use
    (:func:`best_passage_similarities`): a fact in the tail of a long message scores
    here what it scores there, so a threshold tuned on these numbers is the one
    search applies.
    """
    texts = [queries] if isinstance(queries, str) else queries
    if not isinstance(texts, (list, tuple, pd.Series, np.ndarray)) or not all(
        isinstance(text, str) for text in texts
    ):
        raise InvalidInput("queries must be a text or a list of texts")
    texts = list(texts)
    if not texts:
        raise InvalidInput("give at least one query")
    if isinstance(relevant, pd.DataFrame) and "relevant_ids" not in relevant.columns:
        raise InvalidInput("a relevant frame needs a relevant_ids column (a list of ids a row)")
    if relevant is not None and not isinstance(relevant, (pd.DataFrame, list, tuple, pd.Series)):
        raise InvalidInput(
            "relevant must be a list of id collections, one per query, or a frame with "
            "a relevant_ids column"
        )
    ns = memory.core.ns(namespace)
    memories = memory.store.vectors.embedded_events(ns, memory.model_name, MEMORY_FRAME_COLUMNS)
    vectors = memory.embeddings.embed_queries(texts)
    sims = best_passage_similarities(memory, vectors, memories["id"].tolist(), ns)
    n = len(memories)
    frame = pd.concat([memories] * len(texts), ignore_index=True)
    frame.insert(0, "query", np.repeat(texts, n))
    frame.insert(0, "query_index", np.repeat(np.arange(len(texts)), n))
    frame["similarity"] = sims.reshape(-1)
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


def best_passage_similarities(
    memory: Memory, vectors: np.ndarray, ids: Sequence[str], namespace: str
) -> np.ndarray:
    """Cosine of each query vector (a row of ``vectors``) to each of ``ids``, float64 of
    shape (queries, ids): a memory's best passage's, read from the vector index search
    ranks with (``Searcher.similarities``, or DuckDB over a vector budget); NaN for a
    memory the index holds no vector of."""
    out = np.full((len(vectors), len(ids)), np.nan)
    if not len(ids):
        return out
    searcher = memory.core.indexes.searcher(memory.model_name, namespace, search=False)
    for row, vector in enumerate(vectors):
        scores = searcher.similarities(vector, ids)
        out[row] = [scores.get(event_id, np.nan) for event_id in ids]
    return out


def threshold_sweep(
    similarities: pd.DataFrame,
    thresholds: Iterable[float] | None = None,
    *,
    limit: int | None = None,
) -> pd.DataFrame:
    """Precision, recall, F1 and the share of queries with no hit, per threshold.

    ``similarities`` is a labelled frame from :func:`labelled_similarities` (or
    :func:`similarity_frame` with ``relevant``).  A memory is retrieved for a query
    when its similarity is ``> threshold`` (the spec's rule), keeping at most
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
