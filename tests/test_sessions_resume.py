"""Sessions that resume with their context (issue 38, seed 003: Vectora's state persistence).

Each test quotes the line of 003 it implements.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
from pathlib import Path

import numpy as np
import pytest

from nbmemory import InvalidInput, Memory
from nbmemory.retrieval.embedders import HashEmbedder
from nbmemory.sessions.contexts import PREFETCH_QUEUE

SECTIONS = ["Auth", "Database", "Errors", "Style", "Types", "Logs", "Reviews"]
AGENTS = "# Project memory: auth-service\n\n" + "".join(
    f"## {name}\n\n- guideline about {name.lower()} number {i}\n\n"
    for i, name in enumerate(SECTIONS)
)
QUESTION = "which budget did we agree for the trip"


def _ordinary(mem: Memory, session_id: str) -> list[str]:
    """Salient and relevant memories that compete with AGENTS.md for the context."""
    events = [
        {
            "session_id": "older",
            "role": "user",
            "content": f"we agreed the trip budget is {n}k and which hotel",
            "importance": 0.95,
        }
        for n in range(8)
    ]
    events += [
        {"session_id": session_id, "role": "user", "content": f"turn {n} of the trip"}
        for n in range(4)
    ]
    records = mem.add_events(events)
    mem.flush()
    return [r["id"] if isinstance(r, dict) else r for r in records]


@pytest.fixture
def agents_file(tmp_path: Path) -> Path:
    path = tmp_path / "AGENTS.md"
    path.write_text(AGENTS, encoding="utf-8")
    return path


def test_load_agents_md_puts_every_section_first_in_the_session_context(
    mem: Memory, agents_file: Path
) -> None:
    """003: "context: load_agents_md: true" and "O conteúdo do AGENTS.md recebe maior
    prioridade durante a construção do contexto" (AGENTS.md content gets higher
    priority while the context is built)."""
    mem.agents_md.sync(agents_file)
    plain = mem.sessions.start("alice")
    loaded = mem.sessions.start("alice", load_agents_md=True)
    _ordinary(mem, plain.session_id)
    _ordinary(mem, loaded.session_id)

    without = mem.get_context(plain.session_id, QUESTION)
    kinds = [item.kind for item in without.items]
    # the control: ordinary salient memories crowd AGENTS.md out of an ordinary session
    assert kinds[: len(SECTIONS)] != ["agents_md"] * len(SECTIONS)
    assert kinds.count("agents_md") < len(SECTIONS)

    context = mem.get_context(loaded.session_id, QUESTION)
    first = context.items[: len(SECTIONS)]
    assert [item.kind for item in first] == ["agents_md"] * len(SECTIONS)
    assert {item.content.split("\n")[0] for item in first} == {f"## {s}" for s in SECTIONS}
    assert [item.rank for item in context.items] == list(range(1, len(context.items) + 1))
    assert any(item.kind != "agents_md" for item in context.items)  # the rest still follows
    assert context.to_frame()["kind"].iloc[0] == "agents_md"
    assert loaded.state["context"] == {"load_agents_md": True}
    assert loaded.load_agents_md and not plain.load_agents_md


def test_agents_md_is_kept_and_ordinary_memories_dropped_within_the_token_budget(
    mem: Memory, agents_file: Path
) -> None:
    """003: ``max_memory_tokens: 4096 # Limite de contexto injetado a partir da memória``
    with AGENTS.md first: a budget too small for everything drops ordinary memories,
    never an AGENTS.md section that fits."""
    mem.agents_md.sync(agents_file)
    session = mem.sessions.start("alice", load_agents_md=True)
    _ordinary(mem, session.session_id)
    context = mem.get_context(session.session_id, QUESTION)
    agents = [item for item in context.items if item.kind == "agents_md"]
    assert len(agents) == len(SECTIONS)
    budget = context.token_counter("Memory:") + sum(
        context.token_counter(context.format_item(item)) for item in agents
    )
    prompt = context.to_prompt(max_tokens=budget + 3)
    assert set(prompt.kept) == {item.id for item in agents}
    assert len(prompt.dropped) == len(context.items) - len(agents) > 0


def test_the_flag_survives_a_restart_and_a_later_start_can_set_it(
    store_path: str, agents_file: Path
) -> None:
    """003: "Carrega o AGENTS.md se presente e atualiza o cache de contexto" at session
    creation, and a continued session keeps what it was started with."""
    with Memory(store_path, embedder="hash") as mem:
        mem.agents_md.sync(agents_file)
        loaded = mem.sessions.start("alice", load_agents_md=True)
        assert loaded.context is not None  # built at start, AGENTS.md first
        assert [i.kind for i in loaded.context.items[: len(SECTIONS)]] == ["agents_md"] * len(
            SECTIONS
        )
        plain = mem.sessions.start("bob")
        assert plain.context is None
        start = mem.audit.log(action="session_start")
        assert start["details"].str.contains("load_agents_md").sum() == 1
    with Memory(store_path, embedder="hash") as mem:  # a new process reads the flag
        _ordinary(mem, loaded.session_id)
        context = mem.get_context(loaded.session_id, QUESTION)
        assert [i.kind for i in context.items[: len(SECTIONS)]] == ["agents_md"] * len(SECTIONS)
        before = mem.get_context(plain.session_id, QUESTION)
        assert [i.kind for i in before.items].count("agents_md") < len(SECTIONS)
        again = mem.sessions.start("bob", session_id=plain.session_id, load_agents_md=True)
        assert again.load_agents_md
        after = mem.get_context(plain.session_id, QUESTION)
        assert [i.kind for i in after.items[: len(SECTIONS)]] == ["agents_md"] * len(SECTIONS)


def test_load_agents_md_must_be_a_bool(mem: Memory) -> None:
    with pytest.raises(InvalidInput, match="load_agents_md"):
        mem.sessions.start("alice", load_agents_md="yes")  # type: ignore[arg-type]
    assert mem.sessions().empty


# -- a resumed session: plan, tool history, last context -----------------------------------
CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "read_file", "arguments": json.dumps({"path": "auth.py"})},
}
PLAN = [
    {"step": "read the auth module", "status": "done"},
    "refactor the token check",
    "write the tests",
]


class FixedClock:
    def __init__(self) -> None:
        self.now = dt.datetime(2026, 1, 5, 9, 0, 0)

    def __call__(self) -> dt.datetime:
        return self.now


def _working_session(mem: Memory) -> str:
    session = mem.sessions.start("alice")
    sid = session.session_id
    mem.sessions.save_state(sid, {"current_plan": PLAN})
    mem.add_event(sid, "user", "continue refactoring the auth module")
    mem.add_event(sid, "assistant", None, tool_calls=[CALL])
    mem.add_event(
        sid, "tool", "def check_token(t): ...", tool_call_id="call_1", tool_name="read_file"
    )
    anthropic = {"type": "tool_use", "id": "toolu_2", "name": "run_tests", "input": {"k": "auth"}}
    mem.add_event(sid, "assistant", "running the tests", tool_calls=[anthropic])
    mem.add_event(sid, "tool", "3 passed", tool_name="grep")  # answers no recorded call
    mem.flush()
    return sid


def test_a_resumed_session_returns_its_plan_its_tool_history_and_its_last_context(
    mem: Memory,
) -> None:
    """003's harness (tests/state/session-continuity.yaml): "plan_resumed: true",
    "tool_history_preserved: true", "context_cache_reused: true"."""
    mem.clock = FixedClock()
    sid = _working_session(mem)
    context = mem.get_context(sid, "the token check")
    resumed = mem.sessions.resume(sid)
    assert resumed.plan == PLAN and resumed.next_step == "refactor the token check"
    history = [
        {k: e[k] for k in ("tool", "arguments", "call_id", "result")} for e in resumed.tool_history
    ]
    assert history == [
        {"tool": "read_file", "arguments": {"path": "auth.py"}, "call_id": "call_1",
         "result": "def check_token(t): ..."},
        {"tool": "run_tests", "arguments": {"k": "auth"}, "call_id": "toolu_2", "result": None},
        {"tool": "grep", "arguments": None, "call_id": None, "result": "3 passed"},
    ]  # fmt: skip
    assert all(e["event_id"] and e["at"] is not None for e in resumed.tool_history)
    assert resumed.context is context  # the cache, reused: nothing changed
    continued = mem.continue_session(sid)  # the flat name, and start with the id
    assert continued.context is context and continued.tool_history == resumed.tool_history
    assert mem.sessions.start("alice", session_id=sid).context is context
    assert mem.sessions.get(sid).plan == PLAN  # get reads the row, no history or context


def test_a_session_that_built_no_context_resumes_without_one(mem: Memory) -> None:
    sid = mem.sessions.start("alice").session_id
    resumed = mem.sessions.resume(sid)
    assert resumed.context is None and resumed.tool_history == [] and resumed.next_step is None


def test_the_context_cache_is_reused_while_nothing_it_depends_on_changed(mem: Memory) -> None:
    """003: "Cache de contexto" in the session's working memory, "context_cache_reused":
    the same question, nothing new in the namespace and the same settings give the context
    already built, without a statement on the store."""
    mem.clock = FixedClock()  # the session touch is not due again: a hit runs no SQL
    sid = _working_session(mem)
    first = mem.get_context(sid, "the token check")
    ran = mem.store.statements_run
    again = mem.get_context(sid, "the token check")
    assert again is first and mem.store.statements_run == ran
    mem.add_event("elsewhere", "user", "another namespace", namespace="other")
    mem.flush()
    mem.facts.set("user", "language", "Python")  # facts are not part of a context
    mem.sessions.save_state(sid, {"note": "x"})  # nor is the session's own row
    assert mem.get_context(sid, "the token check") is first


def test_the_context_cache_is_invalidated_when_something_it_depends_on_changed(
    mem: Memory,
) -> None:
    """The other half of "reused when nothing it depends on changed": a new, changed or
    deleted event of the namespace, another question or other parameters or settings
    build the context again."""
    mem.clock = FixedClock()
    sid = _working_session(mem)
    question = "the token check"
    seen = [mem.get_context(sid, question)]

    def fresh(**options: object) -> object:
        context = mem.get_context(sid, question, **options)
        assert all(context is not old for old in seen)
        seen.append(context)
        return context

    assert fresh(relevance_limit=2) is not None  # other parameters
    assert mem.get_context(sid, "another question") is not seen[0]  # another question
    new = mem.add_event("someone-else", "user", "the token check uses HMAC now").id
    mem.flush()  # a new event in the namespace (another session's)
    context = fresh()
    assert new in context.ids
    mem.update(new, content="the token check uses Ed25519 now")  # a changed one
    mem.flush()
    fresh()
    mem.delete(new)  # a deleted one
    assert new not in fresh().ids
    mem.configure(relevance_threshold=0.05)  # other settings
    fresh()
    mem.store.execute("UPDATE events SET importance = 0.99 WHERE role = 'tool'")  # plain SQL
    fresh()
    with mem.store.transaction():  # inside a transaction nothing is cached
        inside = mem.get_context(sid, question)
        assert inside is not seen[-1] and mem.get_context(sid, question) is not inside


def test_a_resumed_session_gets_its_last_context_rebuilt_when_it_went_stale(
    mem: Memory,
) -> None:
    mem.clock = FixedClock()
    sid = _working_session(mem)
    before = mem.get_context(sid, "the token check")
    event = mem.add_event(sid, "user", "also rename the token check").id
    mem.flush()
    resumed = mem.sessions.resume(sid)
    assert resumed.context is not before and resumed.context is not None
    assert resumed.context.query == "the token check" and event in resumed.context.ids


class BlockingEmbedder(HashEmbedder):
    """The hash embedder, holding any batch that holds ``text`` until the test opens the gate."""

    def __init__(self, text: str) -> None:
        super().__init__(384)
        self.text = text
        self.entered = threading.Event()
        self.gate = threading.Event()

    def embed(self, texts: list[str]) -> np.ndarray:
        if self.text in texts:
            self.entered.set()
            assert self.gate.wait(30), "the test never opened the gate"
        return super().embed(texts)


def test_the_next_plan_step_is_prefetched_in_the_background_when_a_session_resumes(
    store_path: str,
) -> None:
    """003: "Prefetching: Carrega contexto provavelmente necessário baseado na etapa
    atual do plano" (loads the context likely needed for the plan's current step)."""
    step = "refactor the token check"
    embedder = BlockingEmbedder(step)
    with Memory(store_path, embedder=embedder) as mem:
        mem.clock = FixedClock()
        sid = _working_session(mem)
        resumed = mem.sessions.resume(sid)  # returns while the prefetch waits on the model
        assert resumed.next_step == step
        assert embedder.entered.wait(30)
        written = mem.add_event(sid, "user", "the token check is in auth/tokens.py").id
        mem.flush()  # a write and its embedding never wait for the prefetch
        embedder.gate.set()
        assert mem._contexts.wait_prefetched(30)
        # the prefetch began before that write: stale, so it is built again
        ran = mem.store.statements_run
        context = mem.get_context(sid, step)
        assert written in context.ids and mem.store.statements_run > ran

        mem.sessions.resume(sid)  # nothing changed since: the prefetch is what is read
        assert mem._contexts.wait_prefetched(30)
        ran = mem.store.statements_run
        assert mem.get_context(sid, step) is context
        assert mem.store.statements_run == ran


