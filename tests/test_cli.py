"""The ``nbmemory`` console script: state list/cleanup/delete/export/import, memory sync, health."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nbmemory import InvalidInput, Memory
from nbmemory.cli import main
from nbmemory.validation import utcnow

SCRIPT = Path(sys.executable).with_name("nbmemory")


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def store(tmp_path: Path) -> str:
    """A store with an expired session, a fresh one, and events in two namespaces."""
    path = str(tmp_path / "cli.duckdb")
    with Memory(path, embedder="hash") as mem:
        mem.clock = lambda: dt.datetime(2020, 1, 1)
        mem.start_session("old-user", namespace="auth-service", session_id="sess_old")
        mem.clock = utcnow
        mem.start_session("alice", namespace="auth-service", session_id="sess_abc123")
        mem.add_event("sess_abc123", "user", "refactor the auth module", namespace="auth-service")
        mem.add_event("notes", "user", "default namespace note")
        mem.flush()
    return path


def test_state_list(capsys, store: str) -> None:
    code, out, _ = run(capsys, "state", "list", "--store", store, "--embedder", "hash")
    assert code == 0
    assert "sess_abc123" in out and "sess_old" in out and "expired" in out
    assert "notes" in out  # sessions that hold events, as mem.sessions() lists them
    _, out, _ = run(capsys, "state", "list", "--store", store, "--tracked-only")
    assert "sess_abc123" in out and "notes" not in out
    code, out, _ = run(
        capsys,
        *("state", "list", "--store", store, "--embedder", "hash"),
        *("--namespace", "auth-service", "--user", "alice", "--json"),
    )
    records = json.loads(out)
    assert [(r["session_id"], r["status"], r["events"]) for r in records] == [
        ("sess_abc123", "active", 1)
    ]
    _, out, _ = run(capsys, "state", "list", "--store", store, "--with-untracked", "--json")
    assert "notes" in {r["session_id"] for r in json.loads(out)}


def test_state_cleanup_dry_run_then_for_real(capsys, store: str) -> None:
    code, out, _ = run(capsys, "state", "cleanup", "--dry-run", "--store", store)
    assert code == 0
    assert "would delete 1 session(s)" in out and "sess_old" in out
    with Memory(store, embedder="hash", upkeep=False) as mem:  # (no cleanup of its own)
        assert "sess_old" in set(mem.sessions("auth-service")["session_id"])
    code, out, _ = run(capsys, "state", "cleanup", "--store", store, "--namespace", "auth-service")
    assert code == 0 and "deleted 1 session(s)" in out
    with Memory(store, embedder="hash") as mem:
        assert "sess_old" not in set(mem.sessions("auth-service")["session_id"])
        log = mem.audit_log(action="cleanup")
        assert set(log["actor"]) == {"cli"}


def test_state_delete_finds_the_namespace_of_the_session(capsys, store: str) -> None:
    code, out, _ = run(capsys, "state", "delete", "--session-id", "sess_abc123", "--store", store)
    assert code == 0 and "deleted session 'sess_abc123'" in out
    with Memory(store, embedder="hash", upkeep=False) as mem:  # (sess_old stays: no cleanup)
        tracked = mem.sessions("auth-service", include_untracked=False)
        assert set(tracked["session_id"]) == {"sess_old"}
        assert len(mem.events(namespace="auth-service")) == 1  # memories stay
    code, out, err = run(capsys, "state", "delete", "--session-id", "sess_nope", "--store", store)
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and "sess_nope" in err and "not found" in err


def test_state_export_and_import_round_trip(capsys, store: str, tmp_path: Path) -> None:
    backup = tmp_path / "backup.json"
    code, out, _ = run(
        capsys, "state", "export", "--session-id", "sess_abc123", "--output", str(backup),
        "--store", store,
    )  # fmt: skip
    assert code == 0 and "1 event(s)" in out and "1 session(s)" in out
    assert json.loads(backup.read_text(encoding="utf-8"))["scope"] == {
        "namespace": "auth-service",
        "session_id": "sess_abc123",
    }
    other = str(tmp_path / "other.duckdb")  # restoring into a new file works
    code, out, _ = run(capsys, "state", "import", "--input", str(backup), "--store", other)
    assert code == 0 and "imported into auth-service: 1 new event(s), 0 already present" in out
    assert "1 new session(s)" in out
    code, out, _ = run(capsys, "state", "import", "--input", str(backup), "--store", other)
    assert "imported: 0 new event(s), 1 already present" in out
    with Memory(other, embedder="hash") as restored:
        assert len(restored.events(namespace="auth-service")) == 1
    code, _, err = run(capsys, "state", "import", "--input", str(tmp_path / "x.json"))
    assert code == 1 and "no " in err and err.count("\n") == 1


def test_memory_sync(capsys, store: str, tmp_path: Path) -> None:
    agents = tmp_path / "AGENTS.md"
    agents.write_text("# P\n\n## A\n\none\n\n## B\n\ntwo\n", encoding="utf-8")
    argv = ("memory", "sync", "--file", str(agents), "--store", store, "--embedder", "hash")
    code, out, _ = run(capsys, *argv)
    assert code == 0 and "2 added, 0 updated, 0 removed, 0 unchanged" in out
    agents.write_text("# P\n\n## A\n\none!\n\n## B\n\ntwo\n", encoding="utf-8")
    code, out, _ = run(capsys, *argv)
    assert "0 added, 1 updated, 0 removed, 1 unchanged" in out and "updated: P > A" in out
    with Memory(store, embedder="hash", read_only=True) as mem:
        frame = mem.events(kind="agents_md")
        assert frame["embedding_model"].notna().all()  # embedded before the command returned
    secret = tmp_path / ".env"
    secret.write_text("KEY=1\n", encoding="utf-8")
    code, _, err = run(capsys, "memory", "sync", "--file", str(secret), "--store", store)
    assert code == 1 and "refusing to ingest .env" in err


def test_health(capsys, store: str, tmp_path: Path) -> None:
    code, out, _ = run(capsys, "health", "--store", store, "--embedder", "hash")
    assert code == 0
    assert "store      ok" in out and "model      ok    nbmemory/hash-384 (384-d)" in out
    assert "0 pending" in out
    code, out, _ = run(capsys, "health", "--store", str(tmp_path / "missing.duckdb"))
    assert code == 1 and "store      FAIL  no store at" in out


def test_health_of_one_component_and_verbose(capsys, store: str) -> None:
    """003: ``vectora health check --component mongodb --verbose``."""
    code, out, _ = run(capsys, "health", "--store", store, "--embedder", "hash",
                       "--component", "store", "--verbose")  # fmt: skip
    assert code == 0 and out.startswith("store      ok")
    assert "model" not in out and "backend: file" in out and "size on disk:" in out
    code, out, _ = run(capsys, "health", "--store", store, "--embedder", "hash",
                       "--component", "embedder", "--verbose")  # fmt: skip
    assert code == 0 and "store" not in out.split("\n")[0]
    assert "model      ok" in out and "embeddings ok" in out and "batch_tokens:" not in out
    code, out, _ = run(capsys, "health", "--store", store, "--embedder", "hash",
                       "--component", "lake")  # fmt: skip
    assert code == 1 and "is a store file, not a lake" in out


def test_state_export_is_audited_like_the_api(capsys, store: str, tmp_path: Path) -> None:
    backup = tmp_path / "backup.json"
    code, _, _ = run(capsys, "state", "export", "--namespace", "auth-service",
                     "--output", str(backup), "--store", store)  # fmt: skip
    assert code == 0
    with Memory(store, embedder="hash", upkeep=False) as mem:
        log = mem.audit.log(action="export")
        assert list(log["actor"]) == ["cli"] and str(backup) in log["details"].iloc[0]


def test_usage_errors_exit_2(capsys) -> None:
    with pytest.raises(SystemExit) as info:
        main(["state", "delete"])
    assert info.value.code == 2
    assert "--session-id" in capsys.readouterr().err


def _script(*argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
        check=False,
    )


@pytest.mark.slow
def test_console_script_end_to_end(store: str, tmp_path: Path) -> None:
    assert SCRIPT.exists(), "the nbmemory console script is not installed in this venv"
    out = tmp_path / "ns.json"
    done = _script("state", "export", "--namespace", "auth-service", "--output", str(out),
                   "--store", store)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "exported namespace 'auth-service': 1 event(s)" in done.stdout
    assert json.loads(out.read_text(encoding="utf-8"))["counts"]["sessions"] == 2
    health = _script("health", "--store", store, "--embedder", "hash")
    assert health.returncode == 0 and "embeddings ok" in health.stdout


@pytest.mark.slow
def test_console_script_reports_a_locked_store_and_a_missing_model(
    store: str, tmp_path: Path
) -> None:
    with Memory(store, embedder="hash"):
        locked = _script("health", "--store", store, "--embedder", "hash")
    assert locked.returncode == 1
    assert "store      FAIL" in locked.stdout and "in use by" in locked.stdout
    no_model = _script("health", "--store", store, NBMEMORY_MODEL_PATH=str(tmp_path / "nope"))
    assert no_model.returncode == 1
    assert "model      FAIL" in no_model.stdout and "is not a directory" in no_model.stdout
    failed = _script("state", "delete", "--session-id", "sess_nope", "--store", store)
    assert failed.returncode == 1
    assert failed.stderr.startswith("nbmemory: error: ") and failed.stderr.count("\n") == 1


def test_logs_show_what_was_redacted_and_what_failed_never_the_secret(capsys, tmp_path) -> None:
    path = str(tmp_path / "logs.duckdb")

    def flaky(texts):
        if any("poison" in t for t in texts):
            raise ValueError("the model choked")
        return np.ones((len(texts), 8), dtype=np.float32)

    with Memory(path, embedder=flaky, config=False) as mem:
        mem.add_event("s", "user", "the DB password is Tr0ub4dor&3", namespace="ops")
        mem.add_event("s", "user", "poison pill", namespace="ops")
        mem.flush()
    code, out, _ = run(capsys, "logs", "--store", path, "--embedder", "hash")
    assert code == 0
    assert "redaction  ops  add by api: 1 secret(s) redacted in 1 row(s)" in out
    assert "Tr0ub4dor" not in out
    assert "embedding error  ops s" in out and "the model choked" in out
    code, out, _ = run(capsys, "logs", "--store", path, "--filter", "redaction", "--json")
    records = json.loads(out)
    assert [r["kind"] for r in records] == ["redaction"] and records[0]["redacted"] == 1
    code, out, err = run(capsys, "logs", "--store", path, "--limit", "0")
    assert code == 1 and "--limit" in err


def test_logs_filter_blocklist_shows_refused_files_never_their_content(capsys, tmp_path) -> None:
    """003: "vectora logs --filter guardian --namespace auth-service" reviews blocked content."""
    path = str(tmp_path / "guardian.duckdb")
    secret = tmp_path / "prod.env"
    secret.write_text("# Keys\n\nDB_PASSWORD=Tr0ub4dor&3\n", encoding="utf-8")
    with Memory(path, embedder="hash", config=False) as mem:
        with pytest.raises(InvalidInput, match="refusing to ingest prod.env"):
            mem.agents_md.sync(secret, namespace="auth-service")
        assert mem.events(namespace="auth-service").empty  # nothing of it stored
    for name in ("blocklist", "guardian"):
        code, out, _ = run(
            capsys, "logs", "--store", path, "--filter", name, "--namespace", "auth-service"
        )
        assert code == 0
        assert "blocklist  auth-service  refused prod.env (matches *.env" in out
        assert "Tr0ub4dor" not in out and "DB_PASSWORD" not in out
    code, out, _ = run(capsys, "logs", "--store", path, "--filter", "blocklist", "--json")
    assert json.loads(out) == [
        {
            "kind": "blocklist",
            "at": json.loads(out)[0]["at"],
            "namespace": "auth-service",
            "file": "prod.env",
            "pattern": "*.env",
        }
    ]
    code, out, _ = run(capsys, "logs", "--store", path, "--filter", "guardian", "--namespace", "x")
    assert "nothing to show (guardian)" in out


def test_consolidate_run_archive_restore(capsys, tmp_path) -> None:
    """000's consolidation from the command line: compact, list the archive, restore."""
    path = str(tmp_path / "c.duckdb")
    old = dt.datetime(2026, 1, 5, 9, 0, tzinfo=dt.timezone.utc)
    with Memory(path, embedder="hash", config=False) as mem:
        for i, text in enumerate(["we deploy on Fridays", "the port is 8443 now"]):
            mem.add_event("ops", "user", text, created_at=old + dt.timedelta(minutes=i))
    code, out, _ = run(capsys, "consolidate", "run", "--compact", "--store", path)
    assert code == 0
    assert "consolidated 2 message(s) of 1 session(s) into 1 summary(ies)" in out
    assert "2 moved to the archive" in out
    code, out, _ = run(capsys, "consolidate", "archive", "--store", path)
    assert code == 0 and "2 archived event(s)" in out and "the port is 8443 now" in out
    summary_id = out.split("summary ")[1].split()[0]
    code, out, _ = run(capsys, "consolidate", "restore", summary_id, "--store", path)
    assert code == 0 and f"restored 2 event(s) replaced by summary {summary_id}" in out
    code, out, err = run(capsys, "consolidate", "restore", summary_id, "--store", path)
    assert code == 1 and "nothing in the archive for summary" in err
    with Memory(path, embedder="hash", config=False) as mem:
        assert len(mem.events(kind="message")) == 2
        assert [a for a in mem.audit_log()["action"] if a in ("consolidate", "restore")] == [
            "restore",
            "consolidate",
        ]
