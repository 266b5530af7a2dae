"""The store on DuckLake: one memory shared by many processes and hosts.

* :mod:`.url` — the ``ducklake:`` address and its data path;
* :mod:`.extensions` — DuckDB's ``ducklake``/``postgres`` extensions, loaded privately;
* :mod:`.tables` — the lake's tables, made from the file's declarations;
* :mod:`.keyed_writes` — the store's writes by key (no ``RETURNING``, ``ON CONFLICT``);
* :mod:`.vector_marks` — vectors appended, never marked on the event row;
* :mod:`.store` — :class:`LakeStore`: connection, ids, conflicts, transactions;
* :mod:`.feed` — the change feed: other writers' snapshots, row by row, to the caches;
* :mod:`.lake_errors` — DuckDB's errors about the lake as one line naming the fix;
* :mod:`.first_open` — a brand-new lake made by one process while the others wait;
* :mod:`.maintenance` — status, snapshots, compaction, expiry and erasure (purge);
* :mod:`.fence` — purge, compaction and expiry between other writers' transactions;
* :mod:`.transfer` — :func:`push` a file store into a new lake, :func:`pull` a lake
  into a new file, every row and vector bit.
"""

from __future__ import annotations

from .store import LakeStore
from .transfer import Copied, pull, push
from .url import LakeUrl, is_lake_url, parse_lake_url

__all__ = ["Copied", "LakeStore", "LakeUrl", "is_lake_url", "parse_lake_url", "pull", "push"]
