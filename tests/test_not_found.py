"""One error family for a missing id: every getter and updater of the API raises a
subclass of :class:`nbmemory.NotFound` (a ``KeyError``) naming the kind and the id,
and changes nothing; the deleters that answer with a bool or a count say False / 0."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

import pytest
from IPython.core.error import UsageError

import nbmemory
from nbmemory import (
    FactNotFound,
    InvalidInput,
    MacroNotFound,
    Memory,
    MemoryNotFound,
    NotFound,
    SessionNotFound,
    TaskNotFound,
)
from nbmemory.cli import main


@pytest.fixture
def filled(mem: Memory) -> Memory:
    """One of each kind in the namespace ``there``, so a missing id is missing only here."""
    mem.add_event("s1", "user", "a message", namespace="there")
    mem.memories.add("a memory", namespace="there")
    mem.facts.set("user", "language", "Rust", namespace="there")
    mem.tasks.schedule("standup", "every day at 9am", "summarise", namespace="there")
    mem.macros.add("read_file", "edit_file", namespace="there")
    mem.sessions.start("ann", namespace="there", session_id="sess_there")
    return mem


#: (call, the error's class, its kind, its id) for every call that raises on a missing id,
#: under its grouped name and under its older flat name.
RAISING: list[tuple[str, Callable[[Memory], Any], type[NotFound], str, Any]] = [
    ("get", lambda m: m.get("nope"), MemoryNotFound, "memory", "nope"),
    ("get_event", lambda m: m.get_event("nope"), MemoryNotFound, "memory", "nope"),
    ("update", lambda m: m.update("nope", content="x"), MemoryNotFound, "memory", "nope"),
    ("memories.get", lambda m: m.memories.get("nope"), MemoryNotFound, "memory", "nope"),
    ("get_memory", lambda m: m.get_memory("nope"), MemoryNotFound, "memory", "nope"),
    (
        "memories.update",
        lambda m: m.memories.update("nope", content="x"),
        MemoryNotFound,
        "memory",
        "nope",
    ),
    (
        "update_memory",
        lambda m: m.update_memory("nope", metadata={}),
        MemoryNotFound,
        "memory",
        "nope",
    ),
    ("facts.get", lambda m: m.facts.get("user", "nope"), FactNotFound, "fact", ("user", "nope")),
    ("get_fact", lambda m: m.get_fact("user", "nope"), FactNotFound, "fact", ("user", "nope")),
    ("tasks.get", lambda m: m.tasks.get("nope"), TaskNotFound, "scheduled task", "nope"),
    ("get_task", lambda m: m.get_task("nope"), TaskNotFound, "scheduled task", "nope"),
    ("tasks.pause", lambda m: m.tasks.pause("nope"), TaskNotFound, "scheduled task", "nope"),
    ("pause_task", lambda m: m.pause_task("nope"), TaskNotFound, "scheduled task", "nope"),
    ("tasks.resume", lambda m: m.tasks.resume("nope"), TaskNotFound, "scheduled task", "nope"),
    ("resume_task", lambda m: m.resume_task("nope"), TaskNotFound, "scheduled task", "nope"),
    ("macros.record_use", lambda m: m.macros.record_use(999), MacroNotFound, "macro", 999),
    ("record_macro_use", lambda m: m.record_macro_use(999), MacroNotFound, "macro", 999),
    ("sessions.get", lambda m: m.sessions.get("nope"), SessionNotFound, "session", "nope"),
    ("get_session", lambda m: m.get_session("nope"), SessionNotFound, "session", "nope"),
    ("sessions.resume", lambda m: m.sessions.resume("nope"), SessionNotFound, "session", "nope"),
    ("continue_session", lambda m: m.continue_session("nope"), SessionNotFound, "session", "nope"),
    (
        "sessions.save_state",
        lambda m: m.sessions.save_state("nope", {"a": 1}),
        SessionNotFound,
        "session",
        "nope",
    ),
    (
        "save_session_state",
        lambda m: m.save_session_state("nope", {"a": 1}),
        SessionNotFound,
        "session",
        "nope",
    ),
    ("sessions.close", lambda m: m.sessions.close("nope"), SessionNotFound, "session", "nope"),
    ("close_session", lambda m: m.close_session("nope"), SessionNotFound, "session", "nope"),
    ("sessions.delete", lambda m: m.sessions.delete("nope"), SessionNotFound, "session", "nope"),
    ("delete_session", lambda m: m.delete_session("nope"), SessionNotFound, "session", "nope"),
    (
        "transfer.export_json",
        lambda m: m.transfer.export_json("out.json", session_id="nope"),
        SessionNotFound,
        "session",
        "nope",
    ),
]


@pytest.mark.parametrize(
    ("call", "error", "kind", "missing"), [r[1:] for r in RAISING], ids=[r[0] for r in RAISING]
)
def test_a_missing_id_raises_its_kind_of_not_found_and_changes_nothing(
    filled: Memory, tmp_path, monkeypatch, call, error, kind, missing
) -> None:
    monkeypatch.chdir(tmp_path)
    trail = len(filled.audit.log())
    events = len(filled.events(namespace="there"))
    with pytest.raises(error) as info:
        call(filled)
    exc = info.value
    assert isinstance(exc, KeyError) and isinstance(exc, NotFound)
    assert isinstance(exc, nbmemory.NbMemoryError)
    assert (exc.kind, exc.id, exc.namespace) == (kind, missing, "default")
    message = str(exc)
    assert "\n" not in message and kind in message and "'default'" in message
    parts = missing if isinstance(missing, tuple) else (missing,)
    assert all(repr(part) in message for part in parts)
    assert len(filled.audit.log()) == trail  # nothing written, not even an audit row
    assert len(filled.events(namespace="there")) == events
    assert not (tmp_path / "out.json").exists()


def test_one_except_catches_every_kind(filled: Memory) -> None:
    caught = []
    for _, call, *_ in RAISING:
        try:
            call(filled)
        except KeyError as exc:
            caught.append(type(exc))
    assert len(caught) == len(RAISING)
    assert set(caught) == {
        MemoryNotFound,
        FactNotFound,
        TaskNotFound,
        MacroNotFound,
        SessionNotFound,
    }


def test_the_ids_exist_in_their_own_namespace(filled: Memory) -> None:
    """The same calls find what the fixture stored where it stored it (the misses above
    are misses of the namespace, not of the call)."""
    memory = filled.memories.list(namespace="there")["id"].iloc[0]
    task = filled.tasks.list(namespace="there")["id"].iloc[0]
    macro = int(filled.macros.list(namespace="there")["id"].iloc[0])
    assert filled.get(memory, namespace="there").content == "a memory"
    assert filled.memories.get(memory, namespace="there").content == "a memory"
    assert filled.facts.get("user", "language", namespace="there")["value"] == "Rust"
    assert filled.tasks.get(task, namespace="there")["name"] == "standup"
    assert filled.macros.record_use(macro, namespace="there") == 1
    assert filled.sessions.get("sess_there", namespace="there").user_id == "ann"
    with pytest.raises(MemoryNotFound, match="in namespace 'elsewhere'"):
        filled.get(memory, namespace="elsewhere")


def test_fact_task_and_macro_misses_are_still_invalid_input(filled: Memory) -> None:
    """What they raised before NotFound existed: older ``except InvalidInput`` still works."""
    for call in (
        lambda: filled.facts.get("user", "nope"),
        lambda: filled.tasks.get("nope"),
        lambda: filled.macros.record_use(999),
    ):
        with pytest.raises(InvalidInput):
            call()


@pytest.mark.parametrize(
    ("call", "answer"),
    [
        (lambda m: m.delete("nope"), 0),
        (lambda m: m.delete(["nope", "nada"]), 0),
        (lambda m: m.memories.delete("nope"), False),
        (lambda m: m.delete_memory("nope"), False),
        (lambda m: m.facts.delete("user", "nope"), False),
        (lambda m: m.delete_fact("user", "nope"), False),
        (lambda m: m.tasks.delete("nope"), False),
        (lambda m: m.delete_task("nope"), False),
        (lambda m: m.macros.delete(999), False),
        (lambda m: m.delete_macro(999), False),
        (lambda m: m.prefixes.remove("git status"), False),
        (lambda m: m.remove_allowed_prefix("git status"), False),
        (lambda m: m.memories.clear({"session_id": "nope"}), 0),
    ],
)
def test_deleters_that_answer_say_nothing_was_there(filled: Memory, call, answer) -> None:
    """Deleting is idempotent: what is already gone is not an error (documented)."""
    trail = len(filled.audit.log())
    result = call(filled)
    assert result == answer and type(result) is type(answer)
    assert len(filled.audit.log()) == trail


def test_generate_embedding_answers_in_the_astreus_api_words(filled: Memory) -> None:
    result = filled.memories.generate_embedding("nope")
    assert result == {"success": False, "message": "Memory not found"}


def test_the_errors_pickle_with_their_fields() -> None:
    for exc in (
        MemoryNotFound("m1", "ns"),
        SessionNotFound("s1", "ns", "is closed"),
        FactNotFound(("user", "k"), "ns"),
        TaskNotFound("t1", "ns"),
        MacroNotFound(7, "ns"),
    ):
        copy = pickle.loads(pickle.dumps(exc))
        assert type(copy) is type(exc)
        assert (str(copy), copy.id, copy.namespace) == (str(exc), exc.id, exc.namespace)


def test_the_magics_show_a_miss_as_one_line(ip) -> None:
    with pytest.raises(UsageError) as info:
        ip.run_line_magic("memory", "forget nope")
    assert str(info.value) == "no memory with id 'nope' in namespace 'default'"


def test_the_command_line_shows_a_miss_as_one_line(capsys, store_path: str) -> None:
    Memory(store_path, embedder="hash").close()
    code = main(["state", "delete", "--session-id", "nope", "--store", store_path])
    err = capsys.readouterr().err
    assert code == 1
    assert err.count("\n") == 1
    assert err.startswith("nbmemory: error: session 'nope' not found in namespace 'default'")
