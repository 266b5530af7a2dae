"""Crashes and shutdown, with real processes.

* A child process streams ``add_event`` calls and prints every id the call
  returned; the parent SIGKILLs it mid-stream.  Reopening must find every
  printed id, open cleanly, and embed what had no vector yet.
* A process that opens a Memory, queues work and exits *without* ``close()``
  must exit (the atexit hook stops the threads); the subprocess timeout is the
  failure detector, never a sleep.
* A process killed while it opens a store (a new one, or an old one it migrates),
  right after, in the middle of a batch or after ``flush()``: the file opens again
  with every acknowledged write, on every DuckDB version ``pyproject.toml`` allows
  (``.ci/run`` runs the tests marked ``crash`` under the oldest allowed release and
  under 1.5.5 too; DuckDB 1.x could not replay the schema statements of a new
  store's first session).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import duckdb
import pytest
from fakes import TESTS_DIR

from nbmemory import Memory

#: A deadlock or a hung process fails the test instead of hanging the suite; ``crash``:
#: run again under each DuckDB version the package allows (see ``.ci/run``).
pytestmark = [pytest.mark.timeout(600), pytest.mark.crash, pytest.mark.slow]

#: Generous bound: a child that is still running after this is hung, not slow.
HANG = 120

_SRC = str(Path(__file__).resolve().parents[1] / "src")


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


def _env() -> dict[str, str]:
    # an existing PYTHONPATH stays after ours: CI puts another DuckDB release there
    path = os.pathsep.join(p for p in (_SRC, os.environ.get("PYTHONPATH", "")) if p)
    return dict(os.environ, PYTHONPATH=path, PYTHONUNBUFFERED="1")


STREAM_CHILD = """
import sys
sys.path.insert(0, sys.argv[4])
from fakes import StuckEmbedder as Stuck  # every event is still pending when killed
from nbmemory import Memory

path, mode, start = sys.argv[1], sys.argv[2], int(sys.argv[3])
mem = Memory(path, embedder=Stuck() if mode == "stuck" else "hash", shared=mode == "shared")
i = start
while True:
    event = mem.add_event(f"s{i % 3}", "user", f"memory number {i}", metadata={"i": i})
    print(event.id, flush=True)
    i += 1
