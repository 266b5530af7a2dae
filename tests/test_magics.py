"""The notebook surface on a real IPython ``InteractiveShell`` (no mocks), offline embedder.

Cells go through ``shell.run_cell`` so IPython's own input transformation (help
syntax, cell magics, prompt stripping) is part of what is tested.
"""

from __future__ import annotations

import datetime as dt
import html
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from notebook_shell import holding, run

from nbmemory import Context, Event, Memory
from nbmemory.notebook.magics import RECALL_COLUMNS, MemoryMagics, MemoryStatus
from nbmemory.retrieval.embedders import HashEmbedder


def snapshot(magics: MemoryMagics) -> tuple[int, int]:
    """(events, audit rows) of the store: what a refused input must leave alone."""
    mem = magics.memory
    return len(mem.events()), len(mem.audit_log())


CONVERSATION = [
    ("user", "My name is John and I love TypeScript", None),
    ("assistant", "Nice to meet you, John! TypeScript is a great language", None),
    ("user", "Our project budget is 50k dollars and the deadline is March", "0.9"),
    ("tool", "calendar.create deadline March 3 ok", None),
]


def remember_conversation(shell: InteractiveShell, session: str = "notebook") -> list[Event]:
    events = []
    for role, text, importance in CONVERSATION:
        extra = f" --importance {importance}" if importance else ""
        events.append(run(shell, f"%%remember --role {role} --session {session}{extra}\n{text}"))
    return events


# -- loading ---------------------------------------------------------------------------
@pytest.mark.slow
def test_importing_nbmemory_registers_nothing(tmp_path):
    code = textwrap.dedent(
        """
        from IPython.core.interactiveshell import InteractiveShell
        shell = InteractiveShell.instance()
        before = {k: set(v) for k, v in shell.magics_manager.magics.items()}
        import nbmemory, nbmemory.notebook.magics
        after = {k: set(v) for k, v in shell.magics_manager.magics.items()}
        assert before == after, after
        assert "MemoryMagics" not in shell.magics_manager.registry
        print("ok")
        """
    )
    env = {**os.environ, "IPYTHONDIR": str(tmp_path / "ipython")}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("ok")


def test_load_registers_one_class_and_unload_restores_ipython(shell, tmp_path):
    history_recall = shell.magics_manager.magics["line"]["recall"]
    cleanup_before = list(shell.input_transformers_cleanup)
    shell.run_line_magic("load_ext", "nbmemory")
    try:
        magics = shell.magics_manager.registry["MemoryMagics"]
        assert isinstance(magics, MemoryMagics)
        magics.embedder, magics.path = "hash", str(tmp_path / "loaded.duckdb")
        memory = magics.memory  # the store the magics opened
        line, cell = shell.magics_manager.magics["line"], shell.magics_manager.magics["cell"]
        for name in ("recall", "context", "memory"):
            assert line[name].__self__ is magics
        assert cell["remember"].__self__ is magics
        assert magics in shell.configurables
        assert len(shell.input_transformers_cleanup) == len(cleanup_before) + 1
    finally:
        shell.run_line_magic("unload_ext", "nbmemory")
    line, cell = shell.magics_manager.magics["line"], shell.magics_manager.magics["cell"]
    assert "remember" not in cell and "context" not in line and "memory" not in line
    assert line["recall"] is history_recall
    assert "MemoryMagics" not in shell.magics_manager.registry
    assert magics not in shell.configurables
    assert list(shell.input_transformers_cleanup) == cleanup_before
    assert memory.closed  # unloading closed the store
    # IPython's %recall is back: bare %recall puts the last result on the next input
    run(shell, "6 * 7")
    run(shell, "%recall")
    assert shell.rl_next_input == "42"


def test_unload_after_config_gives_back_a_working_history_recall(shell, tmp_path):
    """``%config`` loads IPython's lazy magics; the placeholder of ``%recall`` saved at
    load can then no longer load, and put back it broke ``%recall`` after unload."""
    shell.run_line_magic("load_ext", "nbmemory")
    try:
        magics = shell.magics_manager.registry["MemoryMagics"]
        magics.embedder, magics.path = "hash", str(tmp_path / "config.duckdb")
        run(shell, "%config MemoryMagics.embed_timeout = 5")
    finally:
        shell.run_line_magic("unload_ext", "nbmemory")
    run(shell, "6 * 7")
    run(shell, "%recall")
    assert shell.rl_next_input == "42"


