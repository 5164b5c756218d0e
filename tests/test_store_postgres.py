"""PostgreSQL-only behaviour: row-level security is a second wall between
users, even for a query that forgets its user filter (D2)."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from memoro.models import AuditRecord, Operation, Writer
from memoro.store.postgres import PostgresStore, migrate
from tests import postgres as pg


@pytest.fixture
def store(postgres: tuple[str, str]) -> Iterator[PostgresStore]:
    admin, app = postgres
    pg.clean(admin)
    backend = PostgresStore(app)
    for user in ("ann", "bob"):
        with backend.block_transaction(user) as tx:
            tx.put(f"{user}'s block", AuditRecord(Writer.USER, Operation.WRITE, (), ("x",), 0, 1))
    yield backend
    backend.close()


def test_a_query_without_a_user_filter_sees_only_the_current_user(store: PostgresStore) -> None:
    with store.transaction("ann") as conn:
        blocks = conn.execute("SELECT user_id, text FROM memory_blocks").fetchall()
        audit = conn.execute("SELECT DISTINCT user_id FROM memory_audit").fetchall()
    assert blocks == [{"user_id": "ann", "text": "ann's block"}]
    assert audit == [{"user_id": "ann"}]


def test_with_no_user_set_a_query_sees_nothing(store: PostgresStore) -> None:
    with store.pool.connection() as conn:
        assert conn.execute("SELECT * FROM memory_blocks").fetchall() == []
        assert conn.execute("SELECT * FROM memory_audit").fetchall() == []


def test_a_row_of_another_user_cannot_be_written(store: PostgresStore) -> None:
    with pytest.raises(psycopg.errors.InsufficientPrivilege), store.transaction("ann") as conn:
        conn.execute(
            "INSERT INTO memory_blocks VALUES ('bob', 'hijack', now(), 'model')"
            " ON CONFLICT (user_id) DO UPDATE SET text = excluded.text"
        )
    assert store.read_block("bob").text == "bob's block"  # type: ignore[union-attr]


def test_memoro_connects_as_a_role_without_bypassrls(store: PostgresStore) -> None:
    with store.pool.connection() as conn:
        row = conn.execute(
            "SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user"
        ).fetchone()
    assert row == {"rolsuper": False, "rolbypassrls": False}


def test_migrations_run_once(postgres: tuple[str, str]) -> None:
    admin, _ = postgres
    migrate(admin)  # already applied by the session fixture: nothing happens
    with psycopg.connect(admin) as conn:
        rows = conn.execute("SELECT version, name FROM schema_migrations").fetchall()
    assert rows == [(1, "block")]
