"""The tri-hybrid context: recency + salience + relevance, provenance and the token budget."""

from __future__ import annotations

import threading

import pandas as pd
import pytest
from fakes import GatedEmbedder

from nbmemory import InvalidInput, Memory


@pytest.fixture
def conversation(store_path):
    """15 turns in s1, salient memories elsewhere, and one clearly relevant old turn.

    The ``spec`` profile: seed 000's relevance (cosine > 0.65), as these tests assert,
    and seed 000's importance by role (no estimate): only the rules are salient.
    """
    mem = Memory(store_path, embedder="hash", profile="spec", estimate_importance=False)
    for i in range(15):
        mem.add_event(
            "s1", "user", f"small talk number {i}", created_at=f"2024-01-01T10:{i:02d}:00"
        )
    for i in range(7):
        mem.add_event(
            "s0",
            "user",
            f"critical rule {i}",
            importance=0.8 + i * 0.02,
            created_at=f"2023-12-01T00:0{i}:00",
        )
    mem.add_event("s0", "user", "My name is John and I love TypeScript", created_at="2023-11-01")
    mem.flush()
    yield mem
    mem.close()


def test_each_strategy_with_the_spec_defaults(conversation):
    ctx = conversation.get_context("s1", "My name is John and I love TypeScript")
    recency = ctx.by_strategy("recency")
    salience = ctx.by_strategy("salience")
    relevance = ctx.by_strategy("relevance")
    # recency: the last 10 of the session, newest is rank 1
    assert sorted(i.recency_rank for i in recency) == list(range(1, 11))
    assert {i.content for i in recency} == {f"small talk number {i}" for i in range(5, 15)}
    # salience: importance >= 0.8, the 5 highest
    assert len(salience) == 5 and all(i.importance >= 0.8 for i in salience)
    assert {i.content for i in salience} == {f"critical rule {i}" for i in range(2, 7)}
    # relevance: similarity > 0.65 only
    assert [i.content for i in relevance] == ["My name is John and I love TypeScript"]
    assert relevance[0].similarity == pytest.approx(1.0, abs=1e-5)
    assert len(ctx) == 16  # deduplicated union


def test_items_are_deduplicated_and_keep_every_strategy(mem):
    mem.add_event("s", "user", "deploy on fridays is forbidden", importance=0.95)
    mem.flush()
    ctx = mem.get_context("s", "deploy on fridays is forbidden")
    assert len(ctx) == 1
    item = ctx.items[0]
    assert item.strategies == ["relevance", "salience", "recency"]
    assert item.similarity == pytest.approx(1.0, abs=1e-5) and item.recency_rank == 1


def test_to_frame_has_provenance_columns(conversation):
    frame = conversation.get_context("s1", "John TypeScript").to_frame()
    for column in [
        "id",
        "role",
        "content",
        "created_at",
        "importance",
        "similarity",
        "strategies",
    ]:
        assert column in frame.columns
    assert frame["rank"].tolist() == list(range(1, len(frame) + 1))
    assert frame["id"].is_unique
    recency_rows = frame[frame["strategies"].str.contains("recency")]
    assert recency_rows["recency_rank"].notna().all()


def test_limits_and_thresholds_per_call(conversation):
    ctx = conversation.get_context(
        "s1",
        "John TypeScript",
        recency_limit=3,
        salience_limit=2,
        salience_threshold=0.9,
        relevance_threshold=-1.0,
        relevance_limit=4,
    )
    assert len(ctx.by_strategy("recency")) == 3
    assert [i.content for i in ctx.by_strategy("salience")] == [
        "critical rule 6",
        "critical rule 5",
    ]
    assert len(ctx.by_strategy("relevance")) == 4
    assert ctx.parameters["relevance_limit"] == 4


def test_limits_and_thresholds_from_settings(store_path):
    with Memory(store_path, embedder="hash", recency_limit=2, relevance_threshold=0.99) as mem:
        for i in range(5):
            mem.add_event("s", "user", f"line {i} about apples")
        mem.flush()
        ctx = mem.get_context("s", "line 0 about apples")
        assert len(ctx.by_strategy("recency")) == 2
        assert [i.content for i in ctx.by_strategy("relevance")] == ["line 0 about apples"]
        mem.configure(relevance_threshold=0.1, recency_limit=1)
        ctx = mem.get_context("s", "line 0 about apples")
        assert len(ctx.by_strategy("recency")) == 1 and len(ctx.by_strategy("relevance")) == 5


def test_zero_limits_switch_a_strategy_off(conversation):
    ctx = conversation.get_context("s1", "John", recency_limit=0, salience_limit=0)
    assert ctx.by_strategy("recency") == [] and ctx.by_strategy("salience") == []


