"""``nbmemory logs``: what the store redacted or could not embed, never the secret.

* ``--filter redaction``: the audit rows of writes that redacted secrets, with how
  many (the audit trail keeps counts, not the secrets; the stored text holds
  ``[REDACTED:…]`` markers);
* ``--filter blocklist`` (or ``guardian``, 003's name): the files refused because
  they match the blocklist (``.env``, ``*.key``, ``*.pem``), with the pattern,
  never their content;
* ``--filter errors``: the memories whose embedding failed, with the reason, and
  what the upkeep thread last failed on;
* ``--filter all`` (the default): all three.

``--namespace`` narrows to one namespace; ``--limit`` keeps the newest rows.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..errors import InvalidInput
from .options import store_options
from .stores import opened, store_path


def add_commands(sub: Any) -> None:
    """Register ``logs`` on the ``nbmemory`` parser."""
    logs = sub.add_parser(
        "logs",
        help="what was redacted, refused by the blocklist or failed to embed (never the secret)",
    )
    store_options(logs)
    logs.add_argument(
        "--filter",
        choices=("redaction", "blocklist", "guardian", "errors", "all"),
        default="all",
        help=(
            "redaction: writes that redacted secrets; blocklist (guardian): files refused;"
            " errors: failed embeddings (default: all)"
        ),
    )
    logs.add_argument("--namespace", default=None, help="one namespace (default: all)")
    logs.add_argument("--limit", type=int, default=50, help="newest rows of each kind (50)")
    logs.add_argument("--json", action="store_true", help="print JSON records")
    logs.set_defaults(func=cmd_logs)


def _redactions(mem: Any, namespace: str | None, limit: int) -> list[dict[str, Any]]:
    trail = mem.audit.log(namespace=namespace)
    rows = []
    for record in trail.to_dict(orient="records"):
        try:
            details = json.loads(record["details"] or "{}")
        except (TypeError, ValueError):
            continue
        count = details.get("redacted") if isinstance(details, dict) else None
        if not count:
            continue
        rows.append(
            {
                "kind": "redaction",
                "at": str(record["logged_at"]),
                "actor": record["actor"],
                "action": record["action"],
                "namespace": record["namespace"],
                "redacted": int(count),
                "rows": len(record["target_ids"] or []),
            }
        )
    return rows[:limit]


def _blocked(mem: Any, namespace: str | None, limit: int) -> list[dict[str, Any]]:
    trail = mem.audit.log(action="blocked_file", namespace=namespace)
    rows = []
    for record in trail.to_dict(orient="records"):
        details = json.loads(record["details"] or "{}")
        rows.append(
            {
                "kind": "blocklist",
                "at": str(record["logged_at"]),
                "namespace": record["namespace"],
                "file": details.get("file", ""),
                "pattern": details.get("pattern", ""),
            }
        )
    return rows[:limit]


def _errors(mem: Any, namespace: str | None, limit: int) -> list[dict[str, Any]]:
    namespaces = [namespace] if namespace else sorted(set(mem.status()["counts"]["namespace"]))
    rows = []
    for ns in namespaces:
        frame = mem.events(namespace=ns)
        failed = frame[frame["embedding_error"].notna()]
        for record in failed.to_dict(orient="records"):
            rows.append(
                {
                    "kind": "embedding",
                    "at": str(record["created_at"]),
                    "namespace": ns,
                    "session_id": record["session_id"],
                    "id": record["id"],
                    "error": record["embedding_error"],
                }
            )
    rows.sort(key=lambda r: r["at"], reverse=True)
    upkeep = mem.status().get("upkeep") or {}
    if upkeep.get("last_error"):
        rows.insert(0, {"kind": "upkeep", "at": "", "error": upkeep["last_error"]})
    return rows[:limit]


def cmd_logs(args: argparse.Namespace) -> int:
    """Print the redaction and error logs of a store."""
    if args.limit < 1:
        raise InvalidInput(f"--limit must be 1 or more, got {args.limit}")
    with opened(args, store_path(args), must_exist=True, read_only=True) as mem:
        rows: list[dict[str, Any]] = []
        if args.filter in ("redaction", "all"):
            rows += _redactions(mem, args.namespace, args.limit)
        if args.filter in ("blocklist", "guardian", "all"):
            rows += _blocked(mem, args.namespace, args.limit)
        if args.filter in ("errors", "all"):
            rows += _errors(mem, args.namespace, args.limit)
    if args.json:
        print(json.dumps(rows, default=str, ensure_ascii=False))
        return 0
    if not rows:
        print(f"nothing to show ({args.filter})")
    for row in rows:
        if row["kind"] == "redaction":
            print(
                f"{row['at']}  redaction  {row['namespace']}  {row['action']} by {row['actor']}:"
                f" {row['redacted']} secret(s) redacted in {row['rows']} row(s)"
            )
        elif row["kind"] == "blocklist":
            print(
                f"{row['at']}  blocklist  {row['namespace']}  refused {row['file']}"
                f" (matches {row['pattern']}: never read, stored or embedded)"
            )
        else:
            where = f"{row.get('namespace', '')} {row.get('session_id', '')} {row.get('id', '')}"
            print(f"{row['at']}  {row['kind']} error  {where.strip()}: {row['error']}")
    return 0
