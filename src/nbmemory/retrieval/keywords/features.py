"""What a text says besides its words, read when it is indexed.

The hybrid ranking's signals need, for every memory, who wrote it ("Name: text"
as transcripts and LoCoMo's turns read), whether and when it places something in
time ("yesterday", "last May", "2023", resolved against the time of writing by
:mod:`nbmemory.retrieval.dates`) and whether it is a question.  They are read
once, when a text enters the keyword index, and kept there as per-document
arrays (:class:`DocumentFacts`).  What the detection costs per event is measured
by ``benchmarks/bench_signals.py`` (reported in ``docs/retrieval.md``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from typing import Any

import numpy as np

from ..dates import periods_of
from .tokens import WORD_RE

#: "Name: text" or "First Last: text" at the start of a turn: a transcript's speaker.
SPEAKER_RE = re.compile(r"^\s*([A-Z][\w'’.-]*(?: [A-Z][\w'’.-]*){0,2}):\s")


def speaker_of(content: str | None) -> str | None:
    """The speaker a turn is written by when it reads "Name: text" (lower-cased),
    as transcripts and LoCoMo's turns do; None otherwise."""
    match = SPEAKER_RE.match(content or "")
    return match.group(1).lower() if match else None


_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
_DAYS = "Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday"
#: Words that place a turn in time: relative days and periods, weekdays (also
#: written short after last/next/this: "Last Fri"), month names (capitalised, so
#: "may" the verb is not one), years and dates, a time since the last talk ("since
#: we last spoke") and a duration up to now ("3 years now", "a few months now").
_TIME_RE = re.compile(
    rf"\b(?:{_MONTHS}|{_DAYS})\b"
    r"|(?i:\b(?:yesterday|today|tonight|tomorrow|ago|recently|lately|weekend"
    r"|(?:last|next|this|past|coming) (?:week|month|year|night|weekend|summer|winter"
    r"|spring|fall|autumn|time|few (?:days|weeks|months))"
    r"|(?:last|next|this|past|coming) (?:mon|tues?|wed|thu(?:rs?)?|fri|sat|sun))\b)"
    r"|\b(?:19|20)\d{2}\b|\b\d{1,2}/\d{1,2}(?:/\d{2,4})?\b"
)
#: The rarer forms, searched only in a text holding "since" or "now" (the number
#: words at every position would double the cost of :data:`_TIME_RE` on every text).
_SINCE_NOW_RE = re.compile(
    r"(?i:\bsince (?:(?:we|i|you|they) )?last\b"
    r"|\b(?:\d+|an?|one|two|three|four|five|six|seven|eight|nine|ten|several|(?:a )?few"
    r"|(?:a )?couple(?: of)?) (?:days?|weeks?|months?|years?|decades?) now\b)"
)
#: Both time patterns, as Arrow's RE2 runs them on ASCII texts, where they match
#: exactly as here (no ``\s``; ``\b``, ``\d`` and ``(?i:)`` agree on ASCII):
#: a text matching either is what :func:`mentions_time` says places itself in time.
TIME_PATTERNS = (_TIME_RE.pattern, _SINCE_NOW_RE.pattern)
#: A question that asks when something happened.
_WHEN_RE = re.compile(
    r"(?i)\bwhen\b|\bwhat (?:year|month|day|date|time|week)\b|\bhow long ago\b"
    r"|\bwhich (?:year|month|day|week)\b"
)


#: Every match of ``_TIME_RE`` holds one of these words (lower-cased), "19", "20" or "/":
#: a text with neither is not searched (the regex is the dearer test, and most texts
#: have none).
TIME_WORDS = frozenset(
    w.lower()
    for w in (
        _MONTHS.split("|")
        + _DAYS.split("|")
        + ["yesterday", "today", "tonight", "tomorrow", "ago", "recently", "lately", "weekend"]
        + ["last", "next", "this", "past", "coming", "since", "now"]
    )
)
#: Version of what the indexer reads from a text (the time, speaker and question
#: rules above): a saved keyword index read by other rules is rebuilt, not trusted.
FACTS_VERSION = 3


def mentions_time(content: str | None) -> bool:
    """Whether a turn places something in time ("yesterday", "last May", "2023")."""
    text = content or ""
    return mentions_time_in(text, WORD_RE.findall(text.lower()))


