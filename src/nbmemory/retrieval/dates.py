"""Time expressions resolved to dates: what a memory says about when, and what a question asks.

A memory that says "I went camping last week" was written at some ``created_at``;
read against that moment, "last week" is the seven days before it.  A question
that names a time ("What did Maria do in May 2023?", "... on 7 July, 2023?",
"the week before August 3, 2023") names a period.  A memory is *in* the period
when it was written then, or says something happened then.

Only a closed set of English expressions is read, with regular expressions and
``dateutil`` (a dependency of pandas), cheaply enough for every write
(``benchmarks/bench_signals.py`` times it with the rest of what the keyword
index reads from a new text, ``docs/retrieval.md`` has the figures): explicit
dates ("7 July, 2023", "July 7th 2023", "2023-07-07", "7/7/2023"), months with
or without a year ("May 2023", "in May"), years, and expressions relative to the
time of writing ("yesterday", "last night", "last week", "last weekend", "last
month", "last year", "this week", "two weeks ago", "a few days ago", "last
Friday", "next month", "tomorrow").  ``dateparser`` reads more languages and
forms, but parses one string as one date, and its ``search_dates`` cost a turn
many times a write's whole budget when it was tried; nothing here needs a model.

Periods are half-open day ranges ``[start, end)`` of :class:`datetime.date`.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from dataclasses import dataclass

from dateutil.relativedelta import relativedelta

#: Month and weekday names, lower-cased.
MONTH_NAMES = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
]
_MONTH_OF = {name: i + 1 for i, name in enumerate(MONTH_NAMES)}
_MONTH_OF.update({name[:3]: i + 1 for i, name in enumerate(MONTH_NAMES)})
DAY_NAMES = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_NUMBER_WORDS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "couple": 2,
    "a couple": 2,
    "a couple of": 2,
    "couple of": 2,
    "few": 3,
    "a few": 3,
    "several": 3,
}

_MONTH = r"(?P<{name}>Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)\.?"
_DAY = r"(?P<{name}>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<{name}>(?:19|20)\d\d)"


#: Explicit dates, months and years (months are capitalised: "may" the verb is not one).
_EXPLICIT = re.compile(
    "|".join(
        [
            # 7 July, 2023 / 7th of July 2023
            r"\b"
            + _DAY.format(name="d1")
            + r"(?:\s+of)?\s+"
            + _MONTH.format(name="m1")
            + r"(?:,?\s+"
            + _YEAR.format(name="y1")
            + r")?\b",
            # July 7, 2023 / July 7th
            r"\b"
            + _MONTH.format(name="m2")
            + r"\s+"
            + _DAY.format(name="d2")
            + r"(?!\d)(?:,?\s*"
            + _YEAR.format(name="y2")
            + r")?\b",
            # July 2023 / July, 2023
            r"\b" + _MONTH.format(name="m3") + r",?\s+" + _YEAR.format(name="y3") + r"\b",
            # 2023-07-07
            r"\b(?P<y4>(?:19|20)\d\d)-(?P<m4>[01]?\d)-(?P<d4>[0-3]?\d)\b",
            # 7/7/2023 (month first, as in the US)
            r"\b(?P<m5>[01]?\d)/(?P<d5>[0-3]?\d)/(?P<y5>(?:19|20)?\d\d)\b",
            # a month alone, after a preposition or at the start ("in May", "May was")
            r"(?:\b(?:in|during|since|until|by|of|early|late|mid|last|next|this)\s+|^)"
            + _MONTH.format(name="m6")
            + r"\b(?![-'’])(?!,?\s+(?:19|20)\d\d\b)(?!\s+[0-3]?\d(?:st|nd|rd|th)?\b)",
            # a year alone
            r"\b" + _YEAR.format(name="y7") + r"\b",
        ]
    )
)

_NUMBER = r"(?P<n>\d+|an?|one|two|three|four|five|six|seven|eight|nine|ten|(?:a\s+)?couple(?:\s+of)?|(?:a\s+)?few|several)"
#: Expressions relative to the time of writing (matched on lower-cased text).
_RELATIVE = re.compile(
    r"\b(?:"
    r"(?P<yesterday>yesterday|last night)"
    r"|(?P<today>today|tonight|this (?:morning|afternoon|evening))"
    r"|(?P<tomorrow>tomorrow)"
    r"|"
    + _NUMBER
    + r"\s+(?P<unit>day|week|month|year)s?\s+(?P<dir>ago|before|earlier|from now|later)"
    r"|(?P<which>last|past|previous|this|next|coming)\s+(?P<span>week|weekend|month|year|summer|winter|spring|fall|autumn"
    r"|monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
    r"|(?P<which_short>last|past|previous|this|next|coming)\s+(?P<short>mon|tues?|wed|thu(?:rs?)?|fri|sat|sun)\.?"
    r"|(?:on\s+)?(?P<weekday>monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
    r"|(?:on\s+)?the\s+(?P<nth>[0-3]?\d)(?:st|nd|rd|th)(?!\s+(?:of\s+)?(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec))"
    r")\b"
)

#: Words every relative expression holds: a text without any is not searched.
_RELATIVE_WORDS = (
    "yesterday",
    "night",
    "today",
    "tonight",
    "this",
    "tomorrow",
    "ago",
    "before",
    "earlier",
    "from now",
    "later",
    "last",
    "past",
    "previous",
    "next",
    "coming",
    "day",
)
#: An ordinal day ("the 15th"), the one relative expression without those words.
_ORDINAL = re.compile(r"\d(?:st|nd|rd|th)\b")
_SEASONS = {
    "spring": (3, 6),
    "summer": (6, 9),
    "fall": (9, 12),
    "autumn": (9, 12),
    "winter": (12, 15),
}


@dataclass(frozen=True, order=True)
class Period:
    """The days ``[start, end)``; ``any_year`` for a month named without a year."""

    start: dt.date
    end: dt.date
    any_year: bool = False

    def overlaps(self, other: Period) -> bool:
        """Whether the two periods share a day (a month of any year matches that
        month in every year)."""
        if self.any_year or other.any_year:
            named, dated = (self, other) if self.any_year else (other, self)
            if dated.any_year:
                return named.start.month == dated.start.month
            return any(
                _month_overlaps(named.start.month, year, dated)
                for year in range(dated.start.year, dated.end.year + 1)
            )
        return self.start < other.end and other.start < self.end

    def contains(self, moment: dt.datetime | dt.date) -> bool:
        day = moment.date() if isinstance(moment, dt.datetime) else moment
        return self.overlaps(Period(day, day + dt.timedelta(days=1)))


def _month_overlaps(month: int, year: int, period: Period) -> bool:
    start = dt.date(year, month, 1)
    return start < period.end and period.start < start + relativedelta(months=1)


def _day(year: int, month: int, day: int) -> Period | None:
    try:
        start = dt.date(year, month, day)
    except ValueError:
        return None
    return Period(start, start + dt.timedelta(days=1))


def _month(year: int, month: int) -> Period:
    start = dt.date(year, month, 1)
    return Period(start, start + relativedelta(months=1))


def _year(year: int) -> Period:
    return Period(dt.date(year, 1, 1), dt.date(year + 1, 1, 1))


def _month_number(text: str) -> int:
    return _MONTH_OF[text.lower().rstrip(".")[:3]]


def explicit_periods(
    text: str, at: dt.date | None = None, *, year: int | None = None
) -> Iterator[Period]:
    """Periods the text names outright: dates, months and years.

    A day or month without a year takes ``year`` when given, else the year of
    ``at`` (the time of writing), the year before when that would put it after
    ``at`` by more than a month ("in December" written in March is last
    December); with neither, a month alone matches that month in any year and a
    day alone is skipped.
    """
    default_year = year
    for match in _EXPLICIT.finditer(text):
        groups = match.groupdict()
        if groups["m1"] or groups["m2"]:
            month = _month_number(groups["m1"] or groups["m2"])
            day = int(groups["d1"] or groups["d2"])
            named = groups["y1"] or groups["y2"]
            if named:
                period = _day(int(named), month, day)
            elif default_year is not None:
                period = _day(default_year, month, day)
            elif at is not None:
                period = _day(_year_for(at, month), month, day)
            else:
                period = None
            if period is not None:
                yield period
        elif groups["m3"]:
            yield _month(int(groups["y3"]), _month_number(groups["m3"]))
        elif groups["y4"]:
            found = _day(int(groups["y4"]), int(groups["m4"]), int(groups["d4"]))
            if found is not None:
                yield found
        elif groups["y5"]:
            short = int(groups["y5"])
            found = _day(
                short + 2000 if short < 100 else short, int(groups["m5"]), int(groups["d5"])
            )
            if found is not None:
                yield found
        elif groups["m6"]:
            month = _month_number(groups["m6"])
            if default_year is not None:
                yield _month(default_year, month)
            elif at is None:
                start = dt.date(2000, month, 1)
                yield Period(start, start + relativedelta(months=1), any_year=True)
            else:
                yield _month(_year_for(at, month), month)
        elif groups["y7"]:
            yield _year(int(groups["y7"]))


def _year_for(at: dt.date, month: int) -> int:
    """The year of a month named without one, as seen from ``at``."""
    return at.year - 1 if month > at.month + 1 else at.year


def relative_periods(text: str, at: dt.datetime | dt.date) -> Iterator[Period]:
    """Periods that expressions relative to ``at`` name ("last week" written on
    14 July is 7–14 July)."""
    lower = text.lower()
    if (
        not any(word in lower for word in _RELATIVE_WORDS)
        and not any(day in lower for day in DAY_NAMES)
        and not _ORDINAL.search(lower)
    ):
        return
    today = at.date() if isinstance(at, dt.datetime) else at
    one = dt.timedelta(days=1)
    for match in _RELATIVE.finditer(lower):
        groups = match.groupdict()
        if groups["yesterday"]:
            yield Period(today - one, today)
        elif groups["today"]:
            yield Period(today, today + one)
        elif groups["tomorrow"]:
            yield Period(today + one, today + 2 * one)
        elif groups["unit"]:
            yield _ago(today, groups["n"], groups["unit"], groups["dir"])
        elif groups["span"]:
            period = _named_span(today, groups["which"], groups["span"])
            if period is not None:
                yield period
        elif groups["short"]:  # "last Fri", "last Tues": a weekday written short
            short = groups["short"][:3]
            weekday = next(i for i, name in enumerate(DAY_NAMES) if name.startswith(short))
            yield _named_span(today, groups["which_short"], DAY_NAMES[weekday])  # type: ignore[misc]
        elif groups["nth"]:  # "on the 15th": that day of the month, the last one by ``at``
            period = _nth(today, int(groups["nth"]))
            if period is not None:
                yield period
        elif groups["weekday"]:
            # "on Friday" / "Friday": the last one before the time of writing
            yield _weekday(today, DAY_NAMES.index(groups["weekday"]), -1)


def _ago(today: dt.date, number: str, unit: str, direction: str) -> Period:
    count = int(number) if number.isdigit() else _NUMBER_WORDS.get(" ".join(number.split()), 1)
    sign = 1 if direction in ("from now", "later") else -1
    step = relativedelta(**{unit + "s": count})
    moment = today + step if sign > 0 else today - step
    # "two weeks ago" is about then, give or take half the unit
    slack = {"day": relativedelta(days=0), "week": relativedelta(days=3)}.get(
        unit, relativedelta(days=15) if unit == "month" else relativedelta(months=6)
    )
    return Period(moment - slack, moment + slack + relativedelta(days=1))


def _named_span(today: dt.date, which: str, span: str) -> Period | None:
    step = {"last": -1, "past": -1, "previous": -1, "this": 0, "next": 1, "coming": 1}[which]
    if span in DAY_NAMES:
        return _weekday(today, DAY_NAMES.index(span), step or -1)
    if span == "week":
        if step < 0:  # "last week", "past week": the seven days before
            return Period(today - dt.timedelta(days=7), today)
        start = today - dt.timedelta(days=today.weekday()) + dt.timedelta(weeks=step)
        return Period(start, start + dt.timedelta(days=7))
    if span == "weekend":
        weekday = today.weekday()
        if step < 0:  # the Saturday before today (a week back when said on a Saturday)
            saturday = today - dt.timedelta(days=(weekday - 5) % 7 or 7)
        elif step == 0:  # this week's (yesterday's when said on a Sunday)
            saturday = today + dt.timedelta(days=5 - weekday if weekday <= 5 else -1)
        else:
            saturday = today + dt.timedelta(days=(5 - weekday) % 7 or 7)
        return Period(saturday, saturday + dt.timedelta(days=2))
    if span == "month":
        first = dt.date(today.year, today.month, 1) + relativedelta(months=step)
        return Period(first, first + relativedelta(months=1))
    if span == "year":
        return _year(today.year + step)
    low, high = _SEASONS[span]
    year = today.year + step
    if step < 0 and today.month >= high:  # "last summer" said in November: this year's
        year += 1
    start = dt.date(year, low, 1)
    return Period(start, start + relativedelta(months=high - low))


def _nth(today: dt.date, day: int) -> Period | None:
    """The ``day``-th of the month of ``today`` when it is not after ``today``, else of
    the month before ("the 15th" written on 17 August is 15 August)."""
    if not 1 <= day <= 31:
        return None
    month = today if day <= today.day else today - relativedelta(months=1)
    return _day(month.year, month.month, day)


def _weekday(today: dt.date, weekday: int, step: int) -> Period:
    if step < 0:
        back = (today.weekday() - weekday) % 7 or 7
        day = today - dt.timedelta(days=back)
    else:
        ahead = (weekday - today.weekday()) % 7 or 7
        day = today + dt.timedelta(days=ahead)
    return Period(day, day + dt.timedelta(days=1))


def periods_of(text: str | None, at: dt.datetime | dt.date | None) -> list[Period]:
    """Every period a memory's text places something in, read against its time of
    writing ``at`` (explicit dates, months, years and relative expressions)."""
    if not text:
        return []
    day = None if at is None else (at.date() if isinstance(at, dt.datetime) else at)
    found = list(explicit_periods(text, day))
    if at is not None:
        found.extend(relative_periods(text, at))
    return sorted(set(found))


_YEARS = re.compile(r"\b((?:19|20)\d\d)\b")
#: "the week before 3 August, 2023", "before 10 April": the period before a date.
_BEFORE = re.compile(r"\b(?:the\s+)?(?P<span>week|weekend|day|month)\s+before\b", re.I)


def question_period(question: str, asked_at: dt.datetime | None = None) -> Period | None:
    """The period a question asks about, when it names one outright ("in May 2023",
    "on 7 July, 2023", "the week before August 3, 2023"); None otherwise.

    Relative words ("yesterday", "last week", "on Monday", "three days ago") are read
    against ``asked_at``, the time the question is asked (an agent asks now), and
    only when the question names no date outright.  Without ``asked_at`` they are
    not read: a question is not written at a memory's time.  Several named periods
    give their span.
    """
    period = _named_period(question)
    if period is not None or asked_at is None:
        return period
    found = list(relative_periods(question, asked_at))
    return Period(min(p.start for p in found), max(p.end for p in found)) if found else None


def _named_period(question: str) -> Period | None:
    """The period a question names outright (see :func:`question_period`)."""
    years = _YEARS.findall(question)
    found = list(explicit_periods(question, year=int(years[-1]) if len(set(years)) == 1 else None))
    if not found:
        return None
    if any(p.any_year for p in found):
        dated = [p for p in found if not p.any_year]
        if not dated:
            return found[0]
        found = dated
    period = Period(min(p.start for p in found), max(p.end for p in found))
    before = _BEFORE.search(question)
    if before and period.end - period.start <= dt.timedelta(days=1):
        days = {"day": 1, "week": 7, "weekend": 7, "month": 31}[before.group("span").lower()]
        period = Period(period.start - dt.timedelta(days=days), period.start)
    return period