def test_without_query_there_is_no_relevance(conversation):
    ctx = conversation.get_context("s1")
    assert ctx.by_strategy("relevance") == [] and len(ctx.by_strategy("recency")) == 10


@pytest.mark.parametrize(
    "kwargs",
    [{"recency_limit": -1}, {"salience_threshold": 1.2}, {"relevance_threshold": "high"}],
)
def test_bad_context_arguments(conversation, kwargs):
    with pytest.raises(InvalidInput):
        conversation.get_context("s1", "x", **kwargs)


def test_to_prompt_fits_the_budget_dropping_lowest_ranked_first(conversation):
    ctx = conversation.get_context("s1", "My name is John and I love TypeScript")
    full = ctx.to_prompt()
    assert full.dropped == [] and len(full.kept) == len(ctx)
    assert "John" in full and full.tokens <= 4096
    small = ctx.to_prompt(max_tokens=40)
    assert small.tokens <= 40 and small.dropped
    frame = ctx.to_frame()
    ranks = dict(zip(frame["id"], frame["rank"], strict=True))
    # every kept item outranks every dropped one
    assert max(ranks[i] for i in small.kept) < min(ranks[i] for i in small.dropped)
    assert "dropped" in small.report()
    # kept items read oldest first
    lines = small.splitlines()[1:]
    kept_frame = frame.set_index("id").loc[small.kept]
    assert kept_frame["created_at"].is_monotonic_increasing
    assert len(lines) == len(small.kept)


def test_default_budget_is_max_memory_tokens(store_path):
    with Memory(store_path, embedder="hash", max_memory_tokens=30) as mem:
        for i in range(10):
            mem.add_event("s", "user", f"a fairly long message number {i} " * 3)
        prompt = mem.get_context("s").to_prompt()
        assert prompt.max_tokens == 30 and prompt.tokens <= 30 and prompt.dropped


def test_token_counter_is_pluggable(store_path):
    with Memory(store_path, embedder="hash", token_counter=lambda text: len(text.split())) as m:
        m.add_event("s", "user", "one two three")
        prompt = m.get_context("s").to_prompt(max_tokens=100)
        assert prompt.tokens == 1 + len(prompt.splitlines()[1].split())


def test_explain_lists_near_misses_with_the_gap(conversation):
    ctx = conversation.get_context("s1", "John loves TypeScript language", explain=True)
    misses = ctx.near_misses
    assert isinstance(misses, pd.DataFrame) and not misses.empty
    relevance = misses[misses["strategy"] == "relevance"]
    assert (relevance["missed_by"] >= 0).all()
    assert not set(misses["id"]) & set(ctx.ids)
    salience = misses[misses["strategy"] == "salience"]
    assert (salience["score"] < 0.8).all()
    assert "Near misses" in ctx._repr_html_()


def test_salience_includes_summaries_from_other_sessions(mem):
    mem.add_event("old", "assistant", "summary of last week", kind="summary", importance=0.9)
    ctx = mem.get_context("new-session")
    assert [i.kind for i in ctx.by_strategy("salience")] == ["summary"]


def _salient_store(path, **settings):
    mem = Memory(path, embedder="hash", estimate_importance=False, **settings)
    for i, topic in enumerate(["tea", "trains", "taxes", "tulips", "tents", "tuna", "tango"]):
        mem.add_event("facts", "user", f"rule about {topic}", importance=0.99 - i * 0.02)
    mem.add_event("s", "user", "hello")
    mem.flush()
    return mem


def test_hybrid_salience_brings_the_salient_memories_closest_to_the_query(store_path):
    """Seven salient rules, a budget of five: the one the question is about comes,
    even though five others are more important."""
    with _salient_store(store_path) as mem:
        ctx = mem.get_context("s", "rule about tango", salience_limit=1, relevance_limit=0)
        assert [i.content for i in ctx.by_strategy("salience")] == ["rule about tango"]
        # without a query: the most important
        ctx = mem.get_context("s", salience_limit=1)
        assert [i.content for i in ctx.by_strategy("salience")] == ["rule about tea"]


def test_spec_salience_is_by_importance_whatever_the_query(store_path):
    with _salient_store(store_path, profile="spec") as mem:
        ctx = mem.get_context("s", "rule about tango", salience_limit=1, relevance_limit=0)
        assert [i.content for i in ctx.by_strategy("salience")] == ["rule about tea"]


class _WorkerGatedEmbedder(GatedEmbedder):
    """Blocks the background worker only; a query (from the caller's thread) passes."""

    def embed(self, texts):
        if threading.current_thread() is threading.main_thread():
            return self.inner.embed(texts)
        return super().embed(texts)


