"""Sessions (seed 003): create/continue, last_activity, TTL cleanup, concurrency cap, persisted state."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from nbmemory import InvalidInput, Memory
from nbmemory.errors import SessionNotFound

T0 = dt.datetime(2026, 1, 5, 9, 0, 0)


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, now: dt.datetime = T0) -> None:
        self.now = now

    def __call__(self) -> dt.datetime:
        return self.now

    def advance(self, **delta: float) -> dt.datetime:
        self.now += dt.timedelta(**delta)
        return self.now


@pytest.fixture
def clock(mem: Memory) -> Clock:
    mem.clock = Clock()
    return mem.clock


def test_start_creates_an_active_session_with_the_default_state(mem: Memory, clock: Clock) -> None:
    session = mem.start_session("alice")
    assert session.session_id.startswith("sess_")
    assert session.status == "active"
    assert session.state == {"current_plan": [], "tool_history": []}
    assert session.created_at == session.last_activity == T0
    frame = mem.sessions()
    row = frame.set_index("session_id").loc[session.session_id]
    assert row["user_id"] == "alice" and row["status"] == "active"
    assert row["expires_at"] == T0 + dt.timedelta(hours=24)
    assert mem.audit_log(action="session_start")["target_ids"].iloc[0].tolist() == [
        session.session_id
    ]


def test_continue_moves_last_activity(mem: Memory, clock: Clock) -> None:
    sid = mem.start_session("alice").session_id
    later = clock.advance(hours=3)
    assert mem.continue_session(sid).last_activity == later


def test_add_event_and_get_context_in_the_session_touch_it(mem: Memory, clock: Clock) -> None:
    sid = mem.start_session("alice").session_id
    t1 = clock.advance(minutes=10)
    mem.add_event(sid, "user", "hello")
    assert mem.get_session(sid).last_activity == t1
    t2 = clock.advance(minutes=10)
    mem.add_events([{"session_id": sid, "role": "user", "content": "bulk"}])
    assert mem.get_session(sid).last_activity == t2
    t3 = clock.advance(minutes=10)
    mem.get_context(sid, "hello")
    assert mem.get_session(sid).last_activity == t3


def test_the_touch_hook_writes_nothing_for_sessions_never_started(
    mem: Memory, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, str]] = []
    loads: list[int] = []
    table = mem.store.sessions
    real_touch, real_keys = table.touch, table.active_keys

    def counting_touch(namespace, session_id, now):
        calls.append((namespace, session_id))
        real_touch(namespace, session_id, now)

    def counting_keys():
        loads.append(1)
        return real_keys()

    monkeypatch.setattr(table, "touch", counting_touch)
    monkeypatch.setattr(table, "active_keys", counting_keys)
    tracked = mem.start_session("alice").session_id
    for _ in range(3):
        mem.add_event("plain", "user", "an untracked session")
        mem.get_context("plain")
    assert calls == []
    clock.advance(seconds=5)
    mem.add_event(tracked, "user", "a tracked session")
    assert calls == [("default", tracked)]
    mem.add_event(tracked, "user", "again within the same second")
    mem.get_context(tracked)
    assert calls == [("default", tracked)]  # throttled: one write a second at most
    assert len(loads) == 1  # the set of started sessions is read once per process


def test_ttl_expiry_dry_run_and_cleanup(mem: Memory, clock: Clock) -> None:
    old = mem.start_session("alice").session_id
    mem.add_event(old, "user", "a memory recorded in the old session")
    clock.advance(hours=20)
    fresh = mem.start_session("alice").session_id
    clock.advance(hours=5)  # old: 25 h idle; fresh: 5 h idle
    listing = mem.sessions().set_index("session_id")
    assert listing.loc[old, "status"] == "expired"
    assert listing.loc[fresh, "status"] == "active"
    with pytest.raises(SessionNotFound, match="expired"):
        mem.continue_session(old)

    preview = mem.cleanup_sessions(dry_run=True)
    assert preview["session_id"].tolist() == [old]
    assert old in set(mem.sessions()["session_id"])  # dry run deleted nothing
    assert mem.audit_log(action="cleanup").empty

    gone = mem.cleanup_sessions()
    assert gone["session_id"].tolist() == [old]
    tracked = mem.sessions(include_untracked=False)
    assert tracked["session_id"].tolist() == [fresh]
    # the memories recorded in the session are long-term memory: they stay
    assert mem.events(session_id=old)["content"].tolist() == [
        "a memory recorded in the old session"
    ]
    assert json.loads(mem.audit_log(action="cleanup")["details"].iloc[0])["what"] == "sessions"


def test_ttl_follows_the_setting(mem: Memory, clock: Clock) -> None:
    sid = mem.start_session("alice").session_id
    mem.configure(session_ttl_hours=1.0)
    clock.advance(minutes=61)
    assert mem.cleanup_sessions(dry_run=True)["session_id"].tolist() == [sid]


def test_at_the_concurrency_limit_the_least_recently_active_session_is_closed(
    mem: Memory, clock: Clock
) -> None:
    ids = []
    for _ in range(5):
        ids.append(mem.start_session("alice").session_id)
        clock.advance(minutes=1)
    mem.continue_session(ids[0])  # now ids[1] is the least recently active
    clock.advance(minutes=1)
    other_user = mem.start_session("bob").session_id
    other_ns = mem.start_session("alice", namespace="elsewhere").session_id
    sixth = mem.start_session("alice").session_id
    listing = mem.sessions().set_index("session_id")
    active = listing[(listing["status"] == "active") & (listing["user_id"] == "alice")]
    assert len(active) == 5
    assert listing.loc[ids[1], "status"] == "closed"
    assert sixth in active.index and ids[0] in active.index
    assert listing.loc[other_user, "status"] == "active"
    assert mem.get_session(other_ns, namespace="elsewhere").status == "active"
    evicted = mem.audit_log(action="session_evicted")
    assert evicted["target_ids"].iloc[0].tolist() == [ids[1]]


def test_limit_follows_the_setting(store_path: str) -> None:
    with Memory(store_path, embedder="hash", max_concurrent_sessions=2) as mem:
        first = mem.start_session("u").session_id
        mem.start_session("u")
        mem.start_session("u")
        assert mem.get_session(first).status == "closed"


def test_state_is_persisted_on_close_and_survives_a_restart(store_path: str) -> None:
    with Memory(store_path, embedder="hash") as mem:
        sid = mem.start_session("alice", namespace="auth-service").session_id
        mem.save_session_state(
            sid, {"current_plan": ["read", "refactor"]}, namespace="auth-service"
        )
        mem.close_session(sid, namespace="auth-service", state={"tool_history": ["grep"]})
    with Memory(store_path, embedder="hash") as mem:
        session = mem.get_session(sid, namespace="auth-service")
        assert session.status == "closed" and session.closed_at is not None
        assert session.state == {"current_plan": ["read", "refactor"], "tool_history": ["grep"]}
        with pytest.raises(SessionNotFound, match="closed"):
            mem.continue_session(sid, namespace="auth-service")
        resumed = mem.start_session("alice", namespace="auth-service", session_id=sid)
        assert resumed.status == "active" and resumed.closed_at is None
        assert resumed.state["current_plan"] == ["read", "refactor"]
        with pytest.raises(InvalidInput, match="belongs to user"):
            mem.start_session("mallory", namespace="auth-service", session_id=sid)


def test_resuming_a_closed_session_says_to_pass_reopen(mem: Memory) -> None:
    sid = mem.sessions.start("alice").session_id
    mem.sessions.close(sid)
    with pytest.raises(SessionNotFound) as info:
        mem.sessions.resume(sid)
    assert str(info.value) == (
        f"session {sid!r} is closed in namespace 'default'; pass reopen=True to continue it"
    )
    assert mem.sessions.get(sid).status == "closed"  # the refusal changed nothing
    assert mem.sessions.resume(sid, reopen=True).status == "active"


def test_state_must_be_json(mem: Memory) -> None:
    with pytest.raises(InvalidInput, match="JSON"):
        mem.start_session("u", state={"bad": object()})
    assert mem.sessions(include_untracked=False).empty


def test_unknown_session_errors_say_what_to_do(mem: Memory) -> None:
    with pytest.raises(SessionNotFound, match=r"sess_nope.*not found.*namespace 'default'.*list"):
        mem.continue_session("sess_nope")
    with pytest.raises(SessionNotFound):
        mem.delete_session("sess_nope")


def test_delete_session_keeps_memories_unless_asked(mem: Memory) -> None:
    a = mem.start_session("u").session_id
    b = mem.start_session("u").session_id
    mem.add_event(a, "user", "kept")
    mem.add_event(b, "user", "removed with its session")
    assert mem.delete_session(a) == {"sessions": 1, "events": 0}
    assert mem.events(session_id=a)["content"].tolist() == ["kept"]
    assert mem.delete_session(b, events=True) == {"sessions": 1, "events": 1}
    assert mem.events(session_id=b).empty
    assert len(mem.audit_log(action="session_delete")) == 2


def test_sessions_listing_filters_and_untracked(mem: Memory) -> None:
    mem.start_session("alice")
    mem.start_session("bob")
    mem.add_event("notebook", "user", "via %%remember, no session started")
    frame = mem.sessions()
    assert set(frame["status"]) == {"active", "untracked"}
    assert frame.set_index("session_id").loc["notebook", "events"] == 1
    assert mem.sessions(user_id="bob")["user_id"].tolist() == ["bob"]
    assert mem.sessions(namespace="other").empty
    assert list(frame.columns) == [
        "namespace",
        "session_id",
        "user_id",
        "status",
        "events",
        "created_at",
        "last_activity",
        "expires_at",
        "closed_at",
        "state",
    ]
