"""Fairness of shared mode: N writer processes and a reader taking turns on one file.

    python benchmarks/bench_shared.py --writers 4 --seconds 60 [--lock plain]

Each writer calls ``add_event`` in a loop for the given time; a reader calls
``get_context`` all along.  The table gives each process's operations and the
time its calls waited (p50/p99/max): fair turns mean the slowest writer gets at
least half of the fastest's operations and p99 stays under 2 s.  ``--lock plain``
runs the same with a plain file lock (what shared mode used before), to compare.
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
path, role, seconds, lock = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
if lock == "plain":  # the lock shared mode used before: first come, first served by chance
    import filelock
    from nbmemory.store import shared, turns

    class Plain:
        def __init__(self, path):
            self.lock_file, self.folder = path, path + ".tickets"
            self._lock = filelock.FileLock(path, thread_local=False)
        def acquire(self, timeout):
            try:
                self._lock.acquire(timeout=timeout)
            except filelock.Timeout:
                raise turns.Timeout(path) from None
        def release(self):
            self._lock.release()

    shared.FairLock = Plain
from nbmemory import Memory

mem = Memory(path, embedder="hash", shared=True, background_consolidation=False)
print("ready", flush=True)
sys.stdin.readline()
waits, errors, end = [], 0, time.monotonic() + seconds
i = 0
while time.monotonic() < end:
    start = time.monotonic()
    try:
        if role == "reader":
            mem.get_context("s0", "a question about note 7")
        else:
            mem.add_event(f"s{i % 3}", "user", f"{role} note {i}")
    except Exception:
        errors += 1
    waits.append(time.monotonic() - start)
    i += 1
mem.flush(timeout=60)
mem.close()
print(json.dumps({"role": role, "ops": len(waits) - errors, "errors": errors, "waits": waits}))
"""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--lock", choices=("fair", "plain"), default="fair")
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="nbmemory-shared-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    path = os.path.join(folder, "shared.duckdb")
    Memory(path, embedder="hash", shared=True).close()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), PYTHONUNBUFFERED="1")
    roles = [f"writer{i + 1}" for i in range(args.writers)] + ["reader"]
    children = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                textwrap.dedent(CHILD),
                path,
                role,
                str(args.seconds),
                args.lock,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for role in roles
    ]
    for child in children:  # every process opened the store before any starts writing
        assert child.stdout is not None and child.stdout.readline().startswith("ready")
    for child in children:
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    results = [json.loads(child.communicate()[0].strip().splitlines()[-1]) for child in children]
    writers = [r for r in results if r["role"] != "reader"]
    ops = [r["ops"] for r in writers]
    print(machine())
    print(
        f"\nshared mode, {args.writers} writers + 1 reader for {args.seconds:g} s, {args.lock} lock"
    )
    rows = [
        [
            r["role"],
            r["ops"],
            r["errors"],
            f"{percentile(r['waits'], 0.5) * 1e3:.0f}",
            f"{percentile(r['waits'], 0.99) * 1e3:.0f}",
            f"{max(r['waits'] or [0]) * 1e3:.0f}",
        ]
        for r in results
    ]
    print_table(["process", "operations", "errors", "p50 ms", "p99 ms", "max ms"], rows)
    all_waits = [w for r in results for w in r["waits"]]
    print(
        f"\nslowest / fastest writer: {min(ops) / max(ops):.2f} (goal >= 0.50); "
        f"p99 of every call: {percentile(all_waits, 0.99):.2f} s (goal < 2 s); "
        f"total operations {sum(ops)}"
    )


if __name__ == "__main__":
    main()
