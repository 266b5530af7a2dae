"""Shared mode's write rate: two writer processes and a reader on one store, beside
exclusive mode measured in the same run.

    python benchmarks/bench_shared_rate.py [--seconds 20] [--writers 2] [--quick]
        [--journal off]

Each writer calls ``add_event`` one at a time for the given time and keeps every id
it got back; a reader calls ``get_context`` all along.  Then a fresh process opens
the store and counts the returned ids it finds: ``lost`` is the ids returned and not
stored (goal 0).  The floor is one process in exclusive mode (``Memory(path)``)
calling ``add_event`` for the same time, alone on its own file, in the same run.
Goals (issue 39): >= 100 ``add_event``/s per writer, 0 lost, slowest writer >= half
the fastest.  ``--journal off`` runs shared mode as it was before the journal (one
turn on the file per ``add_event``), to compare.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import machine, print_table  # noqa: E402

from nbmemory import Memory  # noqa: E402

CHILD = """
import json, sys, time
path, role, seconds, shared, journal = (
    sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4] == "1", sys.argv[5] == "on"
)
if not journal:  # shared mode before the journal: each add_event one turn on the file
    from nbmemory.store import connection, shared as shared_mode
    shared_mode.SharedStore.journal_for = connection.Store.journal_for
from nbmemory import Memory

mem = Memory(path, embedder="hash", shared=shared, background_consolidation=False)
print("ready", flush=True)
sys.stdin.readline()
ids, errors, waits = [], 0, []
end = time.monotonic() + seconds
start = time.monotonic()
i = 0
while time.monotonic() < end:
    began = time.monotonic()
    try:
        if role == "reader":
            mem.get_context("s0", "a question about note 7")
        else:
            ids.append(mem.add_event(f"s{i % 3}", "user", f"{role} note {i}").id)
    except Exception:
        errors += 1
    waits.append(time.monotonic() - began)
    i += 1
elapsed = time.monotonic() - start
mem.flush(timeout=120)
mem.close()
print(json.dumps({"role": role, "ids": ids, "calls": len(waits) - errors, "errors": errors,
                  "elapsed": elapsed, "p99": sorted(waits)[int(0.99 * (len(waits) - 1))]}))
"""


def run(path: str, roles: list[str], seconds: float, shared: bool, journal: str) -> list[dict]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), PYTHONUNBUFFERED="1")
    children = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                textwrap.dedent(CHILD),
                path,
                role,
                str(seconds),
                "1" if shared else "0",
                journal,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for role in roles
    ]
    for child in children:  # every process opened the store before any starts
        assert child.stdout is not None and child.stdout.readline().startswith("ready")
    for child in children:
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    results = []
    for child in children:
        out, _ = child.communicate(timeout=seconds + 600)
        assert child.returncode == 0, f"a {roles} child failed"
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


def stored_ids(path: str, shared: bool) -> set[str]:
    with Memory(path, embedder="hash", shared=shared) as mem:
        return {row[0] for row in mem.store.fetchall("SELECT id FROM events")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writers", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--journal", choices=("on", "off"), default="on")
    parser.add_argument("--quick", action="store_true", help="3 s each (CI)")
    args = parser.parse_args()
    seconds = 3.0 if args.quick else args.seconds
    folder = tempfile.mkdtemp(prefix="nbmemory-shared-rate-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)

    # the floor: one process in exclusive mode, alone, for the same time
    alone = os.path.join(folder, "exclusive.duckdb")
    Memory(alone, embedder="hash").close()
    (floor,) = run(alone, ["writer"], seconds, False, "on")
    floor_rate = len(floor["ids"]) / floor["elapsed"]
    floor_lost = len(set(floor["ids"]) - stored_ids(alone, False))

    path = os.path.join(folder, "shared.duckdb")
    Memory(path, embedder="hash", shared=True).close()
    roles = [f"writer{i + 1}" for i in range(args.writers)] + ["reader"]
    results = run(path, roles, seconds, True, args.journal)
    stored = stored_ids(path, True)

    print(machine())
    print(
        f"\n{args.writers} shared writers + 1 reader for {seconds:g} s (journal {args.journal}),"
        " beside 1 exclusive writer alone for the same time"
    )
    rows = [
        [
            "exclusive writer (floor)",
            len(floor["ids"]),
            f"{floor_rate:.0f}",
            floor["errors"],
            floor_lost,
            f"{floor['p99'] * 1e3:.1f}",
        ]
    ]
    rates = []
    lost = 0
    for r in results:
        rate = r["calls"] / r["elapsed"]
        missing = len(set(r["ids"]) - stored)
        if r["role"] != "reader":
            rates.append(rate)
            lost += missing
        rows.append(
            [
                f"shared {r['role']}",
                r["calls"],
                f"{rate:.0f}",
                r["errors"],
                missing if r["role"] != "reader" else "-",
                f"{r['p99'] * 1e3:.1f}",
            ]
        )
    print_table(["process", "calls", "calls/s", "errors", "lost", "p99 ms"], rows)
    fairness = min(rates) / max(rates) if max(rates) else 0.0
    print(
        f"\nper shared writer: {min(rates):.0f}-{max(rates):.0f} add_event/s "
        f"(goal >= 100; {min(rates) / floor_rate:.2f}x the exclusive floor); "
        f"lost {lost} (goal 0); slowest / fastest writer {fairness:.2f} (goal >= 0.50)"
    )


if __name__ == "__main__":
    main()