def test_reload_ext_gives_a_fresh_instance_and_closes_the_old_store(ip, magics, tmp_path):
    run(ip, "%%remember\nbefore the reload")
    old_memory = magics.memory
    run(ip, "%reload_ext nbmemory")
    new = ip.magics_manager.registry["MemoryMagics"]
    assert new is not magics
    assert old_memory.closed
    ours = [t for t in ip.input_transformers_cleanup if getattr(t, "_nbmemory", False)]
    assert len(ours) == 1
    new.embedder = "hash"
    new.path = magics.path
    assert run(ip, "%recall before the reload")["content"].tolist() == ["before the reload"]


def test_config_from_the_kernel_config_file_reaches_the_magics(shell, tmp_path):
    shell.config.MemoryMagics.relevance_threshold = 0.3
    shell.config.MemoryMagics.session = "from-config"
    try:
        shell.extension_manager.load_extension("nbmemory")
        magics = shell.magics_manager.registry["MemoryMagics"]
        assert magics.relevance_threshold == 0.3
        assert magics.session == "from-config"
    finally:
        shell.extension_manager.unload_extension("nbmemory")
        del shell.config["MemoryMagics"]


def test_a_bad_value_in_the_config_file_is_a_usage_error(shell):
    shell.config.MemoryMagics.relevance_threshold = 3.0
    try:
        with pytest.raises(UsageError, match="relevance_threshold"):
            shell.extension_manager.load_extension("nbmemory")
        assert "MemoryMagics" not in shell.magics_manager.registry
    finally:
        del shell.config["MemoryMagics"]


# -- %%remember ------------------------------------------------------------------------
def test_remember_stores_the_body_exactly_and_displays_one_line(ip, magics):
    body = "  indented {not_a_var} $HOME\n>>> looks like a prompt\nIn [3]: too\ttabs  \n\nend"
    event = run(ip, "%%remember\n" + body)
    assert isinstance(event, Event)
    assert magics.memory.get_event(event.id).content == body
    assert (event.session_id, event.role, event.importance) == ("notebook", "user", 0.5)
    shown, _ = ip.display_formatter.format(event)
    assert shown["text/plain"] == event.summary()
    assert "\n" not in shown["text/plain"] and event.id in shown["text/plain"]
    assert html.escape(event.summary()) in shown["text/html"]


def test_remember_options(ip, magics):
    cell = (
        '%%remember --role assistant --session "my session" --importance 0.95 '
        "--namespace other --kind memory --meta source=chat --meta 'note=hello world' "
        "--meta empty=\nThe deploy is on Fridays"
    )
    event = run(ip, cell)
    stored = magics.memory.get_event(event.id, namespace="other")
    assert stored.content == "The deploy is on Fridays"
    assert stored.role == "assistant"
    assert stored.session_id == "my session"
    assert stored.importance == pytest.approx(0.95)
    assert stored.namespace == "other"
    assert stored.kind == "memory"
    assert stored.metadata == {"source": "chat", "note": "hello world", "empty": ""}


def test_remember_defaults_come_from_the_traits(ip, magics):
    run(ip, "%config MemoryMagics.session = 'agent-7'")
    run(ip, "%config MemoryMagics.role = 'system'")
    event = run(ip, "%%remember\nYou are terse.")
    assert (event.session_id, event.role, event.importance) == ("agent-7", "system", 0.1)


def test_remember_interpolates_only_when_asked(ip, magics):
    ip.user_ns["topic"] = "TypeScript"
    ip.user_ns["user"] = {"name": "John"}
    plain = run(ip, "%%remember\nI love {topic}")
    assert plain.content == "I love {topic}"
    filled = run(ip, "%%remember --interpolate\n{user[name]} loves {topic} {{braces}}")
    assert filled.content == "John loves TypeScript {braces}"
    short = run(ip, "%%remember -i\n{topic}!")
    assert short.content == "TypeScript!"
    before = snapshot(magics)
    with pytest.raises(UsageError, match="names no variable"):
        run(ip, "%%remember -i\nI love {nothing_defined_here}")
    with pytest.raises(UsageError, match="interpolate"):
        run(ip, "%%remember -i\nunbalanced } brace")
    assert snapshot(magics) == before