"""


def _kill_after(code: str, args: list[str], *, count: int = 0) -> list[str]:
    """Run ``code`` in a child, collect the ids it prints, SIGKILL it once it has printed
    ``count`` of them (or says ``done``); return every id it printed before dying."""
    child = subprocess.Popen(
        [*_python(code), *args, TESTS_DIR],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    ids: list[str] = []
    try:
        while not (count and len(ids) >= count):
            line = child.stdout.readline().strip()
            if line == "done":
                break
            if not line and child.poll() is not None:  # the child died on its own: show why
                raise AssertionError(f"child exited early: {child.wait()} {child.stderr.read()}")
            if line:
                ids.append(line)
        child.send_signal(signal.SIGKILL)  # while it is still working, or waiting
        assert child.wait(timeout=HANG) == -signal.SIGKILL
        # lines printed between our last read and the kill were returned too
        ids += [
            x.strip() for x in child.stdout.read().splitlines() if x.strip() not in ("", "done")
        ]
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stdout.close()
        child.stderr.close()
    return ids


def _stream_and_kill(path: str, mode: str, start: int, count: int) -> list[str]:
    """Run the streaming child, read ``count`` returned ids, SIGKILL it; return the ids."""
    return _kill_after(STREAM_CHILD, [path, mode, str(start)], count=count)


def test_sigkill_mid_stream_loses_no_returned_event_and_embeds_the_rest(tmp_path):
    path = str(tmp_path / "killed.duckdb")
    returned = _stream_and_kill(path, "stuck", 0, 150)
    assert len(returned) >= 150

    # the killed file opens cleanly (even read-only, with no repair) ...
    con = duckdb.connect(path, read_only=True)
    try:
        stored, without_vector = con.execute(
            "SELECT count(*), count(*) FILTER (WHERE id NOT IN (SELECT id FROM event_vectors))"
            " FROM events"
        ).fetchone()
    finally:
        con.close()
    # ... and the model never answered, so every event lacks its vector
    assert stored >= len(returned) and without_vector == stored

    with Memory(path, embedder="hash") as mem:
        ids = set(mem.events()["id"])
        assert set(returned) <= ids, "an event whose add_event returned was lost"
        assert mem.flush(timeout=HANG) is True
        status = mem.status()
        assert status["pending"] == 0 and status["failed"] == 0
        assert status["embedded"] == status["events"] == len(ids)
        # and it is searchable again
        assert mem.search("memory number 7", limit=1)["content"].iloc[0] == "memory number 7"


def test_repeated_sigkills_on_one_file_keep_every_returned_event(tmp_path):
    path = str(tmp_path / "killed-again.duckdb")
    returned: list[str] = []
    for round_ in range(3):  # kill, reopen (in the next child), kill again ...
        returned += _stream_and_kill(path, "hash", round_ * 10_000, 60)
    with Memory(path, embedder="hash") as mem:
        assert set(returned) <= set(mem.events()["id"])
        assert mem.flush(timeout=HANG) is True
        assert mem.status()["pending"] == 0
        assert mem.audit_log(action="add")["target_ids"].map(len).sum() >= len(returned)


def test_a_shared_kernel_killed_mid_lease_does_not_block_the_others(tmp_path):
    path = str(tmp_path / "shared-killed.duckdb")
    with Memory(path, embedder="hash", shared=True) as mine:
        mine.add_event("mine", "user", "written before the other kernel started")
        # the child takes a lease for every statement, so the kill lands inside one
        # or between two; either way the kernel drops its locks with the process
        returned = _stream_and_kill(path, "shared", 0, 80)
        assert set(returned) <= set(mine.events()["id"])
        after = mine.add_event("mine", "user", "written after the other kernel died")
        assert mine.flush(timeout=HANG)
        assert mine.recent("mine", 1)["id"].iloc[0] == after.id
        assert mine.get_event(after.id).embedding_model == mine.model_name
    # what the dead kernel left without a vector is embedded at the next open
    with Memory(path, embedder="hash", shared=True) as again:
        assert again.flush(timeout=HANG)
        assert again.status()["pending"] == 0


EXIT_CHILD = """
import sys
sys.path.insert(0, sys.argv[3])
from fakes import StuckEmbedder as Stuck  # a model that never answers
from nbmemory import Memory


path, mode = sys.argv[1], sys.argv[2]
mem = Memory(path, embedder=Stuck() if mode == "stuck" else "hash", shared=mode == "shared")
mem.add_events([{"session_id": "s", "role": "user", "content": f"queued {i}"} for i in range(3000)])
for i in range(20):
    mem.add_event("s", "user", f"single {i}")
if mode == "stuck":
    Stuck.entered.wait()  # the worker is inside the model for sure
if mode == "consolidation":
    mem.start_consolidation(interval_hours=0.0001)  # wakes every 0.36 s
print("leaving without close()", flush=True)
"""


@pytest.mark.parametrize("mode", ["hash", "stuck", "consolidation", "shared"])
def test_exit_without_close_does_not_hang_and_loses_nothing(tmp_path, mode):
    path = str(tmp_path / f"exit-{mode}.duckdb")
    result = subprocess.run(
        [*_python(EXIT_CHILD), path, mode, TESTS_DIR],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=HANG,  # the failure detector: a hung shutdown raises TimeoutExpired
    )
    assert result.returncode == 0, result.stderr
    assert "leaving without close()" in result.stdout
    # the atexit hook closed the file: this process can open it for writing
    with Memory(path, embedder="hash") as mem:
        assert len(mem.events()) == 3020
        assert mem.flush(timeout=HANG) is True
        assert mem.status()["embedded"] == 3020


def _nbmemory_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("nbmemory-") and t.is_alive()}


def test_close_stops_the_embedding_and_consolidation_threads(store_path):
    before = _nbmemory_threads()
    mem = Memory(store_path, embedder="hash")
    mem.add_events([{"session_id": "s", "role": "user", "content": f"t {i}"} for i in range(500)])
    consolidator = mem.start_consolidation(interval_hours=1)
    run = consolidator.trigger()
    started = _nbmemory_threads() - before
    assert {t.name for t in started} >= {"nbmemory-embedder", "nbmemory-consolidation"}
    assert consolidator.wait_for_run(run, timeout=HANG)
    mem.close()
    for thread in started:
        thread.join(timeout=HANG)  # the failure detector: a thread that never ends
        assert not thread.is_alive(), thread.name
    assert not consolidator.alive and mem.consolidator is None
    with Memory(store_path, embedder="hash") as again:  # queued texts were not lost
        assert again.flush(timeout=HANG)
        assert again.status()["embedded"] == len(again.events()) >= 500


# -- killed while a store opens, or early in its first session -----------------------------

EARLY_CHILD = """
import sys
sys.path.insert(0, sys.argv[3])
from nbmemory import Memory