def test_a_new_step_is_prefetched_into_the_cache_the_next_get_context_reads(
    mem: Memory,
) -> None:
    mem.clock = FixedClock()
    sid = _working_session(mem)
    mem.sessions.save_state(sid, {"current_plan": ["write the tests"]})
    mem.sessions.resume(sid)
    assert mem._contexts.wait_prefetched(30)
    hits = mem._contexts.cache.hits
    ran = mem.store.statements_run
    context = mem.get_context(sid, "write the tests")
    assert mem._contexts.cache.hits == hits + 1 and mem.store.statements_run == ran
    assert context.query == "write the tests"


def test_prefetch_is_bounded_and_never_waits(store_path: str) -> None:
    """A resume never queues unbounded work: past ``PREFETCH_QUEUE`` waiting builds, a
    prefetch is dropped, not waited for."""
    embedder = BlockingEmbedder("blocked step")
    with Memory(store_path, embedder=embedder) as mem:
        contexts = mem._contexts
        assert contexts.prefetch("s1", "blocked step")
        assert embedder.entered.wait(30)  # the thread is busy with the first
        accepted = [contexts.prefetch("s1", f"step {n}") for n in range(PREFETCH_QUEUE + 3)]
        assert accepted == [True] * PREFETCH_QUEUE + [False] * 3
        assert contexts._prefetcher is not None and contexts._prefetcher.dropped == 3
        embedder.gate.set()
        assert contexts.wait_prefetched(30)
        assert contexts._prefetcher.done == PREFETCH_QUEUE + 1


