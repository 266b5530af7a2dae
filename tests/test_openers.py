"""Shared and private openers of one store file, in real processes: one rule
(:mod:`nbmemory.store.openers`) that no opener can break.

Shared openers keep each other company, private readers too, and nothing else
mixes: a process opened without ``shared=True`` is refused at once while shared
ones are alive (it used to take the file between their turns and stall them), and a
shared one is refused at once while a private one is alive (it used to wait its
whole lock timeout).  A killed holder's place is free at once.  Every wait below is
on a pipe (a child prints a line when it reaches a point); none is a sleep.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from child_process import child_env, expect, spawn

from nbmemory import Memory, StoreLocked
from nbmemory.store import openers

#: A deadlock or a hung child fails the test instead of hanging the suite.
pytestmark = [
    pytest.mark.timeout(900),
    pytest.mark.slow,
    pytest.mark.skipif(openers._LAYOUT is None, reason="no POSIX record locks here"),
]

HANG = 300
#: What "refused at once" means: well under any lock timeout (30 s by default).
AT_ONCE = 3.0
SCRIPT = Path(sys.executable).with_name("nbmemory")


def _stop(*children: subprocess.Popen) -> None:
    for child in children:
        if child.poll() is None:
            child.kill()
        child.wait(timeout=HANG)
        for stream in (child.stdin, child.stdout, child.stderr):
            if stream is not None:
                stream.close()


def _refused(**kwargs) -> tuple[StoreLocked, float]:
    started = time.monotonic()
    with pytest.raises(StoreLocked) as info:
        Memory(embedder="hash", **kwargs).close()
    return info.value, time.monotonic() - started


# -- private while shared writers run ---------------------------------------------------------
SHARED_WRITER = """
import json, os, sys, time
from nbmemory import Memory
path, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
mem = Memory(path, embedder="hash", shared=True)
print("ready", os.getpid(), flush=True)
sys.stdin.readline()
slowest = 0.0
for i in range(count):
    started = time.monotonic()
    event = mem.add_event("team", "user", f"{name} writes note {i}")
    slowest = max(slowest, time.monotonic() - started)
    print("id", event.id, flush=True)
