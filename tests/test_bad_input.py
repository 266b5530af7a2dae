"""The bad-input battery: every input either gets a clear one-line error (and
nothing is stored) or is stored exactly as given.  Engine API first, then the CLI
through real subprocesses.

Cases already covered elsewhere are not repeated here: blank/surrogate/non-text
content, ``object()``/NaN metadata and an unparsable ``created_at`` on
``add_event`` (tests/test_memory.py), a text file and a missing directory as the
store (tests/test_store.py).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from nbmemory import InvalidInput, Memory, MemoryNotFound, Settings, StoreError
from nbmemory.retrieval.embedders import HashEmbedder

_SRC = str(Path(__file__).resolve().parents[1] / "src")
TEN_MB = 10 * 1024 * 1024

# one value of each kind for every string field
NUL = "a\x00b"
EMOJI = "🧠✨ memória 👩🏽‍💻"
RTL = "שלום עולם مرحبا بالعالم"
SQL = "x'); DROP TABLE events; -- \" ; SELECT * FROM audit_log /* */ %_\\"
SURROGATE = "bad \ud800 text"

STRING_FIELDS = [
    "session_id",
    "namespace",
    "role",
    "kind",
    "tool_name",
    "tool_call_id",
    "graph_id",
    "task_id",
    "metadata_key",
    "metadata_value",
    "content",
]


def _one_line(exc: BaseException) -> str:
    message = str(exc)
    assert message and "\n" not in message, message
    return message


def _event_args(field: str, value: str) -> dict:
    """add_event keyword arguments with ``value`` in ``field`` (and sane values elsewhere)."""
    args: dict = {"session_id": "s", "role": "user", "content": "plain content"}
    if field == "metadata_key":
        args["metadata"] = {value: "v"}
    elif field == "metadata_value":
        args["metadata"] = {"k": value, "nested": [value, {"deep": value}]}
    else:
        args[field] = value
    return args


def _mem_for(store_path: str, field: str, value: str) -> Memory:
    """A store whose roles include ``value`` when the role is the field under test."""
    roles = {"user": 0.5, "assistant": 0.5, "tool": 0.3, "system": 0.1}
    if field == "role":
        roles[value] = 0.4
    return Memory(store_path, embedder="hash", importance_by_role=roles)


def _assert_nothing_stored(mem: Memory) -> None:
    assert mem.store.fetchone("SELECT count(*) FROM events")[0] == 0
    assert mem.audit_log(action="add").empty


# -- strings stored exactly ------------------------------------------------------------
@pytest.mark.parametrize("field", STRING_FIELDS)
@pytest.mark.parametrize("value", [NUL, EMOJI, RTL, SQL], ids=["nul", "emoji", "rtl", "sql"])
def test_every_string_field_is_stored_exactly(store_path, field, value):
    with _mem_for(store_path, field, value) as mem:
        args = _event_args(field, value)
        namespace = args.get("namespace")
        event = mem.add_event(**args)
        assert mem.flush()
        got = mem.get_event(event.id, namespace=namespace)
        if field == "metadata_key":
            assert got.metadata == {value: "v"}
        elif field == "metadata_value":
            assert got.metadata == {"k": value, "nested": [value, {"deep": value}]}
        else:
            assert getattr(got, field) == value
        # filters, recency and search find it by that value, and nothing else broke
        if field in ("session_id", "role", "kind", "tool_name", "tool_call_id"):
            by = {"filters": {field: value}}
            hits = mem.search("plain content", namespace=namespace, **by)
            assert hits["id"].tolist() == [event.id]
            assert mem.events(namespace=namespace, **by)["id"].tolist() == [event.id]
        session = args["session_id"]
        assert mem.recent(session, namespace=namespace)["id"].tolist() == [event.id]
        context = mem.get_context(session, "plain content", namespace=namespace)
        assert event.id in context.ids
        assert {"events", "audit_log", "sessions"} <= {
            r[0] for r in mem.store.fetchall("SELECT table_name FROM information_schema.tables")
        }
        assert mem.store.fetchone("SELECT count(*) FROM events")[0] == 1


def test_hostile_strings_survive_a_restart_and_a_caller_given_id(store_path):
    for value in (NUL, EMOJI, RTL, SQL):
        with Memory(store_path, embedder="hash") as mem:
            ids = mem.add_events(
                [{"id": f"id-{value}", "session_id": value, "role": "user", "content": value}]
            )
            assert ids == [f"id-{value}"]
    with Memory(store_path, embedder="hash") as mem:
        for value in (NUL, EMOJI, RTL, SQL):
            assert mem.get_event(f"id-{value}").content == value
            assert mem.recent(value)["content"].tolist() == [value]
            assert mem.delete([f"id-{value}"]) == 1
        assert mem.events().empty


@pytest.mark.parametrize("field", STRING_FIELDS)
def test_a_lone_surrogate_in_any_string_field_is_refused(store_path, field):
    with Memory(store_path, embedder="hash") as mem:
        with pytest.raises(InvalidInput, match="surrogate") as info:
            mem.add_event(**_event_args(field, SURROGATE))
        _one_line(info.value)
        with pytest.raises(InvalidInput, match="surrogate"):
            mem.add_events([_event_args(field, SURROGATE)])
        _assert_nothing_stored(mem)


def test_lone_surrogates_in_queries_and_tool_calls_are_refused(mem):
    for call in (
        lambda: mem.search(SURROGATE),
        lambda: mem.get_context("s", SURROGATE),
        lambda: mem.add_event("s", "tool", "x", tool_calls=[{"arg": SURROGATE}]),
        lambda: mem.add_event("s", "tool", "x", tool_calls=SURROGATE),
    ):
        with pytest.raises(InvalidInput, match="surrogate") as info:
            call()
        _one_line(info.value)
    _assert_nothing_stored(mem)


def test_emoji_and_rtl_queries_find_their_memories(mem):
    first = mem.add_event("s", "user", EMOJI)
    second = mem.add_event("s", "user", RTL)
    assert mem.flush()
    assert mem.search(EMOJI, limit=1)["id"].iloc[0] == first.id
    assert mem.search(RTL, limit=1)["id"].iloc[0] == second.id


# -- blank input -----------------------------------------------------------------------
@pytest.mark.parametrize("blank", ["", "   ", "\n\t ", "\u3000"])
def test_blank_content_queries_and_names_are_refused(mem, blank):
    calls = {
        "content": lambda: mem.add_events([{"session_id": "s", "role": "user", "content": blank}]),
        "query": lambda: mem.search(blank),
        "context query": lambda: mem.get_context("s", blank),
        "session_id": lambda: mem.add_event(blank, "user", "x"),
        "namespace": lambda: mem.add_event("s", "user", "x", namespace=blank),
        "recent session": lambda: mem.recent(blank),
        "id": lambda: mem.get_event(blank),
    }
    for name, call in calls.items():
        with pytest.raises(InvalidInput) as info:
            call()
        message = _one_line(info.value)
        assert "empty" in message or "non-empty" in message, name
    _assert_nothing_stored(mem)


# -- size ------------------------------------------------------------------------------
def test_ten_megabytes_of_content_is_refused_by_default_with_the_setting_named(mem):
    huge = "x" * TEN_MB
    with pytest.raises(InvalidInput, match=r"10\.5 MB, over the 1\.0 MB limit") as info:
        mem.add_event("s", "user", huge)
    assert "max_content_bytes" in _one_line(info.value)
    with pytest.raises(InvalidInput, match="row 1: content"):
        mem.add_events(
            [
                {"session_id": "s", "role": "user", "content": "small"},
                {"session_id": "s", "role": "user", "content": huge},
            ]
        )
    _assert_nothing_stored(mem)


def _head_embedder(texts):
    """A cheap model: looks at the first 1,000 characters (real models truncate too)."""
    return HashEmbedder(64).embed([t[:1000] for t in texts])


@pytest.mark.slow
def test_ten_megabytes_is_stored_exactly_when_the_limit_is_raised(store_path):
    huge = "start of a long document " + "é" * (TEN_MB // 2) + " end"
    with Memory(store_path, embedder=_head_embedder, max_content_bytes=2 * TEN_MB) as mem:
        event = mem.add_event("s", "user", huge)
        assert mem.flush()
        assert mem.get_event(event.id).content == huge
        assert mem.search("start of a long document", limit=1)["id"].iloc[0] == event.id
        assert mem.status()["embedded"] == 1


# -- metadata --------------------------------------------------------------------------
circular: dict = {}
circular["self"] = circular


@pytest.mark.parametrize(
    "metadata",
    [
        {"k": {1, 2}},
        {"k": b"bytes"},
        circular,
        {"k": math.inf},
        {"k": -math.inf},
        {"k": [1, math.nan]},
        {"k": dt.datetime(2024, 1, 1)},
        {"k": np.arange(3)},
        {1: "int key"},
        {("a", "b"): "tuple key"},
    ],
    ids=[
        "set",
        "bytes",
        "circular",
        "inf",
        "-inf",
        "nested-nan",
        "datetime",
        "ndarray",
        "int-key",
        "tuple-key",
    ],
)
def test_metadata_that_is_not_json_is_refused(mem, metadata):
    with pytest.raises(InvalidInput, match="metadata") as info:
        mem.add_event("s", "user", "x", metadata=metadata)
    _one_line(info.value)
    with pytest.raises(InvalidInput, match="row 0: metadata"):
        mem.add_events([{"session_id": "s", "role": "user", "content": "x", "metadata": metadata}])
    _assert_nothing_stored(mem)


def test_tool_calls_that_are_not_json_are_refused(mem):
    with pytest.raises(InvalidInput, match="tool_calls must be JSON-serialisable"):
        mem.add_event("s", "tool", "x", tool_calls=[object()])
    _assert_nothing_stored(mem)


# -- numbers ---------------------------------------------------------------------------
BAD_NUMBERS = [math.nan, math.inf, -math.inf, -1, -0.5, 1e308, "0.5", True, None]


@pytest.mark.parametrize("bad", BAD_NUMBERS[:-1], ids=repr)
def test_bad_importance_in_bulk_rows_is_refused(mem, bad):
    with pytest.raises(InvalidInput, match="row 0: importance"):
        mem.add_events([{"session_id": "s", "role": "user", "content": "x", "importance": bad}])
    _assert_nothing_stored(mem)


CONTEXT_PARAMS = [
    "recency_limit",
    "salience_limit",
    "relevance_limit",
    "salience_threshold",
    "relevance_threshold",
    "max_tokens",
]


@pytest.mark.parametrize(
    ("param", "bad"),
    [
        (param, bad)
        for param in CONTEXT_PARAMS
        for bad in BAD_NUMBERS[:-1]
        # a cosine threshold may be negative: -1 and -0.5 are valid relevance thresholds
        if not (param == "relevance_threshold" and bad in (-1, -0.5))
    ],
    ids=repr,
)
def test_get_context_refuses_nan_inf_and_negative_parameters(mem, param, bad):
    with pytest.raises(InvalidInput, match=param) as info:
        mem.get_context("s", "q", **{param: bad})
    _one_line(info.value)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"limit": math.nan}, "limit"),
        ({"limit": math.inf}, "limit"),
        ({"limit": True}, "limit"),
        ({"limit": "5"}, "limit"),
        ({"threshold": math.inf}, "threshold"),
        ({"threshold": -math.inf}, "threshold"),
        ({"threshold": -1.5}, "threshold"),
        ({"threshold": np.float64("nan")}, "threshold"),
    ],
)
def test_search_refuses_nan_inf_and_out_of_range(mem, kwargs, match):
    with pytest.raises(InvalidInput, match=match) as info:
        mem.search("q", **kwargs)
    _one_line(info.value)


NUMERIC_SETTINGS = [
    "working_memory_cap",
    "recency_limit",
    "salience_threshold",
    "salience_limit",
    "relevance_threshold",
    "relevance_limit",
    "similarity_threshold",
    "consolidation_interval_hours",
    "session_ttl_hours",
    "max_concurrent_sessions",
    "audit_retention_days",
    "max_memory_tokens",
    "embed_batch_size",
    "max_content_bytes",
    "max_metadata_bytes",
    "max_key_chars",
    "max_json_depth",
]


@pytest.mark.parametrize("name", NUMERIC_SETTINGS)
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, -2, "1"], ids=repr)
def test_settings_refuse_nan_inf_and_negative(store_path, name, bad):
    with pytest.raises(InvalidInput, match=name) as info:
        Settings(**{name: bad})
    _one_line(info.value)
    with Memory(store_path, embedder="hash") as mem:
        before = mem.settings
        with pytest.raises(InvalidInput, match=name):
            mem.configure(**{name: bad})
        assert mem.settings == before  # a refused change changes nothing
        with pytest.raises(InvalidInput, match=name):
            Memory(store_path + ".other", embedder="hash", **{name: bad})


def test_recent_refuses_negative_and_non_integer_limits(mem):
    for bad in (-1, math.nan, 2.5, math.inf):
        with pytest.raises(InvalidInput, match="limit"):
            mem.recent("s", bad)


# -- unknown ids and sessions ----------------------------------------------------------
def test_unknown_ids_and_sessions(mem):
    known = mem.add_event("s", "user", "known", namespace="elsewhere")
    assert mem.flush()
    with pytest.raises(MemoryNotFound, match="no memory with id 'missing'") as info:
        mem.get_event("missing")
    _one_line(info.value)
    with pytest.raises(MemoryNotFound):  # exists, but in another namespace
        mem.get_event(known.id)
    assert mem.get_event(known.id, namespace="elsewhere").content == "known"
    audit_rows = len(mem.audit_log())
    assert mem.delete(["missing", "also missing"]) == 0
    assert mem.delete(known.id) == 0  # not in this namespace: nothing deleted ...
    assert len(mem.audit_log()) == audit_rows  # ... and nothing audited
    recent = mem.recent("nobody")
    assert recent.empty and "content" in recent.columns
    context = mem.get_context("nobody", "known")
    assert context.by_strategy("recency") == []
    assert mem.search("known", session_id="nobody").empty
    assert mem.events(session_id="nobody").empty
    assert mem.search("known", namespace="no-such-namespace").empty


# -- dates -----------------------------------------------------------------------------
BAD_DATES = [
    "2024-13-01",
    "2024-02-30",
    "31/12/2024",
    "May 8 2024",
    "",
    "0000-01-01",
    1_700_000_000,
    1.5e9,
    pd.NaT,
    np.datetime64("NaT"),
    math.nan,
    [2024, 1, 1],
]


@pytest.mark.parametrize("bad", BAD_DATES, ids=repr)
def test_dates_in_the_wrong_format_are_refused(mem, bad):
    with pytest.raises(InvalidInput, match="created_at") as info:
        mem.add_event("s", "user", "x", created_at=bad)
    _one_line(info.value)
    for call, name in (
        (lambda: mem.search("q", since=bad), "since"),
        (lambda: mem.search("q", until=bad), "until"),
        (lambda: mem.events(since=bad), "since"),
    ):
        with pytest.raises(InvalidInput, match=name):
            call()
    _assert_nothing_stored(mem)


# -- store paths -----------------------------------------------------------------------
def _refused(path: str, match: str, **kwargs) -> str:
    with pytest.raises(StoreError, match=match) as info:
        Memory(path, embedder="hash", **kwargs)
    return _one_line(info.value)


def test_store_path_whose_parent_is_a_file(tmp_path):
    (tmp_path / "notes.txt").write_text("a file, not a folder")
    _refused(str(tmp_path / "notes.txt" / "agent.duckdb"), "is a file, not a directory")
    assert os.listdir(tmp_path) == ["notes.txt"]


def test_store_path_that_is_a_directory(tmp_path):
    _refused(str(tmp_path), "is a directory; pass a file inside it")


def test_empty_store_path_is_refused_not_silently_in_memory():
    _refused("", "the store path is empty")
    _refused("   ", "the store path is empty")


def test_store_path_with_a_nul_byte_or_too_long_a_name(tmp_path):
    _refused(str(tmp_path / "a\x00b.duckdb"), "NUL byte")
    _refused(str(tmp_path / ("n" * 300 + ".duckdb")), "cannot use")


def test_store_in_a_directory_that_is_not_writable_even_for_root():
    # Tests run as root, for whom chmod does not make a directory read-only.  The
    # kernel's own read-only directories do: /proc/self refuses new files to
    # everyone (os.access says so), /sys refuses them with EACCES.
    message = _refused("/proc/self/agent.duckdb", "not writable")
    assert "Pass a path in a writable directory" in message
    message = _refused("/sys/agent.duckdb", "writ|permission")
    assert not Path("/sys/agent.duckdb").exists()


def test_read_only_open_of_a_missing_store(tmp_path):
    path = tmp_path / "missing.duckdb"
    _refused(
        str(path), "does not exist, and read_only=True opens an existing store", read_only=True
    )
    assert not path.exists()


def _sqlite_file(path: Path) -> None:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE messages (id TEXT PRIMARY KEY, content TEXT)")
    con.execute("INSERT INTO messages VALUES ('1', 'kept as it is')")
    con.commit()
    con.close()


@pytest.mark.parametrize("kind", ["sqlite", "empty", "short", "random"])
@pytest.mark.parametrize("shared", [False, True], ids=["default", "shared"])
def test_a_file_that_is_not_duckdb_is_refused_and_left_untouched(tmp_path, kind, shared):
    path = tmp_path / f"{kind}.duckdb"
    if kind == "sqlite":
        _sqlite_file(path)
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "short":
        path.write_bytes(b"DUCK")
    else:
        path.write_bytes(np.random.default_rng(0).bytes(64 * 1024))
    before, mtime = path.read_bytes(), path.stat().st_mtime_ns
    match = {
        "sqlite": "SQLite database, not a DuckDB store",
        "empty": r"is empty \(0 bytes\): it holds nothing.*Delete it",
    }.get(kind, "not a DuckDB database")
    message = _refused(str(path), match, shared=shared)
    assert "nothing was changed" in message
    assert path.read_bytes() == before and path.stat().st_mtime_ns == mtime
    assert os.listdir(tmp_path) == [path.name]  # no WAL, no lock file left beside it


# -- the CLI ---------------------------------------------------------------------------
def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    script = Path(sys.executable).with_name("nbmemory")
    return subprocess.run(
        [str(script), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=dict(os.environ, PYTHONPATH=_SRC),
        timeout=300,
    )


@pytest.fixture
def bad_paths(tmp_path):
    (tmp_path / "notes.txt").write_text("my notes\n" * 50)
    _sqlite_file(tmp_path / "agent.sqlite")
    (tmp_path / "folder").mkdir()
    return tmp_path


CLI_CASES = [
    (["demo", "--store", "missing/agent.duckdb"], "does not exist"),
    (["demo", "--store", "notes.txt/agent.duckdb"], "is a file, not a directory"),
    (["demo", "--store", "folder"], "is a directory"),
    (["demo", "--store", "notes.txt"], "not a DuckDB database"),
    (["demo", "--store", "agent.sqlite"], "SQLite database, not a DuckDB store"),
    (["demo", "--store", "/proc/self/agent.duckdb"], "not writable"),
    (["demo", "--question", "   "], "query is empty"),
    (["demo", "--question", "\x1b[31m' OR 1=1; --"], None),  # odd but valid: exit 0
    (["import-sqlite", "missing.sqlite", "--store", "out.duckdb"], "no SQLite database"),
    (["import-sqlite", "notes.txt", "--store", "out.duckdb"], "not a readable SQLite"),
    (["import-sqlite", "agent.sqlite", "--store", "notes.txt"], "not a DuckDB database"),
    (["eval", "locomo", "nowhere"], "does not exist"),
    (["eval", "locomo", "notes.txt"], "cannot read LoCoMo file"),
    (["eval", "locomo", "folder"], "no LoCoMo .json files"),
]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "match"), CLI_CASES, ids=lambda v: " ".join(v) if isinstance(v, list) else ""
)
def test_cli_bad_input_is_one_line_and_non_zero(bad_paths, args, match):
    before = {p.name: p.read_bytes() for p in bad_paths.iterdir() if p.is_file()}
    result = _cli(*args, "--embedder", "hash", cwd=bad_paths)
    if match is None:
        assert result.returncode == 0, result.stderr
        return
    assert result.returncode == 1, result.stdout
    err = result.stderr.strip()
    assert "Traceback" not in err
    assert err.count("\n") == 0, err
    assert err.startswith("nbmemory: error:") and match in err
    after = {p.name: p.read_bytes() for p in bad_paths.iterdir() if p.is_file()}
    assert {k: after.get(k) for k in before} == before  # the user's files are untouched


# -- size limits on every JSON field -------------------------------------------------------
TWENTY_MB = 20_000_000


def _snapshot(mem: Memory) -> tuple:
    """What a refused call must leave as it was: events, counts, audit, sessions, facts,
    macros and tasks (every table a call may write)."""
    assert mem.flush()
    frames = (
        mem.events(),
        mem.status()["counts"],
        mem.audit_log(),
        mem.sessions(),
        mem.facts(),
        mem.macros(),
        mem.scheduled_tasks(),
    )
    return tuple(frame.to_json(date_format="iso", default_handler=str) for frame in frames)


def _seeded(mem: Memory) -> Memory:
    mem.add_event("s", "user", "a first turn", metadata={"source": "test"})
    mem.add_memory("a first memory")
    mem.start_session("u", session_id="sess")
    mem.set_fact("c", "k", "v")
    return mem


def _refused_here(mem: Memory, call, match: str) -> str:
    before = _snapshot(mem)
    with pytest.raises(InvalidInput, match=match) as info:
        call()
    assert _snapshot(mem) == before  # nothing of the refused call was stored
    return _one_line(info.value)


HUGE = {"k": "x" * TWENTY_MB}
LONG_KEY = {"k" * 10_000: "v"}
NESTED_LONG_KEY = {"outer": [{"k" * 300: 1}]}


def _deep(levels: int) -> list:
    value: list = []
    for _ in range(levels - 1):
        value = [value]
    return value


def _metadata_calls(mem: Memory, metadata: object) -> dict:
    memory_id = mem.list_memories()["id"].iloc[0]
    row = {"session_id": "s", "role": "user", "content": "x", "metadata": metadata}
    return {
        "add_event": lambda: mem.add_event("s", "user", "x", metadata=metadata),
        "add_events list": lambda: mem.add_events([{**row, "metadata": None}, row]),
        "add_events frame": lambda: mem.add_events(pd.DataFrame([row, row])),
        "add_memory": lambda: mem.add_memory("x", metadata),
        "update_memory": lambda: mem.update_memory(memory_id, metadata=metadata),
        "remember_conversation": lambda: mem.remember_conversation("x", "user", metadata=metadata),
    }


@pytest.mark.slow
@pytest.mark.parametrize(
    ("metadata", "match"),
    [
        (HUGE, r"metadata is 20\.0 MB of JSON, over the 65,536 bytes limit \(Settings\.max_metadata_bytes\)"),
        (LONG_KEY, r"metadata key 'k+'\.\.\. is 10,000 characters, over the 256-character limit \(Settings\.max_key_chars\)"),
        (NESTED_LONG_KEY, r"metadata key .* in metadata\['outer'\]\[0\] is 300 characters"),
        ({"deep": _deep(100)}, r"metadata is nested more than 64 levels deep .*Settings\.max_json_depth"),
        ({"deep": _deep(5000)}, r"metadata is nested more than 64 levels deep"),
    ],
    ids=["20MB", "key-10000", "nested-key", "depth-100", "depth-5000"],
)  # fmt: skip
def test_metadata_over_a_limit_is_refused_by_every_door(mem, metadata, match):
    _seeded(mem)
    for name, call in _metadata_calls(mem, metadata).items():
        message = _refused_here(mem, call, match)
        assert "Settings." in message, name


def test_metadata_limits_follow_the_settings(store_path):
    big = {"k": "x" * 100_000}
    with Memory(store_path, embedder="hash", max_metadata_bytes=200_000, max_key_chars=20_000,
                max_json_depth=200) as mem:  # fmt: skip
        event = mem.add_event("s", "user", "x", metadata={**big, **LONG_KEY, "d": _deep(150)})
        assert mem.get_event(event.id).metadata["k"] == big["k"]
        with pytest.raises(InvalidInput, match="max_metadata_bytes"):
            mem.add_event("s", "user", "x", metadata={"k": "x" * 300_000})
    # a metadata of exactly the limit is stored; one byte more is not
    with Memory(store_path, embedder="hash") as mem:
        filler = 65_536 - len('{"k": ""}')
        assert mem.add_event("s", "user", "x", metadata={"k": "y" * filler}).metadata
        with pytest.raises(InvalidInput, match="65,537 bytes"):
            mem.add_event("s", "user", "x", metadata={"k": "y" * (filler + 1)})


@pytest.mark.parametrize("form", ["list", "json-text"])
def test_tool_calls_over_a_limit_are_refused(mem, form):
    _seeded(mem)
    calls = [{"function": {"name": "write", "arguments": "x" * TWENTY_MB}}]
    value = calls if form == "list" else json.dumps(calls)
    match = (
        r"tool_calls is 20\.0 MB of JSON, over the 1\.0 MB limit \(Settings\.max_content_bytes\)"
    )
    row = {"session_id": "s", "role": "assistant", "content": None, "tool_calls": value}
    for call in (
        lambda: mem.add_event("s", "assistant", None, tool_calls=value),
        lambda: mem.add_events([row]),
        lambda: mem.add_events(pd.DataFrame([row])),
    ):
        _refused_here(mem, call, match)
    for bad, message in ((LONG_KEY, "tool_calls key"), (_deep(100), "tool_calls is nested")):
        _refused_here(mem, lambda: mem.add_event("s", "assistant", None, tool_calls=[bad]), message)  # noqa: B023


def test_session_state_macro_args_and_task_prompts_are_limited(mem):
    _seeded(mem)
    huge_state = {"plan": "x" * TWENTY_MB}
    for call in (
        lambda: mem.start_session("u", state=huge_state),
        lambda: mem.save_session_state("sess", huge_state),
        lambda: mem.close_session("sess", state=huge_state),
    ):
        _refused_here(mem, call, r"session state is 20\.0 MB of JSON.*max_content_bytes")
    _refused_here(mem, lambda: mem.save_session_state("sess", LONG_KEY), "session state key")
    _refused_here(mem, lambda: mem.save_session_state("sess", {"d": _deep(5000)}), "nested")
    _refused_here(mem, lambda: mem.save_session_state("sess", [1]), "must be a dict")
    _refused_here(mem, lambda: mem.start_session("u", state="text"), "must be a dict")
    _refused_here(
        mem, lambda: mem.add_macro("a", "b", {"x": "y" * TWENTY_MB}), r"next_args is 20\.0 MB"
    )
    _refused_here(mem, lambda: mem.add_macro("a", "b", "y" * TWENTY_MB), "max_content_bytes")
    _refused_here(mem, lambda: mem.add_macro("a", "b", LONG_KEY), "next_args key")
    _refused_here(
        mem,
        lambda: mem.schedule_task("t", "every day at 9am", "p" * TWENTY_MB),
        r"prompt is 20\.0 MB, over the 1\.0 MB limit \(Settings\.max_content_bytes\)",
    )


def test_a_refused_session_state_does_not_even_touch_the_session(mem):
    session = mem.start_session("u", session_id="sess")
    mem.clock = lambda: session.last_activity + dt.timedelta(minutes=5)
    with pytest.raises(InvalidInput):
        mem.save_session_state("sess", {"plan": "x" * TWENTY_MB})
    assert mem.get_session("sess").last_activity == session.last_activity


@pytest.mark.slow
def test_an_import_row_over_a_limit_refuses_the_file(mem, tmp_path):
    _seeded(mem)
    export = tmp_path / "export.json"
    mem.export_json(export)
    document = json.loads(export.read_text())
    for field, value, match in (
        ("metadata", json.dumps(HUGE), r"events\[0\] .*metadata is 20\.0 MB"),
        ("metadata", json.dumps(LONG_KEY), r"events\[0\] .*metadata key"),
        ("metadata", "[" * 100_000 + "]" * 100_000, r"events\[0\] .*max_metadata_bytes"),
        ("metadata", json.dumps({"d": _deep(900)}), r"events\[0\] .*nested"),
        ("tool_calls_json", json.dumps([HUGE]), r"events\[0\] .*tool_calls is 20\.0 MB"),
    ):
        changed = json.loads(json.dumps(document))
        changed["events"][0][field] = value
        export.write_text(json.dumps(changed))
        _refused_here(mem, lambda: mem.import_json(export, namespace="copy"), match)  # noqa: B023
    changed = json.loads(json.dumps(document))
    changed["sessions"][0]["state"] = json.dumps(HUGE)
    export.write_text(json.dumps(changed))
    _refused_here(mem, lambda: mem.import_json(export), r"sessions\[0\]: state is 20\.0 MB")


# -- one rule for missing values -------------------------------------------------------------
#: A value for each optional field, and what is stored when it is not given.
OPTIONAL_FIELDS = {
    "importance": 0.9,
    "created_at": dt.datetime(2024, 5, 8, 13, 56),
    "metadata": {"source": "test"},
    "tool_call_id": "call_1",
    "tool_name": "get_weather",
    "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}],
    "graph_id": "g",
    "task_id": "t",
    "kind": "note",
    "id": "fixed-id",
}


def _stored(mem: Memory) -> list[dict]:
    frame = mem.events().drop(columns=["id", "created_at", "updated_at", "embedding_model"])
    frame = frame.sort_values("content")  # rows of one call may share a millisecond
    return [
        {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}
        for row in frame.to_dict(orient="records")
    ]


@pytest.mark.parametrize("field", sorted(OPTIONAL_FIELDS))
@pytest.mark.parametrize("missing", [None, math.nan, pd.NA], ids=["None", "NaN", "NA"])
def test_an_empty_dataframe_cell_is_the_field_not_given_as_in_a_dict(store_path, field, missing):
    base = {"session_id": "s", "role": "user", "content": "I have a peanut allergy (2)"}
    given = {**base, field: OPTIONAL_FIELDS[field], "content": "I have a peanut allergy (1)"}
    # a DataFrame with the field given in one row and empty in the next ...
    frame = pd.DataFrame([given, {**base, field: missing}])
    frame.loc[1, field] = missing
    with Memory(store_path + ".frame", embedder="hash", estimate_importance=True) as mem:
        mem.add_events(frame)
        from_frame = _stored(mem)
    # ... stores what the dicts store with the field left out, or None
    for absent in ({**base}, {**base, field: None}):
        with Memory(store_path, embedder="hash", estimate_importance=True) as mem:
            mem.add_events([given if field != "id" else {**given, "id": "fixed-id"}, absent])
            assert _stored(mem) == from_frame
        for suffix in ("", ".wal"):
            Path(store_path + suffix).unlink(missing_ok=True)
    default = from_frame[1]
    assert default["importance"] == max(0.5, default["importance"])  # the role default or more
    assert default["kind"] == "message" and default["metadata"] is None


def test_session_id_and_namespace_of_the_call_fill_empty_cells(mem):
    frame = pd.DataFrame(
        [
            {"session_id": "own", "namespace": "elsewhere", "role": "user", "content": "a"},
            {"session_id": None, "namespace": None, "role": "user", "content": "b"},
        ]
    )
    mem.add_events(frame, session_id="call", namespace="ns")
    assert mem.events(namespace="elsewhere")["session_id"].tolist() == ["own"]
    assert mem.events(namespace="ns")["session_id"].tolist() == ["call"]


@pytest.mark.parametrize("nan", [math.nan, np.float64("nan")], ids=["float", "numpy"])
def test_a_nan_given_outside_a_dataframe_is_refused_not_taken_as_missing(mem, nan):
    row = {"session_id": "s", "role": "user", "content": "x", "importance": nan}
    for call, match in (
        (lambda: mem.add_events([row]), r"^row 0: importance is NaN"),
        (lambda: mem.add_event("s", "user", "x", importance=nan), r"^importance is NaN"),
        (lambda: mem.add_memory("x", importance=nan), r"^importance is NaN"),
    ):
        message = _refused_here(mem, call, match)
        assert "leave it out (or None)" in message


# -- the read API validates its numbers ----------------------------------------------------
@pytest.mark.parametrize("bad", [-1, 1.5, "3", True, 2**70], ids=repr)
def test_limits_and_offsets_of_reads_are_refused_by_the_package(mem, bad):
    _seeded(mem)
    for call in (
        lambda: mem.audit_log(limit=bad),
        lambda: mem.events(limit=bad),
        lambda: mem.list_memories(limit=bad),
        lambda: mem.list_memories(offset=bad),
        lambda: mem.search("x", limit=bad),
        lambda: mem.relevant_facts("v", limit=bad),
        lambda: mem.recent("s", bad),
    ):
        with pytest.raises(InvalidInput, match="limit|offset") as info:
            call()
        _one_line(info.value)
    assert len(mem.audit_log(limit=1)) == 1 and len(mem.audit_log(limit=0)) == 0


# -- a damaged or foreign store file ---------------------------------------------------------
def _sha(path: str) -> str:
    import hashlib

    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _tamper(path: str, *statements: str) -> None:
    import duckdb

    with Memory(path, embedder="hash") as mem:
        mem.add_event("s", "user", "kept as it was")
    con = duckdb.connect(path)
    for statement in statements:
        con.execute(statement)
    con.execute("CHECKPOINT")
    con.close()


@pytest.mark.parametrize("value", ["abc", "", "2.5", "9" * 5000])
def test_a_damaged_schema_version_is_a_store_error_naming_the_way_back(store_path, value):
    _tamper(store_path, f"UPDATE nbmemory_meta SET value = '{value}' WHERE key = 'schema_version'")
    before = _sha(store_path)
    for read_only in (False, True):
        if value == "":  # an empty version is "none yet": the file is migrated again
            break
        message = _refused(store_path, "is damaged: nbmemory_meta holds schema_version",
                           read_only=read_only)  # fmt: skip
        assert "nothing was changed" in message and "backup" in message
        assert _sha(store_path) == before
    # the file is free for the next opener (nothing of the failed open holds it)
    import duckdb

    duckdb.connect(store_path).close()


@pytest.mark.parametrize(
    ("table", "columns"),
    [
        ("events", "x INTEGER, content VARCHAR"),
        ("audit_log", "x INTEGER"),
        ("sessions", "namespace VARCHAR, session_id VARCHAR"),
        ("event_vectors", "id VARCHAR"),
    ],
)
def test_a_foreign_table_behind_the_marker_is_refused_naming_its_missing_columns(
    store_path, table, columns
):
    _tamper(store_path, f"DROP TABLE {table}", f"CREATE TABLE {table} ({columns})")
    before = _sha(store_path)
    for read_only in (False, True):
        message = _refused(store_path, f"its tables are not nbmemory's: {table} lacks",
                           read_only=read_only)  # fmt: skip
        assert "nothing was changed" in message
        assert _sha(store_path) == before
        assert not Path(store_path + ".wal").exists()


def test_a_missing_table_behind_the_marker_is_refused(store_path):
    _tamper(store_path, "DROP TABLE facts")
    before = _sha(store_path)
    _refused(store_path, "no facts table")
    assert _sha(store_path) == before


def test_a_foreign_table_met_by_a_migration_is_refused_and_rolled_back(store_path):
    _tamper(
        store_path,
        "DROP TABLE events",
        "CREATE TABLE events (x INTEGER)",
        "DELETE FROM nbmemory_migrations WHERE name = 'm004_event_vectors'",
    )
    before = _sha(store_path)
    message = _refused(store_path, r"cannot be upgraded \(m004_event_vectors")
    assert "nothing was changed" in message
    assert _sha(store_path) == before


def test_an_open_that_fails_half_way_lets_the_file_go(store_path, monkeypatch):
    from nbmemory.knowledge.consolidation import Consolidation

    Memory(store_path, embedder="hash").close()

    def broken(self, *args, **kwargs):
        raise StoreError("a failure after the file was open")

    monkeypatch.setattr(Consolidation, "start", broken)
    with pytest.raises(StoreError, match="after the file was open"):
        Memory(store_path, embedder="hash")
    monkeypatch.undo()
    with Memory(store_path, embedder="hash", read_only=True) as reader:  # not held any more
        assert reader.events().empty


# -- odd values anywhere in the public API: a package error or a result, never a raw one ---
ODD_VALUES = {
    "negative": -1,
    "fraction": 1.5,
    "nan": math.nan,
    "inf": math.inf,
    "huge": 2**70,
    "empty": "",
    "blank": "  ",
    "surrogate": "a\ud800",
    "none": None,
    "list": [],
    "dict": {},
    "object": object(),
    "bool": True,
    "long": "x" * 5000,
    "bytes": b"b",
    "nat": pd.NaT,
    "deep": _deep(3000),
}


def _public_calls(mem: Memory, tmp_path: Path) -> dict[str, tuple]:
    """(method, known-good keyword arguments) for the public API."""
    event = mem.add_event("s", "user", "hello python", metadata={"k": 1})
    memory = mem.add_memory("a memory about python")
    task = mem.schedule_task("t", "every day at 9am", "do it")
    macro = mem.add_macro("a", "b", {"x": 1})
    mem.set_fact("c", "k", "v")
    mem.start_session("u", session_id="sess")
    (tmp_path / "AGENTS.md").write_text("# Rules\n\nbe kind\n")
    export = tmp_path / "export.json"
    mem.export_json(export)
    return {
        "add_event": dict(session_id="s", role="user", content="hi"),
        "add_events": dict(rows=[{"session_id": "s", "role": "user", "content": "x"}]),
        "get_event": dict(event_id=event.id),
        "events": {},
        "recent": dict(session_id="s"),
        "delete": dict(ids=["nope"]),
        "search": dict(query="python"),
        "get_context": dict(session_id="s", query="python"),
        "embed_queries": dict(queries=["q"]),
        "add_memory": dict(content="m"),
        "remember_conversation": dict(content="c", role="user"),
        "search_memories": dict(text="python"),
        "search_memories_by_similarity": dict(query="python"),
        "list_memories": {},
        "update_memory": dict(id=memory.id, content="new"),
        "set_fact": dict(category="c", key="k2", value="v"),
        "fact_history": {},
        "relevant_facts": dict(query="v"),
        "add_macro": dict(trigger_tool="a", next_tool="b"),
        "suggest_next_tool": dict(trigger_tool="a"),
        "record_macro_use": dict(macro_id=macro),
        "is_command_allowed": dict(command="ls -l"),
        "schedule_task": dict(name="n", schedule="every day at 9am", prompt="p"),
        "resume_task": dict(task_id=task["id"]),
        "due_tasks": {},
        "start_session": dict(user_id="u2"),
        "save_session_state": dict(session_id="sess", state={"a": 1}),
        "close_session": dict(session_id="sess"),
        "sessions": {},
        "cleanup_sessions": dict(dry_run=True),
        "audit_log": {},
        "export_json": dict(path=str(tmp_path / "out.json")),
        "import_json": dict(path=str(export), namespace="copy"),
        "import_sqlite": dict(path=str(tmp_path / "none.sqlite")),
        "sync_agents_md": dict(path=str(tmp_path / "AGENTS.md")),
        "consolidate": {},
        "apply_thresholds": dict(relevance_threshold=0.5),
    }


@pytest.mark.slow
def test_odd_values_in_any_argument_get_a_package_error_or_a_result(store_path, tmp_path):
    import inspect

    import nbmemory.errors as errors

    ours = tuple(
        v for v in vars(errors).values() if isinstance(v, type) and issubclass(v, Exception)
    )
    raw: list[str] = []
    with Memory(store_path, embedder="hash", background_consolidation=False) as mem:
        for name, good in _public_calls(mem, tmp_path).items():
            method = getattr(mem, name)
            for parameter in inspect.signature(method).parameters.values():
                if parameter.kind in (parameter.VAR_KEYWORD, parameter.VAR_POSITIONAL):
                    continue
                for label, value in ODD_VALUES.items():
                    try:
                        method(**{**good, parameter.name: value})
                    except ours as exc:
                        _one_line(exc)
                    except Exception as exc:  # noqa: BLE001 - what this test looks for
                        raw.append(
                            f"{name}({parameter.name}={label}): {type(exc).__name__}: {exc}"[:200]
                        )
    assert not raw, "\n".join(raw)