def test_remember_stores_nul_bytes_exactly(ip, magics):
    text = "before\x00after\x00"
    event = ip.run_cell_magic("remember", "", text)
    assert magics.memory.get_event(event.id).content == text


def test_remember_session_with_quotes_and_sql_is_just_a_name(ip, magics):
    first = run(ip, '%%remember --session "x\'; DROP TABLE events; --"\nhello')
    second = run(ip, "%%remember --session 'Robert\"); DELETE FROM events;--'\nagain")
    assert first.session_id == "x'; DROP TABLE events; --"
    assert second.session_id == 'Robert"); DELETE FROM events;--'
    run(ip, "%%remember\nstill here")
    sessions = magics.memory.events()["session_id"].tolist()
    assert sessions == [first.session_id, second.session_id, "notebook"]
    found = run(ip, '%recall hello --session "x\'; DROP TABLE events; --"')
    assert found["content"].tolist() == ["hello"]


# -- %recall ---------------------------------------------------------------------------
def test_recall_returns_a_dataframe_best_first(ip, magics, capsys):
    events = remember_conversation(ip)
    capsys.readouterr()
    frame = ip.run_line_magic("recall", "what language do I love")
    assert isinstance(frame, pd.DataFrame)
    assert list(frame.columns) == RECALL_COLUMNS
    assert len(frame) == 4  # top k (5) of 4 memories
    assert frame["id"].iloc[0] in {events[0].id, events[1].id}  # the two about TypeScript
    assert frame["score"].is_monotonic_decreasing
    assert frame["session"].unique().tolist() == ["notebook"]
    assert capsys.readouterr().out == ""  # a result, not a print


def test_recall_options(ip, magics):
    events = remember_conversation(ip)
    run(ip, "%%remember --session other --role user\nI love TypeScript generics")
    assert len(run(ip, "%recall TypeScript -k 2")) == 2
    assert len(run(ip, "%recall TypeScript -k2")) == 2
    only_other = run(ip, "%recall TypeScript --session other")
    assert only_other["session"].tolist() == ["other"]
    tools = run(ip, "%recall deadline --role tool")
    assert tools["id"].tolist() == [events[3].id]
    high = run(ip, "%recall I love TypeScript --threshold 0.5")
    assert len(high) >= 1 and (high["similarity"] >= 0.5).all()
    created = magics.memory.get_event(events[0].id).created_at
    assert run(ip, f"%recall TypeScript --since {created.year + 1}-01-01").empty
    assert len(run(ip, f"%recall TypeScript --until {created.year + 1}-01-01")) == 5
    assert len(run(ip, "%recall TypeScript --since 2000-01-01T00:00:00Z -k 3")) == 3
    run(ip, "%config MemoryMagics.recall_limit = 1")
    assert len(run(ip, "%recall TypeScript")) == 1


def test_recall_keeps_the_query_text_as_typed(ip, magics):
    run(ip, "%%remember\nwhat's John's favourite language")
    frame = run(ip, "%recall what's John's favourite language -k 1")
    assert frame.attrs["query"] == "what's John's favourite language"
    quoted = run(ip, '%recall "-k is part of this query" -k 1')
    assert quoted.attrs["query"] == "-k is part of this query"
    number = run(ip, "%recall -- 2024 -k")
    assert number.attrs["query"] == "2024 -k"


def test_recall_threshold_with_no_hit_says_how_close_it_came(ip, magics, capsys):
    remember_conversation(ip)
    frame = run(ip, "%recall TypeScript --threshold 0.99")
    assert frame.empty and list(frame.columns) == RECALL_COLUMNS
    best = frame.attrs["best_similarity"]
    assert 0 < best < 0.99
    out = capsys.readouterr().out
    assert "0.99" in out and f"{best:.3f}" in out and "--threshold" in out
    run(ip, "%config MemoryMagics.recall_threshold = 0.99")
    assert run(ip, "%recall TypeScript").empty
    assert len(run(ip, "%recall TypeScript --threshold -1")) == 4


