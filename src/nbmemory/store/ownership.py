"""``store.ownership``: whose DuckDB file this is, decided before a byte is written.

nbmemory writes a file only when it is nbmemory's:

* marked as ours: an ``nbmemory_meta (key PRIMARY KEY, value)`` table whose
  ``format`` is ``'nbmemory'`` (every nbmemory writes it with the schema version; a
  store made before the marker records its ``schema_version`` only);
* new: nothing in it, or only nbmemory's own sequences (a copy from a lake makes
  them before the tables: :func:`nbmemory.store.lake.transfer.pull`);
* the Rust agent's v0.8 store: a ``messages`` table with that store's columns,
  beside its other tables (:data:`LEGACY_TABLES`), migrated into ``events``.

Anything else a user made, in any schema -- a table, a view, a sequence, a macro,
a type, a schema -- makes it another application's file: refused with one line,
nothing written, unless ``adopt=True`` asks to add nbmemory's tables beside the
others (never where a name of nbmemory's own is taken).  Every schema and every
kind of object is looked at because an application may keep its tables in a
schema of its own, or hold only views, macros or types: a file whose ``main``
schema has no table is not an empty one.
"""

from __future__ import annotations

import duckdb

from ..errors import StoreError
from .backend import MigratingStore

#: The marker ``nbmemory_meta.format`` holds in every nbmemory file.
FORMAT = "nbmemory"
#: The table that marks a file as nbmemory's.
META = "nbmemory_meta"

#: Tables of nbmemory's own (a foreign file using one of these names is never adopted).
OWN_TABLES = frozenset(
    {
        META,
        "nbmemory_migrations",
        "events",
        "event_vectors",
        "event_archive",
        "event_vector_archive",
        "facts",
        "fact_history",
        "macros",
        "scheduled_tasks",
        "terminal_allowed_prefixes",
        "sessions",
        "audit_log",
    }
)
#: The sequences nbmemory's tables draw their ids from (the migrations make them).
OWN_SEQUENCES = frozenset({"events_seq", "facts_id_seq", "macros_id_seq", "audit_id_seq"})

#: The Rust agent's v0.8 table, before ``events`` replaced it (kept, renamed, after copying).
LEGACY_MESSAGES = "messages"
#: The columns of the v0.8 ``messages`` table that its copy into ``events`` needs: a
#: ``messages`` table without them is another application's, never migrated.
LEGACY_COLUMNS = ("id", "session_id", "role", "content")
#: What the Rust agent's v0.8 store may hold: it is migrated, not refused.
LEGACY_TABLES = frozenset(
    {LEGACY_MESSAGES, "facts", "macros", "scheduled_tasks", "terminal_allowed_prefixes"}
)

#: Kinds of object whose names share one namespace with tables (a clash with ours).
_RELATIONS = ("table", "view", "sequence")
#: The order kinds are named in a refusal.
_KINDS = ("table", "view", "sequence", "macro", "type", "schema")

Object = tuple[str, str, str]


def owner(store: MigratingStore, *, adopt: bool = False, read_only: bool = False) -> str:
    """What the file is: ``"nbmemory"`` (marked as ours), ``"new"`` (nothing of anyone's
    yet), ``"legacy"`` (the Rust agent's v0.8 store) or ``"adopted"`` (another
    application's, and ``adopt=True``).  Any other file is refused with a one-line
    :class:`StoreError`, before anything is written (read-only, even with ``adopt``:
    adopting a file writes nbmemory's tables into it)."""
    if META in store.catalog.tables():
        problem = _marker_problem(store)
        if problem is None:
            return "nbmemory"
        raise _not_ours(store, problem, [], read_only, adoptable=False)
    objects = store.catalog.objects()
    foreign = [o for o in objects if not _own_sequence(o)]
    if not foreign:
        return "new"
    if all(_legacy(o) for o in foreign) and legacy_messages(store):
        return "legacy"
    clash = [o for o in objects if o[0] in _RELATIONS and o[1] == "main" and _ours(o[2])]
    if adopt and not clash and not read_only:
        return "adopted"
    raise _not_ours(store, _listed(foreign), clash, read_only)


def legacy_messages(store: MigratingStore) -> bool:
    """Whether the main schema has the Rust agent's v0.8 ``messages`` table: one with the
    columns its copy into ``events`` reads (not merely a table of that name)."""
    return set(LEGACY_COLUMNS) <= set(store.catalog.columns(LEGACY_MESSAGES))


def _marker_problem(store: MigratingStore) -> str | None:
    """Why ``nbmemory_meta`` is not the one nbmemory writes (None: it is ours)."""
    columns = store.catalog.columns(META)
    if not {"key", "value"} <= set(columns):
        return f"its {META} has the columns {', '.join(columns[:6])}, not key and value"
    if store.catalog.primary_key(META) != ["key"]:
        return f"its {META} has no primary key on key"
    try:
        marker = store.meta.get("format")
        version = store.meta.get("schema_version")
    except (duckdb.BinderException, duckdb.ConversionException):
        return f"the key of its {META} is not text"
    if marker is None:
        # an nbmemory from before the marker recorded its schema version only
        return None if version is not None else f"its {META} holds no format marker"
    if marker != FORMAT:
        return f"its {META} says format {str(marker)[:40]!r}, not {FORMAT!r}"
    return None


def _not_ours(
    store: MigratingStore,
    what: str,
    clash: list[Object],
    read_only: bool,
    *,
    adoptable: bool = True,
) -> StoreError:
    """The one-line refusal of another application's file.  ``clash``: its objects whose
    names are nbmemory's own; with any, or not ``adoptable``, ``adopt=True`` cannot help."""
    if read_only:
        return StoreError(
            f"{store.path} is another application's DuckDB file, not an nbmemory store "
            f"({what}); nothing was changed. Pass the path of an nbmemory file."
        )
    ordered = sorted(clash, key=lambda o: (_KINDS.index(o[0]), o[2]))
    own = ", ".join(f"{name} {kind}" for kind, _, name in ordered)
    advice = (
        "Pass a new file name, or Memory(path, adopt=True) to add nbmemory's tables "
        "beside the others."
        if adoptable and not clash
        else "Use another path for nbmemory."
    )
    return StoreError(
        f"{store.path} is another application's DuckDB file"
        f"{f' with its own {own}' if own else ''} ({what}); nothing was changed. {advice}"
    )


def _listed(objects: list[Object]) -> str:
    """``tables: orders, crm.customers; views: totals`` (six of a kind at most; a schema
    is named only when nothing else names it)."""
    filled = {schema for kind, schema, _ in objects if kind != "schema"}
    by_kind: dict[str, list[str]] = {}
    for kind, schema, name in objects:
        if kind == "schema" and schema in filled:
            continue
        shown = name if kind == "schema" or schema == "main" else f"{schema}.{name}"
        by_kind.setdefault(kind, []).append(shown)
    parts = []
    for kind in _KINDS:
        names = by_kind.get(kind, [])
        if names:
            more = f" and {len(names) - 6} more" if len(names) > 6 else ""
            parts.append(f"{kind}s: {', '.join(names[:6])}{more}")
    return "; ".join(parts)


def _ours(name: str) -> bool:
    return name in OWN_TABLES or name in OWN_SEQUENCES


def _own_sequence(obj: Object) -> bool:
    kind, schema, name = obj
    return kind == "sequence" and schema == "main" and name in OWN_SEQUENCES


def _legacy(obj: Object) -> bool:
    kind, schema, name = obj
    return kind == "table" and schema == "main" and name in LEGACY_TABLES