def mentions_time_in(text: str, words: list[str]) -> bool:
    """:func:`mentions_time` of ``text`` whose lower-cased words are ``words``."""
    # a year starts "19" or "20", a date holds "/": substring tests, no regex
    if "/" not in text and "19" not in text and "20" not in text and TIME_WORDS.isdisjoint(words):
        return False
    if _TIME_RE.search(text):
        return True
    return ("since" in words or "now" in words) and bool(_SINCE_NOW_RE.search(text))


def time_match(text: str) -> bool:
    """Whether the time expressions match ``text``, without the cheap pre-check of
    :func:`mentions_time_in` (what it must always agree with; tests compare them)."""
    return bool(_TIME_RE.search(text) or _SINCE_NOW_RE.search(text))


def question_share(content: str | None) -> float:
    """How much of a text asks: the share of its words in sentences that end with
    "?" (0: none; 1: a text that only asks).  A question rarely holds its own
    answer, but "We moved the API to port 8443. Can you update nginx?" states one
    before it asks, and a 3k-character answer ending with "Shall I open the PR?"
    is mostly telling: whether a text merely ends with "?" says neither.

    A sentence ends at ".", "!" or "?" before a space or a line break (``\r\n`` too:
    text pasted from Windows), and at a line break.  Only the question marks are visited (a few string searches each, no
    pass over every sentence): 1 us for a short turn, ~15 us for 2.6k characters.
    """
    if not content or "?" not in content:
        return 0.0
    text = content.strip()
    asked = 0
    mark = text.find("?")
    while mark != -1:
        stop = mark + 1
        if stop == len(text) or text[stop] in " \t\r\n":  # this "?" ends a sentence
            start = max(
                text.rfind(". ", 0, mark),
                text.rfind("! ", 0, mark),
                text.rfind("? ", 0, mark),
                text.rfind("\n", 0, mark),
            )
            asked += len(text[start + 1 : stop].split())
        mark = text.find("?", stop)
    total = len(text.split())
    return asked / total if total else 0.0


def asks_when(query: str) -> bool:
    """Whether a question asks when ("When did ...", "What year ...")."""
    return bool(_WHEN_RE.search(query))


_EPOCH = datetime(1970, 1, 1)
_MICROSECOND = timedelta(microseconds=1)
#: The order of a document without a time: before every dated one.
NO_TIME = -(2**62)


def micros(value: Any) -> int:
    """A ``created_at`` as an orderable integer: microseconds since 1970 for a
    datetime (aware ones in UTC), the number itself for a number, very early for None."""
    if value is None:
        return NO_TIME
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(timezone.utc).replace(tzinfo=None)
        return (value - _EPOCH) // _MICROSECOND
    if isinstance(value, date):
        return (datetime.combine(value, datetime.min.time()) - _EPOCH) // _MICROSECOND
    return int(value)


#: Microseconds in a day: ``created`` (as :func:`micros`) // this is a day number.
DAY_MICROS = 86_400_000_000
#: The said-days span of a document that places nothing in time (overlaps no period).
NO_DAY_FROM = np.iinfo(np.int32).max
NO_DAY_TO = np.iinfo(np.int32).min


def said_days(text: str, created: int) -> tuple[int, int]:
    """The days (since 1970) a text places something in, read against its time of
    writing ``created`` (:func:`micros`): the first day and the day after the
    last of every period it names (:func:`nbmemory.retrieval.dates.periods_of`)."""
    at = None if created == NO_TIME else _EPOCH + timedelta(microseconds=created)
    periods = [p for p in periods_of(text, at) if not p.any_year]
    if not periods:
        return NO_DAY_FROM, NO_DAY_TO
    epoch = _EPOCH.date()
    return (
        (min(p.start for p in periods) - epoch).days,
        (max(p.end for p in periods) - epoch).days,
    )


@dataclass(frozen=True)
class DocumentFacts:
    """Per-document arrays for a list of ids (:meth:`KeywordIndex.facts`)."""

    lengths: np.ndarray
    question: np.ndarray
    timed: np.ndarray
    speakers: np.ndarray
    sessions: np.ndarray
    created_days: np.ndarray
    said_from: np.ndarray
    said_to: np.ndarray