def test_recall_on_an_empty_store_says_so(ip, magics, capsys):
    assert run(ip, "%recall anything").empty
    assert "store some with %%remember" in capsys.readouterr().out


def test_questions_ending_in_a_question_mark_search(ip, magics, capsys):
    remember_conversation(ip)
    frame = run(ip, "%recall what do I love?")
    assert isinstance(frame, pd.DataFrame) and frame.attrs["query"] == "what do I love?"
    run(ip, "hits = %recall what do I love? -k 1")
    assert len(ip.user_ns["hits"]) == 1
    context = run(ip, "%context what is the budget?")
    assert isinstance(context, Context) and context.query == "what is the budget?"
    capsys.readouterr()
    # the magic's own help still works
    run(ip, "%recall?")
    assert "usage: %recall" in capsys.readouterr().out


def test_question_lines_inside_a_longer_cell_search_too(ip, magics):
    remember_conversation(ip)
    run(
        ip,
        "question = 'unused'\nfound = %recall what is the budget?\nif True:\n    again = %context what is the budget?",
    )
    assert ip.user_ns["found"].attrs["query"] == "what is the budget?"
    assert isinstance(ip.user_ns["again"], Context)


def test_terminal_still_waits_for_the_body_of_a_remember_cell(ip):
    manager = ip.input_transformer_manager
    assert manager.check_complete("%%remember --role user\n")[0] == "incomplete"
    assert manager.check_complete("%%remember\nsome text\n")[0] == "incomplete"
    assert manager.check_complete("%%remember\nsome text\n\n")[0] == "complete"
    assert manager.check_complete("%recall what do I like?\n")[0] == "complete"


def test_memory_lines_ending_in_a_question_mark_show_help(ip, magics, capsys):
    run(ip, "%memory forget?")
    assert "usage: %memory forget" in capsys.readouterr().out
    run(ip, "%memory?")
    assert "Housekeeping" in capsys.readouterr().out


def test_magic_lines_are_not_variable_expanded(ip, magics):
    ip.user_ns["q"] = "SHOULD NOT APPEAR"
    frame = run(ip, "%recall costs $q and {q}")
    assert frame.attrs["query"] == "costs $q and {q}"
    event = run(ip, "%%remember --meta note={q}\n$q")
    assert event.content == "$q" and event.metadata == {"note": "{q}"}


def test_magic_writes_are_audited_as_the_magic(ip, magics):
    event = run(ip, "%%remember\naudit me")
    run(ip, f"%memory forget {event.id}")
    log = magics.memory.audit_log()
    assert set(log["actor"]) == {"magic"}
    assert {"add", "delete"} <= set(log["action"])


def test_bare_and_numeric_recall_and_rep_stay_ipython_history(ip, magics):
    run(ip, "x = 'first line'")
    number = ip.execution_count - 1
    assert run(ip, f"%recall {number}") is None
    assert ip.rl_next_input == "x = 'first line'"
    ip.rl_next_input = None
    run(ip, f"%rep {number}")
    assert ip.rl_next_input == "x = 'first line'"
    run(ip, "'last value'")
    run(ip, "%recall")
    assert ip.rl_next_input == "last value"
    run(ip, "'other value'")
    run(ip, "%rep")
    assert ip.rl_next_input == "other value"
    assert len(magics.memory.events()) == 0


# -- %context --------------------------------------------------------------------------
def test_context_returns_the_tri_hybrid_context(ip, magics):
    events = remember_conversation(ip)
    run(ip, "%%remember --session elsewhere\nunrelated chatter about the weather")
    context = run(ip, "%context what is the project budget")
    assert isinstance(context, Context) and context.session_id == "notebook"
    frame = context.to_frame()
    assert set(frame["id"]) >= {e.id for e in events}
    budget = frame.set_index("id").loc[events[2].id, "strategies"]
    assert "salience" in budget and "recency" in budget
    assert "strategies" in context._repr_html_()
    other = run(ip, "%context --session elsewhere")
    assert other.session_id == "elsewhere" and other.query is None
    assert [i.content for i in other.by_strategy("recency")] == [
        "unrelated chatter about the weather"
    ]


