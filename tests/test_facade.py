"""The facade's shape: a few core verbs on ``Memory``, the rest in groups
(``mem.facts``, ``mem.tasks`` ...), every older flat name and every Astreus name
still answering the same, and nothing imported that the caller did not ask for."""

from __future__ import annotations

import inspect
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from nbmemory import InvalidInput, Memory
from nbmemory.facade.aliases import ALIASES, ASTREUS_NAMES, OLDER_NAMES
from nbmemory.facade.groups import Group

SRC = Path(__file__).resolve().parents[1] / "src" / "nbmemory"
ROOT = SRC.parents[1]


def own_names(mem: Memory) -> set[str]:
    """Public names of a Memory that are not aliases: its class's and its instance's."""
    names = {n for n in dir(Memory) if not n.startswith("_")} | {
        n for n in vars(mem) if not n.startswith("_")
    }
    return names - set(ALIASES)


def resolve(mem: Memory, path: str):
    target = mem
    for part in path.split("."):
        target = getattr(target, part)
    return target


def test_memory_has_at_most_40_public_names_of_its_own(mem: Memory) -> None:
    names = own_names(mem)
    assert len(names) <= 40, sorted(names)
    groups = {n for n in names if isinstance(getattr(mem, n), Group)}
    assert groups == {
        "facts", "tasks", "macros", "prefixes", "sessions", "audit", "agents_md",
        "memories", "consolidation", "embeddings", "transfer",
    }  # fmt: skip
    for verb in ("add_event", "add_events", "get", "update", "delete", "search",
                 "get_context", "flush", "close", "status", "events", "recent", "purge"):  # fmt: skip
        assert verb in names


def test_every_alias_stands_for_a_grouped_form_with_its_signature(mem: Memory) -> None:
    assert set(ASTREUS_NAMES) == {
        "add_memory", "remember_conversation", "get_memory", "search_memories",
        "search_memories_by_similarity", "list_memories", "update_memory", "delete_memory",
        "clear_memories", "generate_embedding_for_memory",
    }  # fmt: skip
    assert not set(ASTREUS_NAMES) & set(OLDER_NAMES)
    for name, path in ALIASES.items():
        old, new = getattr(mem, name), resolve(mem, path)
        if callable(new):
            assert inspect.signature(old) == inspect.signature(new), name
            assert old.__doc__.startswith(("Older name of", "Astreus name of")), name
            assert f"``mem.{path}``" in old.__doc__, name
        else:  # a property: the same object
            assert old is new, name