path, step = sys.argv[1], sys.argv[2]
mem = Memory(path, embedder="hash")
if step == "open":
    print("done", flush=True)
ids = []
if step in ("add", "flush"):
    ids.append(mem.add_event("s", "user", "the first thing I said").id)
if step == "batch":  # acknowledged batches, then killed inside the next one
    for round_ in range(1000):
        rows = [{"session_id": "s", "role": "user", "content": f"row {round_}-{i}"}
                for i in range(500)]
        print("\\n".join(mem.add_events(rows)), flush=True)
if step == "flush":
    assert mem.flush(timeout=60)
print("\\n".join(ids), flush=True)
print("done", flush=True)
import threading
threading.Event().wait()  # stay here until killed
"""


def _run_and_kill(path: str, step: str, *, lines: int = 0) -> list[str]:
    """Run :data:`EARLY_CHILD` up to ``step``, SIGKILL it once it says ``done`` (or after
    ``lines`` acknowledged ids for ``batch``); return the ids it acknowledged."""
    return _kill_after(EARLY_CHILD, [path, step], count=lines)


@pytest.mark.parametrize("step", ["open", "add", "batch", "flush"])
def test_a_new_store_killed_in_its_first_session_opens_with_every_write(tmp_path, step):
    """DuckDB 1.x could not replay the new store's schema statements from the WAL:
    every write of the first session was unreachable (INTERNAL Error, 4 runs of 4)."""
    path = str(tmp_path / f"first-{step}.duckdb")
    acknowledged = _run_and_kill(path, step, lines=1200 if step == "batch" else 0)
    with Memory(path, embedder="hash") as mem:
        stored = set(mem.events()["id"])
        assert set(acknowledged) <= stored
        assert (len(stored) > 0) == (step != "open")
        if step == "flush":
            assert mem.get_event(acknowledged[0]).embedding_model == mem.model_name
        assert mem.flush(timeout=HANG)
        assert mem.status()["pending"] == 0
        later = mem.add_event("s", "user", "written after the crash")
    with Memory(path, embedder="hash") as again:
        assert later.id in set(again.events()["id"])


def test_an_old_store_killed_right_after_its_migration_opens(tmp_path):
    """m004 alters ``events``, whose ``seq`` column defaults to a sequence: the
    statement DuckDB 1.x cannot replay from a WAL."""
    from test_store import make_version_1_file

    path = str(tmp_path / "old.duckdb")
    make_version_1_file(path)
    _run_and_kill(path, "add")
    with Memory(path, embedder="hash") as mem:
        assert {"e0", "e1", "e2"} <= set(mem.events()["id"])
        assert len(mem.events()) == 4


KILLED_OPEN_CHILD = """
import os, signal, sys, threading, time
sys.path.insert(0, sys.argv[3])
from nbmemory import Memory

path, delay = sys.argv[1], float(sys.argv[2])
threading.Timer(delay, lambda: os.kill(os.getpid(), signal.SIGKILL)).start()
start = time.perf_counter()
mem = Memory(path, embedder="hash")
print(f"opened {time.perf_counter() - start:.4f}", flush=True)
threading.Event().wait()
"""


def test_a_store_killed_at_any_moment_of_its_opening_opens_again(tmp_path):
    """Kills spread over the whole opening of a new store and of one that migrates
    (fault injection at measured points, not synchronisation): every file opens."""
    from test_store import make_version_1_file

    def open_killed(path: str, delay: float) -> str:
        result = subprocess.run(
            [*_python(KILLED_OPEN_CHILD), path, str(delay), TESTS_DIR],
            capture_output=True,
            text=True,
            env=_env(),
            timeout=HANG,
        )
        assert result.returncode == -signal.SIGKILL, result.stderr
        return result.stdout

    # how long an opening takes here, measured by a child that is killed only after
    took = float(open_killed(str(tmp_path / "measure.duckdb"), 30).split()[1])
    for kind in ("new", "old"):
        for step in range(8):
            path = str(tmp_path / f"{kind}-{step}.duckdb")
            if kind == "old":
                make_version_1_file(path)
            open_killed(path, took * step / 6)  # from before the file exists to after
            with Memory(path, embedder="hash") as mem:
                assert len(mem.events()) == (3 if kind == "old" else 0)


OPEN_CHILD = """
import sys
sys.path.insert(0, sys.argv[2])
from nbmemory import Memory