def test_context_explain_lists_near_misses(ip, magics):
    remember_conversation(ip, session="past")
    context = run(ip, "%context TypeScript language --explain --threshold 0.99")
    assert context.by_strategy("relevance") == []
    misses = context.near_misses
    assert isinstance(misses, pd.DataFrame) and not misses.empty
    relevance = misses[misses["strategy"] == "relevance"]
    assert (relevance["missed_by"] > 0).all()
    assert "Near misses" in context._repr_html_()
    assert run(ip, "%context TypeScript").near_misses is None


def test_config_relevance_threshold_changes_what_context_finds(ip, magics):
    remember_conversation(ip, session="past")
    run(ip, "%config MemoryMagics.relevance_threshold = 0.99")
    assert run(ip, "%context I love TypeScript").by_strategy("relevance") == []
    assert magics.memory.settings.relevance_threshold == 0.99
    run(ip, "%config MemoryMagics.relevance_threshold = 0.1")
    found = run(ip, "%context I love TypeScript").by_strategy("relevance")
    assert found and found[0].content == "My name is John and I love TypeScript"
    run(ip, "%config MemoryMagics.relevance_limit = 1")
    assert len(run(ip, "%context I love TypeScript").by_strategy("relevance")) == 1


def test_bad_config_values_are_refused(ip, magics, caplog):
    run(ip, "%config MemoryMagics.relevance_threshold = 5")
    assert magics.relevance_threshold is None  # unchanged: follows the profile
    assert magics.settings().relevance_threshold == 0.2
    run(ip, "%config MemoryMagics.profile = 'fast'")
    assert magics.profile == "hybrid"
    run(ip, "%config MemoryMagics.profile = 'spec'")
    assert magics.settings().relevance_threshold == 0.65
    assert "relevance_threshold must be a number between -1 and 1" in caplog.text
    run(ip, "%config MemoryMagics.session = '  '")
    assert magics.session == "notebook"
    run(ip, "%config MemoryMagics.recall_limit = -1")
    assert magics.recall_limit == 5


def test_changing_the_path_reopens_the_store(ip, magics, tmp_path):
    run(ip, "%%remember\nin the first store")
    first = magics.memory
    ip.user_ns["second_path"] = str(tmp_path / "second.duckdb")
    run(ip, "%config MemoryMagics.path = second_path")
    assert first.closed
    assert magics.memory.path == str(tmp_path / "second.duckdb")
    assert len(magics.memory.events()) == 0


def test_settings_reach_the_store(ip, magics):
    run(ip, "%config MemoryMagics.max_content_bytes = 10")
    with pytest.raises(UsageError, match="over the"):
        run(ip, "%%remember\nthis is longer than ten bytes")
    assert magics.settings().max_content_bytes == 10


# -- %memory ---------------------------------------------------------------------------
def test_memory_status(ip, magics):
    remember_conversation(ip)
    status = run(ip, "%memory status")
    assert isinstance(status, MemoryStatus)
    assert status["events"] == 4 and status["path"] == magics.path
    assert status["model"] == "nbmemory/hash-384"
    counts = status.to_frame()
    assert counts[["session_id", "kind", "events"]].values.tolist() == [["notebook", "message", 4]]
    shown, _ = ip.display_formatter.format(status)
    assert magics.path in shown["text/html"] and "embedded" in shown["text/plain"]


def test_memory_forget_by_id_and_by_filter(ip, magics, capsys):
    events = remember_conversation(ip)
    run(ip, "%%remember --session other\nkeep me")
    gone = run(ip, f"%memory forget {events[0].id} {events[1].id}")
    assert gone["id"].tolist() == [events[0].id, events[1].id]
    assert "forgot 2 memories" in capsys.readouterr().out
    assert len(magics.memory.events()) == 3
    preview = run(ip, "%memory forget --session notebook --role tool --dry-run")
    assert preview["id"].tolist() == [events[3].id]
    assert len(magics.memory.events()) == 3
    run(ip, "%memory forget --session notebook")
    assert magics.memory.events()["content"].tolist() == ["keep me"]
    actions = magics.memory.audit_log(action="delete")
    assert len(actions) == 2