def test_older_names_and_groups_give_the_same_store(tmp_path: Path) -> None:
    """One agent's day through the older flat names and through the groups: both stores
    end up holding the same facts, tasks, macros, prefixes, sessions and audit actions."""

    def day(mem: Memory, grouped: bool) -> dict[str, object]:
        for tool in ("read_file", "edit_file", "run_tests", "read_file", "edit_file"):
            mem.add_event("coding", "tool", f"{tool} ok", tool_name=tool)
        if grouped:
            mem.facts.set("user", "language", "TypeScript")
            mem.facts.set("user", "language", "Rust")
            mem.facts.delete("user", "editor")
            task = mem.tasks.schedule(
                "standup", "every weekday at 9am", "Summarise", now="2030-01-01"
            )
            mem.tasks.pause(task["id"])
            mem.tasks.resume(task["id"], now="2030-01-02")
            mem.macros.learn()
            hint = mem.macros.suggest_next_tool("read_file")
            mem.macros.record_use(hint["macro_id"])
            mem.prefixes.add("git status")
            allowed = mem.prefixes.allows("git status --short")
            s = mem.sessions.start("ann", session_id="sess_1")
            mem.sessions.save_state(s.session_id, {"plan": ["a"]})
            mem.sessions.close(s.session_id)
            memory = mem.memories.add("Budget is $50k", {"type": "project"})
            mem.memories.update(memory.id, content="Budget is $75k")
            mem.flush()
            found = mem.memories.search("budget", limit=1, similarity_threshold=0)
            fired = mem.tasks.run_due(lambda t: t["name"], now="2031-01-01")
            history = mem.facts.history("user", "language")
            trail = mem.audit.log()
            state = mem.sessions.get("sess_1").state
            facts = mem.facts.list()
        else:
            mem.set_fact("user", "language", "TypeScript")
            mem.set_fact("user", "language", "Rust")
            mem.delete_fact("user", "editor")
            task = mem.schedule_task(
                "standup", "every weekday at 9am", "Summarise", now="2030-01-01"
            )
            mem.pause_task(task["id"])
            mem.resume_task(task["id"], now="2030-01-02")
            mem.learn_macros()
            hint = mem.suggest_next_tool("read_file")
            mem.record_macro_use(hint["macro_id"])
            mem.add_allowed_prefix("git status")
            allowed = mem.is_command_allowed("git status --short")
            s = mem.start_session("ann", session_id="sess_1")
            mem.save_session_state(s.session_id, {"plan": ["a"]})
            mem.close_session(s.session_id)
            memory = mem.add_memory("Budget is $50k", {"type": "project"})
            mem.update_memory(memory.id, content="Budget is $75k")
            mem.flush()
            found = mem.search_memories("budget", limit=1, similarity_threshold=0)
            fired = mem.run_due(lambda t: t["name"], now="2031-01-01")
            history = mem.fact_history("user", "language")
            trail = mem.audit_log()
            state = mem.get_session("sess_1").state
            facts = mem.facts()
        return {
            "facts": facts[["category", "key", "value", "source"]].to_dict("records"),
            "history": history["value"].tolist(),
            "macros": mem.macros()[["trigger_tool", "next_tool", "used_count"]].to_dict("records"),
            "hint": hint["next_tool"],
            "allowed": allowed,
            "prefixes": mem.allowed_prefixes(),
            "tasks": mem.scheduled_tasks()[["name", "is_paused"]].to_dict("records"),
            "fired": [(f["name"], f["result"]) for f in fired],
            "state": state,
            "sessions": mem.sessions()[["session_id", "status"]].to_dict("records"),
            "found": found["content"].tolist(),
            "actions": sorted(trail["action"]),
        }

    with Memory(str(tmp_path / "old.duckdb"), embedder="hash") as old:
        before = day(old, grouped=False)
    with Memory(str(tmp_path / "new.duckdb"), embedder="hash") as new:
        after = day(new, grouped=True)
    assert before == after
    assert after["fired"] == [("standup", "standup")] and after["found"] == ["Budget is $75k"]
    assert after["history"] == ["TypeScript"] and after["state"]["plan"] == ["a"]


def test_callable_groups_list_what_they_hold(mem: Memory) -> None:
    """``mem.facts()``, ``mem.sessions()`` and ``mem.macros()`` were methods: they still are."""
    mem.facts.set("user", "language", "Rust")
    mem.sessions.start("ann", namespace="ns1")
    pd.testing.assert_frame_equal(mem.facts("user"), mem.facts.list("user"))
    assert mem.sessions("ns1")["user_id"].tolist() == mem.sessions.list("ns1")["user_id"].tolist()
    pd.testing.assert_frame_equal(mem.macros(), mem.macros.list())


def test_groups_say_what_they_are(mem: Memory) -> None:
    assert repr(mem.facts) == (
        f"<nbmemory facts of {mem.path!r}: delete, get, history, list, relevant, set>"
    )
    assert "schedule" in repr(mem.tasks) and "run_due" in repr(mem.tasks)
    assert "similarities" in repr(mem.research)
    for name in ("facts", "tasks", "macros", "prefixes", "sessions", "audit", "agents_md",
                 "memories", "consolidation", "embeddings", "transfer"):  # fmt: skip
        group = getattr(mem, name)
        assert type(group).__doc__, name
        for method in (m for m in dir(type(group)) if not m.startswith("_")):
            member = inspect.getattr_static(type(group), method)
            assert (member.__doc__ or "").strip(), f"mem.{name}.{method} has no docstring"
            if callable(member):
                assert inspect.signature(member).return_annotation is not inspect.Signature.empty


