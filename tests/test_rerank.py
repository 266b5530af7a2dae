"""The reranking hook: the best candidates of search and context re-scored by a
second model, off by default, and a broken reranker refused in one line."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest

from nbmemory import InvalidInput, Memory, RerankerError
from nbmemory.retrieval import SEARCH_COLUMNS
from nbmemory.retrieval.rerank import as_reranker, reranker_name

QUESTION = "which instrument does Ana play at home"
FILLER = [f"Ana plays at home {word}" for word in ("often", "daily", "weekly", "rarely", "loudly")]
FILLER += [f"unrelated chatter about lunch number {i}" for i in range(10)]


class WordReranker:
    """Scores a text 1 when it holds ``word``, else 0; records what it was shown."""

    def __init__(self, word: str = "cello") -> None:
        self.word = word
        self.seen: list[list[str]] = []

    def __call__(self, query: str, texts: list[str]) -> list[float]:
        self.seen.append(list(texts))
        return [1.0 if self.word in text else 0.0 for text in texts]


@pytest.fixture
def store(store_path):
    mem = Memory(store_path, embedder="hash")
    for text in FILLER:
        mem.add_event("s", "user", text)
    mem.add_event(
        "s", "assistant", "the cello, mostly at home"
    )  # one word shared with the question
    mem.flush()
    yield mem
    mem.close()


def ranked(mem: Memory, mode: str, limit: int = 3) -> list[str]:
    return mem.search(QUESTION, mode=mode, limit=limit)["content"].tolist()


@pytest.mark.parametrize("mode", ["vector", "keyword", "hybrid"])
def test_a_reranker_puts_its_best_candidate_first_in_every_mode(store, mode):
    before = ranked(store, mode, limit=20)
    assert "the cello, mostly at home" in before and before[0] != "the cello, mostly at home"
    store.reranker = WordReranker("cello")
    hits = store.search(QUESTION, mode=mode, limit=3)
    assert hits["content"].iloc[0] == "the cello, mostly at home"
    assert list(hits.columns) == [*SEARCH_COLUMNS, "rerank_score"]
    assert hits["rerank_score"].tolist() == [1.0, 0.0, 0.0]
    assert all("rerank" in signals for signals in hits["signals"])
    # the others keep the first stage's order (a stable sort on the reranker's score)
    assert hits["content"].iloc[1:].tolist() == [t for t in before if "cello" not in t][:2]


def test_top_n_bounds_what_the_reranker_sees(store):
    first_stage = ranked(store, "hybrid", limit=20)
    position = first_stage.index("the cello, mostly at home")
    reranker = WordReranker("cello")
    store.reranker = reranker
    store.configure(rerank_top_n=position)  # the cello turn is just out of reach
    hits = store.search(QUESTION, limit=2)
    assert reranker.seen == [first_stage[:position]]
    assert "the cello, mostly at home" not in hits["content"].tolist()
    store.configure(rerank_top_n=position + 1)
    assert ranked(store, "hybrid", limit=2)[0] == "the cello, mostly at home"
    assert len(reranker.seen[-1]) == position + 1
    # more rows asked for than re-scored: the rest follow in first-stage order, unscored
    store.configure(rerank_top_n=2)
    hits = store.search(QUESTION, limit=5)
    assert len(reranker.seen[-1]) == 2
    assert hits["content"].iloc[2:].tolist() == first_stage[2:5]
    assert hits["rerank_score"].iloc[2:].isna().all()
    assert not any("rerank" in s for s in hits["signals"].iloc[2:])


def test_without_a_reranker_nothing_changes(store):
    assert store.reranker is None and store.settings.rerank_top_n == 20
    default = {mode: store.search(QUESTION, mode=mode, limit=5) for mode in ("vector", "hybrid")}
    context = store.get_context("s", QUESTION).to_frame()
    assert list(default["hybrid"].columns) == SEARCH_COLUMNS
    store.reranker = WordReranker("cello")
    assert store.search(QUESTION, limit=5)["content"].iloc[0] == "the cello, mostly at home"
    store.reranker = None
    for mode, frame in default.items():
        pd.testing.assert_frame_equal(store.search(QUESTION, mode=mode, limit=5), frame)
    pd.testing.assert_frame_equal(store.get_context("s", QUESTION).to_frame(), context)


def test_the_context_relevance_is_reranked(store):
    reranker = WordReranker("cello")
    store.reranker = reranker
    ctx = store.get_context("elsewhere", QUESTION, relevance_limit=2, relevance_threshold=0.1)
    relevance = ctx.by_strategy("relevance")
    assert [item.content for item in relevance][0] == "the cello, mostly at home"
    assert len(relevance) == 2 and "rerank" in (relevance[0].signals or "")
    assert len(reranker.seen[-1]) == 6  # the memories over the floor, up to rerank_top_n
    store.get_context("elsewhere", QUESTION, relevance_limit=2)
    assert len(reranker.seen[-1]) == 5  # the floor (0.2) still decides who is a candidate
    spec = store.settings.replace(profile="spec", relevance_threshold=0.1)
    ctx = store.get_context("elsewhere", QUESTION, settings=spec)  # cosine relevance too
    assert ctx.by_strategy("relevance")[0].content == "the cello, mostly at home"


def test_an_object_with_a_rerank_method_is_adapted(store):
    """fastembed's TextCrossEncoder yields one score per document from .rerank()."""

    class CrossEncoderLike:
        def rerank(self, query, documents, batch_size=64, **kwargs):
            for document in documents:
                yield float(document.count("cello")) - 0.5

    store.reranker = CrossEncoderLike()
    assert reranker_name(store.reranker) == "CrossEncoderLike.rerank"
    hits = store.search(QUESTION, limit=2)
    assert hits["content"].iloc[0] == "the cello, mostly at home"
    assert hits["rerank_score"].tolist() == [0.5, -0.5]
    with pytest.raises(InvalidInput, match="reranker must be a callable"):
        as_reranker(42)
    with pytest.raises(InvalidInput, match="reranker must be a callable"):
        Memory(":memory:", embedder="hash", reranker="cross-encoder")
    with pytest.raises(InvalidInput, match="rerank_top_n"):
        store.configure(rerank_top_n=0)


