"""The first hour without the model: no local copy, an empty fastembed cache, no network.

Each test reproduces one way a new user met the missing model (a model folder that
is not there, a loader that raises, a hub that cannot be reached) on the real
surfaces: the Python API, the console script in a subprocess with a controlled
environment, and the magics on a real IPython ``InteractiveShell``.  What they
check: the failure comes in seconds, once, as one line naming the ways out; the
memories stored meanwhile stay pending (never failed) and are embedded as soon as
a model loads; ``%memory status`` answers at once and says how the model is doing.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import duckdb
import numpy as np
import pytest
from IPython.core.error import UsageError
from notebook_shell import run

from nbmemory import EmbedderError, Memory
from nbmemory.config import DEFAULT_MODEL, ENV_MODEL_PATH
from nbmemory.retrieval import embedders
from nbmemory.retrieval.embedders import (
    FastEmbedEmbedder,
    HashEmbedder,
    ModelUnavailable,
    forget_failed_loads,
)

#: A hang (the bug this file is about) fails the test instead of the suite.
pytestmark = pytest.mark.timeout(300)

SCRIPT = Path(sys.executable).with_name("nbmemory")
#: The README's main job must end within this many seconds without a model.
MAIN_JOB_BUDGET = 30.0


@pytest.fixture(autouse=True)
def _fresh_failures():
    """Load failures are remembered for the process: each test starts (and ends) clean."""
    forget_failed_loads()
    yield
    forget_failed_loads()


def _closed_port() -> int:
    """A local port nothing listens on: connecting is refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _offline_env(cache: Path, *, hub: str | None) -> dict[str, str]:
    """No model path, an empty fastembed cache, and (when ``hub``) a hub that refuses."""
    env = {k: v for k, v in os.environ.items() if k not in (ENV_MODEL_PATH, "HF_HUB_OFFLINE")}
    env.update(FASTEMBED_CACHE_PATH=str(cache), NO_PROXY="*", no_proxy="*")
    if hub is not None:
        env["HF_ENDPOINT"] = hub
    else:
        env.pop("HF_ENDPOINT", None)
    return env


@pytest.fixture
def no_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This process without the model: no model path, an empty cache, an unreachable hub."""
    cache = tmp_path / "empty-fastembed-cache"
    cache.mkdir()
    monkeypatch.delenv(ENV_MODEL_PATH, raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("FASTEMBED_CACHE_PATH", str(cache))
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{_closed_port()}")
    monkeypatch.setenv("NO_PROXY", "*")
    monkeypatch.setenv("no_proxy", "*")
    return cache


@pytest.fixture
def hub_checks(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Counts the checks of the hub (one per real load attempt)."""
    calls: list[float] = []
    real = embedders.hub_unreachable

    def counted(*args, **kwargs):
        calls.append(time.monotonic())
        return real(*args, **kwargs)

    monkeypatch.setattr(embedders, "hub_unreachable", counted)
    return calls


def _rows(mem: Memory) -> list[tuple]:
    return mem.store.fetchall(
        "SELECT e.content, v.embedding IS NOT NULL, e.embedding_error FROM events e"
        " LEFT JOIN event_vectors v USING (id) ORDER BY e.content"
    )


def _one_line_with_both_ways_out(message: str) -> None:
    """The Python API's message: one line, a local copy or the offline test embedder."""
    assert "\n" not in message
    assert f"Set {ENV_MODEL_PATH} to a local copy" in message and 'embedder="hash"' in message


# -- the Python API ----------------------------------------------------------------------------
def test_a_missing_model_fails_once_in_seconds_and_leaves_the_events_pending(
    no_model: Path, store_path: str, hub_checks: list[float]
) -> None:
    started = time.monotonic()
    with Memory(store_path, embedder=FastEmbedEmbedder()) as mem:
        mem.add_events(
            [{"session_id": "s", "role": "user", "content": f"text {i}"} for i in range(7)]
        )
        with pytest.raises(ModelUnavailable) as info:
            mem.flush()  # never pretends the texts were embedded
        first = time.monotonic() - started
        message = str(info.value)
        _one_line_with_both_ways_out(message)
        assert 'embedder="hash"' in message and "not in fastembed's cache" in message
        assert isinstance(info.value, EmbedderError)
        # pending, not failed: no embedding_error, nothing to retry by hand
        assert all(not embedded and error is None for _, embedded, error in _rows(mem))
        status = mem.status()
        assert (status["pending"], status["failed"], status["embedded"]) == (7, 0, 0)
        # remembered: every later call fails at once, without trying again
        again = time.monotonic()
        with pytest.raises(ModelUnavailable):
            mem.flush()
        with pytest.raises(EmbedderError, match="could not load the embedding model"):
            mem.search("text 3")
        assert time.monotonic() - again < 2.0
    assert len(hub_checks) == 1  # one bounded attempt, not one per text
    assert first < 15.0, f"the first failure took {first:.1f} s"