def test_a_closed_memory_refuses_grouped_and_older_calls_alike(store_path: str) -> None:
    mem = Memory(store_path, embedder="hash")
    mem.close()
    for call in (
        lambda: mem.facts.set("user", "k", "v"),
        lambda: mem.set_fact("user", "k", "v"),
        lambda: mem.sessions.list(),
        lambda: mem.sessions(),
        lambda: mem.research.memories(),
        lambda: mem.get("x"),
        lambda: mem.update("x", content="y"),
    ):
        with pytest.raises(InvalidInput, match="this Memory is closed"):
            call()


def test_update_changes_any_event_and_re_embeds_new_text(mem: Memory) -> None:
    message = mem.add_event("s1", "user", "the meeting is on Monday")
    mem.flush()
    changed = mem.update(message.id, content="the meeting is on Tuesday", metadata={"fixed": True})
    assert changed.content == "the meeting is on Tuesday" and changed.metadata == {"fixed": True}
    assert changed.kind == "message"  # not only memories, unlike mem.memories.update
    with pytest.raises(InvalidInput, match="nothing to change"):
        mem.update(message.id)
    mem.flush()
    assert mem.search("Tuesday", limit=1, mode="vector")["id"].iloc[0] == message.id
    row = mem.audit.log(action="update").iloc[0]
    assert list(row["target_ids"]) == [message.id]
    with pytest.raises(KeyError):  # a message is not a memory of the Astreus API
        mem.memories.update(message.id, content="x")


def test_research_group_matches_the_research_functions(mem: Memory) -> None:
    from nbmemory.research import frames, thresholds

    mem.add_events([{"session_id": "s", "role": "user", "content": f"turn {i}"} for i in range(5)])
    mem.flush()
    pd.testing.assert_frame_equal(mem.research.memories(), frames.memories_frame(mem))
    pd.testing.assert_frame_equal(
        mem.research.similarities(["turn 3"]), thresholds.similarity_frame(mem, ["turn 3"])
    )
    frame, matrix = mem.embeddings.vectors()
    assert len(frame) == 5 and matrix.shape[0] == 5


@pytest.mark.slow
def test_the_facade_does_not_import_plotly_until_a_figure_is_drawn() -> None:
    code = (
        "import sys\n"
        "from nbmemory import Memory\n"
        "mem = Memory(':memory:', embedder='hash')\n"
        "mem.add_event('s', 'user', 'hello'); mem.flush()\n"
        "mem.research.memories(); repr(mem.research)\n"
        "assert 'plotly' not in sys.modules, 'plotly imported by the facade'\n"
        "fig = mem.research.importance_histogram()\n"
        "assert 'plotly' in sys.modules and fig.data\n"
        "mem.close()\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_no_two_modules_of_the_features_share_a_file_name() -> None:
    """``events.py`` was three modules.  Within the facade, the feature rooms and the
    foundation, every module's file name is its own in the whole package."""
    files = [p for p in SRC.rglob("*.py") if p.name not in ("__init__.py", "__main__.py")]
    counts = Counter(p.name for p in files)
    mine = ("facade", "log", "knowledge", "automation", "sessions", "transfer")
    shared = sorted(
        str(p.relative_to(SRC))
        for p in files
        if counts[p.name] > 1
        and (len(p.relative_to(SRC).parts) == 1 or p.relative_to(SRC).parts[0] in mine)
    )
    assert shared == []
    assert [str(p.relative_to(SRC)) for p in files if p.name == "events.py"] == ["store/events.py"]


def test_the_docs_list_every_older_name() -> None:
    """docs/python-api.md's "Older names" table says what each alias stands for."""
    text = (ROOT / "docs" / "python-api.md").read_text()
    table = text.split("\n## Older names\n", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in table.splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0].startswith("mem."):
            rows[cells[0].removeprefix("mem.").split("(")[0]] = (
                cells[1].removeprefix("mem.").split("(")[0]
            )
    assert rows == ALIASES