def broken(query: str, texts: list[str]) -> list[float]:
    raise RuntimeError("cross-encoder ran out of memory\nsecond line")


@pytest.mark.parametrize(
    "reranker, message",
    [
        (broken, "the reranker broken failed on \\d+ texts: RuntimeError: cross-encoder ran out"),
        (lambda q, texts: [1.0], "returned 1 scores for \\d+ texts; it must return one score per"),
        (lambda q, texts: [np.nan] * len(texts), "returned a NaN or infinite score"),
        (lambda q, texts: ["high"] * len(texts), "failed on \\d+ texts: ValueError"),
        (lambda q, texts: None, "failed on \\d+ texts: TypeError"),
    ],
)
def test_a_broken_reranker_is_one_clear_error_and_changes_nothing(store, reranker, message):
    session = store.start_session("ana").session_id
    store.clock = lambda: dt.datetime(2030, 1, 1)  # the session's touch is due
    last = store.get_session(session).last_activity
    audit = len(store.audit_log())
    store.reranker = reranker
    for call in (
        lambda: store.search(QUESTION, limit=3, mode="hybrid"),
        lambda: store.get_context(session, QUESTION),
    ):
        with pytest.raises(RerankerError, match=message) as raised:
            call()
        assert "\n" not in str(raised.value)
    assert store.get_session(session).last_activity == last  # not touched
    assert len(store.audit_log()) == audit
    store.reranker = None
    store.get_context(session, QUESTION)
    assert store.get_session(session).last_activity == dt.datetime(2030, 1, 1)


def test_recall_in_a_notebook_uses_the_memory_reranker(ip, magics):
    ip.run_cell("%%remember --role user\nAna plays the piano at home")
    ip.run_cell("%%remember --role user\nthe cello, mostly")
    assert ip.run_line_magic("recall", "what does Ana play at home -k 1")["content"].tolist() == [
        "Ana plays the piano at home"
    ]
    magics.memory.reranker = WordReranker("cello")
    frame = ip.run_line_magic("recall", "what does Ana play at home -k 1")
    assert frame["content"].tolist() == ["the cello, mostly"]
