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
    _refused(str(path), "cannot open the store", read_only=True)
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
    match = "SQLite database, not a DuckDB store" if kind == "sqlite" else "not a DuckDB database"
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
