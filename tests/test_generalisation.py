"""The retrieval goals of issue 37 on every development corpus, with the real model.

The default hybrid ranking must beat the better of its own inputs (cosine only,
keywords only) on each corpus, not only on the one its weights were first fitted
to.  Needs all-MiniLM-L6-v2 (``NBMEMORY_MODEL_PATH``) and the LoCoMo files
(``NBMEMORY_LOCOMO_PATH``); skipped without them.  The five LoCoMo conversations
reuse the session's shared stores (``locomo`` fixture); the other corpora are
embedded once here (about 340 long messages and LoCoMo's 2,760 turns again without
their speakers' names: a minute or two on a CI runner).
"""

from __future__ import annotations

import pandas as pd
import pytest

from nbmemory import Memory
from nbmemory.config import DEFAULT_WEIGHTS
from nbmemory.research.corpora import build_corpus, load_corpus
from nbmemory.research.default_weights import corpus_samples, fit, tech_corpus
from nbmemory.research.generalisation import BASELINES, evaluate_corpora

RANKINGS = {name: BASELINES[name] for name in ("default", "cosine", "keywords")}
#: How far the default must lead the better of its inputs (recall@10): the issue's
#: goal is +0.05; where that is not reached, the lead measured minus a small margin
#: (docs/retrieval.md, "Development corpora").  Measured 2026-12-07 with the weights
#: refitted when ``question_turn`` became the share of a memory that asks: locomo
#: +0.200, locomo-long +0.029 (0.933 against keywords 0.904), locomo-plain +0.176,
#: tech-chat +0.069 (0.847 against keywords 0.778; on seeds 3-8, which no fit saw,
#: +0.053).
MARGIN = {"locomo": 0.05, "locomo-long": 0.02, "locomo-plain": 0.05, "tech-chat": 0.05}


@pytest.fixture(scope="module")
def other_corpora(real_embedder, locomo_dir):
    memory = Memory(":memory:", embedder=real_embedder, background_consolidation=False)
    names = ("locomo-long", "locomo-plain", "tech-chat")
    corpora = [build_corpus(n, locomo_path=locomo_dir) for n in names]
    loaded = {c.name: load_corpus(c, memory) for c in corpora}
    result = evaluate_corpora(memory, corpora, k=(5, 10), strategies=RANKINGS, loaded=loaded)
    result.memory, result.loaded = memory, loaded  # for the refit below
    yield result
    memory.close()


@pytest.fixture(scope="module")
def five(locomo) -> pd.DataFrame:
    """recall@10 of each ranking on the five LoCoMo conversations (their shared stores)."""
    from nbmemory.research.evaluation import evaluate_queries

    frames = [
        evaluate_queries(mem, [conversation], k=(5, 10), strategies=RANKINGS)
        for mem, conversation in locomo.all()
    ]
    frame = pd.concat(frames, ignore_index=True)
    return frame.groupby("strategy")[["recall@5", "recall@10", "rr"]].mean()


def _lead(table: pd.DataFrame) -> float:
    return table.loc["default", "recall@10"] - max(
        table.loc["cosine", "recall@10"], table.loc["keywords", "recall@10"]
    )


def test_the_default_leads_its_inputs_on_the_five_locomo_conversations(five) -> None:
    assert five.loc["default", "recall@10"] >= 0.80, five
    assert _lead(five) >= MARGIN["locomo"], five


@pytest.mark.parametrize("corpus", ["locomo-long", "tech-chat"])
def test_the_default_leads_its_inputs_on_long_messages(other_corpora, corpus) -> None:
    table = other_corpora.table.loc[corpus]
    assert _lead(table) >= MARGIN[corpus], table
    # the guard stays a safety net: it does not take over on these corpora
    assert table.loc["default", "guard"] <= 0.05, table


def test_the_default_leads_its_inputs_on_turns_stored_without_names(other_corpora) -> None:
    """LoCoMo as an agent stores it (the text, no "Name:"): the issue's chats between
    people.  Measured 2026-12-07: 0.761 against keywords 0.585 (cosine 0.294); with
    ``mention`` weighted 0.85, as fitted before, 0.688."""
    table = other_corpora.table.loc["locomo-plain"]
    assert table.loc["default", "recall@10"] >= 0.72, table
    assert _lead(table) >= MARGIN["locomo-plain"], table
    assert table.loc["default", "guard"] <= 0.05, table


def test_the_shipped_weights_are_what_their_recipe_fits(other_corpora, locomo) -> None:
    """``DEFAULT_WEIGHTS`` come from code in the repository, not from a session's
    notebook: the recipe fitted on the same corpora gives them back (to a rounding)."""
    memory, loaded = other_corpora.memory, other_corpora.loaded
    samples = []
    for mem, conversation in locomo.all():
        samples += corpus_samples(mem, "locomo", [conversation])
    for name in ("locomo-long", "locomo-plain"):
        samples += corpus_samples(memory, name, loaded[name])
    samples += corpus_samples(memory, "tech-chat-0", loaded["tech-chat"])
    for seed in (1, 2):
        corpus = tech_corpus(seed)
        samples += corpus_samples(memory, corpus.name, load_corpus(corpus, memory))
    fitted = fit(samples)
    far = {n: (fitted[n], w) for n, w in DEFAULT_WEIGHTS.items() if abs(fitted[n] - w) > 0.02}
    assert not far, far
