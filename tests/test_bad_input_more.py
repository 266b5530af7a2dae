"""More of the bad-input battery (tests/test_bad_input.py): schedules that never fire,
imported rows the API would refuse, filters, options and flags of the wrong type,
token budgets, the configuration file, the magics and AGENTS.md paths.

Every refusal is one line, an ``nbmemory.errors`` exception (a ``UsageError`` in a
magic, exit 1 in the CLI), and leaves the store (or the file) as it was.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fakes import SpyEmbedder
from notebook_shell import one_line_usage_error, run

from nbmemory import InvalidInput, Memory, Settings, cli
from nbmemory.notebook.display import MemoryStatus

NOW = dt.datetime(2024, 5, 6, 8, 0)  # a Monday


def _one_line(exc: BaseException) -> str:
    message = str(exc)
    assert message and "\n" not in message, message
    return message


def _state(mem: Memory) -> tuple[int, ...]:
    """What a refused call must leave alone: rows of every table a call could change."""
    tables = ("events", "sessions", "facts", "macros", "scheduled_tasks", "audit_log")
    return tuple(mem.store.fetchone(f"SELECT count(*) FROM {t}")[0] for t in tables)


# -- 1: a cron that never fires ------------------------------------------------------------
@pytest.mark.parametrize("cron", ["0 0 30 2 *", "0 0 31 4,6 *"])
def test_a_cron_that_never_fires_is_refused_when_scheduled(mem, cron):
    before = _state(mem)
    with pytest.raises(InvalidInput, match="never fires") as info:
        mem.tasks.schedule("x", cron, "p", now=NOW)
    assert cron in _one_line(info.value)
    assert _state(mem) == before


def test_a_cron_with_a_list_of_days_is_read(mem):
    task = mem.tasks.schedule("twice a week", "0 9 * * 1,5", "p", now=NOW)
    assert task["cron_expr"] == "0 9 * * 1,5"
    assert task["next_run_at"] == dt.datetime(2024, 5, 6, 9, 0)


def _export_with_task(mem: Memory, tmp_path: Path) -> dict[str, Any]:
    mem.add_event("s", "user", "hello")
    mem.tasks.schedule("report", "0 9 * * *", "write the report", now=NOW)
    path = tmp_path / "export.json"
    mem.transfer.export_json(path)
    return json.loads(path.read_text())


def _refused_import(
    mem: Memory, tmp_path: Path, edit: Callable[[dict[str, Any]], Any], pattern: str
) -> str:
    """Export ``mem``, ``edit`` the file, import it into a new store: refused (the
    message, one line, matches ``pattern``) and that store left as it was."""
    document = _export_with_task(mem, tmp_path)
    edit(document)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(document))
    with Memory(str(tmp_path / "target.duckdb"), embedder="hash") as target:
        before = _state(target)
        with pytest.raises(InvalidInput, match=pattern) as info:
            target.transfer.import_json(path)
        assert _state(target) == before
    return _one_line(info.value)


def test_import_refuses_a_task_whose_cron_never_fires(mem, tmp_path):
    def edit(document: dict[str, Any]) -> None:
        document["scheduled_tasks"][0]["cron_expr"] = "0 0 30 2 *"

    _refused_import(mem, tmp_path, edit, r"scheduled_tasks\[0\]: cron_expr .* never fires")


def _task_on(mem: Memory, name: str, cron: str) -> str:
    """A task whose stored cron is ``cron`` (as an older version or an import left it)."""
    task = mem.tasks.schedule(name, "0 9 * * *", f"prompt of {name}", now=NOW)
    mem.store.execute("UPDATE scheduled_tasks SET cron_expr = ? WHERE id = ?", [cron, task["id"]])
    return task["id"]


@pytest.mark.parametrize("cron", ["0 0 30 2 *", "not cron"])
def test_run_due_pauses_a_task_whose_stored_cron_is_bad_and_runs_the_others(mem, cron):
    bad = _task_on(mem, "broken", cron)
    good = mem.tasks.schedule("fine", "0 9 * * *", "run me", now=NOW)["id"]
    called: list[str] = []
    later = NOW + dt.timedelta(hours=2)
    results = {r["id"]: r for r in mem.tasks.run_due(lambda t: called.append(t["id"]), now=later)}
    assert called == [good]
    assert results[good]["error"] is None
    assert "paused" in _one_line_text(results[bad]["error"]) and results[bad]["result"] is None
    assert mem.tasks.get(bad)["is_paused"] is True
    trail = mem.audit.log(action="pause_task")
    assert list(trail["target_ids"].iloc[0]) == [bad] and "paused" in trail["details"].iloc[0]
    assert mem.tasks.run_due(lambda t: called.append(t["id"]), now=later) == []


def _one_line_text(text: str | None) -> str:
    assert text and "\n" not in text, text
    return text


def test_resume_refuses_a_task_whose_stored_cron_never_fires(mem):
    bad = _task_on(mem, "broken", "0 0 30 2 *")
    mem.tasks.pause(bad)
    before = _state(mem)
    with pytest.raises(InvalidInput, match="cannot resume.*never fires") as info:
        mem.tasks.resume(bad, now=NOW)
    _one_line(info.value)
    assert _state(mem) == before and mem.tasks.get(bad)["is_paused"] is True


# -- 2: imported rows are checked as the API checks them ----------------------------------------
@pytest.mark.parametrize("content", [None, "   ", ""], ids=["none", "blank", "empty"])
def test_import_refuses_an_empty_turn_with_add_events_message(mem, tmp_path, content):
    with pytest.raises(InvalidInput) as refused:
        mem.add_event("s", "user", content)

    def edit(document: dict[str, Any]) -> None:
        event = document["events"][0]
        event["content"] = content
        event["embedding"] = event["embedding_dim"] = None

    message = _refused_import(mem, tmp_path, edit, r"events\[0\]")
    assert message.endswith(str(refused.value))


def test_import_keeps_a_turn_that_only_calls_tools(mem, tmp_path):
    mem.add_event("s", "assistant", None, tool_calls=[{"name": "ls"}])
    path = tmp_path / "calls.json"
    mem.transfer.export_json(path)
    with Memory(str(tmp_path / "target.duckdb"), embedder="hash") as target:
        assert target.transfer.import_json(path)["events_added"] == 1
        assert target.events()["content"].isna().all()


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("status", "wizard", "status must be 'active' or 'closed'"),
        ("user_id", "u" * 5000, "user_id is 5,000 bytes"),
    ],
)
def test_import_refuses_a_session_the_api_would_not_make(mem, tmp_path, field, value, words):
    mem.sessions.start("alice", session_id="s1")
    _refused_import(
        mem, tmp_path, lambda d: d["sessions"][0].update({field: value}), rf"sessions\[0\]: {words}"
    )


def test_import_refuses_an_embedding_error_that_is_not_text(mem, tmp_path):
    _refused_import(
        mem,
        tmp_path,
        lambda d: d["events"][0].update(embedding_error=5),
        r"events\[0\].*embedding_error must be text",
    )


# -- 3: filters, options, flags, budgets -------------------------------------------------------
BAD_FILTER_VALUES = [5, {"a": 1}, 1.5, True, dt.datetime(2024, 1, 1), [5], [], ""]


@pytest.mark.parametrize("value", BAD_FILTER_VALUES, ids=repr)
def test_filters_refuse_values_that_are_not_names(mem, value):
    mem.add_event("s", "user", "hello world")
    before = _state(mem)
    for call in (
        lambda: mem.search("hello", filters={"role": value}),
        lambda: mem.search("hello", filters={"tool_name": value}, mode="vector"),
        lambda: mem.events(filters={"session_id": value}),
    ):
        with pytest.raises(InvalidInput, match="filter|must be a non-empty string") as info:
            call()
        _one_line(info.value)
    assert _state(mem) == before


def test_filters_still_take_names_lists_and_none(mem):
    mem.add_event("s", "user", "hello world")
    mem.add_event("s", "assistant", "hello there")
    assert len(mem.search("hello", filters={"role": ["user", "assistant"]})) == 2
    assert len(mem.events(filters={"session_id": "s", "tool_name": None})) == 2


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"read_only": "yes"}, "read_only must be True or False"),
        ({"read_only": 1}, "read_only must be True or False"),
        ({"shared": "yes"}, "shared must be True, False or None"),
        ({"shared": 0}, "shared must be True, False or None"),
        ({"adopt": "no"}, "adopt must be True or False"),
        ({"settings": "x"}, "settings must be an nbmemory.Settings"),
        ({"settings": {"recency_limit": 3}}, "settings must be an nbmemory.Settings"),
        ({"token_counter": "x"}, "token_counter must be a callable"),
        ({"actor": 5}, "actor must be a non-empty string"),
    ],
)
def test_memory_refuses_options_of_the_wrong_type(store_path, options, words):
    Memory(store_path, embedder="hash").close()
    before = Path(store_path).read_bytes()
    with pytest.raises(InvalidInput, match=words) as info:
        Memory(store_path, embedder="hash", **options)
    _one_line(info.value)
    assert Path(store_path).read_bytes() == before
    with Memory(store_path, embedder="hash", settings=Settings(), shared=None) as mem:
        assert not mem.closed  # the file was let go


def test_memory_refuses_a_path_that_is_not_one(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidInput, match="the store must be a file path"):
        Memory(5, embedder="hash")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("timeout", ["x", -1, math.nan, True])
def test_flush_refuses_a_timeout_that_is_not_seconds(mem, timeout):
    mem.add_event("s", "user", "hello")
    with pytest.raises(InvalidInput, match="timeout must be a number of seconds") as info:
        mem.flush(timeout)
    _one_line(info.value)
    assert mem.flush(0.0) in (True, False) and mem.flush(math.inf) and mem.flush(None)


def _flag_calls(mem: Memory, tmp_path: Path) -> dict[str, Any]:
    export = tmp_path / "flags.json"
    agents = tmp_path / "AGENTS.md"
    agents.write_text("# Rules\nBe kind.\n")
    return {
        "dry_run": lambda v: mem.sessions.cleanup(dry_run=v),
        "all_namespaces": lambda v: mem.sessions.cleanup(all_namespaces=v),
        "include_untracked": lambda v: mem.sessions.list(include_untracked=v),
        "forget": lambda v: mem.sessions.delete("s1", events=True, forget=v),
        "reopen": lambda v: mem.sessions.resume("s1", reopen=v),
        "merge": lambda v: mem.sessions.save_state("s1", {"k": 1}, merge=v),
        "audit dry_run": lambda v: mem.audit.cleanup(dry_run=v),
        "explain": lambda v: mem.get_context("s1", "hello", explain=v),
        "export progress": lambda v: mem.transfer.export_json(export, progress=v),
        "import progress": lambda v: mem.transfer.import_json(export, progress=v),
        "force_polling": lambda v: mem.agents_md.watch(agents, force_polling=v),
    }


@pytest.mark.parametrize("value", ["no", 0, None], ids=repr)
def test_bool_flags_of_the_api_are_strict(mem, tmp_path, value):
    mem.sessions.start("alice", session_id="s1")
    mem.add_event("s1", "user", "hello")
    mem.transfer.export_json(tmp_path / "flags.json")
    mem.clock = lambda: (
        dt.datetime.now(dt.timezone.utc).replace(tzinfo=None) + dt.timedelta(days=400)
    )  # the session is expired and the audit rows past retention: a cleanup would delete
    before = _state(mem)
    for name, call in _flag_calls(mem, tmp_path).items():
        flag = name.split()[-1]
        with pytest.raises(InvalidInput, match=f"{flag} must be True or False") as info:
            call(value)
        _one_line(info.value)
        assert _state(mem) == before, name


@pytest.mark.parametrize("budget", [-1, "5", True, 2.5])
def test_to_prompt_refuses_a_budget_that_is_not_a_count(mem, budget):
    mem.add_event("s", "user", "hello world")
    context = mem.get_context("s", "hello")
    with pytest.raises(InvalidInput, match="max_tokens must be") as info:
        context.to_prompt(max_tokens=budget)
    _one_line(info.value)


def test_to_prompt_without_a_budget_uses_the_contexts(mem):
    mem.add_event("s", "user", "hello world")
    context = mem.get_context("s", "hello", max_tokens=100)
    assert context.to_prompt().max_tokens == 100
    assert "hello world" in context.to_prompt(None)
    assert context.to_prompt(0).dropped == context.ids  # nothing fits in no tokens
    with pytest.raises(InvalidInput, match="header must be text"):
        context.to_prompt(header=None)


# -- the configuration file ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"[state.audit\nretain_days = 3\n", "not valid TOML"),
        (b"\xff\xfe[state.audit]\n", "cannot read the configuration file"),
        (b"state = 5\n", "state is a value, not a table"),
    ],
    ids=["malformed", "not-utf8", "value-not-table"],
)
def test_config_set_on_a_broken_file_is_one_line_and_changes_nothing(
    tmp_path, monkeypatch, capsys, content, words
):
    monkeypatch.delenv("NBMEMORY_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    file = tmp_path / "nbmemory.toml"
    file.write_bytes(content)
    assert cli.main(["config", "set", "state.audit.retain_days", "30"]) == 1
    err = capsys.readouterr().err.strip()
    assert words in err and "\n" not in err and "Traceback" not in err, err
    assert file.read_bytes() == content


# -- AGENTS.md paths -----------------------------------------------------------------------
def test_a_directory_as_agents_md_is_named_as_one(mem, tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    before = _state(mem)
    with pytest.raises(InvalidInput, match="is a directory, not a file") as info:
        mem.agents_md.sync(folder)
    assert str(folder / "AGENTS.md") in _one_line(info.value)
    with pytest.raises(InvalidInput, match="is a directory, not a file"):
        mem.agents_md.add_learning("Rules", "be kind", path=folder)
    assert _state(mem) == before and list(folder.iterdir()) == []


# -- the magics ----------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["-5", "float('nan')"])
def test_embed_timeout_must_be_seconds(ip, magics, caplog, value):
    run(ip, f"%config MemoryMagics.embed_timeout = {value}")
    assert magics.embed_timeout == 60.0
    assert "embed_timeout must be a number of seconds" in caplog.text
    run(ip, "%config MemoryMagics.embed_timeout = 0")
    assert magics.embed_timeout == 0.0


@pytest.mark.parametrize(
    ("template", "words"),
    [
        ("{0} loves it", "a field without a name ({} or {0})"),
        ("{} loves it", "a field without a name ({} or {0})"),
        ("{d[a][b]} loves it", "{d[a][b]} cannot be filled: 'int' object is not subscriptable"),
        ("{d[z]} loves it", "{d[z]} cannot be filled: no key 'z'"),
        ("{d.nope} loves it", "{d.nope} cannot be filled: 'dict' object has no attribute"),
        ("{n:x} {d:d}", "the format :d does not fit a dict"),
    ],
)
def test_remember_interpolate_names_the_field_that_is_wrong(ip, magics, capsys, template, words):
    ip.user_ns.update(d={"a": 1}, n=5)
    before = _state(magics.memory)
    err = one_line_usage_error(ip, f"%%remember --interpolate\n{template}", capsys)
    assert words in err and "%%remember --interpolate" in err
    assert _state(magics.memory) == before


def test_recall_with_a_filter_no_memory_matches_says_so(ip, magics, capsys):
    run(ip, "%%remember --role user\nMy name is John and I love TypeScript")
    capsys.readouterr()
    assert run(ip, "%recall TypeScript --role wizard").empty
    out = capsys.readouterr().out
    assert "no memory in namespace 'default' has role 'wizard'" in out
    assert "roles: user, assistant" in out and "store some" not in out
    assert run(ip, "%recall TypeScript --role tool --session notebook").empty
    out = capsys.readouterr().out
    assert "has role 'tool' and session 'notebook'; drop or change the filter" in out
    err = one_line_usage_error(ip, "%memory flush --timeout -5", capsys)
    assert "timeout must be a number of seconds" in err


def test_recall_that_finds_nothing_in_a_store_with_memories_does_not_say_it_is_empty(
    ip, magics, capsys
):
    assert run(ip, "%recall zebra --mode keyword").empty
    assert "store some with %%remember" in capsys.readouterr().out  # really empty
    run(ip, "%%remember --role user\nThe API listens on port 8443")
    capsys.readouterr()
    assert run(ip, "%recall zebra --mode keyword").empty
    out = capsys.readouterr().out
    assert "no memory matched 'zebra'" in out and "store some" not in out


def test_a_plan_that_is_not_a_list_is_refused_and_changes_nothing(mem):
    session = mem.sessions.start("ann")
    before = _state(mem)
    with pytest.raises(InvalidInput, match="'current_plan' must be a list") as info:
        mem.sessions.save_state(session.session_id, {"current_plan": "do it"})
    _one_line(info.value)
    assert _state(mem) == before
    saved = mem.sessions.save_state(session.session_id, {"current_plan": ["do it"]})
    assert mem.sessions.resume(saved.session_id).plan == ["do it"]


def test_the_embedding_model_cannot_change_on_an_open_store(mem):
    with pytest.raises(InvalidInput, match="chosen when the store opens") as info:
        mem.configure(embedding_model="BAAI/bge-small-en-v1.5")
    _one_line(info.value)
    assert mem.settings.embedding_model != "BAAI/bge-small-en-v1.5"
    assert mem.configure(embedding_model=mem.settings.embedding_model) is not None


def test_status_says_how_many_memories_another_model_embedded(tmp_path):
    path = str(tmp_path / "two-models.duckdb")
    with Memory(path, embedder=SpyEmbedder()) as first:
        first.add_event("s", "user", "embedded by the first model")
        first.flush()
    with Memory(path, embedder="hash") as second:
        second.add_event("s", "user", "embedded by the second")
        second.flush()
        assert second.status()["other_model"] == 1
        summary = MemoryStatus(second.status()).summary()
        assert "1 embedded by another model" in summary and "reembed()" in summary
        second.embeddings.reembed()
        second.flush()
        assert second.status()["other_model"] == 0


@pytest.mark.parametrize(
    "call",
    [
        lambda mem: mem.macros.add("run_tests", "read_file", confidence=10**400),
        lambda mem: mem.add_event("s", "user", "hi", importance=10**400),
    ],
)
def test_a_number_past_floats_range_is_out_of_range_not_a_raw_overflow(call):
    with Memory(":memory:", embedder="hash") as mem:
        with pytest.raises(InvalidInput, match="between 0 and 1"):
            call(mem)
        assert mem.events().empty
