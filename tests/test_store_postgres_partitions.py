"""The large tables are ready for partitioning by user: every key of turns,
chunks and vectors holds user_id, so PostgreSQL's own hash
partitioning (and Citus, which needs the same) takes them as they are, and
memoro works unchanged on top — with the same results as on SQLite and each
user's rows only ever seen by that user (C5, S1, D5)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from memoro.service import Memoro
from memoro.settings import Settings
from memoro.store.postgres import PostgresStore
from memoro.store.postgres.local import APP_ROLE, OWNER_ROLE, WORKER_ROLE, prepare
from memoro.store.sqlite import SqliteStore
from memoro.testing import HashEmbedder
from tests import postgres as pg

LARGE = ("turns", "chunks", "vectors")
PARTITIONS = 4
POLICY = "user_id = current_setting('memoro.user_id', true)"


def _partition_by_user(owner: str) -> None:
    """Rebuild the large tables as tables hash-partitioned by user_id, with
    the same columns, defaults, keys, indexes, foreign keys and policies."""
    with psycopg.connect(owner, autocommit=False) as conn, conn.transaction():
        for table in LARGE:
            conn.execute(f"ALTER TABLE {table} RENAME TO {table}_plain")
            conn.execute(
                f"CREATE TABLE {table} (LIKE {table}_plain INCLUDING DEFAULTS"
                " INCLUDING CONSTRAINTS INCLUDING INDEXES) PARTITION BY HASH (user_id)"
            )
            for n in range(PARTITIONS):
                conn.execute(
                    f"CREATE TABLE {table}_{n} PARTITION OF {table}"
                    f" FOR VALUES WITH (MODULUS {PARTITIONS}, REMAINDER {n})"
                )
            conn.execute(f"ALTER SEQUENCE {table}_id_seq OWNED BY {table}.id")
            conn.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
            conn.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
            conn.execute(
                f"CREATE POLICY one_user ON {table} USING ({POLICY}) WITH CHECK ({POLICY})"
            )
        conn.execute(f"DROP TABLE {', '.join(t + '_plain' for t in LARGE)} CASCADE")
        conn.execute(
            "ALTER TABLE turns ADD FOREIGN KEY (user_id, conversation_id)"
            " REFERENCES conversations (user_id, id)"
        )
        conn.execute(
            "ALTER TABLE chunks ADD FOREIGN KEY (user_id, turn_id) REFERENCES turns (user_id, id)"
        )
        conn.execute(
            "ALTER TABLE vectors ADD FOREIGN KEY (user_id, chunk_id)"
            " REFERENCES chunks (user_id, id)"
        )
        both = f"{WORKER_ROLE}, {APP_ROLE}"
        conn.execute(
            f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {both}"
        )
        conn.execute(f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {both}")


@pytest.fixture
def partitioned(postgres: tuple[str, str]) -> Iterator[str]:
    """The worker role's URL on a fresh database whose large tables are
    hash-partitioned by user."""
    admin, _ = postgres
    name = "memoro_partitioned"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")
    roles = prepare(pg.in_database(admin, name))
    _partition_by_user(pg.as_role(roles.admin, OWNER_ROLE))
    yield roles.worker
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


USERS = [f"user-{n}" for n in range(8)]


def _fill(memoro: Memoro) -> None:
    for user in USERS:
        for day in range(3):
            memoro.record_turn(
                user,
                f"{user}-day{day}",
                f"What did {user} plan for day {day}? The trip to Lisbon, tickets ZX-{day}",
                f"On day {day} {user} books a train, then dinner with the team",
            )
    memoro.index_pending()
    memoro.delete_conversation(USERS[0], f"{USERS[0]}-day1")
    memoro.index_pending()  # the purge


def _results(memoro: Memoro) -> dict[str, list[tuple[str, str]]]:
    return {
        user: [
            (hit.conversation_id, hit.text)
            for hit in memoro.search(user, "Lisbon train tickets ZX-2 dinner", limit=10)
        ]
        for user in USERS
    }


def test_memoro_runs_on_tables_hash_partitioned_by_user(partitioned: str, tmp_path: Path) -> None:
    on_partitions = Memoro(
        PostgresStore(partitioned), Settings(home=tmp_path), embedder=HashEmbedder(), worker=False
    )
    on_sqlite = Memoro(
        SqliteStore(tmp_path / "memoro.db"),
        Settings(home=tmp_path),
        embedder=HashEmbedder(),
        worker=False,
    )
    try:
        for memoro in (on_partitions, on_sqlite):
            _fill(memoro)
        found = _results(on_partitions)
        assert found == _results(on_sqlite)
        for user, hits in found.items():
            assert hits and all(conversation.startswith(f"{user}-") for conversation, _ in hits)
        assert f"{USERS[0]}-day1" not in {c for c, _ in found[USERS[0]]}
        assert on_partitions.store.vector_models() == {"test/hash": len(USERS) * 3 - 1}
    finally:
        on_partitions.close()
        on_sqlite.close()
    spread = _rows_per_partition(partitioned)
    for table in LARGE:
        used = [n for n in spread[table] if n > 0]
        assert len(used) >= 2, (table, spread[table])  # the users landed in several partitions


def _rows_per_partition(url: str) -> dict[str, list[int]]:
    """Rows in each partition, counted by a superuser (no policy applies)."""
    admin = pg.as_role(url, "postgres")
    counts: dict[str, list[int]] = {}
    with psycopg.connect(admin) as conn:
        for table in LARGE:
            rows: list[Any] = [
                conn.execute(f"SELECT count(*) FROM {table}_{n}").fetchone()
                for n in range(PARTITIONS)
            ]
            counts[table] = [int(r[0]) for r in rows]
    return counts
