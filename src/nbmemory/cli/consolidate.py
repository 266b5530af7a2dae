"""``nbmemory consolidate``: summarise old conversations now, list or restore the archive.

* ``consolidate run [--compact] [--older-than-hours H] [--session-id S]`` — what
  ``mem.consolidation.run`` does (000: old conversations summarised, "reducing storage
  and context-window use" with ``--compact``, the originals moved to the archive);
* ``consolidate archive [--summary-id ID]`` — the archived events, oldest first;
* ``consolidate restore SUMMARY_ID`` — the events one summary replaced, back in
  their place (with their vectors).

``--namespace`` picks the namespace (default: ``default``).
"""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import InvalidInput
from .options import store_options
from .stores import opened, store_path


def add_commands(sub: Any) -> None:
    """Register ``consolidate`` on the ``nbmemory`` parser."""
    parser = sub.add_parser(
        "consolidate", help="summarise old conversations now; list or restore the archive"
    )
    actions = parser.add_subparsers(dest="consolidate_command", metavar="ACTION", required=True)
    run = actions.add_parser("run", help="summarise the messages older than the interval (6 h)")
    run.add_argument(
        "--compact",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="replace them by their summaries, the originals moved to the archive "
        "(default: the consolidation_compact setting, off)",
    )
    run.add_argument(
        "--older-than-hours",
        type=float,
        default=None,
        help="messages older than this (default: consolidation_interval_hours, 6)",
    )
    run.add_argument("--session-id", default=None, help="only this session")
    run.set_defaults(func=cmd_run)
    archive = actions.add_parser("archive", help="the events compaction archived")
    archive.add_argument("--summary-id", default=None, help="those one summary replaced")
    archive.set_defaults(func=cmd_archive)
    restore = actions.add_parser("restore", help="bring back the events one summary replaced")
    restore.add_argument("summary_id", help="the summary's id (consolidate archive lists them)")
    restore.set_defaults(func=cmd_restore)
    for action in (run, archive, restore):
        store_options(action)
        action.add_argument("--namespace", default=None, help="namespace (default: default)")


def cmd_run(args: argparse.Namespace) -> int:
    """Run one consolidation now and say what it did."""
    with opened(args, store_path(args), must_exist=True) as mem:
        report = mem.consolidation.run(
            compact=args.compact,
            older_than_hours=args.older_than_hours,
            session_id=args.session_id,
            namespace=args.namespace,
        )
    archived = f", {report.archived} moved to the archive" if report.archived else ""
    print(
        f"consolidated {report.consolidated} message(s) of {len(report.sessions)} session(s)"
        f" into {len(report.summary_ids)} summary(ies) and {report.facts} fact(s){archived}"
    )
    for session, reason in report.failures.items():
        print(f"  {session}: not consolidated: {reason}")
    return 0 if report.ok else 1


def cmd_archive(args: argparse.Namespace) -> int:
    """Print the archived events (id, session, summary, when archived, the text's start)."""
    with opened(args, store_path(args), must_exist=True, read_only=True) as mem:
        frame = mem.consolidation.archive(summary_id=args.summary_id, namespace=args.namespace)
    if frame.empty:
        print("the archive is empty")
        return 0
    for row in frame.to_dict(orient="records"):
        text = str(row.get("content") or "").replace("\n", " ")
        text = text if len(text) <= 60 else text[:57] + "..."
        print(
            f"{row['id']}  {row['session_id']}  summary {row['summary_id']}"
            f"  archived {row['archived_at']}  {text}"
        )
    print(f"{len(frame)} archived event(s)")
    return 0


def cmd_restore(args: argparse.Namespace) -> int:
    """Move the events one summary replaced back into the conversation."""
    with opened(args, store_path(args), must_exist=True) as mem:
        restored = mem.consolidation.restore(args.summary_id, namespace=args.namespace)
    if not restored:
        raise InvalidInput(
            f"nothing in the archive for summary {args.summary_id}; "
            "nbmemory consolidate archive lists what is there"
        )
    print(f"restored {restored} event(s) replaced by summary {args.summary_id}")
    return 0
