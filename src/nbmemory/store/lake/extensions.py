"""DuckDB's ``ducklake`` extension and the ones it needs, loaded from a private folder.

DuckDB downloads extensions from its own repository on first use; where that is
not reachable, the same extensions come from PyPI as ``duckdb-extension-*``
packages (built for one DuckDB release each: ``pip install 'nbmemory[lake]'``).
Either way they are kept in nbmemory's own ``extension_directory``
(``$NBMEMORY_EXTENSION_DIR``, or ``~/.cache/nbmemory/duckdb-extensions``), never
in the user's ``~/.duckdb``.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import shutil
from pathlib import Path

import duckdb

from ...errors import StoreError
from ..files import memory_limit, quiet

#: What ``LOAD`` takes -> the PyPI package that carries the extension.
PACKAGES = {
    "parquet": "duckdb_extension_parquet",
    "json": "duckdb_extension_json",
    "postgres_scanner": "duckdb_extension_postgres",
    "ducklake": "duckdb_extension_ducklake",
}
#: What each catalog kind needs loaded, in order.
NEEDED = {
    "postgres": ("parquet", "json", "postgres_scanner", "ducklake"),
    "sqlite": ("parquet", "json", "sqlite_scanner", "ducklake"),
    "duckdb": ("parquet", "json", "ducklake"),
}


def extension_directory() -> str:
    """nbmemory's private folder of DuckDB extensions."""
    configured = os.environ.get("NBMEMORY_EXTENSION_DIR")
    if configured:
        return os.path.abspath(os.path.expanduser(configured))
    return str(Path("~/.cache/nbmemory/duckdb-extensions").expanduser())


def connect() -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB whose extensions come from :func:`extension_directory`."""
    con = duckdb.connect(
        ":memory:",
        config={
            "extension_directory": extension_directory(),
            "autoinstall_known_extensions": False,
            "memory_limit": memory_limit(),
        },
    )
    quiet(con)
    return con


def load(con: duckdb.DuckDBPyConnection, catalog: str) -> None:
    """Load what a ``catalog`` lake needs; a one-line :class:`StoreError` when it cannot."""
    for name in NEEDED[catalog]:
        try:
            con.execute(f"LOAD {name}")
            continue
        except duckdb.Error:
            pass
        if _from_package(con, name):
            continue
        try:  # a machine with network: DuckDB's own repository
            con.execute(f"INSTALL {name}")
            con.execute(f"LOAD {name}")
        except duckdb.Error as exc:
            raise StoreError(
                f"DuckLake needs DuckDB's {name!r} extension, which DuckDB "
                f"{duckdb.__version__} could not load or download "
                f"({str(exc).strip().splitlines()[0][:100]}); install it with "
                "pip install 'nbmemory[lake]' (extension wheels exist for duckdb 1.5.5)"
            ) from None


def _from_package(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    """Copy the extension from its PyPI package into the private folder and load it."""
    package = PACKAGES.get(name)
    spec = importlib.util.find_spec(package) if package else None
    if spec is None or spec.origin is None:
        return False
    version = "v" + duckdb.__version__
    found = glob.glob(
        os.path.join(os.path.dirname(spec.origin), "extensions", version, "*.duckdb_extension")
    )
    if not found:
        return False
    platform = con.execute("PRAGMA platform").fetchall()[0][0]
    folder = os.path.join(extension_directory(), version, platform)
    os.makedirs(folder, exist_ok=True)
    # the postgres package's file is named postgres, but DuckDB loads it as postgres_scanner
    target = os.path.join(folder, f"{name}.duckdb_extension")
    if not os.path.exists(target):
        partial = f"{target}.{os.getpid()}.part"
        shutil.copyfile(found[0], partial)
        os.replace(partial, target)
    try:
        con.execute(f"LOAD {name}")
    except duckdb.Error:
        return False
    return True
