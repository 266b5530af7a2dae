"""Shared fixtures.

Unit tests use the deterministic offline embedder (``embedder="hash"``).  Tests
marked ``real_model`` / ``locomo`` need ``$NBMEMORY_MODEL_PATH`` /
``$NBMEMORY_LOCOMO_PATH`` (``.ci/run`` sets both); elsewhere they skip with the
reason, and under CI (``$CI`` set) a missing one is a failure, never a skip.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from nbmemory import Memory
from nbmemory.config import ENV_MODEL_PATH
from nbmemory.research.datasets import ENV_LOCOMO_PATH

#: Fixtures that need the real model, the LoCoMo data or a lake, and the marker that says so.
_MARKERS = {
    "model_path": "real_model",
    "real_embedder": "real_model",
    "locomo_dir": "locomo",  # and ``locomo``, the five conversations loaded
    "lake_catalog": "lake",  # and every fixture built on it (lake_url, ...)
}

#: Markers that make a test ``slow`` too, out of the inner loop (``pytest -m "not slow"``):
#: a LoCoMo test loads whole conversations with the real model (seconds to minutes), the
#: browser test starts JupyterLab and chromium.
_SLOW_WITH = ("locomo", "browser")

#: Parametrised tests that sweep every field, value or page, each case on a store of
#: its own: the inner loop runs their first case, the full run every case (``slow``).
_SWEEPS = {
    # test_bad_input.py
    "test_an_empty_dataframe_cell_is_the_field_not_given_as_in_a_dict",
    "test_every_string_field_is_stored_exactly",
    "test_settings_refuse_nan_inf_and_negative",
    "test_get_context_refuses_nan_inf_and_negative_parameters",
    "test_dates_in_the_wrong_format_are_refused",
    "test_a_lone_surrogate_in_any_string_field_is_refused",
    "test_metadata_that_is_not_json_is_refused",
    "test_bad_importance_in_bulk_rows_is_refused",
    "test_a_damaged_schema_version_is_a_store_error_naming_the_way_back",
    "test_a_foreign_table_behind_the_marker_is_refused_naming_its_missing_columns",
    "test_tool_calls_over_a_limit_are_refused",
    # the other pages of bad input and failures, by feature
    "test_a_missing_id_raises_its_kind_of_not_found_and_changes_nothing",
    "test_deleters_that_answer_say_nothing_was_there",
    "test_bad_input_is_refused_before_anything_is_stored",
    "test_bad_importance_is_refused_and_nothing_stored",
    "test_search_memories_bad_inputs",
    "test_add_memory_bad_inputs",
    "test_consolidate_bad_inputs",
    "test_unusable_summaries_count_as_failures",
    "test_bad_files_are_refused_and_nothing_is_written",
    "test_a_turn_with_neither_content_nor_tool_calls_is_refused_naming_the_row",
    "test_a_whole_batch_failing_is_recorded_and_retried",
    "test_a_broken_reranker_is_one_clear_error_and_changes_nothing",
    "test_is_command_allowed",
    "test_bad_input_is_one_line_usage_error_and_stores_nothing",  # the magics'
    "test_examples_run",  # README.md's examples first, then CONTRIBUTING.md's and docs/
}


def pytest_configure(config: pytest.Config) -> None:
    """Compile nbmemory's source to bytecode once, before any test starts a process.

    The tests start hundreds of Python processes (kills at every write, kernels, the
    CLI), each importing nbmemory.  An editable install leaves the source without
    bytecode, and where ``PYTHONDONTWRITEBYTECODE`` is set (CI's container sets it)
    no process writes any: each compiled the whole package again, about 0.2 s of CPU
    apiece.  Python reads bytecode whatever that variable says, and skips a file
    whose source changed since.
    """
    import compileall

    compileall.compile_dir(str(Path(__file__).resolve().parents[1] / "src"), quiet=1)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test by the real things it uses, so ``-m "not locomo"``, ``-m "not
    slow"`` and the skip reasons follow the fixtures rather than hand-written marks;
    and every case of a sweep but its first ``slow``."""
    first_cases: set[tuple[str, str]] = set()
    for item in items:
        for fixture, marker in _MARKERS.items():
            if fixture in getattr(item, "fixturenames", ()):
                item.add_marker(marker)
        if any(item.get_closest_marker(name) for name in _SLOW_WITH):
            item.add_marker("slow")
        name = getattr(item, "originalname", "")
        if name in _SWEEPS:
            sweep = (str(item.path), name)
            if sweep in first_cases:
                item.add_marker("slow")
            first_cases.add(sweep)


# -- where the two workers' time went (pytest-xdist; printed at the end of the run) ---------
_PHASES: list[tuple[str, float, float, str, float]] = []  # worker, start, stop, test, cpu


def _cpu_seconds() -> float:
    """CPU used so far by this process and the children it has waited for."""
    import resource

    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """On a worker: the CPU each phase used (this process and the children it reaped),
    carried to the controller on the report (xdist sends a report's attributes)."""
    outcome = yield
    before = getattr(item, "_nbmemory_cpu", None)
    now = _cpu_seconds()
    if before is not None:
        outcome.get_result().cpu = now - before
    item._nbmemory_cpu = now  # the next phase starts here


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    item._nbmemory_cpu = _cpu_seconds()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """On xdist's controller: each phase of each test, with the worker that ran it."""
    node = getattr(report, "node", None)
    if node is not None:
        cpu = float(getattr(report, "cpu", 0.0) or 0.0)
        _PHASES.append((node.gateway.id, report.start, report.stop, report.nodeid, cpu))


def pytest_terminal_summary(terminalreporter) -> None:
    """One line per worker: busy seconds and when it ran out of tests.  A worker
    done long before the other is time CI waits for nothing (the run's order is
    xdist's); ``$NBMEMORY_TEST_TIMELINE`` names a file for every phase."""
    if not _PHASES:
        return
    begin = min(start for _, start, _, _, _ in _PHASES)
    workers: dict[str, list[float]] = {}
    for worker, start, stop, _, _ in _PHASES:
        busy = workers.setdefault(worker, [0.0, 0.0])
        busy[0] += stop - start
        busy[1] = max(busy[1], stop - begin)
    end = max(done for _, done in workers.values())
    terminalreporter.write_line(
        "workers: "
        + "; ".join(
            f"{w} busy {busy:.0f} s, out of tests at {done:.0f} s (idle {end - done:.0f} s)"
            for w, (busy, done) in sorted(workers.items())
        )
    )
    path = os.environ.get("NBMEMORY_TEST_TIMELINE")
    if path:
        with open(path, "w", encoding="utf-8") as out:
            for worker, start, stop, test, cpu in sorted(_PHASES, key=lambda p: p[1]):
                out.write(f"{worker}\t{start - begin:.2f}\t{stop - begin:.2f}\t{test}\t{cpu:.2f}\n")


@pytest.fixture(autouse=True)
def _no_leftover_underscore():
    """Doctests leave ``builtins._`` behind (Python's displayhook sets it), and an
    IPython shell stops updating ``_`` when one exists: clear it before each test."""
    import builtins

    if hasattr(builtins, "_"):
        del builtins._
    yield


def _need(env: str, what: str) -> str:
    value = os.environ.get(env)
    if value and Path(value).exists():
        return value
    if os.environ.get("CI"):
        pytest.fail(f"{what} is required in CI: set {env}")
    pytest.skip(f"{what} not available: set {env} to run this test")


@pytest.fixture(scope="session")
def model_path() -> str:
    return _need(ENV_MODEL_PATH, "the all-MiniLM-L6-v2 model")


@pytest.fixture(scope="session")
def locomo_dir() -> Path:
    return Path(_need(ENV_LOCOMO_PATH, "the LoCoMo data"))


@pytest.fixture(scope="session")
def real_embedder(model_path: str):
    """One loaded fastembed model shared by every test that needs it."""
    from nbmemory.retrieval.embedders import FastEmbedEmbedder

    embedder = FastEmbedEmbedder(model_path=model_path)
    embedder.embed(["warm up"])
    return embedder


@pytest.fixture(scope="session")
def lake_catalog() -> str:
    """The PostgreSQL the lake tests use (``$NBMEMORY_LAKE_PG``; ``.ci/run`` starts one)
    and a DuckDB that can load the ducklake extension (``.venv-lake``)."""
    required = bool(os.environ.get("NBMEMORY_LAKE_REQUIRED"))
    catalog = os.environ.get("NBMEMORY_LAKE_PG")
    if not catalog:
        if required:
            pytest.fail("the lake tests need NBMEMORY_LAKE_PG (a libpq connection string)")
        pytest.skip("no PostgreSQL for the lake: set NBMEMORY_LAKE_PG (bash .ci/run does)")
    from nbmemory.store.lake import extensions

    con = extensions.connect()
    try:
        extensions.load(con, "postgres")
    except Exception as exc:
        if required:
            pytest.fail(f"the lake tests cannot load DuckDB's extensions: {exc}")
        pytest.skip(f"DuckLake is not loadable here ({exc})")
    finally:
        con.close()
    return catalog


@pytest.fixture
def lake_url(lake_catalog: str, tmp_path: Path) -> str:
    """A new, empty lake: its own catalog schema in the test PostgreSQL, its own data path."""
    import uuid

    schema = "t_" + uuid.uuid4().hex[:16]
    return (
        f"ducklake:postgres:{lake_catalog} metadata_schema={schema} data_path={tmp_path / 'lake'}"
    )


@pytest.fixture
def foreign_lake(lake_url: str):
    """``lake_url`` made by another application (an ``orders`` table with one row);
    yields a DuckDB connection attached to it as ``other``, to look at it afterwards."""
    from nbmemory.store.lake import extensions, parse_lake_url

    address = parse_lake_url(lake_url)
    con = extensions.connect()
    try:
        extensions.load(con, "postgres")
        con.execute(
            f"ATTACH '{address.attach.replace(chr(39), chr(39) * 2)}' AS other"
            f" (DATA_PATH '{address.data_path}', METADATA_SCHEMA '{address.metadata_schema}')"
        )
        con.execute("CREATE TABLE other.orders (id INTEGER, total DOUBLE)")
        con.execute("INSERT INTO other.orders VALUES (1, 9.5)")
        yield con
    finally:
        con.close()


@pytest.fixture
def store_path(tmp_path: Path) -> str:
    return str(tmp_path / "agent.duckdb")


@pytest.fixture
def mem(store_path: str):
    """A file-backed store with the offline embedder."""
    memory = Memory(store_path, embedder="hash")
    yield memory
    memory.close()


# -- research toolkit (issue 4): LoCoMo stores shared across test files ---------------------
TINY_LOCOMO = {
    "sample_id": "tiny-1",
    "conversation": {
        "speaker_a": "Alice",
        "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Alice", "dia_id": "D1:1", "text": "I adopted a puppy named Rex"},
            {"speaker": "Bob", "dia_id": "D1:2", "text": "Rex is a lovely name for a puppy"},
            {"speaker": "Alice", "dia_id": "D1:3", "text": "My sister lives in Lisbon"},
        ],
        "session_2_date_time": "10:00 am on 20 May, 2023",
        "session_2": [
            {"speaker": "Bob", "dia_id": "D2:1", "text": "I started painting watercolours"},
            {"speaker": "Alice", "dia_id": "D2:2", "text": "Lisbon was sunny when I visited"},
            {"speaker": "Bob", "dia_id": "D2:3", "text": "See you next week"},
        ],
    },
    "qa": [
        {
            "question": "What is the name of Alice's puppy?",
            "answer": "Rex",
            "evidence": ["D1:1"],
            "category": 1,
        },
        {
            "question": "Where does Alice's sister live?",
            "answer": "Lisbon",
            "evidence": ["D1:3", "D2:2"],
            "category": 2,
        },
        {
            "question": "What did Bob start painting?",
            "answer": "watercolours",
            "evidence": ["D2:1"],
            "category": 4,
        },
        {
            "question": "What is Bob's cat called?",
            "adversarial_answer": "none",
            "evidence": [],
            "category": 5,
        },
    ],
}


