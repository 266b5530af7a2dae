"""Seed 000's facts (with history), macros and terminal_allowed_prefixes."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pytest

from nbmemory import InvalidInput, Memory

# -- facts ---------------------------------------------------------------------------------


def test_set_fact_upserts_and_keeps_history(mem):
    first = mem.set_fact("user", "language", "TypeScript", source="user")
    assert first["status"] == "created"
    again = mem.set_fact("user", "language", "TypeScript", source="agent")
    assert again["status"] == "unchanged"
    assert mem.fact_history().empty
    changed = mem.set_fact("user", "language", "Rust", source="agent")
    assert changed["status"] == "updated"
    assert changed["id"] == first["id"]
    facts = mem.facts()
    assert len(facts) == 1
    assert facts.iloc[0][["category", "key", "value", "source"]].tolist() == [
        "user",
        "language",
        "Rust",
        "agent",
    ]
    history = mem.fact_history("user", "language")
    assert history[["value", "source"]].values.tolist() == [["TypeScript", "agent"]]
    assert history["superseded_at"].iloc[0] >= history["valid_from"].iloc[0]
    assert pd.Timestamp(history["superseded_at"].iloc[0]) == pd.Timestamp(changed["updated_at"])
    actions = mem.audit_log(action="set_fact")
    assert len(actions) == 3


def test_facts_filter_by_category_and_namespace(mem):
    mem.set_fact("user", "name", "John")
    mem.set_fact("project", "budget", "$50k")
    mem.set_fact("user", "name", "Ana", namespace="other")
    assert list(mem.facts("user")["value"]) == ["John"]
    assert list(mem.facts()["category"]) == ["project", "user"]
    assert list(mem.facts(namespace="other")["value"]) == ["Ana"]
    assert mem.get_fact("project", "budget")["value"] == "$50k"
    assert list(mem.facts().columns) == [
        "id",
        "category",
        "key",
        "value",
        "source",
        "created_at",
        "updated_at",
    ]


def test_delete_fact_keeps_the_last_value_in_history(mem):
    mem.set_fact("user", "city", "Lisbon")
    assert mem.delete_fact("user", "city") is True
    assert mem.delete_fact("user", "city") is False
    assert mem.facts().empty
    assert list(mem.fact_history()["value"]) == ["Lisbon"]
    with pytest.raises(InvalidInput, match="no fact"):
        mem.get_fact("user", "city")


@pytest.mark.parametrize(
    "args, kwargs, message",
    [
        (("", "k", "v"), {}, "category"),
        (("c", None, "v"), {}, "key"),
        (("c", "k", ""), {}, "value"),
        (("c", "k", ["v"]), {}, "value"),
        (("c", "k", "v"), {"source": "robot"}, "source"),
        (("c", "k", "v"), {"namespace": ""}, "namespace"),
    ],
)
def test_set_fact_bad_inputs(mem, args, kwargs, message):
    with pytest.raises(InvalidInput, match=message):
        mem.set_fact(*args, **kwargs)
    assert mem.facts().empty


def test_numbers_are_stored_as_text(mem):
    assert mem.set_fact("project", "budget", 75000)["value"] == "75000"


def test_relevant_facts_by_similarity(mem):
    mem.set_fact("user", "favourite language", "TypeScript")
    mem.set_fact("user", "home city", "Lisbon Portugal")
    mem.set_fact("project", "deadline", "end of March")
    hits = mem.relevant_facts("which language does the user like", limit=2)
    assert hits["key"].iloc[0] == "favourite language"
    assert hits["similarity"].is_monotonic_decreasing
    assert len(hits) == 2
    # a changed value is re-embedded before the next query
    mem.set_fact("user", "home city", "Porto")
    assert mem.store.fetchone("SELECT embedding FROM facts WHERE key = 'home city'")[0] is None
    top = mem.relevant_facts("home city Porto", limit=1)
    assert list(top["value"]) == ["Porto"]
    assert mem.relevant_facts("qqq zzz", threshold=0.99).empty
    assert list(mem.relevant_facts("deadline", category="project")["key"]) == ["deadline"]
    with pytest.raises(InvalidInput):
        mem.relevant_facts("x", limit=-1)
    with pytest.raises(InvalidInput):
        mem.relevant_facts("")


def test_facts_survive_reopen(store_path):
    with Memory(store_path, embedder="hash") as m:
        m.set_fact("user", "name", "John")
        m.set_fact("user", "name", "Johnny")
    with Memory(store_path, embedder="hash") as m:
        assert m.get_fact("user", "name")["value"] == "Johnny"
        assert list(m.fact_history()["value"]) == ["John"]


# -- macros --------------------------------------------------------------------------------


def _tools(mem, session, names, start=dt.datetime(2024, 1, 1)):
    for i, name in enumerate(names):
        if isinstance(name, tuple):
            name, args = name
        else:
            args = None
        mem.add_event(
            session,
            "tool",
            f"output of {name}",
            tool_name=name,
            metadata=None if args is None else {"args": args},
            created_at=start + dt.timedelta(minutes=i),
        )


def test_macros_learn_chains_with_confidence(mem):
    _tools(mem, "s1", ["read_file", ("run_tests", {"path": "tests"}), "read_file", "edit_file"])
    later = dt.datetime(2024, 1, 2)
    _tools(mem, "s2", ["read_file", ("run_tests", {"path": "tests/unit"})], start=later)
    mem.add_event("s1", "user", "not a tool")  # ignored
    learnt = mem.learn_macros()
    pairs = {(r.trigger_tool, r.next_tool): r for r in learnt.itertuples()}
    assert set(pairs) == {
        ("read_file", "run_tests"),
        ("read_file", "edit_file"),
        ("run_tests", "read_file"),
    }
    assert pairs[("read_file", "run_tests")].confidence == pytest.approx(2 / 3)
    assert pairs[("read_file", "edit_file")].confidence == pytest.approx(1 / 3)
    assert pairs[("run_tests", "read_file")].confidence == pytest.approx(1.0)
    # learning twice changes nothing and writes no audit row
    audits = len(mem.audit_log(action="learn_macros"))
    again = mem.learn_macros()
    assert len(again) == 3
    assert len(mem.audit_log(action="learn_macros")) == audits
    suggestion = mem.suggest_next_tool("read_file")
    assert suggestion["next_tool"] == "run_tests"
    assert suggestion["next_args"] == {"path": "tests/unit"}  # the latest arguments seen
    assert suggestion["confidence"] == pytest.approx(2 / 3)
    assert mem.suggest_next_tool("edit_file") is None
    assert mem.suggest_next_tool("read_file", min_confidence=0.9) is None


def test_suggestions_follow_new_tool_events_and_count_uses(mem):
    _tools(mem, "s1", ["search", "open"])
    assert mem.suggest_next_tool("search")["next_tool"] == "open"
    _tools(mem, "s2", ["search", "summarise", "search", "summarise"])
    suggestion = mem.suggest_next_tool("search")  # relearnt without being asked
    assert suggestion["next_tool"] == "summarise"
    assert suggestion["confidence"] == pytest.approx(2 / 3)
    assert mem.record_macro_use(suggestion["macro_id"]) == 1
    assert mem.record_macro_use(suggestion["macro_id"]) == 2
    assert mem.suggest_next_tool("search")["used_count"] == 2
    with pytest.raises(InvalidInput, match="no macro"):
        mem.record_macro_use(99999)
    with pytest.raises(InvalidInput):
        mem.record_macro_use("1")


def test_deleted_events_drop_confidence_to_zero(mem):
    _tools(mem, "s1", ["a", "b"])
    assert mem.suggest_next_tool("a")["next_tool"] == "b"
    mem.delete(list(mem.events(session_id="s1")["id"]))
    assert mem.suggest_next_tool("a") is None
    assert mem.macros("a")["confidence"].tolist() == [0.0]


def test_a_fact_whose_caller_does_not_say_has_source_empty(mem):
    """000: facts' "source | TEXT | \"\" | Quem armazenou: \"agent\" ou \"user\""."""
    mem.facts.set("user", "editor", "vim")
    assert mem.facts.get("user", "editor")["source"] == ""
    mem.facts.set("user", "editor", "helix", source="user")
    assert mem.facts.get("user", "editor")["source"] == "user"
    with pytest.raises(InvalidInput, match="source must be"):
        mem.facts.set("user", "editor", "vim", source="someone")