Memory(sys.argv[1], embedder="hash").close()
"""


def _strace() -> str:
    found = shutil.which("strace")
    if found:
        return found
    if os.environ.get("CI"):
        pytest.fail("strace is required in CI (.ci/run installs it)")
    pytest.skip("strace is not installed (apt-get install strace): it kills the child at a write")


@pytest.mark.parametrize("kind", ["new", "old"])
def test_a_store_killed_at_each_write_of_its_opening_opens_again(tmp_path, kind):
    """strace kills the child at its 1st, 2nd, 3rd... ``pwrite`` (DuckDB writes every
    byte of a store file and its log with it) while it opens a new store, or migrates
    one of schema version 1, until one child gets through: after each kill the store
    opens with what it held, and nothing but the store is left beside it.  Before
    new stores were created under another name and linked into place, the kills at
    the 1st to 3rd write left a file of 0, 4,096 or 8,192 bytes that no DuckDB opens."""
    from test_store import make_version_1_file

    strace = _strace()
    for n in range(1, 200):
        path = tmp_path / f"{kind}-{n}.duckdb"
        if kind == "old":
            make_version_1_file(str(path))
        result = subprocess.run(
            [strace, "-f", "-qq", "-o", os.devnull, "-e", "trace=pwrite64",
             "-e", f"inject=pwrite64:signal=KILL:when={n}", *_python(OPEN_CHILD),
             str(path), TESTS_DIR],
            capture_output=True, text=True, env=_env(), timeout=HANG,
        )  # fmt: skip
        assert result.returncode in (0, -signal.SIGKILL, 128 + signal.SIGKILL), result.stderr
        with Memory(str(path), embedder="hash") as mem:
            assert len(mem.events()) == (3 if kind == "old" else 0)
        assert sorted(p.name for p in tmp_path.glob(f"{kind}-{n}.*")) == [path.name]
        if result.returncode == 0:
            break  # every write of the creation was a kill point
    else:
        pytest.fail("the child was still killed at its 199th write")
    assert n > 3, n  # the header's three writes at least were kill points


def test_a_log_this_duckdb_cannot_replay_gets_the_way_to_recover(tmp_path):
    """A WAL holding an ALTER of a table with a sequence default (what a store made
    before this fix and killed early holds): 1.x names the way out, 2.x replays it."""
    from nbmemory.errors import WalNotReplayable

    path = str(tmp_path / "unreplayable.duckdb")
    with Memory(path, embedder="hash") as mem:
        mem.add_event("s", "user", "kept safe in the file")
    code = """
    import os, signal, sys, duckdb
    con = duckdb.connect(sys.argv[1])
    con.execute("SET checkpoint_threshold = '1GB'")
    con.execute("CREATE TABLE scratch (a INTEGER)")
    con.execute("ALTER TABLE scratch ADD COLUMN b BIGINT DEFAULT nextval('events_seq')")
    con.execute("INSERT INTO scratch (a) VALUES (1)")
    os.kill(os.getpid(), signal.SIGKILL)
    """
    result = subprocess.run([*_python(code), path], env=_env(), timeout=HANG)
    assert result.returncode == -signal.SIGKILL
    before = (Path(path).read_bytes(), Path(path + ".wal").read_bytes())
    if duckdb.__version__.startswith("1."):
        with pytest.raises(WalNotReplayable, match=r"Keep the \.wal file.*duckdb 2\.0 or newer"):
            Memory(path, embedder="hash")
        assert (Path(path).read_bytes(), Path(path + ".wal").read_bytes()) == before
    else:
        with Memory(path, embedder="hash") as mem:
            assert mem.events()["content"].tolist() == ["kept safe in the file"]


LONG_CHILD = """
import sys
import threading
sys.path.insert(0, sys.argv[4])
from test_long_memories import TAIL_FACTS, long_message
from nbmemory import Memory
from nbmemory.config import Settings
from nbmemory.retrieval.offline_embedders import HashEmbedder