def test_memory_forget_by_time_window(ip, magics):
    old = magics.memory.add_event("notebook", "user", "old news", created_at="2020-01-01T00:00:00Z")
    new = run(ip, "%%remember\nfresh news")
    assert run(ip, "%memory forget --until 2021-01-01 --dry-run")["id"].tolist() == [old.id]
    run(ip, "%memory forget --since 2021-01-01")
    assert magics.memory.events()["id"].tolist() == [old.id]
    assert new.id not in set(magics.memory.events()["id"])


def test_memory_forget_purge_erases_the_bytes(ip, magics, capsys):
    doomed = run(ip, "%%remember\nthe vault code is vault-code-ocelot-58")
    run(ip, "%%remember\nkeep this one")
    path = magics.memory.path
    run(ip, f"%memory forget {doomed.id} --purge")
    out = capsys.readouterr().out
    assert "forgot 1 memories" in out and "gone from its bytes" in out
    assert b"vault-code-ocelot-58" not in Path(path).read_bytes()
    assert magics.memory.events()["content"].tolist() == ["keep this one"]
    run(ip, "%memory forget --purge")  # the rewrite alone
    assert "rewrote" in capsys.readouterr().out


def test_memory_forget_refusals_delete_nothing(ip, magics):
    events = remember_conversation(ip)
    before = snapshot(magics)
    with pytest.raises(UsageError, match="no memory with id"):
        run(ip, f"%memory forget {events[0].id} no-such-id")
    with pytest.raises(UsageError, match="forget what"):
        run(ip, "%memory forget")
    with pytest.raises(UsageError, match="not both"):
        run(ip, f"%memory forget {events[0].id} --session notebook")
    assert snapshot(magics) == before
    run(ip, "%memory forget --all")
    assert magics.memory.events().empty


def test_memory_flush_and_close(ip, magics, capsys):
    run(ip, "%%remember\nembedded soon")
    status = run(ip, "%memory flush --timeout 60")
    assert isinstance(status, MemoryStatus)
    assert status["embedded"] == 1 and status["pending"] == 0 and status["backlog"] == 0
    mem = magics.memory
    run(ip, "%memory close")
    assert mem.closed and "closed" in capsys.readouterr().out
    assert run(ip, "%recall embedded")["content"].tolist() == ["embedded soon"]


def test_memory_sessions(ip, magics):
    remember_conversation(ip)
    run(ip, "%%remember --session 'second chat'\nhello again")
    run(ip, "%%remember --namespace elsewhere --session hidden\nnot here")
    sessions = run(ip, "%memory sessions")
    assert isinstance(sessions, pd.DataFrame)
    counts = dict(zip(sessions["session_id"], sessions["events"], strict=True))
    assert counts == {"notebook": 4, "second chat": 1}
    assert set(run(ip, "%memory sessions --namespace elsewhere")["session_id"]) == {"hidden"}
    assert set(run(ip, "%memory sessions --all")["session_id"]) == {
        "notebook",
        "second chat",
        "hidden",
    }


def test_memory_facts(ip, magics):
    assert run(ip, "%memory facts").empty
    magics.memory.set_fact("preferences", "language", "TypeScript")
    magics.memory.set_fact("project", "budget", "50k")
    facts = run(ip, "%memory facts")
    assert isinstance(facts, pd.DataFrame)
    assert facts[["category", "key", "value"]].values.tolist() == [
        ["preferences", "language", "TypeScript"],
        ["project", "budget", "50k"],
    ]
    only = run(ip, "%memory facts --category project")
    assert only["value"].tolist() == ["50k"]


def test_memory_export_and_import_round_trip(ip, magics, tmp_path):
    events = remember_conversation(ip)
    run(ip, "%%remember --session other\nnot exported")
    whole = tmp_path / "namespace.json"
    assert run(ip, f"%memory export '{whole}' --namespace default")["events"] == 5
    target = tmp_path / "one session.json"
    summary = run(ip, f"%memory export '{target}' --session notebook")
    assert target.exists() and isinstance(summary, dict)
    run(ip, "%memory forget --all")
    assert magics.memory.events().empty
    result = run(ip, f'%memory import "{target}"')
    assert result["events_added"] == 4
    restored = magics.memory.events()
    assert sorted(restored["id"]) == sorted(e.id for e in events)
    assert run(ip, f'%memory import "{target}"')["events_added"] == 0
    moved = run(ip, f'%memory import "{target}" --namespace archive')
    assert moved["events_added"] == 4
    assert len(magics.memory.events(namespace="archive")) == 4
    with pytest.raises(UsageError):
        run(ip, f"%memory import '{tmp_path / 'missing.json'}'")
    with pytest.raises(UsageError):
        run(ip, f"%memory export '{tmp_path / 'no' / 'dir.json'}'")