def test_hand_written_macro_with_args_pattern(mem):
    macro_id = mem.add_macro("git_diff", "run_tests", {"fast": True}, trigger_args_pattern="*.py*")
    assert mem.suggest_next_tool("git_diff", {"file": "a.md"}) is None
    hit = mem.suggest_next_tool("git_diff", {"file": "a.py"})
    assert hit == {
        "macro_id": macro_id,
        "next_tool": "run_tests",
        "next_args": {"fast": True},
        "confidence": 0.0,  # 000: "confidence | REAL | 0.0"
        "used_count": 0,
    }
    for _ in range(10):  # ... and grows with use
        mem.record_macro_use(macro_id)
    grown = mem.macros("git_diff")["confidence"].tolist()
    assert grown == [pytest.approx(1 - 0.9**10)]
    mem.learn_macros()  # never touches hand-written macros
    assert mem.macros("git_diff")["confidence"].tolist() == grown
    assert mem.delete_macro(macro_id) is True
    assert mem.delete_macro(macro_id) is False
    with pytest.raises(InvalidInput):
        mem.add_macro("", "x")
    with pytest.raises(InvalidInput):
        mem.add_macro("a", "b", confidence=1.5)
    with pytest.raises(InvalidInput):
        mem.suggest_next_tool(None)


# -- allowed prefixes ----------------------------------------------------------------------


def test_allowed_prefixes_add_list_remove(mem):
    assert mem.add_allowed_prefix("git status") is True
    assert mem.add_allowed_prefix("  git   status ") is False
    assert mem.add_allowed_prefix("ls") is True
    assert mem.allowed_prefixes() == ["git status", "ls"]
    assert mem.remove_allowed_prefix("ls") is True
    assert mem.remove_allowed_prefix("ls") is False
    assert mem.allowed_prefixes() == ["git status"]
    assert len(mem.audit_log(action="allow_prefix")) == 2
    for bad in ("", "   ", None, 5):
        with pytest.raises(InvalidInput):
            mem.add_allowed_prefix(bad)


@pytest.mark.parametrize(
    "command, allowed",
    [
        ("git status", True),
        ("git status --short", True),
        ("  git  status   -s", True),
        ("git statusx", False),
        ("git stat", False),
        ("git push", False),
        ("git status; rm -rf ~", False),
        ("git status && curl evil", False),
        ("git status | sh", False),
        ("git status $(rm -rf ~)", False),
        ("git status `id`", False),
        ("git status > /etc/passwd", False),
        ("git status\nrm -rf ~", False),
        ("", False),
    ],
)
def test_is_command_allowed(mem, command, allowed):
    mem.add_allowed_prefix("git status")
    assert mem.is_command_allowed(command) is allowed


def test_is_command_allowed_bad_type(mem):
    with pytest.raises(InvalidInput):
        mem.is_command_allowed(["git", "status"])


def test_fact_values_are_redacted(mem):
    secret = "sk-" + "b" * 30
    fact = mem.set_fact("config", "openai", f"key {secret}")
    assert secret not in fact["value"] and "[REDACTED]" in fact["value"]