path, step, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
if step == "old":  # a store of long texts embedded whole, as before passages
    whole = HashEmbedder(max_tokens=None)  # reads the whole text, declares no window
    with Memory(path, embedder=whole, settings=Settings(passage_tokens=1_000_000)) as mem:
        mem.add_events(
            [
                {"session_id": "s", "role": "assistant", "content": long_message(i, "Fact %d." % i)}
                for i in range(count)
            ]
        )
        mem.flush()
    print("done", flush=True)
    sys.exit(0)
mem = Memory(path, embedder="hash")
if step == "reembed":  # the long texts are queued again at open: killed while they are
    print("done", flush=True)
    mem.flush()
    threading.Event().wait()
i = 0
while True:  # ingest of long texts, each cut into passages by the worker
    event = mem.add_event("s", "assistant", long_message(i, TAIL_FACTS[i % 20][0]))
    print(event.id, flush=True)
    i += 1
    if i == 10:  # some passages surely written before the kill, whatever the load
        mem.flush()
"""

#: Events whose vector rows are not one whole-text row or all their passages, in order,
#: covering their text; vector rows of no event; events marked embedded without rows.
BROKEN_PASSAGES = """
SELECT
  (SELECT count(*) FROM (
     SELECT v.id, count(*) AS n, count(v.passage) AS p, min(v.passage) AS lo,
            max(v.passage) AS hi, count(DISTINCT v.passage) AS d, min(v.span_start) AS s0,
            max(v.span_stop) AS s1, any_value(length(e.content)) AS len,
            bool_or(e.id IS NULL) AS orphan
     FROM event_vectors v LEFT JOIN events e ON e.id = v.id GROUP BY v.id)
   WHERE orphan OR (p = 0 AND n != 1)
      OR (p > 0 AND (p != n OR lo != 0 OR hi != n - 1 OR d != n OR s0 != 0 OR s1 != len))),
  (SELECT count(*) FROM events
   WHERE embedding_model IS NOT NULL AND id NOT IN (SELECT id FROM event_vectors)),
  (SELECT count(DISTINCT id) FROM event_vectors WHERE passage IS NOT NULL)
"""


def _passage_state(path: str) -> tuple[int, int, int]:
    con = duckdb.connect(path, read_only=True)
    try:
        broken, unmarked, split = con.execute(BROKEN_PASSAGES).fetchone()
    finally:
        con.close()
    return broken, unmarked, split


def test_a_kill_while_long_memories_are_embedded_leaves_no_partial_passages(tmp_path):
    path = str(tmp_path / "long.duckdb")
    for round_ in range(3):
        returned = _kill_after(LONG_CHILD, [path, "ingest", "0"], count=40 + 20 * round_)
        assert returned
        broken, unmarked, split = _passage_state(path)
        assert (broken, unmarked) == (0, 0)
    assert split > 0  # passages were written before the kills (the child flushed once)
    with Memory(path, embedder="hash") as mem:
        assert mem.flush(timeout=HANG) is True
        status = mem.status()
        assert status["pending"] == 0 and status["embedded"] == status["events"]
    assert _passage_state(path)[:2] == (0, 0)


def test_a_kill_while_an_older_store_is_re_embedded_as_passages_leaves_it_whole(tmp_path):
    path = str(tmp_path / "old.duckdb")
    assert _kill_after(LONG_CHILD, [path, "old", "300"]) == []  # made, then killed idle
    assert _passage_state(path) == (0, 0, 0)
    _kill_after(LONG_CHILD, [path, "reembed", "0"])  # killed once re-embedding started
    broken, unmarked, split = _passage_state(path)
    assert (broken, unmarked) == (0, 0)
    assert split < 300  # killed part-way (300 texts of ~10 passages take seconds)
    with Memory(path, embedder="hash") as mem:  # what is left is queued again
        assert mem.flush(timeout=HANG) is True
        assert mem.status()["passages"] == f"{300 - split} of {300 - split} long memories" + (
            " re-embedded as passages"
        )
    assert _passage_state(path) == (0, 0, 300)


COMPACT_CHILD = """
import sys
import threading
sys.path.insert(0, sys.argv[2])
from nbmemory import Memory