def test_a_cache_without_this_model_is_looked_in_quietly_then_the_hub_checked(
    no_model: Path, capfd: pytest.CaptureFixture[str], hub_checks: list[float]
) -> None:
    (no_model / "models--someone--another-model").mkdir()  # a cache, not of this model
    embedder = FastEmbedEmbedder()
    assert embedder.load_state == "not loaded yet"
    with pytest.raises(ModelUnavailable, match="not in fastembed's cache.*cannot be reached"):
        embedder.embed(["hello"])
    assert len(hub_checks) == 1
    assert embedder.load_state.startswith("cannot load: it is not in fastembed's cache")
    assert "ERROR" not in capfd.readouterr().err  # fastembed's log of the cache miss is muted


def test_a_loader_that_raises_is_called_once_not_text_by_text(
    tmp_path: Path, store_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fastembed

    attempts: list[dict] = []

    class BrokenLoader:
        def __init__(self, **kwargs) -> None:
            attempts.append(kwargs)
            raise RuntimeError("onnxruntime cannot read this model")

    monkeypatch.setattr(fastembed, "TextEmbedding", BrokenLoader)
    folder = tmp_path / "model"
    folder.mkdir()
    with Memory(store_path, embedder=FastEmbedEmbedder(model_path=str(folder))) as mem:
        mem.add_events([{"session_id": "s", "role": "user", "content": f"t{i}"} for i in range(7)])
        with pytest.raises(EmbedderError, match="onnxruntime cannot read this model"):
            mem.flush()
        assert mem.status()["failed"] == 0 and mem.status()["pending"] == 7
        with pytest.raises(EmbedderError):
            mem.search("a question")
    assert len(attempts) == 1


def test_a_model_folder_that_is_missing_says_so_at_once(tmp_path: Path, store_path: str) -> None:
    embedder = FastEmbedEmbedder(model_path=str(tmp_path / "nowhere"))
    with Memory(store_path, embedder=embedder) as mem:
        mem.add_event("s", "user", "kept for later")
        with pytest.raises(ModelUnavailable, match="is not a directory") as info:
            mem.flush()
        _one_line_with_both_ways_out(str(info.value))
        assert embedder.load_state.startswith("cannot load: model_path")
        assert mem.status()["pending"] == 1 and mem.status()["failed"] == 0


class LateModel:
    """A model of one's own that cannot load until ``arrive()``; one text always fails."""

    name = "nbmemory/hash-384"  # the hash model's vectors, under its name

    def __init__(self) -> None:
        self.inner = HashEmbedder(384)
        self.loaded = False
        self.seen: list[str] = []
        self.saw_the_first = threading.Event()

    def arrive(self) -> None:
        self.loaded = True

    def embed(self, texts: list[str]) -> np.ndarray:
        if not self.loaded:
            raise ModelUnavailable(self.name, "the model is still on its way")
        self.seen.extend(texts)
        if "first memory" in texts:
            self.saw_the_first.set()
        if "poison" in texts:
            raise ValueError("this text breaks the model")
        return self.inner.embed(texts)


def test_pending_rows_are_embedded_once_the_model_loads_in_the_same_process(
    store_path: str,
) -> None:
    model = LateModel()
    with Memory(store_path, embedder=model) as mem:
        mem.add_event("s", "user", "first memory")
        mem.add_event("s", "user", "poison")
        with pytest.raises(ModelUnavailable, match="still on its way"):
            mem.flush()
        assert mem.worker is not None and mem.worker.set_aside == 2
        model.arrive()
        # no flush: the next text that embeds brings back what was set aside
        mem.add_event("s", "user", "second memory")
        assert model.saw_the_first.wait(30)
        assert mem.flush()
        rows = {content: (embedded, error) for content, embedded, error in _rows(mem)}
        assert rows["first memory"] == (True, None)
        assert rows["second memory"] == (True, None)
        # a text that fails the model stays failed, with its error
        assert rows["poison"][0] is False and "this text breaks the model" in rows["poison"][1]
        status = mem.status()
        assert (status["embedded"], status["pending"], status["failed"]) == (2, 0, 1)


def test_an_env_model_path_set_after_the_failure_is_tried_by_the_next_flush(
    model_path: str, no_model: Path, store_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Memory(store_path, embedder=FastEmbedEmbedder()) as mem:
        mem.add_event("s", "user", "I love TypeScript")
        with pytest.raises(ModelUnavailable):
            mem.flush()
        monkeypatch.setenv(ENV_MODEL_PATH, model_path)
        assert mem.flush()
        assert mem.status()["embedded"] == 1
        hit = mem.search("Which language do I like?", limit=1, mode="vector")
        assert hit["content"].tolist() == ["I love TypeScript"] and hit["similarity"].iloc[0] > 0


def test_pending_rows_are_embedded_at_the_next_open(
    real_embedder, no_model: Path, store_path: str
) -> None:
    with Memory(store_path, embedder=FastEmbedEmbedder()) as mem:
        mem.add_event("s", "user", "stored while the model was missing")
        with pytest.raises(ModelUnavailable):
            mem.flush()
    with Memory(store_path, embedder=real_embedder) as mem:
        assert mem.flush()
        status = mem.status()
        assert (status["embedded"], status["pending"], status["failed"]) == (1, 0, 0)


# -- the console script ------------------------------------------------------------------------
def _script(
    *argv: str, env: dict[str, str], cwd: Path
) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    done = subprocess.run(
        [str(SCRIPT), *argv], capture_output=True, text=True, env=env, cwd=cwd, timeout=600
    )
    return done, time.monotonic() - started


@pytest.mark.slow
@pytest.mark.parametrize("hub", ["default", "refused"])
def test_the_main_job_without_model_or_network_ends_fast(
    tmp_path: Path, hub: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``nbmemory demo --store nbmemory.duckdb``: one line and exit 1 within seconds."""
    assert SCRIPT.exists(), "the nbmemory console script is not installed in this venv"
    if hub == "default":  # the real hub, as a new user meets it: only where it is unreachable
        env = _offline_env(tmp_path / "cache", hub=None)
        monkeypatch.delenv("HF_ENDPOINT", raising=False)
        if embedders.hub_unreachable() is None:
            pytest.skip("huggingface.co is reachable from here")
    else:
        env = _offline_env(tmp_path / "cache", hub=f"http://127.0.0.1:{_closed_port()}")
    (tmp_path / "cache").mkdir()
    done, seconds = _script("demo", "--store", "nbmemory.duckdb", env=env, cwd=tmp_path)
    print(f"\nmain job without a model ({hub} hub): {seconds:.2f} s, exit {done.returncode}")
    assert seconds < MAIN_JOB_BUDGET, f"took {seconds:.1f} s"
    assert done.returncode == 1
    err = done.stderr.strip()
    assert err.startswith("nbmemory: error: could not load the embedding model") and "\n" not in err
    assert "--embedder hash" in err and f"Set {ENV_MODEL_PATH}" in err
    # the model is checked before the store is made: no half-made store for the next run
    # (which would have said "already in this store: nothing added")
    assert sorted(os.listdir(tmp_path)) == ["cache"]


@pytest.mark.slow
def test_the_main_job_with_a_bad_model_threads_says_to_set_that(tmp_path: Path) -> None:
    """A bad NBMEMORY_MODEL_THREADS: one line naming it and what to set, not the advice
    about a missing model (no local copy would help), and no store made."""
    env = dict(os.environ, NBMEMORY_MODEL_THREADS="two")
    done, _ = _script("demo", "--store", "nbmemory.duckdb", env=env, cwd=tmp_path)
    assert done.returncode == 1
    err = done.stderr.strip()
    assert "\n" not in err and "NBMEMORY_MODEL_THREADS='two' is not a number of threads" in err
    assert "Set NBMEMORY_MODEL_THREADS to a whole number" in err
    assert f"Set {ENV_MODEL_PATH}" not in err and "--embedder hash" not in err
    assert os.listdir(tmp_path) == []


@pytest.mark.slow
def test_health_says_the_model_is_missing_in_seconds(tmp_path: Path) -> None:
    store = tmp_path / "agent.duckdb"
    with Memory(str(store), embedder="hash") as mem:
        mem.add_event("s", "user", "something")
        assert mem.flush()
    (tmp_path / "cache").mkdir()
    env = _offline_env(tmp_path / "cache", hub=f"http://127.0.0.1:{_closed_port()}")
    done, seconds = _script("health", "--store", str(store), env=env, cwd=tmp_path)
    print(f"\nhealth without a model: {seconds:.2f} s")
    assert seconds < 15.0, f"took {seconds:.1f} s"
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    model = next(line for line in lines if line.startswith("model"))
    assert model.startswith("model      FAIL  could not load the embedding model")
    assert "--embedder hash" in model and 'embedder="hash"' not in model
    assert any(line.startswith("embeddings ok") for line in lines)


@pytest.mark.slow
def test_memory_sync_without_a_model_succeeds_and_says_what_is_pending(tmp_path: Path) -> None:
    """The sync is stored (exit 0), and a note says its rows wait for a model."""
    store = tmp_path / "agent.duckdb"
    Memory(str(store), embedder="hash").close()
    (tmp_path / "AGENTS.md").write_text("# Rules\n\n## Deploys\nNever deploy on fridays.\n")
    (tmp_path / "cache").mkdir()
    env = _offline_env(tmp_path / "cache", hub=f"http://127.0.0.1:{_closed_port()}")
    done, _ = _script(
        "memory", "sync", "--store", str(store), "--file", "AGENTS.md", env=env, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert "1 added" in done.stdout
    note = done.stderr.strip().splitlines()[-1]
    assert note.startswith("note: 1 event(s) stored without a vector yet")
    assert "could not load the embedding model" in note and "--embedder hash" in note
    with Memory(str(store), embedder="hash", read_only=True) as mem:
        assert mem.events()["content"].str.contains("fridays").any()


def _store_with_a_failed_row(path: Path) -> None:
    """Two rows of the hash model, one of which failed (its model raised on it)."""

    class PoisonedHash(HashEmbedder):
        def embed(self, texts: list[str]) -> np.ndarray:
            if "poison" in texts:
                raise ValueError("the model choked")
            return super().embed(texts)

    with Memory(str(path), embedder=PoisonedHash()) as mem:
        mem.add_event("s", "user", "fine")
        mem.add_event("s", "user", "poison")
        assert mem.flush()
        assert mem.status()["failed"] == 1


@pytest.mark.slow
def test_reembed_failed_from_the_command_line(tmp_path: Path) -> None:
    store = tmp_path / "agent.duckdb"
    _store_with_a_failed_row(store)
    (tmp_path / "cache").mkdir()
    env = _offline_env(tmp_path / "cache", hub=f"http://127.0.0.1:{_closed_port()}")
    health, _ = _script(
        "health", "--store", str(store), "--embedder", "hash", env=env, cwd=tmp_path
    )
    assert health.returncode == 0
    assert "1 failed; try them again with nbmemory memory reembed --failed" in health.stdout
    # without the model: refused in seconds, in the command line's words, nothing changed
    refused, seconds = _script("memory", "reembed", "--failed", "--store", str(store), env=env,
                               cwd=tmp_path)  # fmt: skip
    assert refused.returncode == 1 and seconds < 15.0
    assert "--embedder hash" in refused.stderr and refused.stderr.count("\n") == 1
    with Memory(str(store), embedder="hash", read_only=True) as mem:
        assert mem.status()["failed"] == 1
    done, _ = _script("memory", "reembed", "--failed", "--store", str(store), "--embedder", "hash",
                      env=env, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "re-queued 1 event(s) whose embedding had failed" in done.stdout
    assert "2 embedded, 0 pending and 0 failed" in done.stdout
    with Memory(str(store), embedder="hash", read_only=True) as mem:
        status = mem.status()
        assert (status["embedded"], status["failed"]) == (2, 0)


@pytest.mark.slow
def test_reembed_converts_the_rows_of_another_model(tmp_path: Path) -> None:
    store = tmp_path / "agent.duckdb"
    with Memory(str(store), embedder="hash:64") as mem:
        mem.add_event("s", "user", "embedded by the 64-d model")
        mem.add_event("t", "user", "another one", namespace="other")
        assert mem.flush()
    env = dict(os.environ)
    done, _ = _script("memory", "reembed", "--store", str(store), "--embedder", "hash",
                      env=env, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "re-queued 2 event(s) not embedded by nbmemory/hash-384" in done.stdout
    con = duckdb.connect(str(store), read_only=True)
    try:
        models = con.execute("SELECT DISTINCT embedding_model FROM events").fetchall()
    finally:
        con.close()
    assert models == [("nbmemory/hash-384",)]


# -- the notebook ------------------------------------------------------------------------------
def test_status_answers_at_once_while_the_model_loads_and_after_it_failed(
    ip, magics, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fastembed

    assert run(ip, "%memory status").model_state == "ok (384-d)"  # the hash model
    entered, gate = threading.Event(), threading.Event()

    class SlowBrokenLoader:  # fastembed retrying a download, then giving up
        def __init__(self, **kwargs) -> None:
            entered.set()
            gate.wait(60)
            raise OSError("could not reach the hub")

    monkeypatch.setattr(fastembed, "TextEmbedding", SlowBrokenLoader)
    folder = tmp_path / "model"
    folder.mkdir()
    magics.embedder = None
    magics.model_path = str(folder)
    try:
        status = run(ip, "%memory status")
        assert status.model_state == "not loaded yet"
        run(ip, "%%remember\nwaiting for a model")
        assert entered.wait(30)  # the worker is inside the load now
        started = time.monotonic()
        status = run(ip, "%memory status")
        assert time.monotonic() - started < 5.0
        assert status.model_state == "loading"
        assert status.model_line() == f"model {DEFAULT_MODEL}: loading"
    finally:
        gate.set()
    with pytest.raises(UsageError) as info:
        run(ip, "%memory flush")
    message = str(info.value)
    assert "could not reach the hub" in message and "%config MemoryMagics.model_path" in message
    assert 'embedder="hash"' not in message and "--embedder" not in message
    status = run(ip, "%memory status")
    assert status.model_state.startswith("cannot load: loading it from")
    assert status["pending"] == 1 and status["failed"] == 0
    assert "cannot load" in status._repr_html_()


def test_env_model_path_after_the_error_is_tried_by_the_next_magic(
    model_path: str, ip, magics, no_model: Path
) -> None:
    magics.embedder = None
    run(ip, "%%remember\nMy name is John and I love TypeScript")
    started = time.monotonic()
    with pytest.raises(UsageError) as info:
        run(ip, "%recall what language do I like?")
    assert time.monotonic() - started < 15.0
    message = str(info.value)
    assert '%config MemoryMagics.model_path = "' in message
    assert '%config MemoryMagics.embedder = "hash"' in message
    status = run(ip, "%memory status")
    assert status.model_state.startswith("cannot load: it is not in fastembed's cache")
    assert status["pending"] == 1
    run(ip, f"%env {ENV_MODEL_PATH}={model_path}")  # (no_model restores the variable)
    frame = run(ip, "%recall what language do I like? -k 1")
    assert frame["content"].tolist() == ["My name is John and I love TypeScript"]
    assert not np.isnan(frame["similarity"].iloc[0])
    status = run(ip, "%memory status")
    assert status.model_state.startswith("ok (384-d, reads 254 word-pieces, used by 1 embedder")
    assert status["pending"] == 0
    assert magics.memory.model_name == DEFAULT_MODEL


def test_a_bad_model_threads_in_a_notebook_says_to_set_that_and_is_not_remembered(
    model_path: str, ip, magics, monkeypatch: pytest.MonkeyPatch
) -> None:
    magics.embedder = None
    magics.model_path = model_path
    monkeypatch.setenv("NBMEMORY_MODEL_THREADS", "0")
    run(ip, "%%remember\nThe staging port is now 8443")
    with pytest.raises(UsageError) as info:
        run(ip, "%recall which port does staging use?")
    message = str(info.value)
    assert "NBMEMORY_MODEL_THREADS='0' is not a number of threads" in message
    assert "Set NBMEMORY_MODEL_THREADS to a whole number" in message
    assert "%config MemoryMagics.model_path" not in message
    assert run(ip, "%memory status")["pending"] == 1  # kept, embedded once it loads
    monkeypatch.setenv("NBMEMORY_MODEL_THREADS", "1")
    frame = run(ip, "%recall which port does staging use? -k 1")
    assert frame["content"].tolist() == ["The staging port is now 8443"]
    assert run(ip, "%memory status")["pending"] == 0


def test_config_model_path_after_the_error_is_used_at_once(
    model_path: str, ip, magics, no_model: Path, tmp_path: Path
) -> None:
    magics.embedder = None
    # what %config MemoryMagics.model_path = "..." does (the trait itself: running %config
    # here would load IPython's lazy magics, which test_magics.py must see unloaded)
    magics.model_path = str(tmp_path / "not-here")
    run(ip, "%%remember\nThe budget is 3000 euros")
    with pytest.raises(UsageError, match="is not a directory"):
        run(ip, "%context how much can we spend?")
    magics.model_path = model_path
    frame = run(ip, "%recall how much can we spend? -k 1")
    assert frame["content"].tolist() == ["The budget is 3000 euros"]
    assert run(ip, "%memory status")["embedded"] == 1