@pytest.fixture(scope="session")
def tiny_locomo_path(tmp_path_factory) -> Path:
    """A six-turn LoCoMo-format conversation with three answerable questions."""
    import json

    path = tmp_path_factory.mktemp("locomo") / "conv-tiny.json"
    path.write_text(json.dumps(TINY_LOCOMO))
    return path


class LocomoStores:
    """Each LoCoMo conversation loaded once (real model, in-memory store, default
    settings), on first use.  Tests read them and never change them: other
    settings are tried per call (``settings=`` or ``SettingsTrial``)."""

    def __init__(self, embedder, folder: Path) -> None:
        self.embedder = embedder
        self.folder = folder
        self._loaded: dict[str, tuple] = {}

    def __getitem__(self, conversation: str):
        from nbmemory.research.datasets import load_locomo

        if conversation not in self._loaded:
            memory = Memory(":memory:", embedder=self.embedder, background_consolidation=False)
            self._loaded[conversation] = (
                memory,
                load_locomo(self.folder / f"{conversation}.json", memory),
            )
        return self._loaded[conversation]

    def all(self) -> list[tuple]:
        from nbmemory.research.datasets import locomo_files

        return [self[path.stem] for path in locomo_files(self.folder)]

    def close(self) -> None:
        for memory, _ in self._loaded.values():
            memory.close()


