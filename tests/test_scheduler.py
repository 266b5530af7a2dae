"""Scheduled tasks: cron and plain English, next_run_at, pause/resume, run_due with a clock."""

from __future__ import annotations

import datetime as dt
import threading

import pytest

from nbmemory import InvalidInput, Memory
from nbmemory.automation.cron import parse_schedule

# Wednesday 2024-05-08 10:15 UTC
NOW = dt.datetime(2024, 5, 8, 10, 15)


@pytest.mark.parametrize(
    "text, cron, first",
    [
        ("0 9 * * *", "0 9 * * *", dt.datetime(2024, 5, 9, 9, 0)),
        ("30 8 * * MON", "30 8 * * mon", dt.datetime(2024, 5, 13, 8, 30)),
        ("@hourly", "0 * * * *", dt.datetime(2024, 5, 8, 11, 0)),
        ("every day at 9am", "0 9 * * *", dt.datetime(2024, 5, 9, 9, 0)),
        ("Every day at 11:30", "30 11 * * *", dt.datetime(2024, 5, 8, 11, 30)),
        ("daily at 6:45 pm", "45 18 * * *", dt.datetime(2024, 5, 8, 18, 45)),
        ("every monday at 8:30", "30 8 * * 1", dt.datetime(2024, 5, 13, 8, 30)),
        ("every Monday and Friday at noon", "0 12 * * 1,5", dt.datetime(2024, 5, 10, 12, 0)),
        ("every tuesdays at 7pm", "0 19 * * 2", dt.datetime(2024, 5, 14, 19, 0)),
        ("every weekday at 8", "0 8 * * 1-5", dt.datetime(2024, 5, 9, 8, 0)),
        ("every weekend at 10am", "0 10 * * 0,6", dt.datetime(2024, 5, 11, 10, 0)),
        ("every 2 hours", "0 */2 * * *", dt.datetime(2024, 5, 8, 12, 0)),
        ("every hour", "0 * * * *", dt.datetime(2024, 5, 8, 11, 0)),
        ("every 15 minutes", "*/15 * * * *", dt.datetime(2024, 5, 8, 10, 30)),
        ("every minute", "* * * * *", dt.datetime(2024, 5, 8, 10, 16)),
        ("every 3 days at 7pm", "0 19 */3 * *", dt.datetime(2024, 5, 10, 19, 0)),
        ("every month on the 1st at 9am", "0 9 1 * *", dt.datetime(2024, 6, 1, 9, 0)),
        ("monthly", "0 0 1 * *", dt.datetime(2024, 6, 1, 0, 0)),
    ],
)
def test_recurring_schedules(text, cron, first):
    parsed = parse_schedule(text, NOW)
    assert parsed.cron_expr == cron
    assert parsed.original == text
    assert parsed.is_oneshot is False
    assert parsed.next_run_at == first


@pytest.mark.parametrize(
    "text, when, cron",
    [
        ("in 30 minutes", dt.datetime(2024, 5, 8, 10, 45), "45 10 8 5 *"),
        ("in 2 hours", dt.datetime(2024, 5, 8, 12, 15), "15 12 8 5 *"),
        ("in a day", dt.datetime(2024, 5, 9, 10, 15), "15 10 9 5 *"),
        ("at 5pm", dt.datetime(2024, 5, 8, 17, 0), "0 17 8 5 *"),
        ("at 9am", dt.datetime(2024, 5, 9, 9, 0), "0 9 9 5 *"),  # 9am is past: tomorrow
        ("tomorrow at 9:30", dt.datetime(2024, 5, 9, 9, 30), "30 9 9 5 *"),
        ("today at 23:59", dt.datetime(2024, 5, 8, 23, 59), "59 23 8 5 *"),
    ],
)
def test_oneshot_schedules(text, when, cron):
    parsed = parse_schedule(text, NOW)
    assert parsed.is_oneshot is True
    assert parsed.next_run_at == when
    assert parsed.cron_expr == cron


@pytest.mark.parametrize(
    "text, named",
    [
        ("61 9 * * *", "not valid"),
        ("0 9 * *", "has 4 fields"),
        ("0 0 9 * * *", "has 6 fields"),
        ("every fortnight", "'fortnight'"),
        ("every monday at 25:00", "'25:00'"),
        ("every day at 13pm", "'13pm'"),
        ("every day at teatime", "'teatime'"),
        ("in 3 fortnights", "'3 fortnights'"),
        ("in 0 minutes", "at least 1"),
        ("every 90 minutes", "every 90 minutes"),
        ("whenever you like", "'whenever you like'"),
        ("today at 9am", "already past"),
        ("", "schedule must be"),
        (None, "schedule must be"),
    ],
)
def test_bad_schedules_name_what_was_not_understood(text, named):
    with pytest.raises(InvalidInput) as info:
        parse_schedule(text, NOW)
    assert named in str(info.value)


