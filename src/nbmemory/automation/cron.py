"""Schedules in cron or plain English, turned into a cron expression and a next run.

A schedule is a 5-field cron expression (``"30 8 * * 1"``) or plain English:

* recurring — ``every minute``, ``every 15 minutes``, ``every hour``, ``every 2 hours``,
  ``every day at 9am``, ``daily at 18:30``, ``every weekday at 8``, ``every weekend
  at 10am``, ``every monday at 8:30``, ``every monday and friday at noon``, ``every 3
  days at 7pm``, ``every month on the 1st at 9am``, ``monthly``, ``@daily`` ...;
* one-shot — ``in 30 minutes``, ``in 2 hours``, ``in 1 day``, ``at 5pm`` (the next
  5pm), ``today at 17:00``, ``tomorrow at 9am``.

Both the original text and the computed cron are stored; ``next_run_at`` comes from
croniter.  Times are UTC, like every timestamp of the store.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidInput
from ..validation import check_cron, shown

_DAYS = {
    "sunday": 0,
    "sun": 0,
    "monday": 1,
    "mon": 1,
    "tuesday": 2,
    "tue": 2,
    "tues": 2,
    "wednesday": 3,
    "wed": 3,
    "thursday": 4,
    "thu": 4,
    "thur": 4,
    "thurs": 4,
    "friday": 5,
    "fri": 5,
    "saturday": 6,
    "sat": 6,
}
_UNITS = {"minute": 1, "min": 1, "hour": 60, "day": 1440, "week": 10080}
_MACROS = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}
_CRON_FIELD = re.compile(r"^[0-9*/,\-?a-z]+$")
_TIME = re.compile(r"^(\d{1,2})(?:[:.h](\d{2}))?\s*(am|pm|a\.m\.|p\.m\.)?$")
_COUNT = r"(\d+|a|an|one)"


@dataclass(frozen=True)
class Schedule:
    """A parsed schedule: the cron to store, whether it fires once, and its first run."""

    original: str
    cron_expr: str
    is_oneshot: bool
    next_run_at: dt.datetime


def next_run(cron_expr: str, after: dt.datetime) -> dt.datetime:
    """The first time strictly after ``after`` that ``cron_expr`` matches (croniter).

    :class:`InvalidInput` when it never matches or is not cron (a task stored by an
    older version, or imported from another agent's database, may hold one).
    """
    # here, not at import: 8 ms that a store without schedules need not pay
    from croniter import croniter

    try:
        return croniter(cron_expr, after).get_next(dt.datetime)
    except OverflowError:
        raise NoNextRun(
            f"schedule {cron_expr!r} has no run after {after:%Y-%m-%d %H:%M} before the year 10000"
        ) from None
    except (ValueError, KeyError, TypeError, AttributeError):
        check_cron(cron_expr)  # raises InvalidInput saying what is wrong with it
        raise


class NoNextRun(InvalidInput):
    """A schedule whose next time is past the last one a date can hold (9999-12-31)."""


def parse_schedule(text: Any, now: dt.datetime) -> Schedule:
    """Turn cron or plain English into a :class:`Schedule` (see the module doc).

    :class:`InvalidInput` names the part that was not understood.
    """
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput(f"schedule must be a cron expression or text, got {shown(text)}")
    original = text.strip()
    words = " ".join(original.lower().replace(",", " , ").split()).replace(" , ", ", ")
    if words in _MACROS:
        cron = _MACROS[words]
        return Schedule(original, cron, False, next_run(cron, now))
    fields = original.lower().split()  # (not ``words``: '1,5' is one field of a cron)
    if fields and re.match(r"^[0-9*]", fields[0]) and all(_CRON_FIELD.match(f) for f in fields):
        cron = check_cron(original.lower())
        return Schedule(original, cron, False, next_run(cron, now))
    once = _parse_oneshot(words, original, now)
    if once is not None:
        return once
    cron = _parse_recurring(words, original)
    return Schedule(original, cron, False, next_run(cron, now))


def _parse_time(text: str, original: str) -> tuple[int, int]:
    text = text.strip()
    if text == "noon":
        return 12, 0
    if text == "midnight":
        return 0, 0
    match = _TIME.match(text)
    if not match:
        raise InvalidInput(
            f"could not understand the time {text!r} in schedule {original!r}; "
            "write it like 9am, 8:30, 18:45 or noon"
        )
    hour, minute = int(match.group(1)), int(match.group(2) or 0)
    meridiem = (match.group(3) or "").replace(".", "")
    if meridiem:
        if not 1 <= hour <= 12:
            raise InvalidInput(f"the time {text!r} in schedule {original!r} is not a valid time")
        hour = hour % 12 + (12 if meridiem == "pm" else 0)
    if hour > 23 or minute > 59:
        raise InvalidInput(f"the time {text!r} in schedule {original!r} is not a valid time")
    return hour, minute


def _split_at(words: str, original: str) -> tuple[str, tuple[int, int] | None]:
    head, sep, tail = words.partition(" at ")
    if not sep:
        return words, None
    return head.strip(), _parse_time(tail, original)


def _count(word: str) -> int:
    return 1 if word in ("a", "an", "one") else int(word)


def _parse_oneshot(words: str, original: str, now: dt.datetime) -> Schedule | None:
    match = re.fullmatch(rf"in {_COUNT} (minute|min|hour|day|week)s?", words)
    if match:
        amount = _count(match.group(1))
        if amount < 1:
            raise InvalidInput(f"schedule {original!r}: the delay must be at least 1")
        try:
            when = now + dt.timedelta(minutes=amount * _UNITS[match.group(2)])
        except OverflowError:
            raise InvalidInput(
                f"schedule {original!r}: the delay reaches past the year 9999"
            ) from None
        return Schedule(original, _cron_at(when), True, when)
    if words.startswith("in "):
        raise InvalidInput(
            f"could not understand {words[3:]!r} in schedule {original!r}; "
            "write a delay like 'in 30 minutes', 'in 2 hours' or 'in 1 day'"
        )
    match = re.fullmatch(r"(?:(today|tomorrow) )?at (.+)", words)
    if not match:
        if words in ("today", "tomorrow"):
            raise InvalidInput(f"schedule {original!r} needs a time: '{words} at 9am'")
        return None
    hour, minute = _parse_time(match.group(2), original)
    day = now.date() + dt.timedelta(days=1 if match.group(1) == "tomorrow" else 0)
    when = dt.datetime.combine(day, dt.time(hour, minute))
    if when <= now:
        if match.group(1) == "today":
            raise InvalidInput(f"schedule {original!r} is already past ({now:%H:%M} UTC now)")
        when += dt.timedelta(days=1)
    return Schedule(original, _cron_at(when), True, when)


def _cron_at(when: dt.datetime) -> str:
    return f"{when.minute} {when.hour} {when.day} {when.month} *"


def _days(text: str, original: str) -> str:
    parts = [p for p in re.split(r"\s*(?:,|\band\b)\s*", text) if p]
    numbers = []
    for part in parts:
        name = part[:-1] if part.endswith("s") and part[:-1] in _DAYS else part
        if name not in _DAYS:
            raise InvalidInput(
                f"could not understand {part!r} in schedule {original!r}; "
                "expected a weekday such as monday, or day, weekday, hour, 15 minutes"
            )
        numbers.append(_DAYS[name])
    return ",".join(str(n) for n in sorted(set(numbers)))


def _parse_recurring(words: str, original: str) -> str:
    if words in ("hourly", "every hour"):
        return "0 * * * *"
    if words in ("every minute", "minutely"):
        return "* * * * *"
    head, time = _split_at(words, original)
    hour, minute = time if time is not None else (0, 0)
    if head in ("daily", "every day", "everyday"):
        return f"{minute} {hour} * * *"
    if head in ("weekly",):
        return f"{minute} {hour} * * 0"
    if head in ("monthly",):
        return f"{minute} {hour} 1 * *"
    if not head.startswith("every "):
        raise InvalidInput(
            f"could not understand the schedule {original!r}; use a 5-field cron "
            "('0 9 * * *') or text like 'every day at 9am', 'every monday at 8:30', "
            "'every 2 hours', 'in 30 minutes'"
        )
    rest = head[len("every ") :]
    match = re.fullmatch(rf"{_COUNT} (minute|min|hour|day)s?", rest)
    if match:
        amount, unit = _count(match.group(1)), match.group(2)
        limits = {"minute": 59, "min": 59, "hour": 23, "day": 31}
        if not 1 <= amount <= limits[unit]:
            raise InvalidInput(
                f"schedule {original!r}: every {amount} {unit}s cannot be written as cron "
                f"(use 1 to {limits[unit]})"
            )
        if unit in ("minute", "min"):
            if time is not None:
                raise InvalidInput(f"schedule {original!r}: 'at' makes no sense with minutes")
            return f"*/{amount} * * * *"
        if unit == "hour":
            if time is not None:
                raise InvalidInput(f"schedule {original!r}: 'at' makes no sense with hours")
            return "0 * * * *" if amount == 1 else f"0 */{amount} * * *"
        return f"{minute} {hour} */{amount} * *" if amount > 1 else f"{minute} {hour} * * *"
    if rest in ("weekday", "weekdays"):
        return f"{minute} {hour} * * 1-5"
    if rest in ("weekend", "weekends"):
        return f"{minute} {hour} * * 0,6"
    match = re.fullmatch(r"month(?: on the (\d{1,2})(?:st|nd|rd|th)?)?", rest)
    if match:
        day = int(match.group(1) or 1)
        if not 1 <= day <= 31:
            raise InvalidInput(f"schedule {original!r}: day {day} of the month does not exist")
        return f"{minute} {hour} {day} * *"
    if rest == "week":
        return f"{minute} {hour} * * 0"
    return f"{minute} {hour} * * {_days(rest, original)}"
