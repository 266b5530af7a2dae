"""Scheduled tasks: prompts an agent runs on a schedule (cron or plain English).

Nothing runs by itself: an agent or notebook calls :meth:`Scheduler.run_due`
(with an injectable ``now``), which fires each due task once per due time, even
when called twice or from two threads (the row is claimed by a conditional
update first, so delivery is at most once).  Missed due times are coalesced into
one firing, and a one-shot task deletes itself when it fires.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from typing import Any

import pandas as pd

from ..core import Core
from ..errors import InvalidInput, TaskNotFound
from ..event_rows import new_id
from ..validation import (
    check_name,
    check_text,
    is_one_of,
    shown,
    to_utc,
    utcnow,
)
from .cron import NoNextRun, next_run, parse_schedule

log = logging.getLogger(__name__)

TASK_SOURCES = ("tool", "config")


class Scheduler:
    """Create, list, pause, resume, delete and fire scheduled tasks (``mem.tasks``)."""

    def __init__(self, core: Core) -> None:
        self.core = core

    def schedule(
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

        ``trusted`` tasks skip terminal approval; the flag is stored and reported
        as ``is_trusted``.  ``source`` is ``"tool"`` or ``"config"``.
        """
        name = check_name(name, "name")
        prompt = check_text(
            prompt,
            "prompt",
            max_bytes=self.core.settings.max_content_bytes,
            setting="max_content_bytes",
        )
        if not isinstance(trusted, bool):
            raise InvalidInput(f"trusted must be True or False, got {shown(trusted)}")
        if not is_one_of(source, TASK_SOURCES):
            raise InvalidInput(
                f"source must be one of {', '.join(TASK_SOURCES)}, got {shown(source)}"
            )
        ns = self.core.ns(namespace)
        now = _now(now)
        parsed = parse_schedule(schedule, now)
        task = {
            "id": new_id(),
            "namespace": ns,
            "name": name,
            "cron_expr": parsed.cron_expr,
            "original_schedule": parsed.original,
            "prompt": prompt,
            "source": source,
            "is_oneshot": parsed.is_oneshot,
            "is_paused": False,
            "is_trusted": trusted,
            "next_run_at": parsed.next_run_at,
            "last_run_at": None,
            "created_at": now,
            "updated_at": now,
        }
        with self.core.writer.transaction() as tx:
            tx.tasks.add(task)
            tx.audit(
                "schedule_task",
                [task["id"]],
                ns,
                {"name": name, "cron": parsed.cron_expr, "oneshot": parsed.is_oneshot},
            )
        return self.get(task["id"], namespace=ns)

    def get(self, task_id: str, *, namespace: str | None = None) -> dict[str, Any]:
        """One scheduled task as a dict; :class:`~nbmemory.errors.TaskNotFound` when there is none."""
        ns = self.core.ns(namespace)
        task = self.core.store.tasks.get(check_name(task_id, "task_id"), ns)
        if task is None:
            raise TaskNotFound(task_id, ns)
        return task

    def pause(self, task_id: str, *, namespace: str | None = None) -> dict[str, Any]:
        """Stop a task from firing until :meth:`resume`."""
        return self._set_paused(task_id, True, None, namespace)

    def resume(
        self, task_id: str, *, now: Any = None, namespace: str | None = None
    ) -> dict[str, Any]:
        """Let a paused task fire again; a recurring one restarts from ``now`` (no burst
        of missed runs), a one-shot keeps its time (fires at once if it is past)."""
        return self._set_paused(task_id, False, _now(now), namespace)

    def _set_paused(
        self, task_id: str, paused: bool, now: dt.datetime | None, namespace: str | None
    ) -> dict[str, Any]:
        ns = self.core.ns(namespace)
        task = self.get(task_id, namespace=ns)
        next_at = task["next_run_at"]
        if now is not None and task["is_paused"] and not task["is_oneshot"]:
            try:
                next_at = next_run(task["cron_expr"], now)
            except InvalidInput as exc:  # stored by an older version, or imported so
                raise InvalidInput(
                    f"task {task['name']!r} ({task['id']}) cannot resume: {exc}; delete it "
                    "and schedule it again"
                ) from None
        with self.core.writer.transaction() as tx:
            tx.tasks.set_paused(task["id"], ns, paused, next_at, utcnow())
            tx.audit("pause_task" if paused else "resume_task", [task["id"]], ns)
        return self.get(task["id"], namespace=ns)

    def delete(self, task_id: str, *, namespace: str | None = None) -> bool:
        """Remove a task; True if it existed."""
        ns = self.core.ns(namespace)
        task_id = check_name(task_id, "task_id")
        with self.core.writer.transaction() as tx:
            deleted = tx.tasks.delete(task_id, ns)
            if deleted:
                tx.audit("delete_task", [task_id], ns)
        return deleted

    def due(self, now: Any = None, *, namespace: str | None = None) -> pd.DataFrame:
        """Unpaused tasks whose ``next_run_at`` is at or before ``now`` (default: the clock)."""
        return self.core.store.tasks.frame(self.core.ns(namespace), due_by=_now(now))

    def run_due(
        self,
        callback: Callable[[dict[str, Any]], Any],
        now: Any = None,
        *,
        approve: Callable[[dict[str, Any]], bool] | None = None,
        namespace: str | None = None,
    ) -> list[dict[str, Any]]:
        """Fire every due task once: ``callback(task)`` per task; returns what happened.

        Each task is claimed before its callback runs (its ``next_run_at`` moves to
        the next cron time after ``now``, or a one-shot row is deleted), so calling
        this twice for the same due time fires nothing the second time.  A callback
        that raises does not stop the others; its error is in the result's ``error``.
        Neither does a task whose stored cron never fires or is not cron (kept by an
        older version, or imported from another agent's database): it is paused,
        audited as ``pause_task`` with the reason, and reported with that ``error``
        (``result`` None, its callback not called).

        ``approve(task) -> bool`` gates the tasks that are not trusted (the Rust
        agent's "trusted tasks skip approval"): asked after the claim, a False (or an
        approver that raises) skips this run, audited as ``deny_task``, with
        ``approved`` False in the result; trusted tasks run without asking
        (``approved`` True).  Without an approver every due task runs (``approved``
        None).
        """
        if not callable(callback):
            raise InvalidInput(f"callback must be callable, got {type(callback).__name__}")
        if approve is not None and not callable(approve):
            raise InvalidInput(f"approve must be callable or None, got {type(approve).__name__}")
        ns = self.core.ns(namespace)
        now = _now(now)
        fired: list[dict[str, Any]] = []
        for task in self.due(now, namespace=ns).to_dict(orient="records"):
            due_at = pd.Timestamp(task["next_run_at"]).to_pydatetime()
            run = {**task, "due_at": due_at, "fired_at": now}
            try:
                following = None if task["is_oneshot"] else next_run(task["cron_expr"], now)
            except NoNextRun:  # its last run: no later time a date can hold
                following = None
            except InvalidInput as exc:
                fired.append({**self._set_aside(run, str(exc), ns), "approved": None})
                continue
            with self.core.writer.transaction() as tx:
                claimed = tx.tasks.claim(task["id"], due_at, next_run_at=following, now=now)
                if claimed:
                    tx.audit("run_task", [task["id"]], ns, {"due_at": due_at.isoformat()})
            if not claimed:
                continue  # fired by another caller meanwhile
            approved = self._approved(approve, run, ns)
            if approved is False:
                fired.append({**_outcome(run), "approved": False})
                continue
            fired.append({**_fire(callback, run), "approved": approved})
        return fired

    def _set_aside(self, task: dict[str, Any], problem: str, ns: str) -> dict[str, Any]:
        """Pause a due task that cannot be scheduled again (its stored cron is bad),
        audited with the reason; its outcome, with that reason as the ``error``."""
        reason = f"{problem}; the task is paused: delete it and schedule it again"
        log.error("scheduled task %s (%s) paused: %s", task["name"], task["id"], reason)
        with self.core.writer.transaction() as tx:
            tx.tasks.set_paused(task["id"], ns, True, task["due_at"], utcnow())
            tx.audit("pause_task", [task["id"]], ns, {"reason": reason})
        return {**_outcome(task), "error": reason}

    def _approved(
        self, approve: Callable[[dict[str, Any]], bool] | None, task: dict[str, Any], ns: str
    ) -> bool | None:
        """True (trusted, or approved), False (denied: audited) or None (no approver)."""
        if task["is_trusted"]:
            return True
        if approve is None:
            return None
        try:
            verdict = approve(dict(task)) is True
            reason = None if verdict else "not approved"
        except Exception as exc:
            verdict, reason = False, f"the approver raised {type(exc).__name__}: {exc}"
        if not verdict:
            with self.core.writer.transaction() as tx:
                tx.audit("deny_task", [task["id"]], ns, {"reason": reason})
        return verdict

    def list(self, *, namespace: str | None = None) -> pd.DataFrame:
        """Every task of the namespace, next to run first."""
        return self.core.store.tasks.frame(self.core.ns(namespace))


def _outcome(task: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": task["id"],
        "name": task["name"],
        "prompt": task["prompt"],
        "is_trusted": bool(task["is_trusted"]),
        "due_at": task["due_at"],
        "fired_at": task["fired_at"],
        "result": None,
        "error": None,
    }


def _fire(callback: Callable[[dict[str, Any]], Any], task: dict[str, Any]) -> dict[str, Any]:
    outcome = _outcome(task)
    try:
        outcome["result"] = callback(task)
    except Exception as exc:
        log.exception("scheduled task %s (%s) failed", task["name"], task["id"])
        outcome["error"] = f"{type(exc).__name__}: {exc}"
    return outcome


def _now(now: Any) -> dt.datetime:
    return utcnow() if now is None else to_utc(now, "now")
