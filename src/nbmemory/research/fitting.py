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

:func:`fit` wraps it for conversations loaded in a store: it chooses the L2
penalty by leave-one-conversation-out (fit on n-1, rank the one left out; with
one conversation, five folds of its questions), and measures the default
weights, the fitted ones on the same questions, the fitted ones on each held-out
part (what to expect on conversations not yet seen), and the unfused baselines
(cosine only, keywords only, their reciprocal-rank fusion).  Weights whose
held-out recall is below the best baseline are not worth shipping:
:attr:`FitResult.acceptable` says so, and the CLI refuses to write them.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pandas as pd

from ..config import FEATURES
from ..errors import InvalidInput
from ..retrieval.blas import one_thread
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
#: The L2 penalties :func:`fit` tries, keeping the one with the best held-out recall.
L2_GRID = (1e-3, 1e-2, 1e-1)
#: Question folds when there is a single conversation to hold out parts of.
QUESTION_FOLDS = 5
STEPS = 400
LEARNING_RATE = 0.05


@dataclass
class Sample:
    """One labelled question: its candidates' features and which are evidence."""

    conversation: str
    question: str
    features: np.ndarray  # candidates x FEATURES
    relevant: np.ndarray  # bool per candidate
    #: how much this question counts in the fit (e.g. 1 / its corpus's questions)
    weight: float = 1.0
    #: evidence memories in all (some may not be among the candidates)
    evidence: int = 0
    #: each candidate's session code, and whether the question asks for several
    #: things: what the diversity step of a search reads (:func:`ranked`)
    sessions: np.ndarray | None = None
    several: bool = False
    #: the question's category (LoCoMo's 1-4, or a corpus's own), 0 when unknown
    category: int = 0
    #: the corpus it comes from, when fitting across several (:mod:`.default_weights`)
    corpus: str = ""


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
                    evidence=len(relevant),
                    sessions=np.asarray(found.sessions),
                    several=found.several,
                    category=int(q.category),
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
    counts = np.array([s.weight for s in usable], dtype=np.float64)
    share = (counts / counts.sum())[segment]  # each question's part of the loss
    w = np.zeros(x.shape[1])
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    with one_thread(x.size):  # thousands of small products: BLAS's threads would spin
        for step in range(1, steps + 1):
            scores = x @ w
            p = np.exp(scores - np.maximum.reduceat(scores, starts)[segment])
            p /= np.add.reduceat(p, starts)[segment]
            grad = x.T @ ((p - target) * share) + l2 * w
            grad[~varies] = 0.0
            m = 0.9 * m + 0.1 * grad
            v = 0.999 * v + 0.001 * grad**2
            w -= learning_rate * (m / (1 - 0.9**step)) / (np.sqrt(v / (1 - 0.999**step)) + 1e-8)
    weights = np.where(varies, w / scale, 0.0)
    return {name: round(float(value), 4) for name, value in zip(FEATURES, weights, strict=True)}


def offline_recall(samples: Sequence[Sample], weights: Mapping[str, float], k: int = 10) -> float:
    """Mean recall@k of ranking each sample's candidates by ``weights`` (numpy over
    the collected features: what choosing a penalty needs, without searching)."""
    if not samples:
        return float("nan")
    w = np.array([weights[name] for name in FEATURES], dtype=np.float64)
    total = 0.0
    for s in samples:
        if not len(s.relevant):
            continue
        order = np.argsort(-(s.features @ w), kind="stable")[:k]
        total += s.relevant[order].sum() / max(s.evidence, int(s.relevant.sum()), 1)
    return total / len(samples)


def fold_of(conversation: str, question: str, conversations: int) -> str:
    """The held-out part a question belongs to: its conversation, or with a single
    conversation one of :data:`QUESTION_FOLDS` folds (by a checksum of its text)."""
    if conversations > 1:
        return conversation
    return f"fold {zlib.crc32(question.encode()) % QUESTION_FOLDS}"


def held_out_folds(samples: Sequence[Sample]) -> list[tuple[str, list[Sample], list[Sample]]]:
    """(part, fit on, judge on) triples: leave one conversation out; with a single
    conversation, :data:`QUESTION_FOLDS` folds of its questions."""
    count = len({s.conversation for s in samples})
    parts: dict[str, list[Sample]] = {}
    for s in samples:
        parts.setdefault(fold_of(s.conversation, s.question, count), []).append(s)
    return [
        (part, [s for other, rest in parts.items() if other != part for s in rest], test)
        for part, test in parts.items()
    ]


