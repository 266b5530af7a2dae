"""Which tables the lake's change feed reads, from the snapshots' own change lists
(:func:`nbmemory.store.lake.feed.touched`); no lake needed."""

from __future__ import annotations

import duckdb

from nbmemory.store.lake.feed import Snapshots, TableNames, touched


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
    assert touched([{"deleted_from_table": ["7"]}, {}], names) == {"sessions"}
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


def test_the_catalogs_change_list_is_read_as_snapshots_shows_it() -> None:
    asked: list[str] = []

    def run(sql, params):
        asked.append(sql)
        return [
            (4, "inlined_insert:3,inlined_insert:9"),
            (5, 'created_table:"main"."a,b"'),
            (6, ""),
        ]

    found = Snapshots(run, "postgres", "team").foreign(4, 6, "me")
    assert found == [(4, {"inlined_insert": ["3", "9"]}), (5, None), (6, {})]
    assert '__ducklake_metadata_lake."team".ducklake_snapshot_changes' in asked[0]
    names, _ = _names()
    assert touched([changed for _, changed in found], names) is None  # the quoted comma


def test_a_catalog_without_that_table_is_asked_through_snapshots() -> None:
    asked: list[str] = []

    def run(sql, params):
        asked.append(sql)
        if "ducklake_snapshot_changes" in sql:
            raise duckdb.CatalogException(
                "Table with name ducklake_snapshot_changes does not exist!"
            )
        return [(4, {"inlined_insert": ["3"]})]

    snapshots = Snapshots(run, "sqlite", None)
    assert snapshots.foreign(4, 4, "me") == [(4, {"inlined_insert": ["3"]})]
    assert snapshots.foreign(5, 5, "me") == [(4, {"inlined_insert": ["3"]})]
    assert '."main".' in asked[0] and len(asked) == 3  # tried once, then snapshots()