print("written", json.dumps({"slowest": slowest}), flush=True)
sys.stdin.readline()  # stays a member until the test has tried everything
mem.close()
print("closed", flush=True)
"""


def test_a_private_opener_is_refused_at_once_while_shared_writers_run(tmp_path):
    path = str(tmp_path / "team.duckdb")
    count = 40
    writers = [
        spawn(SHARED_WRITER, path, f"w{i}", str(count), NBMEMORY_LOCK_TIMEOUT="120")
        for i in range(3)
    ]
    try:
        pids = {int(expect(child, "ready")) for child in writers}
        for child in writers:  # all start writing at once
            child.stdin.write("go\n")
            child.stdin.flush()
        ids: set[str] = set()
        for child in writers:  # every one of them is writing now
            ids.add(expect(child, "id"))
        # while they write: every private opener, writer or reader, is refused at once
        refusals = []
        for attempt in range(20):
            error, seconds = _refused(path=path, read_only=bool(attempt % 2))
            refusals.append(seconds)
            assert seconds < AT_ONCE, f"refused after {seconds:.1f} s"
            assert error.shared and error.pid in pids
            message = str(error)
            assert message.startswith(f"the store {path} is in shared use by process {error.pid}")
            assert "shared=True" in message and "\n" not in message
        # the command line without --shared too, in its own words; with --shared it joins
        alone = subprocess.run(
            [str(SCRIPT), "state", "list", "--store", path],
            capture_output=True, text=True, env=child_env(), timeout=HANG,
        )  # fmt: skip
        assert alone.returncode == 1
        assert alone.stderr.count("\n") == 1 and "in shared use by process" in alone.stderr
        assert "--shared" in alone.stderr and "NBMEMORY_SHARED=1" in alone.stderr
        joined = subprocess.run(
            [str(SCRIPT), "demo", "--store", path, "--embedder", "hash", "--shared"],
            capture_output=True, text=True, env=child_env(), timeout=HANG,
        )  # fmt: skip
        assert joined.returncode == 0, joined.stderr
        slowest = []
        for child in writers:
            while True:
                line = child.stdout.readline()
                assert line, child.stderr.read()
                if line.startswith("id "):
                    ids.add(line.split()[1])
                elif line.startswith("written "):
                    slowest.append(json.loads(line[8:])["slowest"])
                    break
            child.stdin.write("close\n")
            child.stdin.flush()
            expect(child, "closed")
            assert child.wait(timeout=HANG) == 0, child.stderr.read()
    finally:
        _stop(*writers)
    print(
        f"\nslowest refusal of a private opener: {max(refusals):.3f} s; slowest add_event of "
        f"each shared writer: {', '.join(f'{s:.2f} s' for s in slowest)}"
    )
    # nothing lost: every acknowledged write is in the file, with the demo's beside them
    with Memory(path, embedder="hash") as mem:
        stored = mem.events()
        assert ids <= set(stored["id"]) and len(ids) == 3 * count
        assert len(stored) == 3 * count + 7
    assert not os.path.exists(path + openers.SUFFIX)  # the last one out removed the sidecar


# -- shared while a private holder lives, and after it is killed ------------------------------
PRIVATE_HOLDER = """
import os, sys
from nbmemory import Memory
mem = Memory(sys.argv[1], embedder="hash", read_only=sys.argv[2] == "reader")
event_id = mem.add_event("s", "user", "held alone").id if sys.argv[2] == "writer" else "-"
print("ready", os.getpid(), event_id, flush=True)
sys.stdin.readline()
"""


@pytest.mark.parametrize("holder", ["writer", "reader"])
def test_a_shared_opener_is_refused_at_once_while_a_private_one_holds(tmp_path, holder):
    path = str(tmp_path / "alone.duckdb")
    Memory(path, embedder="hash").close()
    child = spawn(PRIVATE_HOLDER, path, holder)
    try:
        pid = int(expect(child, "ready").split()[0])
        for read_only in (False, True):
            error, seconds = _refused(path=path, shared=True, read_only=read_only)
            assert seconds < AT_ONCE, f"waited {seconds:.1f} s"  # it used to wait 30 s
            assert error.pid == pid and not error.shared
            assert f"in use by process {pid}" in str(error)
            assert "without shared=True" in str(error)
        if holder == "reader":  # private readers keep each other company (DuckDB allows it)
            with Memory(path, embedder="hash", read_only=True) as mem:
                assert mem.status()["events"] == 0
        else:
            _refused(path=path, read_only=True)
        done = subprocess.run(
            [str(SCRIPT), "state", "list", "--store", path, "--shared"],
            capture_output=True, text=True, env=child_env(), timeout=HANG,
        )  # fmt: skip
        assert done.returncode == 1 and done.stderr.count("\n") == 1
        assert f"process {pid}" in done.stderr and "--shared" in done.stderr
    finally:
        _stop(child)


def test_a_killed_private_holder_lets_a_shared_opener_in_at_once(tmp_path):
    path = str(tmp_path / "killed.duckdb")
    held: list[str] = []
    for _ in range(8):
        child = spawn(PRIVATE_HOLDER, path, "writer")
        try:
            pid, event_id = expect(child, "ready").split()
            held.append(event_id)
            _refused(path=path, shared=True)
            os.kill(int(pid), signal.SIGKILL)
            assert child.wait(timeout=HANG) == -signal.SIGKILL
        finally:
            _stop(child)
        started = time.monotonic()
        with Memory(path, embedder="hash", shared=True) as mem:  # no stale lock remains
            assert time.monotonic() - started < AT_ONCE * 3
            assert set(held) <= set(mem.events()["id"])  # and the killed one's write is there
    assert not os.path.exists(path + openers.SUFFIX)


# -- the rule itself, raced -------------------------------------------------------------------
FAKE_STORE = """
class Opener:  # what openers.join reads of a store, and nothing else (no DuckDB)
    def __init__(self, path, kind):
        self.path, self.backend = path, "file"
        self.holds_file, self.read_only = kind != "shared", kind == "reader"
"""

RACER = (
    FAKE_STORE
    + """