def test_another_memory_writing_the_same_file_makes_the_cache_stale(store_path: str) -> None:
    """What another writer committed counts too (here a second Memory of this process on
    the same file; a lake's other hosts are noticed the same way, by ``store.refresh``)."""
    with Memory(store_path, embedder="hash") as mem, Memory(store_path, embedder="hash") as peer:
        mem.clock = FixedClock()
        sid = _working_session(mem)
        first = mem.get_context(sid, "the token check")
        assert mem.get_context(sid, "the token check") is first
        new = peer.add_event(sid, "user", "the token check moved").id
        peer.flush()
        again = mem.get_context(sid, "the token check")
        assert again is not first and new in again.ids


def test_no_deleted_text_stays_in_the_cache(mem: Memory) -> None:
    """Erasure reaches the cache: a context holding a deleted event is dropped at once
    (not only made stale), and deleting or forgetting a session drops its questions."""
    mem.clock = FixedClock()
    sid = _working_session(mem)
    secret = mem.add_event(sid, "user", "my locker code is 4711").id
    mem.flush()
    held = mem.get_context(sid, "locker code")
    other = mem.get_context(sid, "the token check", recency_limit=0, relevance_limit=1)
    assert secret in held.ids and secret not in other.ids
    mem.delete(secret)
    kept = mem._contexts.cache.kept(mem.namespace, sid)
    assert held not in kept and other in kept
    mem.sessions.delete(sid, events=True)
    assert mem._contexts.cache.kept(mem.namespace, sid) == []
    assert mem._contexts.cache.last(mem.namespace, sid) is None


