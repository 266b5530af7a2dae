"""Sessions that resume with their context (issue 38, seed 003: Vectora's state persistence).

Each test quotes the line of 003 it implements.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nbmemory import InvalidInput, Memory

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