import sys
from nbmemory.store import openers
from nbmemory.errors import StoreLocked
store = Opener(sys.argv[1], sys.argv[2])
print("ready", flush=True)
while sys.stdin.readline().strip() == "go":
    try:
        leave = openers.join(store)
        print("in", flush=True)
    except StoreLocked as exc:
        leave = None
        print("out", exc.pid, flush=True)
    sys.stdin.readline()  # every racer has answered: let go
    if leave is not None:
        leave()
    print("done", flush=True)
"""
)


def test_openers_racing_at_once_are_never_let_in_together(tmp_path):
    """Three shared openers, a private writer and two private readers start together,
    over and over: whoever gets in, shared ones and private ones never both do."""
    path = str(tmp_path / "raced.duckdb")
    kinds = ["shared", "shared", "shared", "writer", "reader", "reader"]
    racers = [spawn(RACER, path, kind) for kind in kinds]
    admitted_kinds: set[frozenset[str]] = set()
    try:
        for child in racers:
            expect(child, "ready")
        for _ in range(40):
            for child in racers:  # as close to the same moment as pipes allow
                child.stdin.write("go\n")
                child.stdin.flush()
            answers = [child.stdout.readline().split() for child in racers]
            admitted = {
                kind for kind, answer in zip(kinds, answers, strict=True) if answer[0] == "in"
            }
            assert all(answer and answer[0] in ("in", "out") for answer in answers), answers
            # the rule: only shared openers, or only private readers, or one private writer
            assert admitted in ({"shared"}, {"reader"}, {"writer"}, set()), answers
            if "writer" in admitted:
                assert [a[0] for a in answers].count("in") == 1
            admitted_kinds.add(frozenset(admitted))
            for child in racers:
                child.stdin.write("close\n")
                child.stdin.flush()
            for child in racers:
                expect(child, "done")
    finally:
        for child in racers:
            if child.poll() is None:
                child.stdin.close()
        _stop(*racers)
    print(f"\nadmitted together over 40 rounds: {sorted(map(sorted, admitted_kinds))}")
    assert not os.path.exists(path + openers.SUFFIX)


# -- one process, several modes; a forked child -----------------------------------------------
TRY_OPEN = """
import sys
from nbmemory import Memory, StoreLocked
try:
    Memory(sys.argv[1], embedder="hash", shared=sys.argv[2] == "shared").close()
except StoreLocked as exc:
    print("out", exc.pid, flush=True)
else:
    print("in", flush=True)
"""


def _other_process(path: str, kind: str) -> list[str]:
    child = spawn(TRY_OPEN, path, kind)
    out, err = child.communicate(timeout=HANG)
    assert child.returncode == 0, err
    return out.split()


def test_one_process_may_open_a_file_shared_and_alone_and_others_follow_the_strongest(tmp_path):
    path = str(tmp_path / "both.duckdb")
    shared = Memory(path, embedder="hash", shared=True)
    try:
        assert _other_process(path, "shared") == ["in"]
        alone = Memory(path, embedder="hash")  # this process only: it may take the file alone
        try:
            assert _other_process(path, "shared") == ["out", str(os.getpid())]
            shared.add_event("s", "user", "written by the shared store of the holder")
        finally:
            alone.close()
        assert _other_process(path, "shared") == ["in"]  # back to shared membership
        assert _other_process(path, "private") == ["out", str(os.getpid())]
    finally:
        shared.close()
    assert _other_process(path, "private") == ["in"]
    assert not os.path.exists(path + openers.SUFFIX)


def test_a_forked_child_holds_none_of_its_parents_places(tmp_path):
    """Record locks are not inherited: a forked child must not think it holds the file."""
    path = str(tmp_path / "forked.duckdb")
    with Memory(path, embedder="hash"):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: join as a shared opener, report, exit without teardown
            namespace: dict = {}
            exec(FAKE_STORE, namespace)
            store = namespace["Opener"](path, "shared")
            try:
                openers.join(store)
                answer = "in"
            except StoreLocked as exc:
                answer = f"out {exc.pid}"
            os.write(write, answer.encode())
            os._exit(0)
        os.close(write)
        answer = os.read(read, 1024).decode()
        os.waitpid(pid, 0)
        os.close(read)
    assert answer == f"out {os.getpid()}"