# -- the last context survives a restart (the agent resumes in a new process) --------------
RESUME = """
import json, sys
from nbmemory import Memory
with Memory(sys.argv[1], embedder="hash") as mem:
    session = mem.sessions.resume(sys.argv[2])
    context = session.context
    print(json.dumps({
        "source": session.context_source,
        "reused": session.context_cache_reused,
        "query": None if context is None else context.query,
        "ids": None if context is None else context.ids,
        "strategies": None if context is None else [i.strategies for i in context.items],
        "cached": context is not None and mem.get_context(sys.argv[2], context.query) is context,
    }))
"""


def _resume_elsewhere(store_path: str, sid: str) -> dict:
    """Resume ``sid`` in a new Python process, as an agent restarting does."""
    import os
    import subprocess
    import sys

    src = str(Path(__file__).resolve().parents[1] / "src")
    env = {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run(
        [sys.executable, "-c", RESUME, store_path, sid],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _stored(store_path: str, sid: str) -> dict:
    with Memory(store_path, embedder="hash", read_only=True) as mem:
        return mem.sessions.get(sid).state


def test_a_session_resumed_in_a_new_process_gets_its_last_context_back(store_path: str) -> None:
    """003's harness: "context_cache_reused: true" for a session an agent continues after a
    restart: the same items in the same order, read back from the session's state (the
    ids, never the texts) without building the context again."""
    with Memory(store_path, embedder="hash") as mem:
        sid = _working_session(mem)
        context = mem.get_context(sid, "the token check")
        built = {"ids": context.ids, "strategies": [i.strategies for i in context.items]}
        mem.get_context(sid, "the token check")  # a cache hit writes nothing
        assert mem.audit.log(action="session_state").shape[0] == 1  # only save_state's
    record = _stored(store_path, sid)["last_context"]
    assert record["query"] == "the token check" and record["ids"] == built["ids"]
    assert "check_token" not in json.dumps(record)  # the texts stay in the events
    again = _resume_elsewhere(store_path, sid)
    assert again["ids"] == built["ids"] and again["strategies"] == built["strategies"]
    assert again["source"] == "restored" and again["reused"] and again["cached"]
    assert again["query"] == "the token check"
    # in-process, a second Memory on the file: restored the same way
    with Memory(store_path, embedder="hash") as mem:
        resumed = mem.continue_session(sid)
        assert resumed.context is not None and resumed.context.ids == built["ids"]
        assert resumed.context_source == "restored"


def test_a_session_resumed_in_a_new_process_after_a_change_gets_a_rebuilt_context(
    store_path: str,
) -> None:
    """The other half of 003's cache: "invalidated otherwise", across a restart too: a new
    event of the namespace or a deleted item makes the recorded context stale, so the new
    process builds it again (without the deleted item, whose id leaves the state)."""
    with Memory(store_path, embedder="hash") as mem:
        sid = _working_session(mem)
        gone = mem.add_event(sid, "user", "the token check lives in auth/tokens.py").id
        mem.flush()
        context = mem.get_context(sid, "the token check")
        assert gone in context.ids
        mem.delete(gone)
    assert gone not in json.dumps(_stored(store_path, sid))
    first = _resume_elsewhere(store_path, sid)
    assert first["source"] == "rebuilt" and not first["reused"]
    assert gone not in first["ids"] and first["query"] == "the token check"
    assert _stored(store_path, sid)["last_context"]["ids"] == first["ids"]
    with Memory(store_path, embedder="hash") as peer:  # another session's new event
        new = peer.add_event("someone-else", "user", "the token check uses HMAC now").id
        peer.flush()
    second = _resume_elsewhere(store_path, sid)
    assert second["source"] == "rebuilt" and new in second["ids"]
    third = _resume_elsewhere(store_path, sid)  # nothing changed since: restored
    assert third["source"] == "restored" and third["ids"] == second["ids"]


def test_erasure_leaves_no_id_in_any_session_state(store_path: str) -> None:
    """An erased event leaves no id in the recorded contexts of other sessions (an event
    of one user found by another's context), and a forgotten session's state goes."""
    with Memory(store_path, embedder="hash") as mem:
        alice = _working_session(mem)
        bob = mem.sessions.start("bob").session_id
        secret = mem.add_event(alice, "user", "the token check secret is 4711", importance=0.99)
        mem.flush()
        assert secret.id in mem.get_context(bob, "the token check secret").ids
        assert secret.id in json.dumps(mem.sessions.get(bob).state)
        mem.get_context(alice, "the token check secret")
        result = mem.sessions.forget_user("alice")
        assert result["events"] >= 1
        assert mem.sessions().query("session_id == @alice").empty
        state = json.dumps(mem.sessions.get(bob).state)
        assert secret.id not in state and "4711" not in state
        assert mem.sessions.get(bob).state["last_context"]["digest"] is None
        kept = mem.add_event(bob, "user", "a note of bob").id
        mem.flush()
        mem.get_context(bob, "a note")
        mem.sessions.delete(bob, forget=True)
        assert mem.sessions().empty
        assert kept not in str(mem.store.run("SELECT state FROM sessions", []))
    resumed = None
    with Memory(store_path, embedder="hash") as mem:
        carol = mem.sessions.start("carol").session_id
        resumed = mem.sessions.resume(carol)
    assert resumed.context is None and resumed.context_source is None


def test_a_read_only_store_records_nothing_and_a_failed_write_fails_no_get_context(
    store_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Memory(store_path, embedder="hash") as mem:
        sid = _working_session(mem)
    with Memory(store_path, embedder="hash", read_only=True) as mem:
        assert mem.get_context(sid, "the token check").ids
        assert "last_context" not in mem.sessions.get(sid).state
    with Memory(store_path, embedder="hash") as mem:
        from nbmemory.store.sessions import SessionsTable

        def broken(*args: object, **kwargs: object) -> None:
            raise OSError("disk full")

        monkeypatch.setattr(SessionsTable, "save_state", broken)
        assert mem.get_context(sid, "the token check").ids  # logged, not raised
        assert "last_context" not in mem.sessions.get(sid).state


def test_compacted_events_leave_the_recorded_context_so_erasing_the_archive_leaves_no_id(
    store_path: str,
) -> None:
    """A compacting consolidation moves events out of ``events``: their ids leave every
    session's recorded context then, so a later erasure of the archive finds none."""
    old = dt.datetime(2025, 1, 1, 9, 0, 0)
    with Memory(store_path, embedder="hash", background_consolidation=False) as mem:
        sid = mem.sessions.start("alice").session_id
        ids = [
            mem.add_event(sid, "user", f"the vault code word is {n}", created_at=old).id
            for n in range(4)
        ]
        mem.flush()
        assert set(ids) & set(mem.get_context(sid, "vault code word").ids)
        assert set(ids) & set(mem.sessions.get(sid).state["last_context"]["ids"])
        assert mem.consolidation.run(now=old + dt.timedelta(days=30), compact=True).archived
        assert not set(ids) & set(json.dumps(mem.sessions.get(sid).state).split('"'))
