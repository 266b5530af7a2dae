"""Upkeep that runs by itself (000: consolidation "a cada 6 horas"; 003: sessions
"ttl_hours: 24 # Tempo limite de inatividade antes da limpeza", audit
"retain_days: 90 # Período de retenção para logs de auditoria").

A long-lived agent keeps a ``Memory`` open for days and never calls a cleanup:
the store's clock is moved 48 hours and the upkeep thread does the rest.
"""

from __future__ import annotations

import datetime as dt

import pytest

from nbmemory import Memory
from nbmemory.errors import SessionNotFound
from nbmemory.validation import utcnow


class Clock:
    def __init__(self, now: dt.datetime) -> None:
        self.now = now

    def __call__(self) -> dt.datetime:
        return self.now


def _checks_after_now(mem: Memory, more: int = 2) -> None:
    """Wait until the upkeep thread has looked at the clock ``more`` times from now
    (the first may have read the clock before the test moved it)."""
    upkeep = mem._upkeep
    assert upkeep is not None
    assert upkeep.wait_for_check(upkeep.runs + more, timeout=60)


def test_a_memory_left_open_48_hours_cleans_and_consolidates_by_itself(tmp_path):
    clock = Clock(utcnow())
    mem = Memory(
        str(tmp_path / "agent.duckdb"),
        embedder="hash",
        config=False,
        upkeep_check_seconds=0.05,
        audit_retention_days=1,
    )
    try:
        mem.clock = clock
        old = mem.sessions.start(user_id="ana")
        for i in range(12):
            mem.add_event(old.session_id, "user", f"message {i} about the Lisbon trip budget")
        mem.flush()
        _checks_after_now(mem)
        before = mem.status()["upkeep"]
        assert before["sessions_removed"] == 0 and before["audit_rows_removed"] == 0
        assert before["consolidation_runs"] == 0
        assert mem.sessions.get(old.session_id).user_id == "ana"

        clock.now += dt.timedelta(hours=48)  # nothing else is called from here on
        _checks_after_now(mem)

        after = mem.status()["upkeep"]
        assert after["sessions_removed"] == 1
        with pytest.raises(SessionNotFound):  # the session row went; its memories stay
            mem.sessions.get(old.session_id)
        assert after["audit_rows_removed"] > 0
        assert after["consolidation_runs"] >= 1 and after["last_consolidation"] == clock.now
        assert after["last_cleanup"] == clock.now and after["last_error"] is None
        actions = list(mem.audit.log()["action"])
        assert "cleanup" in actions  # audited like the same call made by hand
        assert not mem.events(kind="summary").empty  # the old conversation consolidated
    finally:
        mem.close()
    assert not mem._upkeep.alive  # close stops the thread


def test_an_idle_check_writes_nothing(tmp_path):
    with Memory(
        str(tmp_path / "m.duckdb"), embedder="hash", config=False, upkeep_check_seconds=0.05
    ) as mem:
        mem.add_event("s", "user", "hello")
        _checks_after_now(mem, 3)
        rows = len(mem.audit.log())
        _checks_after_now(mem, 3)
        assert len(mem.audit.log()) == rows  # hourly checks leave no audit noise


def test_upkeep_off_and_read_only_stores_run_no_thread(tmp_path):
    path = str(tmp_path / "m.duckdb")
    with Memory(path, embedder="hash", config=False, upkeep=False) as mem:
        mem.add_event("s", "user", "hello")
        assert mem.status()["upkeep"] is None
    with Memory(path, embedder="hash", config=False, read_only=True) as mem:
        assert mem.status()["upkeep"] is None


def test_an_expired_session_goes_when_a_store_opens_not_when_a_command_looks(tmp_path, capsys):
    """003's ``state cleanup --dry-run`` lists what would go: opening the store for it
    must not remove it first; a program's Memory does."""
    from nbmemory import cli

    path = str(tmp_path / "m.duckdb")
    with Memory(path, embedder="hash", config=False) as mem:
        mem.clock = lambda: dt.datetime(2020, 1, 1)
        mem.sessions.start(user_id="old", session_id="sess_old")
    assert cli.main(["state", "cleanup", "--dry-run", "--store", path, "--embedder", "hash"]) == 0
    assert "sess_old" in capsys.readouterr().out
    with Memory(path, embedder="hash", config=False) as mem:  # removed at open, audited
        with pytest.raises(SessionNotFound):
            mem.sessions.get("sess_old")
        assert mem.status()["upkeep"]["sessions_removed"] == 1
        assert "cleanup" in set(mem.audit.log()["action"])
