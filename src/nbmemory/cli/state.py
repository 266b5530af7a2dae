"""``nbmemory state ...``, ``nbmemory memory sync|learn|purge|reembed`` and ``nbmemory health``.

::

    nbmemory state list    [--namespace NS] [--user ID] [--with-untracked] [--json]
    nbmemory state cleanup [--namespace NS] [--dry-run]
    nbmemory state delete  --session-id ID [--namespace NS] [--with-events | --forget]
    nbmemory state forget  --user ID [--namespace NS]
    nbmemory state export  --output FILE [--session-id ID] [--namespace NS] [--force]
    nbmemory state import  --input FILE [--namespace NS]
    nbmemory memory sync   --file AGENTS.md [--namespace NS]
    nbmemory memory learn  --section S --text T [--file AGENTS.md] [--namespace NS]
    nbmemory memory purge  [--fact-history] [--rotate-pseudonym-key] [--expire-snapshots]
    nbmemory memory reembed [--failed] [--namespace NS]
    nbmemory health

Every command takes ``--store`` (default ``$NBMEMORY_PATH`` or ``./nbmemory.duckdb``),
``--embedder`` and ``--shared``.  Reads (list, export, health) open the store read-only;
only ``health`` loads the embedding model (to check it); writes are audited with actor ``cli``.  Long
work shows a tqdm progress bar on a terminal.  Errors print one line and exit 1;
``state import`` into a new store removes it again when it fails.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path
from typing import Any

from ..config import ENV_MODEL_PATH
from ..errors import EmbedderError, InvalidInput, ModelUnavailable, NbMemoryError
from ..memory import Memory
from ..retrieval.embedders import Embedder, model_unavailable
from ..sessions.lifecycle import LIST_COLUMNS as SESSION_LIST
from ..transfer.json_files import read_export
from .options import in_cli_words, store_options
from .stores import opened, store_path


def _common(parser: argparse.ArgumentParser, *, namespace: bool = True) -> None:
    store_options(parser)
    if namespace:
        parser.add_argument("--namespace", default=None, help="namespace (default: all / default)")


def _open(
    args: argparse.Namespace, *, read_only: bool = False, create: bool = False
) -> contextlib.AbstractContextManager[Memory]:
    """The store of ``--store``; it must exist unless the command fills a new one (which
    is removed again if the command fails).

    A ``ducklake:`` address is no path: whether that lake exists is for its store to say.
    """
    return opened(args, store_path(args), must_exist=not create, read_only=read_only)


def _session_namespace(mem: Memory, args: argparse.Namespace) -> str | None:
    """--namespace, or the one namespace holding --session-id (the CLI may give only the id)."""
    if args.namespace is not None or not args.session_id:
        return args.namespace
    found = mem.store.sessions.namespaces_of(args.session_id)
    if len(found) > 1:
        raise InvalidInput(
            f"session {args.session_id!r} exists in namespaces {', '.join(found)}; "
            "pass --namespace to choose one"
        )
    return found[0] if found else None


def _wait_for_embeddings(mem: Memory, label: str = "embedding") -> None:
    """Block until the background embedder is done, with a progress bar on a terminal."""
    from tqdm import tqdm

    total = mem.embeddings.backlog
    if not total:
        return
    with tqdm(total=total, desc=label, unit="text", disable=None, file=sys.stderr) as bar:
        try:
            while not mem.flush(timeout=0.5):
                bar.update(total - mem.embeddings.backlog - bar.n)
        except ModelUnavailable:
            return  # the rows are stored and stay pending: _report_pending says so
        bar.update(total - bar.n)


def _report_pending(mem: Memory) -> None:
    """Say on stderr that rows wait for a model that cannot load (the command still
    succeeded: they are stored, and are embedded at the next open with a model)."""
    unavailable = mem.core.worker.unavailable if mem.core.worker is not None else None
    if unavailable is None:
        return
    pending = mem.status()["pending"]
    if pending:
        print(
            f"note: {pending} event(s) stored without a vector yet, embedded at the next open "
            f"with a model; {unavailable.remedy(MODEL_ADVICE)}",
            file=sys.stderr,
        )


def _print_frame(frame: Any, columns: list[str]) -> None:
    if frame.empty:
        print("(none)")
        return
    print(frame.reindex(columns=columns).to_string(index=False))


# -- state ---------------------------------------------------------------------------------
#: What ``state list`` prints (the state JSON and creation/closing times are left out).
LIST_COLUMNS = [c for c in SESSION_LIST if c not in ("created_at", "closed_at", "state")]


def cmd_state_list(args: argparse.Namespace) -> int:
    """List sessions (all namespaces unless --namespace)."""
    with _open(args, read_only=True) as mem:
        frame = mem.sessions.list(
            args.namespace,
            user_id=args.user,
            all_namespaces=args.namespace is None,
            include_untracked=not args.tracked_only,
        )
    if args.json:
        records = frame.drop(columns=["state"]).astype(object).where(frame.notna(), None)
        print(json.dumps(records.to_dict(orient="records"), default=str, ensure_ascii=False))
    else:
        _print_frame(frame, LIST_COLUMNS)
    return 0


def cmd_state_cleanup(args: argparse.Namespace) -> int:
    """Delete sessions idle past the TTL and audit rows past the retention."""
    with _open(args) as mem:
        frame = mem.sessions.cleanup(
            namespace=args.namespace, all_namespaces=args.namespace is None, dry_run=args.dry_run
        )
        audit_rows = mem.audit.cleanup(dry_run=args.dry_run)
        ttl = mem.settings.session_ttl_hours
        days = mem.settings.audit_retention_days
    verb = "would delete" if args.dry_run else "deleted"
    print(f"{verb} {len(frame)} session(s) idle for more than {ttl:g} h:")
    _print_frame(frame, ["namespace", "session_id", "user_id", "status", "last_activity"])
    print(f"{verb} {audit_rows} audit row(s) older than {days} days")
    return 0


def cmd_state_delete(args: argparse.Namespace) -> int:
    """Delete one session (and, with --with-events, its memories)."""
    with _open(args) as mem:
        result = mem.sessions.delete(
            args.session_id,
            namespace=_session_namespace(mem, args),
            events=args.with_events,
            forget=args.forget,
        )
    forgotten = (
        f", its id pseudonymised in {result['audit_rows']} audit row(s); "
        "nbmemory memory purge erases the old bytes"
        if args.forget
        else ""
    )
    print(
        f"deleted session {args.session_id!r} "
        f"({result['sessions']} session row, {result['events']} event(s)){forgotten}"
    )
    return 0


def cmd_state_forget(args: argparse.Namespace) -> int:
    """Forget a user: sessions, their events, the ids in the audit trail (all namespaces
    unless --namespace)."""
    with _open(args) as mem:
        result = mem.sessions.forget_user(
            args.user, namespace=args.namespace, all_namespaces=args.namespace is None
        )
    print(
        f"forgot user {args.user!r} (now {result['user']} in the audit trail): "
        f"{result['sessions']} session(s), {result['events']} event(s) deleted, "
        f"{result['audit_rows']} audit row(s) pseudonymised; "
        "nbmemory memory purge erases the old bytes"
    )
    return 0


def cmd_state_export(args: argparse.Namespace) -> int:
    """Export a session or a namespace to a JSON file (audited, as the API's export is)."""
    with _open(args) as mem:
        summary = mem.transfer.export_json(
            args.output,
            session_id=args.session_id,
            namespace=_session_namespace(mem, args),
            progress=True,
            overwrite=args.force,
        )
    scope = f"session {args.session_id!r} of " if args.session_id else ""
    print(
        f"exported {scope}namespace {summary['namespace']!r}: {summary['events']} event(s) "
        f"({summary['embedded']} with vectors), {summary['sessions']} session(s), "
        f"{summary['facts']} fact(s), {summary['macros']} macro(s), "
        f"{summary['scheduled_tasks']} scheduled task(s), "
        f"{summary['terminal_allowed_prefixes']} allowed prefix(es) -> {summary['path']} ({summary['bytes']:,} bytes, format v{summary['version']})"
    )
    return 0


def cmd_state_import(args: argparse.Namespace) -> int:
    """Import an export file (into a new store too); rows already present are skipped."""
    if not Path(args.input).expanduser().is_file():
        raise InvalidInput(f"no export file {args.input}; pass --input FILE made by state export")
    if not Path(store_path(args)).exists():
        read_export(args.input)  # a file that is no export makes no new store
    with _open(args, create=True) as mem:
        summary = mem.transfer.import_json(args.input, namespace=args.namespace, progress=True)
        _wait_for_embeddings(mem)
        _report_pending(mem)
    where = f" into {', '.join(summary['namespaces'])}" if summary["namespaces"] else ""
    print(
        f"imported{where}: {summary['events_added']} new event(s), "
        f"{summary['events_skipped']} already present; {summary['sessions_added']} new "
        f"session(s), {summary['sessions_skipped']} already present; new: "
        f"{summary['facts_added']} fact(s), {summary['macros_added']} macro(s), "
        f"{summary['scheduled_tasks_added']} scheduled task(s), "
        f"{summary['terminal_allowed_prefixes_added']} allowed prefix(es)"
        + (f"; redacted {summary['redacted']} secret(s)" if summary["redacted"] else "")
    )
    return 0


# -- memory sync -----------------------------------------------------------------------------
def cmd_memory_sync(args: argparse.Namespace) -> int:
    """Sync an AGENTS.md file into the store (changed sections only)."""
    with _open(args) as mem:
        result = mem.agents_md.sync(args.file, namespace=args.namespace)
        _wait_for_embeddings(mem)
        _report_pending(mem)
    print(str(result))
    for label, keys in (("added", result.added), ("updated", result.updated)):
        for key in keys:
            print(f"  {label}: {key}")
    for key in result.removed:
        print(f"  removed: {key}")
    return 0


def cmd_memory_learn(args: argparse.Namespace) -> int:
    """Append a learning to a section of AGENTS.md (redacted), then sync the file."""
    with _open(args) as mem:
        result = mem.agents_md.add_learning(
            args.section, args.text, path=args.file, namespace=args.namespace
        )
        _wait_for_embeddings(mem)
        _report_pending(mem)
    print(f"learning added to {result.path}: section {result.learning}")
    print(str(result))
    return 0


def cmd_memory_purge(args: argparse.Namespace) -> int:
    """Rewrite the store from its live rows (what plain deletion leaves behind goes); on a
    lake, with --expire-snapshots, its files and catalog, expiring every older snapshot."""
    with _open(args) as mem:
        result = mem.purge(
            fact_history=args.fact_history,
            rotate_pseudonym_key=args.rotate_pseudonym_key,
            expire_snapshots=args.expire_snapshots,
        )
    erased = (
        f" ({result['fact_history_erased']} value(s) of deleted facts erased)"
        if args.fact_history
        else ""
    )
    if "snapshots_expired" in result:  # a lake
        print(
            f"purged {result['path']}: {result['rows_flushed']} inlined row(s) written to "
            f"Parquet, {result['files_rewritten']} file(s) rewritten without deleted rows, "
            f"{result['snapshots_expired']} older snapshot(s) expired, "
            f"{result['files_deleted']} old file(s) deleted; deleted and changed text is gone "
            f"from its files and catalog, and time travel starts now{erased}"
        )
        return 0
    print(
        f"rewrote {result['path']}: {result['bytes_before']:,} -> {result['bytes_after']:,} bytes;"
        f" deleted and changed text is gone from the file{erased}"
    )
    return 0


# -- the model: reembed, health ---------------------------------------------------------------
#: What to do about a model that cannot load, in the command line's words.
MODEL_ADVICE = (
    f"Set {ENV_MODEL_PATH} to a local copy of the model (a folder holding model.onnx and "
    "tokenizer.json), or add --embedder hash for the offline test embedder."
)
#: The command that tries failed embeddings again (``health`` names it).
RETRY_FAILED = "nbmemory memory reembed --failed"


def _in_cli_words(exc: BaseException) -> str:
    """The error's message, with a model that cannot load explained for the command line."""
    unavailable = model_unavailable(exc)
    return str(exc) if unavailable is None else unavailable.remedy(MODEL_ADVICE)


def check_model(embedder: Embedder) -> int:
    """The model's dimension; a model that cannot load is a one-line EmbedderError."""
    try:
        return int(embedder.embed(["nbmemory model check"]).shape[1])
    except NbMemoryError as exc:
        raise EmbedderError(_in_cli_words(exc)) from None


def cmd_memory_reembed(args: argparse.Namespace) -> int:
    """Embed rows again: those whose embedding failed (--failed), else those of other models."""
    if args.failed and args.namespace is not None:
        raise InvalidInput(
            "--failed re-queues the failed rows of every namespace; drop --namespace"
        )
    with _open(args) as mem:
        check_model(mem.core.embedder)  # a model that cannot load changes nothing
        if args.failed:
            queued = mem.embeddings.retry_failed()
            what = "whose embedding had failed"
        else:
            queued = mem.embeddings.reembed(namespace=args.namespace)
            what = f"not embedded by {mem.model_name}"
        try:
            _wait_for_embeddings(mem, "re-embedding")
            mem.flush()
        except NbMemoryError as exc:
            raise EmbedderError(_in_cli_words(exc)) from None
        status = mem.status()
    print(
        f"re-queued {queued} event(s) {what}; the store now has {status['embedded']} embedded, "
        f"{status['pending']} pending and {status['failed']} failed"
        + (
            f" (see why with nbmemory health, retry with {RETRY_FAILED})"
            if status["failed"]
            else ""
        )
    )
    return 0


def cmd_health(args: argparse.Namespace) -> int:
    """Check that the store opens, the model loads, and how many embeddings are pending
    (``--component store|embedder|lake`` checks one; ``--verbose`` says more).

    Without a model nothing waits for fastembed's retries: its cache is looked at
    and the hub gets one quick check, so the answer comes in about a second.
    """
    wanted = args.component
    lines: list[tuple[str, str, str, list[str]]] = []
    with contextlib.ExitStack() as stack:
        try:
            mem = stack.enter_context(_open(args, read_only=True))
            status = mem.status()
        except NbMemoryError as exc:
            lines.append(("store", "FAIL", in_cli_words(exc, args), []))
        else:
            if wanted in (None, "store"):
                lines.append(_store_health(mem, status))
            if wanted in (None, "embedder"):
                lines += _embedder_health(mem, status)
            if wanted == "lake" or (wanted is None and mem.store.backend == "ducklake"):
                lines.append(_lake_health(mem, args))
    healthy = all(state != "FAIL" for _, state, _, _ in lines)
    for component, state, detail, more in lines:
        print(f"{component:<11}{state:<6}{detail}")
        if args.verbose:
            for line in more:
                print(f"{'':<17}{line}")
    return 0 if healthy else 1


def _store_health(mem: Memory, status: dict[str, Any]) -> tuple[str, str, str, list[str]]:
    namespaces = status["counts"]["namespace"].nunique() if status["events"] else 0
    detail = (
        f"{mem.store.path} (schema {status['schema_version']}, {status['events']} "
        f"events in {namespaces} namespace(s))"
    )
    more = [f"backend: {mem.store.backend}", f"configuration file: {mem.config_file or 'none'}"]
    if mem.store.backend == "file" and mem.store.path != ":memory:":
        size = Path(mem.store.path).stat().st_size
        more.append(f"size on disk: {size:,} bytes")
    return ("store", "ok", detail, more)


def _embedder_health(mem: Memory, status: dict[str, Any]) -> list[tuple[str, str, str, list[str]]]:
    lines: list[tuple[str, str, str, list[str]]] = []
    try:
        vectors = mem.core.embedder.embed(["nbmemory health check"])
        footprint = mem.status()["embedder"]
        more = [f"{key}: {value}" for key, value in footprint.items()]
        lines.append(("model", "ok", f"{mem.model_name} ({vectors.shape[1]}-d)", more))
    except Exception as exc:  # a diagnosis: whatever the model raises is reported
        lines.append(("model", "FAIL", " ".join(_in_cli_words(exc).split()), []))
    detail = (
        f"{status['embedded']} embedded, {status['pending']} pending (backlog), "
        f"{status['failed']} failed"
    )
    if status["failed"]:
        detail += f"; try them again with {RETRY_FAILED}"
    more = [f"events without text (never embedded): {status.get('without_text', 0)}"]
    lines.append(("embeddings", "WARN" if status["failed"] else "ok", detail, more))
    return lines


def _lake_health(mem: Memory, args: argparse.Namespace) -> tuple[str, str, str, list[str]]:
    if mem.store.backend != "ducklake":
        return (
            "lake",
            "FAIL",
            f"{mem.store.path} is a store file, not a lake; pass --store ducklake:... "
            "(docs/lake.md)",
            [],
        )
    from ..store.lake import maintenance

    try:
        lake = maintenance.status(mem.store)  # type: ignore[arg-type]
    except Exception as exc:  # a diagnosis: the catalog's own words
        return ("lake", "FAIL", " ".join(str(exc).split()), [])
    detail = f"snapshot {lake['current_snapshot']} of {lake['snapshots']}, {lake['events']} events"
    more = [f"data path: {lake['data_path']}", f"files on disk: {lake['files_on_disk']}"]
    more += [f"{table}: {count} file(s)" for table, count in lake["files"].items()]
    return ("lake", "ok", detail, more)


def add_commands(sub: Any) -> None:
    """Register ``state``, ``memory`` and ``health`` on the ``nbmemory`` parser."""
    state = sub.add_parser("state", help="sessions: list, cleanup, delete, forget, export, import")
    state_sub = state.add_subparsers(dest="state_command", metavar="ACTION", required=True)

    listing = state_sub.add_parser("list", help="list sessions")
    _common(listing)
    listing.add_argument("--user", default=None, help="only this user_id")
    listing.add_argument(
        "--tracked-only",
        action="store_true",
        help="only sessions started with start_session (not the session ids that only "
        "appear on events, listed by default as mem.sessions() lists them)",
    )
    listing.add_argument(  # (the default now; kept so that older scripts still run)
        "--with-untracked", action="store_true", help=argparse.SUPPRESS
    )
    listing.add_argument("--json", action="store_true", help="print JSON records")
    listing.set_defaults(func=cmd_state_list)

    cleanup = state_sub.add_parser("cleanup", help="delete expired sessions and old audit rows")
    _common(cleanup)
    cleanup.add_argument("--dry-run", action="store_true", help="list what would go, delete none")
    cleanup.set_defaults(func=cmd_state_cleanup)

    delete = state_sub.add_parser("delete", help="delete one session")
    _common(delete)
    delete.add_argument("--session-id", required=True)
    delete.add_argument("--with-events", action="store_true", help="delete its memories too")
    delete.add_argument(
        "--forget",
        action="store_true",
        help="its memories too, and its id pseudonymised in the audit trail",
    )
    delete.set_defaults(func=cmd_state_delete)

    forget = state_sub.add_parser(
        "forget", help="forget a user: sessions, their events, the ids in the audit trail"
    )
    _common(forget)
    forget.add_argument("--user", required=True, help="the user_id")
    forget.set_defaults(func=cmd_state_forget)

    export = state_sub.add_parser("export", help="export a session or namespace to JSON")
    _common(export)
    export.add_argument("--output", required=True, help="JSON file to write")
    export.add_argument("--session-id", default=None, help="only this session")
    export.add_argument(
        "--force",
        action="store_true",
        help="replace an existing file that is not an export (never a database)",
    )
    export.set_defaults(func=cmd_state_export)

    importer = state_sub.add_parser("import", help="import a JSON export")
    _common(importer)
    importer.add_argument("--input", required=True, help="JSON file made by export")
    importer.set_defaults(func=cmd_state_import)

    memory = sub.add_parser("memory", help="AGENTS.md memory")
    memory_sub = memory.add_subparsers(dest="memory_command", metavar="ACTION", required=True)
    sync = memory_sub.add_parser("sync", help="re-embed the changed sections of AGENTS.md")
    _common(sync)
    sync.add_argument("--file", default="AGENTS.md", help="the file (default ./AGENTS.md)")
    sync.set_defaults(func=cmd_memory_sync)
    learn = memory_sub.add_parser(
        "learn", help="append a learning to a section of AGENTS.md (redacted) and sync it"
    )
    _common(learn)
    learn.add_argument("--section", required=True, help="the heading to append under")
    learn.add_argument("--text", required=True, help="the learning (one list item)")
    learn.add_argument(
        "--file", default=None, help="the AGENTS.md (default: the configured one, else ./AGENTS.md)"
    )
    learn.set_defaults(func=cmd_memory_learn)
    purge = memory_sub.add_parser(
        "purge", help="rewrite the store so deleted or changed text is gone from its bytes"
    )
    _common(purge, namespace=False)
    purge.add_argument(
        "--fact-history", action="store_true", help="first erase the history of deleted facts"
    )
    purge.add_argument(
        "--rotate-pseudonym-key",
        action="store_true",
        help="drop the key of the audit trail's pseudonyms (guesses can no longer be tested)",
    )
    purge.add_argument(
        "--expire-snapshots",
        action="store_true",
        help="a lake: expire every snapshot before now (time travel to them ends), which "
        "erasing there needs",
    )
    purge.set_defaults(func=cmd_memory_purge)
    reembed = memory_sub.add_parser(
        "reembed",
        help="embed again the rows of other models, or with --failed those whose embedding failed",
    )
    _common(reembed)
    reembed.add_argument(
        "--failed",
        action="store_true",
        help="re-queue the rows whose embedding failed (every namespace)",
    )
    reembed.set_defaults(func=cmd_memory_reembed)

    health = sub.add_parser("health", help="store opens, model loads, embedding backlog")
    _common(health, namespace=False)
    health.add_argument(
        "--component",
        choices=("store", "embedder", "lake"),
        default=None,
        help="check one: the store, the embedding model and backlog, or the lake's "
        "catalog (default: all that apply)",
    )
    health.add_argument("--verbose", action="store_true", help="also the details of each component")
    health.set_defaults(func=cmd_health)
