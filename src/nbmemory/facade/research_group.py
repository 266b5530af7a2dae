"""``mem.research``: the research toolkit's views of one store, bound to it.

DataFrames (what memory holds, how salient, how similar to questions), LoCoMo
loading and evaluation, and the importance histogram.  The functions are those
of :mod:`nbmemory.research` (which take the Memory as first argument and stay
the reference); only the figure imports plotly, when it is drawn, so the facade
works without the ``notebook`` extra.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from ..config import Settings
from ..research import datasets, evaluation, frames, thresholds
from ..research.datasets import LoadedConversation, LocomoConversation
from ..research.evaluation import Evaluation, Strategy
from ..research.subject import MemoryLike as Memory


class ResearchGroup:
    """The research toolkit on this Memory: frames, similarities, LoCoMo, evaluation, figures.

    The functions that take no store (``threshold_sweep``, ``suggest_threshold``,
    ``similarity_histogram``, ``sweep_figure`` ...) are in
    :mod:`nbmemory.research.thresholds` and :mod:`nbmemory.research.figures`.
    """

    def __init__(self, memory: Memory, check_open: Callable[[], None]) -> None:
        self._memory = memory
        self._check_open = check_open

    def __repr__(self) -> str:
        names = [n for n in dir(type(self)) if not n.startswith("_")]
        return f"<nbmemory research of {self._memory.path!r}: {', '.join(names)}>"

    def _open(self) -> Memory:
        self._check_open()
        return self._memory

    def memories(self, *, namespace: str | None = None) -> pd.DataFrame:
        """Every memory with its importance, whether it is salient and embedded
        (:func:`nbmemory.research.frames.memories_frame`)."""
        return frames.memories_frame(self._open(), namespace=namespace)

    def salience_table(self, *, namespace: str | None = None) -> pd.DataFrame:
        """Importance and salience per session and role
        (:func:`nbmemory.research.frames.salience_table`)."""
        return frames.salience_table(self._open(), namespace=namespace)

    def similarities(
        self,
        queries: str | Sequence[str],
        *,
        namespace: str | None = None,
        relevant: pd.DataFrame | Sequence[Iterable[str]] | None = None,
    ) -> pd.DataFrame:
        """Cosine similarity of each query to every memory, one row per pair
        (:func:`nbmemory.research.thresholds.similarity_frame`)."""
        return thresholds.similarity_frame(
            self._open(), queries, namespace=namespace, relevant=relevant
        )

    def labelled_similarities(
        self, loaded: LoadedConversation | Sequence[LoadedConversation]
    ) -> pd.DataFrame:
        """Similarity of every answerable question to every memory of its conversation,
        with ``relevant`` (:func:`nbmemory.research.thresholds.labelled_similarities`)."""
        return thresholds.labelled_similarities(self._open(), loaded)

    def load_locomo(
        self, path: str | os.PathLike[str], *, namespace: str | None = None, flush: bool = True
    ) -> LoadedConversation:
        """Store a LoCoMo conversation's turns as events
        (:func:`nbmemory.research.datasets.load_locomo`)."""
        return datasets.load_locomo(path, self._open(), namespace=namespace, flush=flush)

    def load_conversation(
        self,
        conversation: LocomoConversation,
        *,
        namespace: str | None = None,
        flush: bool = True,
        source: str = "locomo",
    ) -> LoadedConversation:
        """Store a conversation of LoCoMo's shape, read or generated (a corpus of
        :mod:`nbmemory.research.corpora`), as :meth:`load_locomo` does
        (:func:`nbmemory.research.datasets.load_conversation`)."""
        return datasets.load_conversation(
            conversation, self._open(), namespace=namespace, flush=flush, source=source
        )

    def evaluate(
        self,
        loaded: LoadedConversation | Sequence[LoadedConversation],
        *,
        k: Iterable[int] | int | str = (5, 10),
        strategies: Mapping[str, Strategy] | Sequence[str] | None = None,
        settings: Settings | None = None,
    ) -> Evaluation:
        """recall@k, precision@k and MRR of each strategy on labelled questions
        (:func:`nbmemory.research.evaluation.evaluate`)."""
        return evaluation.evaluate(
            self._open(), loaded, k=k, strategies=strategies, settings=settings
        )

    def importance_histogram(
        self,
        *,
        cut: float | None = None,
        namespace: str | None = None,
        by: str | None = "role",
        title: str | None = None,
    ) -> Any:  # a plotly Figure (plotly is imported only here, when drawn)
        """A plotly histogram of importance with the salience cut
        (:func:`nbmemory.research.figures.importance_histogram`; needs plotly)."""
        from ..research.figures import importance_histogram  # plotly: only when drawn

        memory: Any = self._open()
        return importance_histogram(memory, cut=cut, namespace=namespace, by=by, title=title)