@pytest.mark.parametrize(
    "command", ["status", "sessions", "facts", "forget", "export", "import", "flush", "close"]
)
def test_every_memory_subcommand_has_help(ip, magics, capsys, command):
    assert run(ip, f"%memory {command} --help") is None
    assert f"usage: %memory {command}" in capsys.readouterr().out


def test_memory_without_subcommand_prints_the_list(ip, magics, capsys):
    run(ip, "%memory")
    out = capsys.readouterr().out
    for command in ("status", "sessions", "facts", "forget", "export", "import", "flush"):
        assert command in out
    with pytest.raises(UsageError, match="invalid choice"):
        run(ip, "%memory explode")


@pytest.mark.parametrize("magic", ["%%remember --help\nbody", "%recall --help", "%context --help"])
def test_help_option_prints_usage(ip, magics, capsys, magic):
    assert run(ip, magic) is None
    assert "usage: %" in capsys.readouterr().out
    assert len(magics.memory.events()) == 0


# -- bad input: one-line UsageError, store unchanged -----------------------------------
BAD_INPUT = [
    ("%%remember --bogus\ntext", "unrecognized arguments: --bogus"),
    ("%recall TypeScript --bogus", "unrecognized arguments: --bogus"),
    ("%context --bogus", "unrecognized arguments: --bogus"),
    ("%memory status --bogus", "unrecognized arguments: --bogus"),
    ("%%remember --importance 2\ntext", "importance must be a number between 0 and 1"),
    ("%%remember --importance abc\ntext", "invalid float value"),
    ("%recall TypeScript --threshold abc", "invalid float value: 'abc'"),
    ("%recall TypeScript --threshold 2", "threshold must be a number"),
    ("%recall TypeScript -k -1", "give -k 1 or more"),
    ("%recall TypeScript --since yesterday", "not an ISO-8601 date-time"),
    ("%recall -k 3", "give a question"),
    ("%%remember\n", "empty"),
    ("%%remember\n   \n\t\n", "empty"),
    ("%%remember --role wizard\ntext", "unknown role 'wizard'"),
    ("%%remember --meta novalue\ntext", "--meta takes key=value"),
    ("%%remember --meta =value\ntext", "--meta takes key=value"),
    ("%%remember stray words\ntext", "unexpected 'stray words'"),
    ("%context --threshold 7", "relevance_threshold must be a number"),
]


@pytest.mark.parametrize(("cell", "message"), BAD_INPUT)
def test_bad_input_is_one_line_usage_error_and_stores_nothing(ip, magics, capsys, cell, message):
    remember_conversation(ip)
    before = snapshot(magics)
    capsys.readouterr()
    result = ip.run_cell(cell, store_history=True)
    assert isinstance(result.error_in_exec, UsageError), result.error_in_exec
    assert message in str(result.error_in_exec)
    err = capsys.readouterr().err.strip()
    assert err.startswith("UsageError: ") and "\n" not in err and "Traceback" not in err
    assert snapshot(magics) == before


def test_recall_on_a_store_another_process_holds_is_a_usage_error(ip, magics):
    Memory(magics.path, embedder="hash").close()  # create the file
    with holding(magics.path):
        with pytest.raises(UsageError, match="in use by process"):
            run(ip, "%recall anything")
        with pytest.raises(UsageError, match="in use by process"):
            run(ip, "%%remember\nnot stored")
    assert run(ip, "%recall anything").empty  # free again: opens and answers


