"""A question's relative date ("yesterday", "last week") is read against the time it
is asked: an agent asks now.  Before, only dates written out were read, and "what did
we decide yesterday?" ranked a six-day-old decision first."""

from __future__ import annotations

import datetime as dt

import pytest

from nbmemory import Memory
from nbmemory.retrieval.dates import Period, question_period

ASKED = dt.datetime(2026, 12, 7, 9, 30)


@pytest.mark.parametrize(
    "question, start, end",
    [
        ("what did we decide yesterday?", dt.date(2026, 12, 6), dt.date(2026, 12, 7)),
        ("what did we change three days ago?", dt.date(2026, 12, 4), dt.date(2026, 12, 5)),
        ("what happened last week?", dt.date(2026, 11, 30), dt.date(2026, 12, 7)),
    ],
)
def test_relative_words_are_read_against_the_time_of_asking(question, start, end):
    period = question_period(question, ASKED)
    assert period is not None and (period.start, period.end) == (start, end)
    assert question_period(question) is None  # without a time of asking, as before


def test_a_date_written_out_wins_over_a_relative_word():
    period = question_period("what did we say yesterday about May 3, 2023?", ASKED)
    assert period == Period(dt.date(2023, 5, 3), dt.date(2023, 5, 4))


def write_decisions(mem: Memory, now: dt.datetime) -> None:
    """Three decisions, six, four and one day before ``now``."""
    for days, text in [
        (6, "Decision: we use ruff, not black, for formatting."),
        (4, "Decision: logs go to Loki via promtail."),
        (1, "Decision: we go with Redis Streams for the job queue."),
    ]:
        mem.add_event("d", "user", text, created_at=now - dt.timedelta(days=days))
    mem.flush()


@pytest.fixture
def decisions(store_path, real_embedder):
    with Memory(store_path, embedder=real_embedder) as mem:
        write_decisions(mem, dt.datetime.now(dt.timezone.utc))
        yield mem


@pytest.mark.real_model
def test_yesterdays_decision_ranks_first_for_a_question_about_yesterday(decisions):
    hits = decisions.search("what did we decide yesterday?", limit=3)
    assert "Redis Streams" in hits.content.iloc[0] and "date" in hits.signals.iloc[0]


@pytest.mark.real_model
def test_yesterdays_decision_reaches_the_context_under_the_cosine_floor(decisions):
    # its cosine to the question is under get_context's floor (0.2): the context had
    # only the six-day-old decision, which is over it
    question = "what did we decide yesterday?"
    hits = decisions.search(question, limit=3)
    assert hits.similarity.iloc[0] < decisions.settings.relevance_threshold
    relevant = [i.content for i in decisions.get_context("d2", question).by_strategy("relevance")]
    assert relevant and "Redis Streams" in relevant[0]
    # a stricter threshold someone sets is kept as set
    strict = decisions.get_context("d2", question, relevance_threshold=0.5)
    assert not any("Redis" in i.content for i in strict.by_strategy("relevance"))


@pytest.mark.real_model
def test_yesterday_is_the_day_before_the_stores_clock(store_path, real_embedder):
    """An agent replayed (or tested) on a simulated clock, ``mem.clock``, asks on that
    day: the question was read against the wall clock, so its "yesterday" named a day
    no memory was written on, and the six-day-old decision came first."""
    asked = dt.datetime(2026, 3, 5, 12)
    with Memory(store_path, embedder=real_embedder) as mem:
        mem.clock = lambda: asked
        write_decisions(mem, asked)
        hits = mem.search("what did we decide yesterday?", limit=3)
        assert "Redis Streams" in hits.content.iloc[0] and "date" in hits.signals.iloc[0]
        context = mem.get_context("d2", "what did we decide yesterday?")
        relevant = [i.content for i in context.by_strategy("relevance")]
        assert relevant and "Redis Streams" in relevant[0]


@pytest.mark.real_model
def test_a_context_cached_yesterday_is_not_todays_answer(store_path, real_embedder):
    """Contexts are cached until the store changes; "yesterday" changes with the day
    without any write, and the cached context kept answering the day before's."""
    asked = dt.datetime(2026, 3, 5, 12)
    with Memory(store_path, embedder=real_embedder) as mem:
        mem.clock = lambda: asked
        write_decisions(mem, asked)
        question = "what did we decide yesterday?"
        first = mem.get_context("d2", question).by_strategy("relevance")
        assert "Redis Streams" in first[0].content
        mem.clock = lambda: asked - dt.timedelta(days=3)  # a replay: yesterday is Loki's day
        later = mem.get_context("d2", question).by_strategy("relevance")
        assert "Loki" in later[0].content