@pytest.fixture(scope="session")
def locomo(real_embedder, locomo_dir):
    """The five LoCoMo conversations, one shared store each: ``locomo["conv-26"]``."""
    stores = LocomoStores(real_embedder, locomo_dir)
    yield stores
    stores.close()


# -- the magics in a real IPython shell ------------------------------------------------------
@pytest.fixture(scope="module")
def shell():
    """The process' InteractiveShell (a singleton), with history kept in memory."""
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    return InteractiveShell.instance(config=config)


@pytest.fixture
def ip(shell, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The shell with nbmemory loaded on a fresh store and the hash embedder; unloaded after.

    ``%config`` writes into ``shell.config`` (which outlives the extension), so the
    MemoryMagics section is cleared before and after each test.
    """
    monkeypatch.delenv("NBMEMORY_SHARED", raising=False)
    shell.config.pop("MemoryMagics", None)
    shell.extension_manager.load_extension("nbmemory")
    magics = shell.magics_manager.registry["MemoryMagics"]
    magics.embedder = "hash"
    magics.path = str(tmp_path / "notebook.duckdb")
    yield shell
    shell.extension_manager.unload_extension("nbmemory")
    shell.config.pop("MemoryMagics", None)


@pytest.fixture
def magics(ip):
    """The loaded MemoryMagics instance."""
    return ip.magics_manager.registry["MemoryMagics"]


@pytest.fixture
def held_store(magics):
    """The magics' store file, held open by another process (a non-shared DuckDB)."""
    from notebook_shell import holding

    Memory(magics.path, embedder="hash").close()  # create the file
    with holding(magics.path) as pid:
        yield pid


@pytest.fixture
def small_disk(tmp_path):
    """A real 20 MB file system (tmpfs), mounted for the test (needs root)."""
    mountpoint = tmp_path / "disk"
    mountpoint.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", str(mountpoint)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {done.stderr.strip()}")
    yield mountpoint
    subprocess.run(["umount", "-l", str(mountpoint)], check=False)
