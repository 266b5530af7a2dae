"""Which tables the lake's change feed reads, from the snapshots' own change lists
(:func:`nbmemory.store.lake.feed.touched`); no lake needed."""

from __future__ import annotations

from nbmemory.store.lake.feed import TableNames, touched


def _names() -> tuple[TableNames, list[str]]:
    asked: list[str] = []

    def run(sql, params):
        asked.append(sql)
        return [(3, "events"), (5, "event_vectors"), (7, "sessions"), (9, "audit_log")]

    return TableNames(run), asked


def test_only_the_followed_tables_the_snapshots_wrote_are_read() -> None:
    names, asked = _names()
    assert touched([{"inlined_insert": ["3", "9"]}, {"inlined_insert": ["5"]}], names) == {
        "events",
        "event_vectors",
    }
    assert touched([{"tables_deleted_from": ["7"]}, None, {}], names) == {"sessions"}
    assert touched([{"inlined_insert": ["9"]}], names) == set()  # the audit log only
    assert len(asked) == 1  # the names are asked once


def test_a_table_made_altered_or_unknown_reads_every_table_and_asks_the_names_again() -> None:
    names, asked = _names()
    assert touched([{"inlined_insert": ["3"]}, {"tables_altered": ["5"]}], names) is None
    assert touched([{"compacted_table": ["3"]}], names) is None
    assert touched([{"tables_inserted_into": ["11"]}], names) is None  # made since
    assert touched([{"tables_created": ["main.notes"]}], names) is None
    assert touched([{"inlined_insert": ["3"]}], names) == {"events"}
    assert len(asked) == 2  # for the unknown id, and again after it was forgotten