def choose_l2(samples: Sequence[Sample], grid: Sequence[float] = L2_GRID, k: int = 10) -> float:
    """The penalty of :data:`L2_GRID` whose weights rank the held-out parts best
    (recall@k over every held-out question; ties: the stronger penalty)."""
    best, chosen = -1.0, grid[0]
    for l2 in sorted(grid, reverse=True):
        judged = []
        for _, train, test in held_out_folds(samples):
            try:
                weights = fit_weights(train, l2=l2)
            except InvalidInput:
                continue
            judged.append(offline_recall(test, weights, k) * len(test))
        score = sum(judged) / len(samples) if judged else -1.0
        if score > best + 1e-9:
            best, chosen = score, l2
    return chosen


@dataclass
class FitResult:
    """Fitted weights and what they change: the hybrid search with the default
    weights, the fitted ones, each held-out part ranked by weights fitted
    without it, and the unfused baselines (cosine, keywords, their RRF)."""

    weights: dict[str, float]
    table: pd.DataFrame
    parameters: dict[str, Any] = field(default_factory=dict)

    @property
    def held_out(self) -> float:
        """recall@k (largest k) of the fitted weights on what they were not fitted on."""
        return float(self.table.loc[HELD_OUT, self._recall])

    @property
    def baseline(self) -> tuple[str, float]:
        """The best unfused ranking and its recall@k (largest k)."""
        rows = self.table.loc[[r for r in BASELINE_ROWS if r in self.table.index], self._recall]
        return str(rows.idxmax()), float(rows.max())

    @property
    def acceptable(self) -> bool:
        """Whether the held-out recall reaches the best unfused baseline's."""
        return self.held_out >= self.baseline[1]

    @property
    def _recall(self) -> str:
        return f"recall@{parse_ks(self.parameters['k'])[-1]}"

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


#: Row names of :attr:`FitResult.table`.
HELD_OUT = "fitted, each held out"
BASELINE_ROWS = ("cosine", "keywords", "rrf")


def fit(
    memory: Memory,
    conversations: Sequence[LoadedConversation],
    *,
    k: Iterable[int] | int | str = (5, 10),
) -> FitResult:
    """Fit the hybrid weights on ``conversations`` and measure them (see :class:`FitResult`).

    The L2 penalty is chosen by :func:`choose_l2` (held-out recall), the held-out
    row ranks each conversation (or question fold) with weights fitted without
    it.  The store's own settings never change: every row reads with trial settings.
    """
    from .generalisation import BASELINES

    ks = parse_ks(k)
    if not conversations:
        raise InvalidInput("name at least one conversation to fit on")
    base = memory.settings.replace(profile="hybrid")
    samples = collect_samples(memory, conversations)
    l2 = choose_l2(samples, k=ks[-1])
    weights = fit_weights(samples, l2=l2)
    rows = {
        "default weights": _ask(memory, conversations, base, ks),
        "fitted weights (same questions)": _ask(
            memory, conversations, base.replace(fusion_weights=weights), ks
        ),
    }
    count = len({c.conversation.conversation_id for c in conversations})
    held_out = []
    for part, train, _ in held_out_folds(samples):
        trained = fit_weights(train, l2=l2)
        frame = _ask(memory, conversations, base.replace(fusion_weights=trained), ks, part)
        held_out.append(frame)
    rows[HELD_OUT] = pd.concat(held_out, ignore_index=True)
    view = cast("Memory", SettingsTrial(memory, base))
    for name in BASELINE_ROWS:
        rows[name] = evaluate_queries(
            view, list(conversations), k=ks, strategies={name: BASELINES[name]}
        )
    frames = []
    for name, frame in rows.items():
        frame = frame.copy()
        frame["strategy"] = name
        frames.append(frame)
    per_query = pd.concat(frames, ignore_index=True)
    table = summarize(per_query, metrics=("recall", "hit")).drop(columns="no hit")
    parameters = {
        "k": ",".join(str(x) for x in ks),
        "model": memory.model_name,
        "l2": l2,
        "held out": "conversations" if count > 1 else f"{QUESTION_FOLDS} folds of questions",
    }
    return FitResult(weights, table, parameters)


def _ask(
    memory: Memory,
    conversations: Sequence[LoadedConversation],
    settings: Any,
    ks: list[int],
    part: str | None = None,
) -> pd.DataFrame:
    """The hybrid search's rows; ``part`` keeps that held-out part's (:func:`fold_of`)."""
    count = len({c.conversation.conversation_id for c in conversations})
    if part is not None and count > 1:
        conversations = [c for c in conversations if c.conversation.conversation_id == part]
    view = cast("Memory", SettingsTrial(memory, settings))
    frame = evaluate_queries(
        view, list(conversations), k=ks, strategies={"hybrid": STRATEGIES["hybrid"]}
    )
    if part is None or count > 1:
        return frame
    keep = [
        fold_of(c, q, count) == part
        for c, q in zip(frame["conversation"], frame["question"], strict=True)
    ]
    return frame[keep]
