"""How often the importance estimate lifts LoCoMo turns to salience, and what it costs.

    NBMEMORY_LOCOMO_PATH=../shared/data/locomo python benchmarks/importance_locomo.py

For every LoCoMo conversation, the importance each turn would be stored with
(``importance_for``: max(role default, estimate), the default settings), then the
share of evidence turns (turns some question of category 1-4 cites) that reach
salience (importance >= 0.8) against the share of the other turns.  Two readings:
as ``load_locomo`` stores them (speaker A is ``user``, speaker B ``assistant``,
whose turns keep their role default) and with both speakers read as people
(``user``).  No embedding model is needed: the estimate reads text only.  Last,
the estimate's cost per text (p50 and p95 over every turn, ``--repeat`` times).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import machine, p50, p95, print_table  # noqa: E402

from nbmemory import Settings  # noqa: E402
from nbmemory.event_rows import importance_for  # noqa: E402
from nbmemory.importance import estimate_importance  # noqa: E402
from nbmemory.research.datasets import locomo_files, read_locomo  # noqa: E402


def share(hits: int, total: int) -> str:
    return f"{hits / total:.1%} ({hits}/{total})" if total else "-"


def count(turns, evidence: set[str], roles: dict[str, str], settings: Settings) -> list[int]:
    """[evidence turns, of them salient, other turns, of them salient]."""
    out = [0, 0, 0, 0]
    for turn in turns.itertuples(index=False):
        importance = importance_for(roles[turn.speaker], None, settings, turn.content)
        slot = 0 if turn.dia_id in evidence else 2
        out[slot] += 1
        out[slot + 1] += importance >= settings.salience_threshold
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", help="LoCoMo folder (default $NBMEMORY_LOCOMO_PATH)")
    parser.add_argument("--repeat", type=int, default=5, help="timing passes over every turn")
    args = parser.parse_args()
    settings = Settings()
    rows, texts = [], []
    totals = {"stored": [0, 0, 0, 0], "people": [0, 0, 0, 0]}
    for path in locomo_files(args.path):
        conversation = read_locomo(path)
        evidence = {d for ids in conversation.answerable()["evidence"] for d in ids}
        a, b = conversation.speakers
        stored = count(conversation.turns, evidence, {a: "user", b: "assistant"}, settings)
        people = count(conversation.turns, evidence, {a: "user", b: "user"}, settings)
        for key, counts in (("stored", stored), ("people", people)):
            totals[key] = [x + y for x, y in zip(totals[key], counts, strict=True)]
        rows.append((conversation.conversation_id, stored, people))
        texts.extend(conversation.turns["content"])
    rows.append(("**all**", totals["stored"], totals["people"]))
    print(f"salience threshold {settings.salience_threshold}, default settings\n")
    print_table(
        [
            "conversation",
            "evidence salient (A user, B assistant)",
            "other salient (A user, B assistant)",
            "evidence salient (both as user)",
            "other salient (both as user)",
        ],
        [
            (name, share(s[1], s[0]), share(s[3], s[2]), share(p[1], p[0]), share(p[3], p[2]))
            for name, s, p in rows
        ],
    )
    seconds = []
    for _ in range(args.repeat):
        for text in texts:
            start = time.perf_counter()
            estimate_importance(text, "user")
            seconds.append(time.perf_counter() - start)
    print(
        f"\nestimate_importance: p50 {p50(seconds) * 1e6:.1f} µs, p95 {p95(seconds) * 1e6:.1f} µs"
        f" per text ({len(texts)} turns x {args.repeat}); {machine()}"
    )


if __name__ == "__main__":
    main()
