"""A lake under faults and bad input: each gives one line that names what to fix, and
everything acknowledged before is there afterwards (real processes, a real
PostgreSQL stopped and started, real small file systems)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import tempfile
from pathlib import Path

import pytest
from child_process import expect, spawn
from disks import fill

from nbmemory import Memory
from nbmemory.errors import StoreError

POSTGRES = str(Path(__file__).resolve().parents[1] / ".ci" / "postgres")


def _open(url: str) -> Memory:
    return Memory(url, embedder="hash", background_consolidation=False)


def test_a_wrong_password_is_one_line_that_hides_it(lake_url: str) -> None:
    wrong = lake_url.replace("password=", "password=not-the-") if "password=" in lake_url else None
    if wrong is None:
        pytest.skip("the test catalog has no password to get wrong")
    with pytest.raises(StoreError, match="refused the login") as caught:
        _open(wrong)
    message = str(caught.value)
    assert "\n" not in message and "not-the-" not in message and "password=***" in message


def test_a_catalog_nobody_listens_on_is_one_line(lake_url: str) -> None:
    unreachable = re.sub(r"port=\d+", "port=1", lake_url)
    with pytest.raises(StoreError, match="cannot reach the lake's catalog") as caught:
        _open(unreachable)
    assert "\n" not in str(caught.value)


def test_another_applications_lake_is_refused_and_left_as_it_is(
    lake_url: str, foreign_lake
) -> None:
    with pytest.raises(StoreError, match="belongs to another application"):
        _open(lake_url)
    tables = foreign_lake.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_catalog = 'other'"
    ).fetchall()
    assert tables == [("orders",)]
    assert foreign_lake.execute("SELECT * FROM other.orders").fetchall() == [(1, 9.5)]


def test_two_lakes_cannot_share_a_data_path(lake_url: str) -> None:
    with _open(lake_url) as first:
        first.add_event("s", "user", "the first lake's memory")
    other = lake_url.replace("metadata_schema=t_", "metadata_schema=u_")
    with pytest.raises(StoreError, match="belongs to another lake"):
        _open(other)
    with _open(lake_url) as again:  # the first lake is untouched and still opens
        assert again.events()["content"].tolist() == ["the first lake's memory"]


def test_time_travel_reads_the_lake_as_it_was(lake_url: str) -> None:
    with _open(lake_url) as mem:
        mem.add_event("s", "user", "I live in Lisbon")
        then = mem.store.current_snapshot()
        mem.add_event("s", "user", "I moved to Porto")
        mem.set_fact("user", "city", "Porto")
    with Memory(lake_url, embedder="hash", snapshot=then) as past:
        assert past.events()["content"].tolist() == ["I live in Lisbon"]
        assert past.facts().empty
        with pytest.raises(StoreError, match="read-only"):
            past.add_event("s", "user", "rewriting history")
    with _open(lake_url) as now:
        assert len(now.events()) == 2
        messages = now.store.fetch_lake(
            "SELECT commit_message FROM lake.snapshots() WHERE author IS NOT NULL"
        )
        assert {m[0] for m in messages} == {"nbmemory api", "nbmemory ids"}


@pytest.fixture
def own_postgres(lake_catalog: str):
    """A PostgreSQL of this test's own, which the test stops and starts."""
    folder = tempfile.mkdtemp(prefix="nbm-pg-")
    os.chmod(folder, 0o755)  # the server runs as the postgres user
    cluster = os.path.join(folder, "pg")
    try:
        catalog = subprocess.run(
            [POSTGRES, "start", cluster], capture_output=True, text=True, check=True
        ).stdout.strip()
        yield cluster, f"ducklake:postgres:{catalog} data_path={folder}/lake"
    finally:
        subprocess.run([POSTGRES, "stop", cluster], check=False)
        subprocess.run(["rm", "-rf", folder], check=False)


