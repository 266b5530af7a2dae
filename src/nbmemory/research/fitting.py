"""Fitting the weights of the hybrid ranking on labelled questions.

Hybrid search scores each candidate by a weighted sum of its features
(:mod:`nbmemory.retrieval.fusion`).  :func:`fit_weights` learns those weights
from questions whose answering memories are known (LoCoMo's evidence lists, or
a user's own conversations in the same format): for each question, a softmax
over its candidates should put its probability on the evidence (a *listwise*
objective: what matters is the order among one question's candidates, not a
score that means the same across questions).  Features are standardised, the
weights start at zero and Adam takes a fixed number of full steps, so a fit is
deterministic; an L2 penalty keeps weights of rare features small.

:func:`fit` wraps it for conversations loaded in a store: it measures the
default weights, the fitted ones on the same questions, and (with two or more
conversations) the fitted ones on each conversation with weights fitted
without it, which is what to expect on conversations not yet seen.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pandas as pd

from ..config import FEATURES
from ..errors import InvalidInput
from .datasets import LoadedConversation
from .evaluation import (
    STRATEGIES,
    SettingsTrial,
    evaluate_queries,
    frame_to_markdown,
    parse_ks,
    summarize,
)

if TYPE_CHECKING:
    from .subject import MemoryLike as Memory

#: L2 penalty, steps and step size of the fit (chosen on LoCoMo held-out
#: conversations; the result moves little around them).
L2 = 1e-3
STEPS = 400
LEARNING_RATE = 0.05


@dataclass
class Sample:
    """One labelled question: its candidates' features and which are evidence."""

    conversation: str
    question: str
    features: np.ndarray  # candidates x FEATURES
    relevant: np.ndarray  # bool per candidate


def collect_samples(
    memory: Memory, conversations: LoadedConversation | Sequence[LoadedConversation]
) -> list[Sample]:
    """The hybrid candidates of every answerable question, with their labels."""
    loaded = [conversations] if isinstance(conversations, LoadedConversation) else conversations
    samples = []
    for conv in loaded:
        for q in conv.queries().itertuples(index=False):
            found = memory.core.retriever.candidates(q.question, conv.namespace)
            if found is None:
                continue
            relevant = set(q.relevant_ids)
            samples.append(
                Sample(
                    conv.conversation.conversation_id,
                    q.question,
                    found.features,
                    np.array([i in relevant for i in found.ids], dtype=bool),
                )
            )
    return samples


def fit_weights(
    samples: Iterable[Sample],
    *,
    l2: float = L2,
    steps: int = STEPS,
    learning_rate: float = LEARNING_RATE,
) -> dict[str, float]:
    """Feature -> weight, fitted so that each question's evidence ranks first
    among its candidates (softmax cross-entropy per question)."""
    usable = [s for s in samples if s.relevant.any() and len(s.relevant) > 1]
    if not usable:
        raise InvalidInput(
            "nothing to fit: no question has an evidence memory among its candidates"
        )
    stacked = np.vstack([s.features for s in usable])
    mean = stacked.mean(axis=0)
    scale = stacked.std(axis=0)
    varies = scale > 1e-12
    scale[~varies] = 1.0
    # every question's candidates one after another: a softmax per segment
    x = (stacked - mean) / scale
    sizes = np.array([len(s.relevant) for s in usable])
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    segment = np.repeat(np.arange(len(usable)), sizes)
    target = np.concatenate([s.relevant / s.relevant.sum() for s in usable])
    w = np.zeros(x.shape[1])
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    for step in range(1, steps + 1):
        scores = x @ w
        p = np.exp(scores - np.maximum.reduceat(scores, starts)[segment])
        p /= np.add.reduceat(p, starts)[segment]
        grad = x.T @ (p - target) / len(usable) + l2 * w
        grad[~varies] = 0.0
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad**2
        w -= learning_rate * (m / (1 - 0.9**step)) / (np.sqrt(v / (1 - 0.999**step)) + 1e-8)
    weights = np.where(varies, w / scale, 0.0)
    return {name: round(float(value), 4) for name, value in zip(FEATURES, weights, strict=True)}


@dataclass
class FitResult:
    """Fitted weights and what they change: the hybrid search with the default
    weights, the fitted ones, and (two or more conversations) each conversation
    ranked by weights fitted without it."""

    weights: dict[str, float]
    table: pd.DataFrame
    parameters: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        """The weights as JSON: ``Settings(fusion_weights=json.loads(text))``."""
        return json.dumps(self.weights, indent=2)

    def weights_frame(self) -> pd.DataFrame:
        from ..config import DEFAULT_WEIGHTS

        frame = pd.DataFrame(
            {
                "default": [DEFAULT_WEIGHTS[n] for n in FEATURES],
                "fitted": [self.weights[n] for n in FEATURES],
            },
            index=pd.Index(list(FEATURES), name="feature"),
        )
        return frame

    def to_markdown(self, digits: int = 3) -> str:
        return frame_to_markdown(self.table.reset_index(), digits=digits)

    def __str__(self) -> str:
        return self.table.to_string(float_format=lambda v: f"{v:.3f}")

    def __repr__(self) -> str:
        return f"FitResult({len(self.weights)} weights)\n{self}"

    def _repr_html_(self) -> str:
        return self.table.to_html(float_format=lambda v: f"{v:.3f}") + self.weights_frame().to_html(
            float_format=lambda v: f"{v:.3f}"
        )


def fit(
    memory: Memory,
    conversations: Sequence[LoadedConversation],
    *,
    k: Iterable[int] | int | str = (5, 10),
) -> FitResult:
    """Fit the hybrid weights on ``conversations`` and measure them (see :class:`FitResult`).

    The store's own settings never change: every row reads with trial settings.
    """
    ks = parse_ks(k)
    if not conversations:
        raise InvalidInput("name at least one conversation to fit on")
    base = memory.settings.replace(profile="hybrid")
    samples = collect_samples(memory, conversations)
    weights = fit_weights(samples)
    rows = {
        "default weights": _ask(memory, conversations, base, ks),
        "fitted weights (same questions)": _ask(
            memory, conversations, base.replace(fusion_weights=weights), ks
        ),
    }
    ids = [c.conversation.conversation_id for c in conversations]
    if len(set(ids)) > 1:
        held_out = []
        for conv in conversations:
            own = conv.conversation.conversation_id
            trained = fit_weights(s for s in samples if s.conversation != own)
            held_out.append(_ask(memory, [conv], base.replace(fusion_weights=trained), ks))
        rows["fitted, each conversation held out"] = pd.concat(held_out, ignore_index=True)
    frames = []
    for name, frame in rows.items():
        frame = frame.copy()
        frame["strategy"] = name
        frames.append(frame)
    per_query = pd.concat(frames, ignore_index=True)
    table = summarize(per_query, metrics=("recall", "hit")).drop(columns="no hit")
    parameters = {"k": ",".join(str(x) for x in ks), "model": memory.model_name}
    return FitResult(weights, table, parameters)


def _ask(
    memory: Memory, conversations: Sequence[LoadedConversation], settings: Any, ks: list[int]
) -> pd.DataFrame:
    view = cast("Memory", SettingsTrial(memory, settings))
    return evaluate_queries(
        view, list(conversations), k=ks, strategies={"hybrid": STRATEGIES["hybrid"]}
    )
