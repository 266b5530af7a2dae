"""Time expressions resolved to dates, and the date signals of hybrid search."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nbmemory import Memory
from nbmemory.retrieval import dates
from nbmemory.retrieval.dates import Period, periods_of, question_period

D = dt.date
#: Friday 14 July 2023, 1 pm: the time of writing of the examples.
AT = dt.datetime(2023, 7, 14, 13, 0)


def day(d: dt.date) -> Period:
    return Period(d, d + dt.timedelta(days=1))


@pytest.mark.parametrize(
    "text, expected",
    [
        ("I went to a support group yesterday", [day(D(2023, 7, 13))]),
        ("last night was loud", [day(D(2023, 7, 13))]),
        ("today I rest", [day(D(2023, 7, 14))]),
        ("see you tomorrow", [day(D(2023, 7, 15))]),
        ("I went camping last week", [Period(D(2023, 7, 7), D(2023, 7, 14))]),
        ("last weekend we hiked", [Period(D(2023, 7, 8), D(2023, 7, 10))]),
        ("last Friday we met", [day(D(2023, 7, 7))]),
        ("on Monday I painted", [day(D(2023, 7, 10))]),
        # weekdays written short, as people chat (LoCoMo: "Last Fri I finally took my kids")
        ("Last Fri I took my kids to a pottery workshop", [day(D(2023, 7, 7))]),
        ("I joined a new activist group last Tues.", [day(D(2023, 7, 11))]),
        ("see you next thurs", [day(D(2023, 7, 20))]),
        ("the sun was out", []),  # "sun" alone is not Sunday
        # a day of the month alone: the last such day by the time of writing
        ("I met my teammates on the 15th after my trip", [day(D(2023, 6, 15))]),
        ("the party was on the 2nd", [day(D(2023, 7, 2))]),
        ("Two weeks ago I got a puppy", [Period(D(2023, 6, 27), D(2023, 7, 4))]),
        ("last month was busy", [Period(D(2023, 6, 1), D(2023, 7, 1))]),
        ("next month we move", [Period(D(2023, 8, 1), D(2023, 9, 1))]),
        ("I painted that lake sunrise last year!", [Period(D(2022, 1, 1), D(2023, 1, 1))]),
        ("last summer was hot", [Period(D(2022, 6, 1), D(2022, 9, 1))]),
        ("in May I started running", [Period(D(2023, 5, 1), D(2023, 6, 1))]),
        ("in December we skied", [Period(D(2022, 12, 1), D(2023, 1, 1))]),  # last December
        ("on 7 July, 2023 we", [day(D(2023, 7, 7))]),
        ("July 7th was great", [day(D(2023, 7, 7))]),
        ("the 3rd of March 2021", [day(D(2021, 3, 3))]),
        ("Sept. 5, 2022 and Dec 1", [day(D(2022, 9, 5)), day(D(2022, 12, 1))]),
        ("we met on 2023-02-01", [day(D(2023, 2, 1))]),
        ("the party is on 10/5/2023", [day(D(2023, 10, 5))]),
        ("Back in 2019 I lived there", [Period(D(2019, 1, 1), D(2020, 1, 1))]),
        ("We moved in May 2023", [Period(D(2023, 5, 1), D(2023, 6, 1))]),
        ("I may come along", []),  # the verb, not the month
        ("I love painting lakes", []),
        ("", []),
    ],
)
def test_a_memory_places_things_in_time_relative_to_when_it_was_written(text, expected):
    assert periods_of(text, AT) == expected


def test_without_a_time_of_writing_only_explicit_dates_count():
    assert periods_of("yesterday, on 7 July 2023", None) == [day(D(2023, 7, 7))]
    assert periods_of("in June", None) == [Period(D(2000, 6, 1), D(2000, 7, 1), any_year=True)]


@pytest.mark.parametrize(
    "question, expected",
    [
        ("What did Maria do in May 2023?", Period(D(2023, 5, 1), D(2023, 6, 1))),
        ("What did Gina find on 1 February, 2023?", day(D(2023, 2, 1))),
        ("What movie did Joanna watch on 1 May, 2022?", day(D(2022, 5, 1))),
        (
            "How many times has Melanie gone to the beach in 2023?",
            Period(D(2023, 1, 1), D(2024, 1, 1)),
        ),
        (
            "What did John do the week before August 3, 2023 involving his kids?",
            Period(D(2023, 7, 27), D(2023, 8, 3)),
        ),
        (
            "Where was John between August 11 and August 15 2023?",
            Period(D(2023, 8, 11), D(2023, 8, 16)),
        ),
        ("When did Melanie go camping in June?", Period(D(2000, 6, 1), D(2000, 7, 1), True)),
        ("When did she go camping?", None),
        ("What did she do last week?", None),  # a question is not written at a memory's time
    ],
)
def test_the_period_a_question_names(question, expected):
    assert question_period(question) == expected


def test_a_month_of_any_year_overlaps_that_month_in_every_year():
    june = Period(D(2000, 6, 1), D(2000, 7, 1), any_year=True)
    assert june.overlaps(day(D(2023, 6, 30)))
    assert not june.overlaps(day(D(2023, 7, 1)))
    assert june.overlaps(Period(D(2020, 11, 1), D(2021, 7, 1)))
    assert june.contains(dt.datetime(1999, 6, 5, 23, 0))
    assert not day(D(2023, 7, 1)).overlaps(day(D(2023, 7, 2)))  # half-open


@given(st.text(max_size=80), st.datetimes(dt.datetime(1900, 3, 1), dt.datetime(2100, 10, 1)))
@settings(max_examples=300, deadline=None)
def test_any_text_gives_well_formed_periods(text, at):
    for period in periods_of(text, at):
        assert period.start < period.end


_RELATIVE_PIECES = [
    "yesterday",
    "last night",
    "today",
    "tonight",
    "this morning",
    "tomorrow",
    "two days ago",
    "a few weeks before",
    "3 months later",
    "a year from now",
    "last week",
    "past weekend",
    "previous month",
    "this year",
    "next summer",
    "coming friday",
    "on Sunday",
    "Tuesday",
    "last Fri",
    "next tues",
    "on the 15th",
]


@given(st.sampled_from(_RELATIVE_PIECES), st.sampled_from(["", "We met ", "I think "]))
@settings(max_examples=200, deadline=None)
def test_the_relative_pre_check_never_hides_an_expression(piece, before):
    """The substring test that skips most texts must let every expression through."""
    text = f"{before}{piece}, yes"
    assert dates._RELATIVE.search(text.lower())
    assert list(dates.relative_periods(text, AT)), text


def blind_model(texts: list[str]) -> np.ndarray:
    """Every vector alike: cosine decides nothing, the other signals decide."""
    return np.ones((len(texts), 8), dtype=np.float32)


def test_a_question_naming_a_date_favours_memories_of_that_date(tmp_path):
    """Three turns alike but for when they were written or what they say; a
    question naming 7 July 2023 puts the one written that day first, then the one
    that says it happened then ("last week", written a week later)."""
    with Memory(tmp_path / "m.duckdb", embedder=blind_model) as mem:
        written = mem.add_event("a", "user", "we adopted a dog", created_at="2023-07-07T10:00")
        said = mem.add_event(
            "b", "user", "we adopted a dog last week", created_at="2023-07-12T10:00"
        )
        other = mem.add_event("c", "user", "we adopted a dog", created_at="2023-03-01T10:00")
        for i in range(5):
            mem.add_event("d", "user", f"unrelated chatter {i}", created_at="2023-01-01T10:00")
        mem.flush()
        hits = mem.search("What did we adopt on 7 July, 2023?", limit=3)
        assert hits["id"].tolist() == [written.id, said.id, other.id]
        assert "date" in hits["signals"].iloc[0] and "date" in hits["signals"].iloc[1]
        assert "date" not in hits["signals"].iloc[2]
        mem.configure(signal_weights={"dates": 0})
        hits = mem.search("What did we adopt on 7 July, 2023?", limit=3)
        assert not any("date" in s for s in hits["signals"])
        scores = hits.set_index("id")["score"]
        assert scores[written.id] == pytest.approx(scores[other.id])  # nothing tells them apart