def test_recall_says_when_embeddings_are_still_running(ip, magics, capsys, monkeypatch):
    release = threading.Event()
    embed = HashEmbedder.embed

    def slow(self: HashEmbedder, texts: list[str]) -> np.ndarray:
        if "waiting for its vector" in texts:  # the worker's batch, not a query or probe
            release.wait(60)
        return embed(self, texts)

    monkeypatch.setattr(HashEmbedder, "embed", slow)  # the magics' embedder="hash"
    run(ip, "%config MemoryMagics.embed_timeout = 0.2")
    try:
        run(ip, "%%remember\nwaiting for its vector")
        frame = run(ip, "%recall waiting --mode vector")
        assert frame.empty
        assert "still being embedded" in capsys.readouterr().out
        # keywords need no vector: the hybrid ranking finds it already
        frame = run(ip, "%recall waiting")
        assert frame["content"].tolist() == ["waiting for its vector"]
        assert frame["signals"].iloc[0] == "keyword" and np.isnan(frame["similarity"].iloc[0])
    finally:
        release.set()
    assert magics.memory.flush(60)
    assert run(ip, "%recall waiting")["content"].tolist() == ["waiting for its vector"]


def test_a_10_mb_cell_is_refused(ip, magics):
    before = snapshot(magics)
    with pytest.raises(UsageError, match="MB, over the 1.0 MB limit"):
        ip.run_cell_magic("remember", "", "x" * 10_000_000)
    assert snapshot(magics) == before


def test_lone_surrogates_are_refused(ip, magics):
    before = snapshot(magics)
    with pytest.raises(UsageError, match="lone surrogate"):
        ip.run_cell_magic("remember", "", "broken \ud800 text")
    with pytest.raises(UsageError, match="lone surrogate"):
        ip.run_line_magic("recall", "broken \udfff query")
    assert snapshot(magics) == before


def test_recall_without_a_writable_store_is_a_usage_error(ip, magics, tmp_path):
    magics.path = str(tmp_path / "missing" / "dir" / "store.duckdb")
    with pytest.raises(UsageError, match="does not exist"):
        run(ip, "%recall anything")
    assert not (tmp_path / "missing").exists()
    magics.path = str(tmp_path)  # a directory, not a file
    with pytest.raises(UsageError, match="store"):
        run(ip, "%recall anything")
    with pytest.raises(UsageError, match="store"):
        run(ip, "%%remember\nnowhere to go")


def test_memory_open_hands_the_magics_memory_to_python(ip, magics, shell):
    from nbmemory.notebook.magics import current_memory

    run(ip, "%%remember\nthe port is now 8443")
    mem = run(ip, "%memory open")
    assert mem is magics.memory and mem is current_memory(shell)
    mem.flush()
    assert mem.search("which port?", limit=1)["content"].tolist() == ["the port is now 8443"]
    run(ip, "%memory close")
    reopened = run(ip, "%memory open")  # a closed store is opened again
    assert not reopened.closed and reopened is not mem


def test_memory_consolidate_compacts_and_restore_brings_them_back(ip, magics, capsys):
    """000: old conversations compressed, "reducing storage and context-window use"."""
    mem = magics.memory
    old = dt.datetime(2026, 1, 5, 9, 0, tzinfo=dt.timezone.utc)
    for i, text in enumerate(["we deploy on Fridays", "the port is 8443 now", "ok, noted"]):
        mem.add_event("notebook", "user", text, created_at=old + dt.timedelta(minutes=i))
    report = run(ip, "%memory consolidate --compact")
    assert report.consolidated == 3 and report.archived == 3
    (summary_id,) = report.summary_ids
    assert f"%memory restore {summary_id}" in capsys.readouterr().out
    assert mem.events(kind="message").empty  # the originals left the conversation
    assert run(ip, f"%memory restore {summary_id}") == 3
    assert sorted(mem.events(kind="message")["content"]) == [
        "ok, noted",
        "the port is 8443 now",
        "we deploy on Fridays",
    ]
    with pytest.raises(UsageError, match="nothing in the archive for summary"):
        run(ip, f"%memory restore {summary_id}")


def test_memory_learn_appends_to_agents_md(ip, magics, tmp_path, monkeypatch):
    """003: learnings appended to AGENTS.md, redacted, synced into memory."""
    monkeypatch.chdir(tmp_path)
    result = run(ip, "%memory learn Deploy 'use the blue pool; password is hunter2'")
    text = (tmp_path / "AGENTS.md").read_text(encoding="utf-8")
    assert "use the blue pool" in text and "hunter2" not in text
    assert (
        result.learning
        and magics.memory.events(kind="agents_md")["content"].str.contains("blue pool").any()
    )
