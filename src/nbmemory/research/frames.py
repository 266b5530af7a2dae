"""Research views of a store as pandas DataFrames (no plotting library needed).

Every function takes a :class:`~nbmemory.Memory` (or something computed from one)
and returns a DataFrame; :mod:`nbmemory.research.figures` draws them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..errors import InvalidInput
from ..log.embeddings import MEMORY_FRAME_COLUMNS
from ..retrieval.context import STRATEGIES as CONTEXT_STRATEGIES
from ..validation import check_name
from .thresholds import SPEC_THRESHOLDS

if TYPE_CHECKING:
    from ..retrieval import Context
    from .subject import MemoryLike as Memory

#: Columns of :func:`memories_frame`: the memory, then whether it is salient and embedded.
MEMORY_COLUMNS = [*MEMORY_FRAME_COLUMNS[:-1], "salient", "embedded", "created_at"]


def memories_frame(memory: Memory, *, namespace: str | None = None) -> pd.DataFrame:
    """Every memory of the namespace with its importance and whether it is salient.

    ``salient`` is importance >= the store's ``salience_threshold`` (0.8): what the
    salience strategy of the context may pick.  ``embedded`` says whether the
    memory has a vector of the current model (only those can be recalled by
    similarity).  Oldest first.
    """
    ns = memory.namespace if namespace is None else check_name(namespace, "namespace")
    frame = memory.store.events.salience_frame(
        ns, memory.settings.salience_threshold, memory.model_name
    )[MEMORY_COLUMNS]
    # the cut ``salient`` was read against (importance_histogram draws it as a line)
    frame.attrs["salience_threshold"] = memory.settings.salience_threshold
    return frame


def salience_table(memory: Memory, *, namespace: str | None = None) -> pd.DataFrame:
    """Importance and salience per session and role: count, mean/min/max, salient share."""
    frame = memories_frame(memory, namespace=namespace)
    grouped = frame.groupby(["session_id", "role"], sort=True)
    table = grouped.agg(
        memories=("id", "size"),
        mean_importance=("importance", "mean"),
        min_importance=("importance", "min"),
        max_importance=("importance", "max"),
        salient=("salient", "sum"),
    )
    table["salient_share"] = table["salient"] / table["memories"]
    table["salient"] = table["salient"].astype("int64")
    return table


def context_contributions(context: Context) -> pd.DataFrame:
    """What each strategy of a :class:`~nbmemory.retrieval.Context` contributed.

    One row per strategy (relevance, salience, recency): how many items it found,
    how many only it found (``only``), how many it shared with another strategy,
    its best rank in the merged context and the score range it brought
    (similarity for relevance, importance for salience, recency rank for recency).
    """
    rows = []
    for strategy in CONTEXT_STRATEGIES:
        items = context.by_strategy(strategy)
        if strategy == "relevance":
            found = [i.similarity for i in items]
        elif strategy == "salience":
            found = [i.importance for i in items]
        else:
            found = [i.recency_rank for i in items]
        scores = [float(s) for s in found if s is not None]
        rows.append(
            {
                "strategy": strategy,
                "found": len(items),
                "only": sum(1 for i in items if i.strategies == [strategy]),
                "shared": sum(1 for i in items if len(i.strategies) > 1),
                "best_rank": min((i.rank for i in items), default=None),
                "min_score": min(scores, default=None),
                "max_score": max(scores, default=None),
            }
        )
    frame = pd.DataFrame(rows).set_index("strategy")
    frame.attrs["parameters"] = dict(context.parameters)
    frame.attrs["query"] = context.query
    return frame


def recall_at_thresholds(
    similarities: pd.DataFrame, thresholds: Mapping[str, float] | None = None
) -> pd.DataFrame:
    """For each named threshold: share of relevant pairs above it, and queries with none.

    The two numbers behind "only 11% of the evidence scores above 0.65, and 60%
    of the questions get no turn above it".
    """
    if "relevant" not in similarities.columns:
        raise InvalidInput(
            "recall_at_thresholds needs labelled similarities (labelled_similarities(...))"
        )
    chosen = dict(thresholds or SPEC_THRESHOLDS)
    key = ["conversation", "query_index"] if "conversation" in similarities else ["query_index"]
    best = similarities.groupby(key)["similarity"].max().to_numpy()
    relevant = similarities.loc[similarities["relevant"].astype(bool), "similarity"].to_numpy()
    rows = [
        {
            "threshold": name,
            "value": value,
            "relevant_above": float(np.mean(relevant > value)) if len(relevant) else np.nan,
            "queries_without_hit": float(np.mean(best <= value)) if len(best) else np.nan,
        }
        for name, value in chosen.items()
    ]
    return pd.DataFrame(rows).set_index("threshold")