path = sys.argv[1]
mem = Memory(path, embedder="hash", background_consolidation=False)


def summarizer(events):  # prints each chunk as its transaction is about to start
    print(events[0]["id"], flush=True)
    return "summary of " + str(len(events)) + " events"


mem.consolidation.run(summarizer=summarizer, compact=True, chunk_size=10, older_than_hours=1)
print("done", flush=True)
threading.Event().wait()
"""

#: Compaction's invariants, read from the file: every event once (in events or in the
#: archive), each archived row's summary stored and naming it, each summary's sources
#: all archived, vectors only beside their rows, nothing marked and left behind.
COMPACT_STATE = """
SELECT
  (SELECT count(*) FROM events WHERE kind = 'message'),
  (SELECT count(*) FROM event_archive),
  (SELECT count(*) FROM events e JOIN event_archive a USING (id)),
  (SELECT count(*) FROM event_archive a WHERE NOT EXISTS (SELECT 1 FROM events s
     WHERE s.id = a.summary_id AND s.kind = 'summary'
     AND list_contains(json_extract_string(s.metadata, '$.source_ids[*]'), a.id))),
  (SELECT count(*) FROM (SELECT s.id, len(json_extract_string(s.metadata, '$.source_ids[*]')) AS n,
     (SELECT count(*) FROM event_archive a WHERE a.summary_id = s.id) AS moved
     FROM events s WHERE s.kind = 'summary') WHERE n != moved),
  (SELECT count(*) FROM event_vectors v WHERE v.id NOT IN (SELECT id FROM events)),
  (SELECT count(*) FROM event_vector_archive v WHERE v.id NOT IN (SELECT id FROM event_archive)),
  (SELECT count(*) FROM event_archive WHERE embedding_model IS NOT NULL
     AND id NOT IN (SELECT id FROM event_vector_archive)),
  (SELECT count(*) FROM events WHERE consolidated_at IS NOT NULL),
  (SELECT count(*) FROM events WHERE kind = 'summary')
"""


def _compact_state(path: str) -> tuple[int, ...]:
    con = duckdb.connect(path, read_only=True)
    try:
        return tuple(con.execute(COMPACT_STATE).fetchone())
    finally:
        con.close()


def test_a_kill_while_consolidation_compacts_leaves_every_event_in_one_place(tmp_path):
    """000: old conversations compressed into summaries; a process SIGKILLed mid-run
    leaves each chunk either whole in ``events`` or summarised and whole in the archive
    (one transaction per chunk), and the next run finishes; a restore gives all back."""
    import datetime as dt

    path = str(tmp_path / "compact.duckdb")
    old = dt.datetime(2024, 1, 1)
    with Memory(path, embedder="hash", background_consolidation=False) as mem:
        ids = mem.add_events(
            [
                {
                    "session_id": f"s{i % 20}",
                    "role": "user",
                    "content": f"note {i} of session {i % 20}: the value is v{i}",
                    "created_at": old + dt.timedelta(minutes=i),
                }
                for i in range(2000)
            ]
        )
        assert mem.flush(timeout=HANG) is True
    chunks = 0
    for round_ in range(2):
        printed = _kill_after(COMPACT_CHILD, [path], count=15 + 10 * round_)
        assert len(printed) >= 15 + 10 * round_ and printed[-1] != "done"
        state = _compact_state(path)
        messages, archived, twice, orphans, partial, stray, stray_archived = state[:7]
        unvectored, marked, summaries = state[7:]
        assert messages + archived == 2000 and twice == 0  # every event once
        assert (orphans, partial, stray, stray_archived, unvectored, marked) == (0,) * 6
        assert archived == 10 * summaries  # whole chunks only
        assert summaries > chunks  # progress at each round, and killed before the end
        assert archived < 2000
        chunks = summaries
    with Memory(path, embedder="hash", background_consolidation=False) as mem:
        report = mem.consolidation.run(compact=True, chunk_size=10, older_than_hours=1)
        assert report.ok and report.archived == 2000 - 10 * chunks
        assert mem.events(kind="message").empty
        restored = sum(mem.consolidation.restore(s) for s in mem.events(kind="summary")["id"])
        assert restored == 2000
        assert sorted(mem.events(kind="message")["id"]) == sorted(ids)
        assert mem.flush(timeout=HANG) is True
        assert mem.status()["pending"] == 0