def test_schedule_task_stores_text_cron_and_trusted_flag(mem):
    task = mem.schedule_task(
        "standup", "every weekday at 9am", "Summarise yesterday", trusted=True, now=NOW
    )
    assert task["original_schedule"] == "every weekday at 9am"
    assert task["cron_expr"] == "0 9 * * 1-5"
    assert task["next_run_at"] == dt.datetime(2024, 5, 9, 9, 0)
    assert task["is_trusted"] is True
    assert task["is_paused"] is False
    assert task["is_oneshot"] is False
    assert task["source"] == "tool"
    frame = mem.scheduled_tasks()
    assert frame["is_trusted"].tolist() == [True]
    assert mem.get_task(task["id"])["prompt"] == "Summarise yesterday"
    assert len(mem.audit_log(action="schedule_task")) == 1


def test_schedule_task_bad_inputs(mem):
    with pytest.raises(InvalidInput, match="'fortnight'"):
        mem.schedule_task("x", "every fortnight", "p", now=NOW)
    with pytest.raises(InvalidInput, match="trusted"):
        mem.schedule_task("x", "every day", "p", trusted="yes", now=NOW)
    with pytest.raises(InvalidInput, match="source"):
        mem.schedule_task("x", "every day", "p", source="cron", now=NOW)
    with pytest.raises(InvalidInput, match="prompt"):
        mem.schedule_task("x", "every day", "", now=NOW)
    with pytest.raises(InvalidInput, match="now"):
        mem.schedule_task("x", "every day", "p", now="half past ten")
    with pytest.raises(InvalidInput, match="no scheduled task"):
        mem.get_task("missing")
    with pytest.raises(InvalidInput):
        mem.pause_task(None)
    assert mem.scheduled_tasks().empty


def test_run_due_fires_once_per_due_time(mem):
    task = mem.schedule_task("digest", "every day at 9am", "Send the digest", now=NOW)
    fired = []
    assert mem.due_tasks(NOW).empty
    assert mem.run_due(fired.append, now=NOW) == []
    due = dt.datetime(2024, 5, 9, 9, 0)
    assert list(mem.due_tasks(due)["id"]) == [task["id"]]
    results = mem.run_due(fired.append, now=due + dt.timedelta(seconds=30))
    assert [r["id"] for r in results] == [task["id"]]
    assert results[0]["due_at"] == due
    assert fired[0]["prompt"] == "Send the digest"
    # called again for the same due time: nothing fires
    assert mem.run_due(fired.append, now=due + dt.timedelta(minutes=1)) == []
    assert len(fired) == 1
    after = mem.get_task(task["id"])
    assert after["next_run_at"] == dt.datetime(2024, 5, 10, 9, 0)
    assert after["last_run_at"] == due + dt.timedelta(seconds=30)
    # the next day it fires again
    assert len(mem.run_due(fired.append, now=dt.datetime(2024, 5, 10, 9, 0))) == 1
    assert len(mem.audit_log(action="run_task")) == 2


def test_missed_runs_coalesce_into_one(mem):
    mem.schedule_task("tick", "every hour", "tick", now=NOW)
    fired = []
    later = NOW + dt.timedelta(hours=5, minutes=10)
    mem.run_due(fired.append, now=later)
    assert len(fired) == 1
    assert mem.scheduled_tasks()["next_run_at"].iloc[0] == dt.datetime(2024, 5, 8, 16, 0)


def test_oneshot_deletes_itself_after_firing(mem):
    task = mem.schedule_task("reminder", "in 30 minutes", "Stretch", now=NOW)
    assert task["is_oneshot"] is True
    assert mem.run_due(lambda t: "early", now=NOW + dt.timedelta(minutes=29)) == []
    results = mem.run_due(lambda t: t["prompt"].upper(), now=NOW + dt.timedelta(minutes=31))
    assert results[0]["result"] == "STRETCH"
    assert mem.scheduled_tasks().empty
    assert mem.run_due(lambda t: "again", now=NOW + dt.timedelta(minutes=32)) == []


