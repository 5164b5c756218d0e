"""PostgreSQL connections for the shared store code: the dialect (times and
JSON as PostgreSQL types, the database's clock for leases), a connection
wrapper that runs ``?``-placeholder SQL, and the migration runner."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from memoro.errors import MigrationError
from memoro.store import backfill, keywords, migrations
from memoro.store.dialect import Dialect

JOBS_CHANNEL = "memoro_jobs"


def _later(seconds: float) -> tuple[str, tuple[object, ...]]:
    # the database's clock: every worker and server compares leases to it
    if seconds == 0:
        return "now()", ()
    return "now() + make_interval(secs => ?)", (seconds,)


def _same(value: Any) -> Any:
    return value


def _time(at: datetime) -> datetime:
    return at


PG = Dialect(
    name="postgres",
    time=_time,
    read_time=_same,
    json=Jsonb,
    read_json=_same,
    later=_later,
    migrations_table="CREATE TABLE IF NOT EXISTS schema_migrations ("
    " version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL)",
)


@lru_cache(maxsize=512)
def _pyformat(sql: str) -> str:
    return sql.replace("?", "%s")


class PgConn:
    """A psycopg connection that also runs the shared code's ``?`` SQL
    (PostgreSQL-only SQL keeps psycopg's ``%s`` and ``%(name)s``)."""

    def __init__(self, raw: psycopg.Connection[Any]) -> None:
        self.raw = raw

    def execute(self, sql: str, params: Any = (), /) -> psycopg.Cursor[Any]:
        # no parameters: the SQL is sent as it is (a % in it stays a %)
        return self.raw.execute(_pyformat(sql), params or None)

    def executemany(self, sql: str, params: Any, /) -> psycopg.Cursor[Any]:
        cursor = self.raw.cursor()
        cursor.executemany(_pyformat(sql), params)
        return cursor


ALIVE: dict[str, Any] = {
    "connect_timeout": 5,
    "keepalives_idle": 5,
    "keepalives_interval": 1,
    "keepalives_count": 3,
    "tcp_user_timeout": 3000,
}
"""Connection options that give up on a database that stops answering
within seconds, for every connection memoro opens: a connection attempt
after connect_timeout, a connection whose peer vanished (no reply, no
reset) after tcp_user_timeout milliseconds of unanswered data or a few
missed keepalives. Without them libpq waits 130 s to connect and the
kernel about 15 minutes on a dead peer."""


def one_line(exc: Exception) -> str:
    """A driver error in one line: libpq's spans several (the reason, a hint)."""
    return " ".join(line.strip() for line in str(exc).splitlines() if line.strip())


def vector_literal(v: npt.NDArray[np.float32]) -> str:
    """A vector as pgvector's text input."""
    return "[" + ",".join(f"{x:.7g}" for x in np.asarray(v, dtype=np.float32)) + "]"


def migrate(url: str, *, upto: int | None = None) -> None:
    """Apply the PostgreSQL migrations (up to version ``upto``), once, under
    an advisory lock (run it as the role that owns memoro's tables)."""
    try:
        with psycopg.connect(url, autocommit=False, row_factory=dict_row) as raw, raw.transaction():
            raw.execute("SELECT pg_advisory_xact_lock(hashtext('memoro.migrate'))")
            conn = PgConn(raw)

            def run(migration: migrations.Migration) -> None:
                raw.execute(migration.sql.encode())
                if migration.name in _STEPS:
                    step, tables = _STEPS[migration.name]
                    _across_users(conn, tables, step)

            migrations.apply(conn, PG, run, upto=upto)
    except psycopg.Error as exc:
        raise MigrationError(f"cannot migrate the PostgreSQL database: {one_line(exc)}") from exc


_OWNED = ("conversations", "turns", "chunks", "postings", "vectors")


def _across_users(conn: PgConn, tables: tuple[str, ...], step: Callable[[PgConn], None]) -> None:
    """Run a migration's Python ``step`` over every user's rows of ``tables``:
    the owner of FORCE'd tables is held by their policies, so that is lifted
    for the step and put back, inside the migration's transaction."""
    for table in tables:
        conn.execute(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY")
    step(conn)
    for table in tables:
        conn.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")


def _backfill_keywords(conn: PgConn) -> None:
    """Terms, postings and per-user statistics for chunks indexed before
    migration 3 (term ids are computed in Python, so SQL alone cannot); the
    vectors of deleted conversations go, as a deletion now does at once."""
    rows = conn.execute(
        "SELECT c.id, c.user_id, c.text, cv.deleted_at IS NULL AS visible FROM chunks c"
        " JOIN turns t ON t.id = c.turn_id"
        " JOIN conversations cv ON cv.user_id = t.user_id AND cv.id = t.conversation_id"
    ).fetchall()
    for row in rows:
        found = keywords.chunk_terms(row["text"])
        conn.execute(
            "UPDATE chunks SET terms = ?, length = ? WHERE id = ?",
            (found.ids.tolist(), found.length, row["id"]),
        )
        if row["visible"]:
            conn.execute(
                "INSERT INTO postings (user_id, term, chunk_id, tf, length)"
                " SELECT ?, t, ?, n, ? FROM unnest(?::bigint[], ?::integer[]) x (t, n)",
                (row["user_id"], row["id"], found.length, *_lists(found)),
            )
    conn.execute(
        "DELETE FROM vectors v USING chunks c, turns t, conversations cv"
        " WHERE v.chunk_id = c.id AND t.id = c.turn_id AND cv.user_id = t.user_id"
        " AND cv.id = t.conversation_id AND cv.deleted_at IS NOT NULL"
    )
    conn.execute(
        "INSERT INTO history_users SELECT c.user_id,"
        " count(*) FILTER (WHERE cv.deleted_at IS NULL),"
        " coalesce(sum(c.length) FILTER (WHERE cv.deleted_at IS NULL), 0)"
        " FROM chunks c JOIN turns t ON t.id = c.turn_id"
        " JOIN conversations cv ON cv.user_id = t.user_id AND cv.id = t.conversation_id"
        " GROUP BY c.user_id"
    )


def _question_terms(conn: PgConn) -> None:
    """Question terms for chunks indexed before migration 19, and no saved
    index copy without them."""
    backfill.question_terms(conn)
    conn.execute("DELETE FROM search_indexes")


def _lists(found: keywords.ChunkTerms) -> tuple[list[int], list[int]]:
    return found.ids.tolist(), found.counts.tolist()


_PACK_BATCH = 1000


def _pack_terms(conn: PgConn) -> None:
    """Every chunk's terms packed as SQLite packs them (migration 12):
    computed from the text again, so both backends hold the same bytes."""
    after = 0
    while rows := conn.execute(
        "SELECT id, text FROM chunks WHERE id > ? ORDER BY id LIMIT ?", (after, _PACK_BATCH)
    ).fetchall():
        packed = [keywords.chunk_terms(r["text"]).pack() for r in rows]
        conn.execute(
            "UPDATE chunks c SET terms = x.terms FROM unnest(?::bigint[], ?::bytea[]) x (id, terms)"
            " WHERE c.id = x.id",
            ([r["id"] for r in rows], packed),
        )
        after = rows[-1]["id"]
    conn.execute("ALTER TABLE chunks ALTER COLUMN terms SET NOT NULL")


_STEPS: dict[str, tuple[Callable[[PgConn], None], tuple[str, ...]]] = {
    "keywords": (_backfill_keywords, _OWNED),
    "search_in_memory": (_pack_terms, ("chunks",)),
    "question_terms": (_question_terms, ("turns", "chunks", "search_indexes")),
}
"""The migrations with a step in Python (term ids are computed in Python,
so SQL alone cannot), and the tables each reads and writes for every user."""
