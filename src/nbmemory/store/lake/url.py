"""A lake's address: ``ducklake:<catalog>`` plus the folder its Parquet files live in.

``ducklake:postgres:dbname=nbm host=127.0.0.1 port=5432 user=nbm`` is DuckDB's own
form (what follows ``postgres:`` is a libpq connection string).  The data path is
needed only when the lake is created (DuckLake records it in the catalog); it can
be passed apart (``Memory(url, data_path=...)``, ``--data-path``,
``$NBMEMORY_DATA_PATH``) or inside the string as ``data_path=/team/lake``, so one
string is enough for ``$NBMEMORY_PATH`` and ``%config MemoryMagics.path``.
``metadata_schema=NAME`` keeps the lake's catalog tables in their own schema of
the catalog database (several lakes in one PostgreSQL database).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from ...errors import StoreError

SCHEME = "ducklake:"
#: Catalog databases DuckLake can keep its metadata in, by their prefix in the URL.
CATALOGS = ("postgres:", "sqlite:", "duckdb:")

_DATA_PATH = re.compile(r"(?:^|\s)data_path=(\S+)")
_METADATA_SCHEMA = re.compile(r"(?:^|\s)metadata_schema=(\w+)")
_SECRET = re.compile(r"(password\s*=\s*)(\S+)", re.IGNORECASE)


#: The name the lake is attached under in each process's DuckDB.
LAKE = "lake"


def is_lake_url(path: object) -> bool:
    """Whether ``path`` names a DuckLake (``ducklake:...``) rather than a DuckDB file."""
    return isinstance(path, str) and path.strip().lower().startswith(SCHEME)


@dataclass(frozen=True)
class LakeUrl:
    """A parsed ``ducklake:`` address."""

    #: What DuckDB's ATTACH takes: ``ducklake:postgres:dbname=...`` (no data_path).
    attach: str
    #: ``postgres``, ``sqlite`` or ``duckdb``.
    catalog: str
    #: Where new Parquet files go (None: as the catalog already records).
    data_path: str | None
    #: The schema of the catalog database that holds the lake's tables (None: DuckLake's).
    metadata_schema: str | None = None

    @property
    def shown(self) -> str:
        """The address with any password hidden (for messages and reprs)."""
        return _SECRET.sub(r"\1***", self.attach)


def parse_lake_url(url: str, data_path: str | os.PathLike[str] | None = None) -> LakeUrl:
    """Split a ``ducklake:`` URL; a one-line :class:`StoreError` says what is wrong."""
    text = url.strip()
    if not is_lake_url(text):
        raise StoreError(f"{url!r} is not a lake address; it must start with {SCHEME!r}")
    rest = text[len(SCHEME) :]
    found = _DATA_PATH.search(rest)
    if found:
        if data_path is None:
            data_path = found.group(1)
        rest = (rest[: found.start()] + rest[found.end() :]).strip()
    schema = _METADATA_SCHEMA.search(rest)
    if schema:
        rest = (rest[: schema.start()] + rest[schema.end() :]).strip()
    catalog = next((c for c in CATALOGS if rest.lower().startswith(c)), None)
    if catalog is None:
        shown = _SECRET.sub(r"\1***", url)
        raise StoreError(
            f"the lake address {shown!r} names no catalog; write "
            "ducklake:postgres:dbname=... host=... (or ducklake:sqlite:FILE)"
        )
    if data_path is None:
        data_path = os.environ.get("NBMEMORY_DATA_PATH") or None
    if data_path is not None:
        data_path = os.path.join(os.path.abspath(os.path.expanduser(str(data_path))), "")
    return LakeUrl(
        SCHEME + rest, catalog.rstrip(":"), data_path, schema.group(1) if schema else None
    )


def sql_literal(text: str) -> str:
    """A SQL string literal, for ATTACH and its options (which take no parameters)."""
    return "'" + text.replace("'", "''") + "'"