def test_postgres_stopped_and_started_again_loses_nothing_acknowledged(own_postgres) -> None:
    cluster, url = own_postgres
    with _open(url) as mem:
        kept = [mem.add_event("s", "user", f"before {i}").id for i in range(5)]
        assert mem.flush(timeout=60)
        subprocess.run([POSTGRES, "stop", cluster], check=True)
        for call in (
            lambda: mem.add_event("s", "user", "while the catalog is down"),
            lambda: mem.search("before"),
        ):
            with pytest.raises(StoreError, match="cannot reach the lake's catalog") as caught:
                call()
            assert "\n" not in str(caught.value) and "password=***" in str(caught.value)
        subprocess.run([POSTGRES, "start", cluster], check=True, capture_output=True)
        kept.append(mem.add_event("s", "user", "after the restart").id)
        assert mem.flush(timeout=60)
        assert mem.search("restart", limit=1)["id"].tolist() == [kept[-1]]
    with _open(url) as again:
        assert sorted(again.events()["id"]) == sorted(kept)


_KILLED_WRITER = """
import sys
from nbmemory import Memory
mem = Memory(sys.argv[1], embedder="hash", background_consolidation=False)
i = 0
while True:
    event = mem.add_event("s", "user", f"note {i}")
    print("ack " + event.id, flush=True)
    i += 1
"""


def test_a_writer_killed_mid_commit_leaves_every_acknowledged_event(lake_url: str) -> None:
    with _open(lake_url):
        pass
    child = spawn(_KILLED_WRITER, lake_url)
    acknowledged = [expect(child, "ack ") for _ in range(25)]
    child.send_signal(signal.SIGKILL)
    assert child.stdout is not None
    acknowledged += [line[4:].strip() for line in child.stdout if line.startswith("ack ")]
    child.wait()
    with _open(lake_url) as mem:
        stored = set(mem.events()["id"])
        assert set(acknowledged) <= stored
        assert len(stored - set(acknowledged)) <= 1  # the one in flight, whole or not at all
        audited = {i for ids in mem.audit_log()["target_ids"] for i in ids}
        assert stored <= audited  # no event without its audit row
        mem.add_event("s", "user", "the lake takes writes after the kill")


@pytest.fixture
def small_data_path(lake_catalog: str, small_disk: Path):
    """A lake whose data path is a real 20 MB file system (tmpfs)."""
    schema = "t_" + os.urandom(8).hex()
    return (
        small_disk,
        f"ducklake:postgres:{lake_catalog} metadata_schema={schema} data_path={small_disk}",
    )


def _rows(n: int, tag: str) -> list[dict]:
    return [
        {"session_id": "s", "role": "user", "content": f"{tag} {i} " + "x" * 400} for i in range(n)
    ]


def test_a_full_or_read_only_data_path_is_one_line_and_nothing_half_stored(small_data_path) -> None:
    mountpoint, url = small_data_path
    with _open(url) as mem:
        kept = list(mem.add_events(_rows(200, "before")))
        assert mem.flush(timeout=60)
        filler = fill(mountpoint)
        with pytest.raises(StoreError, match="data path cannot be written") as caught:
            mem.add_events(_rows(2000, "during"))
        assert "\n" not in str(caught.value)
        filler.unlink()
        subprocess.run(["mount", "-o", "remount,ro", str(mountpoint)], check=True)
        with pytest.raises(StoreError, match="data path cannot be written"):
            mem.add_events(_rows(2000, "read-only"))
        subprocess.run(["mount", "-o", "remount,rw", str(mountpoint)], check=True)
        kept += list(mem.add_events(_rows(200, "after")))
        assert sorted(mem.events()["id"]) == sorted(kept)
        assert json.loads((mountpoint / "nbmemory-lake.json").read_text())["lake_id"]


def test_time_travel_to_a_moment_and_bad_snapshots(lake_url: str) -> None:
    import datetime as dt

    from nbmemory.errors import InvalidInput

    with _open(lake_url) as mem:
        mem.add_event("s", "user", "first")
        between = dt.datetime.now(dt.timezone.utc)
        while dt.datetime.now(dt.timezone.utc) == between:  # the next commit is later
            pass
        mem.add_event("s", "user", "second")
    with Memory(lake_url, embedder="hash", snapshot=between) as past:
        assert past.events()["content"].tolist() == ["first"]
    for bad in ("yesterday", True, 1.5):
        with pytest.raises(InvalidInput, match="snapshot= takes"):
            Memory(lake_url, embedder="hash", snapshot=bad)


def test_reading_a_lake_that_was_never_made_says_so(lake_url: str) -> None:
    with pytest.raises(StoreError, match="there is no lake at") as caught:
        Memory(lake_url, embedder="hash", read_only=True)
    assert "\n" not in str(caught.value)
