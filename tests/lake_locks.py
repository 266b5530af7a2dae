"""What PostgreSQL's lock table says about a lake's advisory locks (lake tests)."""

from __future__ import annotations


def advisory_waiters(lake_url: str, classid: int) -> int:
    """Requests for the lake's advisory lock of class ``classid`` (the fence's, the
    turn's) that PostgreSQL has queued and not granted yet."""
    from nbmemory.store.lake import extensions, parse_lake_url

    address = parse_lake_url(lake_url)
    con = extensions.connect()
    try:
        extensions.load(con, "postgres")
        dsn = address.attach[len("ducklake:postgres:") :].replace("'", "''")
        con.execute(f"ATTACH '{dsn}' AS pg (TYPE postgres, READ_ONLY)")
        [[count]] = con.execute(
            "SELECT * FROM postgres_query('pg', ?)",
            [f"SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
             f" AND classid = {int(classid)}"],
        ).fetchall()  # fmt: skip
        return int(count)
    finally:
        con.close()
