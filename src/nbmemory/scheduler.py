"""Scheduled tasks (seed 000): prompts an agent runs on a schedule.

A schedule is a 5-field cron expression (``"30 8 * * 1"``) or plain English:

* recurring — ``every minute``, ``every 15 minutes``, ``every hour``, ``every 2 hours``,
  ``every day at 9am``, ``daily at 18:30``, ``every weekday at 8``, ``every weekend
  at 10am``, ``every monday at 8:30``, ``every monday and friday at noon``, ``every 3
  days at 7pm``, ``every month on the 1st at 9am``, ``monthly``, ``@daily`` ...;
* one-shot — ``in 30 minutes``, ``in 2 hours``, ``in 1 day``, ``at 5pm`` (the next
  5pm), ``today at 17:00``, ``tomorrow at 9am``.

Both the original text and the computed cron are stored; ``next_run_at`` comes from
croniter.  Times are UTC, like every timestamp of the store.  Nothing runs by
itself: an agent or notebook calls :meth:`SchedulerMixin.run_due` (with an
injectable ``now``), which fires each due task once per due time, even when called
twice or from two threads (the row is claimed by a conditional update first, so
delivery is at most once).  Missed due times are coalesced into one firing, and
a one-shot task deletes itself when it fires.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd
from croniter import croniter

from . import events as ev
from .errors import InvalidInput

log = logging.getLogger(__name__)

TASK_COLUMNS = [
    "id",
    "name",
    "cron_expr",
    "original_schedule",
    "prompt",
    "source",
    "is_oneshot",
    "is_paused",
    "is_trusted",
    "next_run_at",
    "last_run_at",
    "created_at",
    "updated_at",
]
TASK_SOURCES = ("tool", "config")

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
    """The first time strictly after ``after`` that ``cron_expr`` matches (croniter)."""
    return croniter(cron_expr, after).get_next(dt.datetime)


def parse_schedule(text: Any, now: dt.datetime) -> Schedule:
    """Turn cron or plain English into a :class:`Schedule` (see the module doc).

    :class:`InvalidInput` names the part that was not understood.
    """
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput(f"schedule must be a cron expression or text, got {text!r}")
    original = text.strip()
    words = " ".join(original.lower().replace(",", " , ").split()).replace(" , ", ", ")
    if words in _MACROS:
        cron = _MACROS[words]
        return Schedule(original, cron, False, next_run(cron, now))
    fields = words.split()
    if fields and re.match(r"^[0-9*]", fields[0]) and all(_CRON_FIELD.match(f) for f in fields):
        cron = _check_cron(original, fields)
        return Schedule(original, cron, False, next_run(cron, now))
    once = _parse_oneshot(words, original, now)
    if once is not None:
        return once
    cron = _parse_recurring(words, original)
    return Schedule(original, cron, False, next_run(cron, now))


def _check_cron(original: str, fields: list[str]) -> str:
    if len(fields) != 5:
        raise InvalidInput(
            f"cron expression {original!r} has {len(fields)} fields; use 5: "
            "minute hour day-of-month month day-of-week (e.g. '30 8 * * 1')"
        )
    expr = " ".join(fields)
    try:
        croniter(expr)
    except (ValueError, KeyError) as exc:
        raise InvalidInput(f"cron expression {original!r} is not valid: {exc}") from None
    return expr


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
        when = now + dt.timedelta(minutes=amount * _UNITS[match.group(2)])
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


def _task_id(task_id: Any) -> str:
    return ev.check_name(task_id, "task_id")


class SchedulerMixin:
    """Scheduled-task methods of :class:`nbmemory.Memory`."""

    def schedule_task(
        self,
        name: str,
        schedule: str,
        prompt: str,
        *,
        trusted: bool = False,
        source: str = "tool",
        now: Any = None,
        namespace: str | None = None,
    ) -> dict[str, Any]:
        """Create a task that runs ``prompt`` on ``schedule`` (cron or English); returns it.

        ``trusted`` tasks skip terminal approval (seed 000); the flag is stored and
        reported as ``is_trusted``.  ``source`` is ``"tool"`` or ``"config"``.
        """
        self._check_open()
        name = ev.check_name(name, "name")
        prompt = ev.check_text(prompt, "prompt", max_bytes=self._settings.max_content_bytes)
        if not isinstance(trusted, bool):
            raise InvalidInput(f"trusted must be True or False, got {trusted!r}")
        if source not in TASK_SOURCES:
            raise InvalidInput(f"source must be one of {', '.join(TASK_SOURCES)}, got {source!r}")
        ns = self._ns(namespace)
        now = _now(now)
        parsed = parse_schedule(schedule, now)
        task_id = ev.new_id()
        self.store.execute(
            f"INSERT INTO scheduled_tasks ({', '.join(TASK_COLUMNS)}, namespace)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, false, ?, ?, NULL, ?, ?, ?)",
            [
                task_id,
                name,
                parsed.cron_expr,
                parsed.original,
                prompt,
                source,
                parsed.is_oneshot,
                trusted,
                parsed.next_run_at,
                now,
                now,
                ns,
            ],
        )
        self._audit(
            "schedule_task",
            [task_id],
            ns,
            {"name": name, "cron": parsed.cron_expr, "oneshot": parsed.is_oneshot},
        )
        return self.get_task(task_id, namespace=ns)

    def get_task(self, task_id: str, *, namespace: str | None = None) -> dict[str, Any]:
        """One scheduled task as a dict; :class:`InvalidInput` when there is none."""
        self._check_open()
        ns = self._ns(namespace)
        rows = self.store.records(
            f"SELECT {', '.join(TASK_COLUMNS)} FROM scheduled_tasks WHERE id = ? AND namespace = ?",
            [_task_id(task_id), ns],
        )
        if not rows:
            raise InvalidInput(
                f"no scheduled task with id {task_id!r} in namespace {ns!r}; "
                "see mem.scheduled_tasks()"
            )
        return rows[0]

    def scheduled_tasks(self, *, namespace: str | None = None) -> pd.DataFrame:
        """Every task of the namespace, next to run first."""
        self._check_open()
        return self.store.df(
            f"SELECT {', '.join(TASK_COLUMNS)} FROM scheduled_tasks WHERE namespace = ?"
            " ORDER BY next_run_at, name, id",
            [self._ns(namespace)],
        )

    def pause_task(self, task_id: str, *, namespace: str | None = None) -> dict[str, Any]:
        """Stop a task from firing until :meth:`resume_task`."""
        return self._set_paused(task_id, True, None, namespace)

    def resume_task(
        self, task_id: str, *, now: Any = None, namespace: str | None = None
    ) -> dict[str, Any]:
        """Let a paused task fire again; a recurring one restarts from ``now`` (no burst
        of missed runs), a one-shot keeps its time (fires at once if it is past)."""
        return self._set_paused(task_id, False, _now(now), namespace)

    def _set_paused(
        self, task_id: str, paused: bool, now: dt.datetime | None, namespace: str | None
    ) -> dict[str, Any]:
        self._check_open()
        ns = self._ns(namespace)
        task = self.get_task(task_id, namespace=ns)
        next_at = task["next_run_at"]
        if now is not None and task["is_paused"] and not task["is_oneshot"]:
            next_at = next_run(task["cron_expr"], now)
        self.store.execute(
            "UPDATE scheduled_tasks SET is_paused = ?, next_run_at = ?, updated_at = ?"
            " WHERE id = ? AND namespace = ?",
            [paused, next_at, ev.utcnow(), task["id"], ns],
        )
        self._audit("pause_task" if paused else "resume_task", [task["id"]], ns)
        return self.get_task(task["id"], namespace=ns)

    def delete_task(self, task_id: str, *, namespace: str | None = None) -> bool:
        """Remove a task; True if it existed."""
        self._check_open()
        ns = self._ns(namespace)
        rows = self.store.fetchall(
            "DELETE FROM scheduled_tasks WHERE id = ? AND namespace = ? RETURNING id",
            [_task_id(task_id), ns],
        )
        if rows:
            self._audit("delete_task", [rows[0][0]], ns)
        return bool(rows)

    def due_tasks(self, now: Any = None, *, namespace: str | None = None) -> pd.DataFrame:
        """Unpaused tasks whose ``next_run_at`` is at or before ``now`` (default: the clock)."""
        self._check_open()
        return self.store.df(
            f"SELECT {', '.join(TASK_COLUMNS)} FROM scheduled_tasks WHERE namespace = ?"
            " AND NOT is_paused AND next_run_at <= ? ORDER BY next_run_at, name, id",
            [self._ns(namespace), _now(now)],
        )

    def run_due(
        self,
        callback: Callable[[dict[str, Any]], Any],
        now: Any = None,
        *,
        namespace: str | None = None,
    ) -> list[dict[str, Any]]:
        """Fire every due task once: ``callback(task)`` per task; returns what happened.

        Each task is claimed before its callback runs (its ``next_run_at`` moves to
        the next cron time after ``now``, or a one-shot row is deleted), so calling
        this twice for the same due time fires nothing the second time.  A callback
        that raises does not stop the others; its error is in the result's ``error``.
        """
        self._check_open()
        if not callable(callback):
            raise InvalidInput(f"callback must be callable, got {type(callback).__name__}")
        ns = self._ns(namespace)
        now = _now(now)
        fired: list[dict[str, Any]] = []
        for task in self.due_tasks(now, namespace=ns).to_dict(orient="records"):
            due_at = pd.Timestamp(task["next_run_at"]).to_pydatetime()
            if task["is_oneshot"]:
                claimed = self.store.fetchall(
                    "DELETE FROM scheduled_tasks WHERE id = ? AND next_run_at = ?"
                    " AND NOT is_paused RETURNING id",
                    [task["id"], due_at],
                )
            else:
                claimed = self.store.fetchall(
                    "UPDATE scheduled_tasks SET next_run_at = ?, last_run_at = ?, updated_at = ?"
                    " WHERE id = ? AND next_run_at = ? AND NOT is_paused RETURNING id",
                    [next_run(task["cron_expr"], now), now, now, task["id"], due_at],
                )
            if not claimed:
                continue  # fired by another caller meanwhile
            self._audit("run_task", [task["id"]], ns, {"due_at": due_at.isoformat()})
            task = {**task, "due_at": due_at, "fired_at": now}
            outcome: dict[str, Any] = {
                "id": task["id"],
                "name": task["name"],
                "prompt": task["prompt"],
                "is_trusted": bool(task["is_trusted"]),
                "due_at": due_at,
                "fired_at": now,
                "result": None,
                "error": None,
            }
            try:
                outcome["result"] = callback(task)
            except Exception as exc:
                log.exception("scheduled task %s (%s) failed", task["name"], task["id"])
                outcome["error"] = f"{type(exc).__name__}: {exc}"
            fired.append(outcome)
        return fired


def _now(now: Any) -> dt.datetime:
    return ev.utcnow() if now is None else ev.to_utc(now, "now")