def test_salient_memories_without_a_vector_yet_still_come(store_path):
    """The worker is busy: salient memories waiting for their vector fill the budget
    after those ranked by the query."""
    gated = _WorkerGatedEmbedder()
    gated.gate.set()
    mem = Memory(store_path, embedder=gated, estimate_importance=False)
    try:
        mem.add_event("facts", "user", "always write tests", importance=0.9)
        mem.flush()
        gated.gate.clear()
        gated.entered.clear()
        mem.add_event("facts", "user", "never deploy on fridays", importance=0.95)
        assert gated.entered.wait(10)  # the worker holds that batch
        ctx = mem.get_context("s", "deploy", relevance_limit=0)
        assert [i.content for i in ctx.by_strategy("salience")] == [
            "always write tests",  # ranked by the query (it has a vector)
            "never deploy on fridays",  # then the waiting one
        ]
    finally:
        gated.gate.set()
        mem.close()


def _salient(mem, query="rule", threshold=0.9):
    ctx = mem.get_context(
        "s", query, salience_threshold=threshold, salience_limit=20, relevance_limit=0
    )
    return {i.content for i in ctx.by_strategy("salience")}


def test_hybrid_salience_reads_the_salient_ids_once_and_follows_every_change(store_path):
    """The salient ids are kept in memory: a second context reads none from the table,
    and what is added, deleted, updated or written with plain SQL since is seen."""
    with _salient_store(store_path) as mem:
        reads = []
        ids_at_least = mem.store.events.ids_at_least
        mem.store.events.ids_at_least = lambda *a: reads.append(a) or ids_at_least(*a)
        first = {f"rule about {t}" for t in ("tea", "trains", "taxes", "tulips", "tents")}
        assert _salient(mem) == first
        assert _salient(mem) == first
        assert len(reads) == 1  # the second call used the kept ids

        new = mem.add_event("facts", "user", "rule about tofu", importance=0.97)
        mem.add_event("facts", "user", "rule about toast", importance=0.5)  # not salient
        mem.flush()
        assert "rule about tofu" in _salient(mem) and len(reads) == 1
        mem.delete(new.id)
        assert "rule about tofu" not in _salient(mem) and len(reads) == 1

        (tea,) = mem.store.run("SELECT id FROM events WHERE content = 'rule about tea'")[0]
        mem.store.execute("UPDATE events SET importance = 0.1 WHERE id = ?", [tea])
        assert "rule about tea" not in _salient(mem)  # plain SQL: read again
        assert len(reads) == 2
        # another namespace and another threshold are kept apart
        assert _salient(mem, threshold=0.96) == {"rule about trains"}
        mem.add_event("facts", "user", "rule about tuna", importance=0.99, namespace="other")
        assert _salient(mem, threshold=0.96) == {"rule about trains"}
        assert _salient(mem) == first - {"rule about tea"}


def test_salience_inside_a_transaction_sees_its_uncommitted_rows(store_path):
    with _salient_store(store_path) as mem:
        assert "rule about tofu" not in _salient(mem)
        with mem.store.transaction():
            mem.store.execute(
                "UPDATE events SET importance = 0.99 WHERE content = 'rule about tango'"
            )
            assert "rule about tango" in _salient(mem)
        assert "rule about tango" in _salient(mem)


def test_hybrid_context_reads_the_rows_of_both_strategies_in_one_query(store_path):
    """Salience and relevance are ranked from the indexes, then their rows are read
    together; the memories and their order are those each strategy gives alone."""
    with _salient_store(store_path) as mem:
        mem.add_event("s", "user", "what is the rule about tango again?")
        mem.flush()
        fetches = []
        rows = mem.store.events.rows
        mem.store.events.rows = lambda ids: fetches.append(list(ids)) or rows(ids)
        question = "rule about tango"
        ctx = mem.get_context(
            "s", question, recency_limit=0, salience_limit=3, salience_threshold=0.9,
            relevance_limit=3, relevance_threshold=0.0,
        )  # fmt: skip
        assert len(fetches) == 1
        vector = mem.retriever.embed_query(question)
        alone = mem.retriever.salient("default", vector, threshold=0.9, limit=3)

        def order(strategy):  # the strategy's own order (items are in the merged one)
            items = sorted(ctx.by_strategy(strategy), key=lambda i: i.positions[strategy])
            return [i.id for i in items]

        assert order("salience") == [r["id"] for r in alone]
        relevance = mem.retriever.hits_frame(
            mem.retriever.rank(
                question, vector, "default", limit=3, threshold=0.0, mode="hybrid", strict=True
            )
        )
        assert order("relevance") == list(relevance["id"])
        assert ctx.by_strategy("relevance") and ctx.by_strategy("salience")
