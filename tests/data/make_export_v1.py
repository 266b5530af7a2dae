"""How ``export_v1.json`` was made: run with nbmemory before export format 2 (c0c43ec).

    cd tests && PYTHONPATH=../src python data/make_export_v1.py data/export_v1.json

A namespace with one session (and its state), two short messages and a long one
(a fact in its last 300 characters: version 1 carries its first passage's vector
only), and a fact, which version 1 leaves out.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from test_long_memories import TAIL_FACTS, long_message  # noqa: E402

from nbmemory import Memory  # noqa: E402


def main(out: str) -> None:
    with (
        tempfile.TemporaryDirectory() as folder,
        Memory(Path(folder) / "v1.duckdb", embedder="hash", background_consolidation=False) as mem,
    ):
        sid = mem.start_session("ana", session_id="s1").session_id
        mem.add_event(
            sid,
            "user",
            "I prefer tea over coffee",
            metadata={"mood": "calm"},
            created_at="2026-11-01T09:00:00Z",
        )
        mem.add_event(
            sid, "assistant", "Noted: tea.", created_at="2026-11-01T09:00:05Z", importance=0.8
        )
        mem.add_event(
            sid, "assistant", long_message(0, TAIL_FACTS[0][0]), created_at="2026-11-01T09:01:00Z"
        )
        mem.save_session_state(sid, {"current_plan": ["brew tea"]})
        mem.set_fact("drink", "favourite", "tea")  # not part of version 1
        mem.flush()
        print(mem.export_json(out))


if __name__ == "__main__":
    main(sys.argv[1])
