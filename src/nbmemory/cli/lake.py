"""``nbmemory lake ...``: look after a DuckLake store, and copy stores into and out of one.

::

    nbmemory lake status    [--store URL] [--json]
    nbmemory lake snapshots [--store URL] [--limit N] [--json]
    nbmemory lake compact   [--store URL]
    nbmemory lake expire    [--store URL] --older-than DURATION [--dry-run]
    nbmemory lake push      FILE.duckdb [URL]
    nbmemory lake pull      [URL] FILE.duckdb

``URL`` is a ``ducklake:`` address (``ducklake:postgres:dbname=... host=...
data_path=/team/lake``); without one, ``$NBMEMORY_PATH``.  ``status`` and
``snapshots`` open the lake read-only.  ``compact`` writes inlined rows to
Parquet and merges small files; ``expire`` forgets snapshots older than
``DURATION`` (``7d``, ``12h``, ``30m``, ``45s``, ``2w``: time travel stops there)
and deletes the files only they used; both wait for the write transactions in
flight, and writers wait for them (the lake's fence).  Neither erases what was
forgotten: ``nbmemory memory purge --expire-snapshots`` does.  ``push`` copies a
file store into a new,
empty lake; ``pull`` copies a lake into a new file (an existing file is never
overwritten): every row, id, timestamp and vector bit, so a round trip gives the
same store.  Errors print one line and exit 1; bad usage exits 2.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
from typing import Any

from ..config import default_store_path
from ..errors import InvalidInput
from ..store.lake import LakeStore, is_lake_url, maintenance, transfer

#: What a lake command given something else says.
NEED_URL = "nbmemory lake commands need a ducklake: URL"
_URL_HELP = "the lake: a ducklake: URL (default: $NBMEMORY_PATH)"
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
#: A ``--limit`` no lake reaches: every snapshot.
_EVERY = 2**62
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$", re.I)


def parse_duration(text: str) -> dt.timedelta:
    """``7d``, ``12h``, ``30m``, ``45s`` or ``2w`` as a timedelta (argparse's ``type``).

    >>> parse_duration("12h")
    datetime.timedelta(seconds=43200)
    """
    found = _DURATION.match(text)
    if found is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a duration; write a number and a unit, like 7d, 12h, 30m or 45s"
        )
    return dt.timedelta(**{_UNITS[found.group(2).lower()]: float(found.group(1))})


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return value


def _url(given: str | None) -> str:
    """The lake's address: the one given, else ``$NBMEMORY_PATH``; a path is refused."""
    url = given or default_store_path()
    if not is_lake_url(url):
        raise InvalidInput(
            f"{NEED_URL}, and {url} is not one; pass --store 'ducklake:postgres:dbname=... "
            "host=... data_path=...' or set NBMEMORY_PATH to one"
        )
    return url


def _lake(args: argparse.Namespace, *, read_only: bool) -> LakeStore:
    """The lake of ``--store``; one not made yet, or not nbmemory's, is refused.

    A writing command first opens it read-only: opening for writing would make
    nbmemory's tables in an empty catalog (a mistyped address) before compacting it.
    """
    url = _url(args.store)
    if not read_only:
        LakeStore(url, read_only=True).close()
    store = LakeStore(url, read_only=read_only)
    store.actor = "cli"
    return store


def _print_json(value: Any) -> None:
    print(json.dumps(value, default=str, ensure_ascii=False))


def _time(value: Any) -> str:
    """A snapshot time to the second, in UTC."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.timezone.utc)
        return value.strftime("%Y-%m-%d %H:%M:%S UTC")
    return "" if value is None else str(value)


# -- status, snapshots -------------------------------------------------------------------
def cmd_lake_status(args: argparse.Namespace) -> int:
    """What the lake holds: snapshots, events, and each table's Parquet files."""
    store = _lake(args, read_only=True)
    try:
        status = maintenance.status(store)
    finally:
        store.close()
    if args.json:
        _print_json(status)
        return 0
    print(f"{'lake':<16}{status['catalog']}")
    print(f"{'data path':<16}{status['data_path']}")
    print(
        f"{'snapshots':<16}{status['snapshots']} (current {status['current_snapshot']}, "
        f"oldest {_time(status['oldest_snapshot_time'])})"
    )
    print(f"{'events':<16}{status['events']}")
    print(f"{'files on disk':<16}{status['files_on_disk']}")
    print()
    width = max([len("table"), *(len(name) for name in status["files"])])
    print(f"{'table':<{width}}  {'files':>6}  {'bytes':>14}")
    for name, count in status["files"].items():
        print(f"{name:<{width}}  {count:>6}  {status['bytes'][name]:>14,}")
    return 0


def _changes(value: Any) -> str:
    """A snapshot's changes, ``kind: a, b; kind: c``."""
    if not isinstance(value, dict):
        return "" if value is None else str(value)
    return "; ".join(f"{kind}: {', '.join(map(str, items))}" for kind, items in value.items())


def cmd_lake_snapshots(args: argparse.Namespace) -> int:
    """The latest snapshots: id, time, the writing process, its commit message, changes."""
    store = _lake(args, read_only=True)
    try:
        frame = maintenance.snapshots(store, limit=args.limit)
    finally:
        store.close()
    records = [
        {
            "snapshot_id": int(row["snapshot_id"]),
            "snapshot_time": _time(row["snapshot_time"]),
            "author": row["author"],
            "commit_message": row["commit_message"],
            "changes": row["changes"],
        }
        for row in frame.astype(object).where(frame.notna(), None).to_dict(orient="records")
    ]
    if args.json:
        _print_json(records)
        return 0
    if not records:
        print("(none)")
        return 0
    heads = ("id", "time", "author", "message", "changes")
    cells = [
        [str(r["snapshot_id"]), r["snapshot_time"], r["author"] or "", r["commit_message"] or ""]
        + [_changes(r["changes"])]
        for r in records
    ]
    widths = [max(len(h), *(len(row[i]) for row in cells)) for i, h in enumerate(heads)]
    print("  ".join(h.ljust(w) for h, w in zip(heads, widths, strict=True)).rstrip())
    for row in cells:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    return 0


# -- compact, expire ---------------------------------------------------------------------
def cmd_lake_compact(args: argparse.Namespace) -> int:
    """Write inlined rows to Parquet, merge small files, delete the ones no longer used."""
    store = _lake(args, read_only=False)
    try:
        result = maintenance.compact(store)
    finally:
        store.close()
    print(
        f"compacted the lake: {result['rows_flushed']} inlined row(s) written to Parquet, "
        f"{result['files_merged']} file(s) merged, {result['files_deleted']} old file(s) "
        f"deleted; files on disk: {result['files_before']} before, {result['files_after']} after"
    )
    return 0


def cmd_lake_expire(args: argparse.Namespace) -> int:
    """Forget snapshots older than --older-than (time travel stops there) and their files."""
    older_than: dt.timedelta = args.older_than
    if args.dry_run:
        store = _lake(args, read_only=True)
        try:
            cutoff = dt.datetime.now(dt.timezone.utc) - older_than
            frame = maintenance.snapshots(store, limit=_EVERY)
        finally:
            store.close()
        # the current snapshot is never expired: it is what the lake holds now
        older = [
            int(row.snapshot_id)
            for row in frame.iloc[1:].itertuples()
            if _utc(row.snapshot_time) < cutoff
        ]
        shown = ", ".join(map(str, sorted(older)[:20])) + (" ..." if len(older) > 20 else "")
        print(
            f"would expire {len(older)} snapshot(s) older than {args.older_than_text}"
            + (f" ({shown})" if older else "")
            + "; nothing was changed"
        )
        return 0
    store = _lake(args, read_only=False)
    try:
        result = maintenance.expire(store, older_than)
    finally:
        store.close()
    print(
        f"expired {result['snapshots_expired']} snapshot(s) older than {args.older_than_text}; "
        f"deleted {result['files_deleted']} file(s) nothing refers to any more"
    )
    return 0


def _utc(value: Any) -> dt.datetime:
    stamp: dt.datetime = value.to_pydatetime() if hasattr(value, "to_pydatetime") else value
    if stamp.tzinfo is None:
        return stamp.replace(tzinfo=dt.timezone.utc)
    return stamp.astimezone(dt.timezone.utc)


# -- push, pull --------------------------------------------------------------------------
def _summary(copied: transfer.Copied) -> str:
    rows = copied.rows
    return (
        f"{rows.get('events', 0)} event(s), {rows.get('event_vectors', 0)} vector(s), "
        f"{rows.get('event_archive', 0)} archived event(s), "
        f"{rows.get('facts', 0)} fact(s) ({rows.get('fact_history', 0)} past value(s)), "
        f"{rows.get('macros', 0)} macro(s), {rows.get('scheduled_tasks', 0)} task(s), "
        f"{rows.get('sessions', 0)} session(s), {rows.get('audit_log', 0)} audit row(s); "
        f"{copied.total:,} row(s) in all"
    )


def cmd_lake_push(args: argparse.Namespace) -> int:
    """Copy a file store into a new, empty lake."""
    url = _url(args.url)
    copied = transfer.push(args.file, url)
    print(f"pushed {args.file} -> {copied.target} (snapshot {copied.snapshot}): {_summary(copied)}")
    return 0


def cmd_lake_pull(args: argparse.Namespace) -> int:
    """Copy a lake into a new file store."""
    url = _url(args.url)
    copied = transfer.pull(url, args.file)
    print(f"pulled {copied.source} (snapshot {copied.snapshot}) -> {args.file}: {_summary(copied)}")
    return 0


def _store_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", default=None, metavar="URL", help=_URL_HELP)


class _Duration(argparse.Action):
    """Keeps the duration as written too (messages repeat the user's words)."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
        text = str(values)
        try:
            setattr(namespace, self.dest, parse_duration(text))
        except argparse.ArgumentTypeError as exc:
            parser.error(f"argument --older-than: {exc}")
        namespace.older_than_text = text.strip()


def add_commands(sub: Any) -> None:
    """Register ``lake`` and its actions on the ``nbmemory`` parser."""
    lake = sub.add_parser(
        "lake", help="a DuckLake store: status, snapshots, compact, expire, push, pull"
    )
    lake_sub = lake.add_subparsers(dest="lake_command", metavar="ACTION", required=True)

    status = lake_sub.add_parser("status", help="snapshots, events and files of the lake")
    _store_option(status)
    status.add_argument("--json", action="store_true", help="print JSON")
    status.set_defaults(func=cmd_lake_status)

    snapshots = lake_sub.add_parser("snapshots", help="the latest snapshots (commits)")
    _store_option(snapshots)
    snapshots.add_argument(
        "--limit", type=_positive, default=20, help="how many (default 20), newest first"
    )
    snapshots.add_argument("--json", action="store_true", help="print JSON records")
    snapshots.set_defaults(func=cmd_lake_snapshots)

    compact = lake_sub.add_parser(
        "compact",
        help="write inlined rows to Parquet and merge small files (erasing is memory purge)",
    )
    _store_option(compact)
    compact.set_defaults(func=cmd_lake_compact)

    expire = lake_sub.add_parser(
        "expire", help="forget old snapshots and delete the files only they used"
    )
    _store_option(expire)
    expire.add_argument(
        "--older-than",
        required=True,
        metavar="DURATION",
        action=_Duration,
        help="snapshots older than this go: 7d, 12h, 30m, 45s, 2w",
    )
    expire.add_argument(
        "--dry-run", action="store_true", help="say which snapshots would go, change nothing"
    )
    expire.set_defaults(func=cmd_lake_expire)

    push = lake_sub.add_parser("push", help="copy a file store into a new, empty lake")
    push.add_argument("file", metavar="FILE.duckdb", help="the nbmemory file to copy")
    push.add_argument("url", metavar="URL", nargs="?", default=None, help=_URL_HELP)
    push.set_defaults(func=cmd_lake_push)

    pull = lake_sub.add_parser("pull", help="copy a lake into a new file store")
    pull.add_argument("url", metavar="URL", nargs="?", default=None, help=_URL_HELP)
    pull.add_argument("file", metavar="FILE.duckdb", help="the new file (must not exist)")
    pull.set_defaults(func=cmd_lake_pull)