def test_pause_and_resume(mem):
    task = mem.schedule_task("digest", "every day at 9am", "p", now=NOW)
    paused = mem.pause_task(task["id"])
    assert paused["is_paused"] is True
    week_later = NOW + dt.timedelta(days=7)
    assert mem.due_tasks(week_later).empty
    assert mem.run_due(lambda t: None, now=week_later) == []
    resumed = mem.resume_task(task["id"], now=week_later)
    assert resumed["is_paused"] is False
    # restarts from the resume time: no burst of the missed week
    assert resumed["next_run_at"] == dt.datetime(2024, 5, 16, 9, 0)
    assert len(mem.audit_log(action="pause_task")) == 1
    assert mem.delete_task(task["id"]) is True
    assert mem.delete_task(task["id"]) is False


def test_failing_callback_is_reported_and_others_still_fire(mem):
    mem.schedule_task("bad", "every hour", "boom", now=NOW)
    mem.schedule_task("good", "every hour", "fine", now=NOW)

    def callback(task):
        if task["name"] == "bad":
            raise RuntimeError("agent crashed")
        return "ok"

    results = {r["name"]: r for r in mem.run_due(callback, now=NOW + dt.timedelta(hours=1))}
    assert results["bad"]["error"] == "RuntimeError: agent crashed"
    assert results["good"]["result"] == "ok"
    with pytest.raises(InvalidInput, match="callable"):
        mem.run_due("not callable", now=NOW)


def test_two_threads_fire_a_task_once(mem):
    mem.schedule_task("once", "every hour", "p", now=NOW)
    fired = []
    barrier = threading.Barrier(2)
    due = NOW + dt.timedelta(hours=1)

    def worker():
        barrier.wait()
        mem.run_due(fired.append, now=due)

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(fired) == 1


def test_tasks_survive_reopen(store_path):
    with Memory(store_path, embedder="hash") as m:
        task = m.schedule_task("digest", "0 9 * * *", "p", trusted=True, now=NOW)
    with Memory(store_path, embedder="hash") as m:
        again = m.get_task(task["id"])
        assert again["is_trusted"] is True
        assert again["next_run_at"] == task["next_run_at"]


def test_task_methods_with_unknown_ids_and_bad_clocks(mem):
    for call in (mem.pause_task, mem.resume_task, mem.get_task):
        with pytest.raises(InvalidInput, match="no scheduled task"):
            call("missing")
    assert mem.delete_task("missing") is False
    with pytest.raises(InvalidInput, match="now"):
        mem.due_tasks("tomorrow-ish")
    with pytest.raises(InvalidInput, match="now"):
        mem.run_due(print, now=12)
    with pytest.raises(InvalidInput, match="task_id"):
        mem.delete_task(7)


def test_untrusted_tasks_ask_the_approver_and_trusted_ones_do_not(mem):
    """000: scheduled_tasks "is_trusted | INTEGER | 0 | Tarefas trusted ignoram aprovação
    do terminal"; "is_oneshot ... Disparar uma vez e depois auto-excluir"."""
    trusted = mem.tasks.schedule(
        "backup", "every day at 3am", "back up", trusted=True, now="2030-01-01"
    )
    untrusted = mem.tasks.schedule("deploy", "every day at 3am", "deploy prod", now="2030-01-01")
    once = mem.tasks.schedule("ping", "in 1 hour", "ping", now="2030-01-01 00:00", source="config")
    asked: list[str] = []

    def deny_deploys(task):
        asked.append(task["name"])
        return task["name"] != "deploy"

    fired = mem.tasks.run_due(lambda t: t["prompt"], now="2030-01-02", approve=deny_deploys)
    by_name = {f["name"]: f for f in fired}
    assert sorted(asked) == ["deploy", "ping"]  # never the trusted one
    assert by_name["backup"]["approved"] is True and by_name["backup"]["result"] == "back up"
    assert by_name["deploy"]["approved"] is False and by_name["deploy"]["result"] is None
    assert by_name["ping"]["approved"] is True and by_name["ping"]["result"] == "ping"
    denied = mem.audit.log(action="deny_task")
    assert list(denied["target_ids"].iloc[0]) == [untrusted["id"]]
    remaining = set(mem.tasks.list()["id"])
    assert once["id"] not in remaining  # a one-shot goes after firing
    assert {trusted["id"], untrusted["id"]} <= remaining  # recurring ones move on
    assert mem.tasks.run_due(lambda t: 1, now="2030-01-02", approve=deny_deploys) == []

    def broken(task):
        raise RuntimeError("no terminal")

    later = mem.tasks.run_due(lambda t: 1, now="2030-01-03 04:00", approve=broken)
    assert {f["name"]: f["approved"] for f in later} == {"backup": True, "deploy": False}
    assert "RuntimeError" in mem.audit.log(action="deny_task")["details"].iloc[0]
    with pytest.raises(InvalidInput, match="approve"):
        mem.tasks.run_due(lambda t: 1, approve="yes")
