"""PostgreSQL's three roles (D4 of the hardening issue, docs/deploy.md): the
app role that serves requests sees only the user its transaction names — in
every table, through every function of memoro's — while members of
memoro_worker index, purge and run maintenance across users."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from memoro.errors import StoreError
from memoro.service import Memoro
from memoro.settings import Settings
from memoro.store.postgres import PostgresStore
from memoro.store.postgres.local import APP_ROLE
from memoro.testing import HashEmbedder
from tests import postgres as pg

# every function memoro's migrations create, called as the app role would
CROSS_USER_FUNCTIONS = {
    "memoro_vector_models": "SELECT * FROM memoro_vector_models()",
    "memoro_chunks_missing": "SELECT * FROM memoro_chunks_missing('hash', 100)",
    "memoro_count_missing": "SELECT * FROM memoro_count_missing('hash')",
}
# memoro_block_changed is a trigger (not callable): it announces a digest of
# the user whose block changed, never the text; memoro_next_generation draws
# a number from a sequence
HARMLESS = {"memoro_is_worker", "memoro_block_changed", "memoro_next_generation"}
# one user's rows, with the caller's rights: what the caller could read anyway
ONE_USER = {"memoro_read_block"}
# across users on purpose, for monitoring: counts and ages, no user, payload or error
COUNTS_ONLY = {
    "memoro_queue_stats": ["status", "jobs", "oldest_seconds", "oldest_live_seconds"],
    "memoro_review_stats": ["proposals", "reviewed_users", "failing_users", "failures"],
}


@pytest.fixture
def roles(postgres_server: Any, tmp_path: Path) -> Iterator[tuple[Memoro, Memoro]]:
    """(a server on the app role, a worker on the worker role), with ann's
    and bob's turns recorded and indexed, and one conversation of each
    deleted but not yet purged."""
    pg.clean(postgres_server.admin)
    settings = Settings(home=tmp_path)
    app = Memoro(
        PostgresStore(postgres_server.app), settings, embedder=HashEmbedder(), worker=False
    )
    worker = Memoro(
        PostgresStore(postgres_server.worker), settings, embedder=HashEmbedder(), worker=False
    )
    for user in ("ann", "bob"):
        app.record_turn(user, "kept", f"{user}'s heron notes", "ok")
        app.record_turn(user, "gone", f"{user}'s deleted notes", "ok")
    worker.index_pending()
    for user in ("ann", "bob"):
        app.delete_conversation(user, "gone")
    yield app, worker
    app.close()
    worker.close()


def test_the_app_role_cannot_read_across_users_through_any_function(
    postgres_server: Any, roles: tuple[Memoro, Memoro]
) -> None:
    with psycopg.connect(postgres_server.app, autocommit=True) as conn:
        defined = {
            row[0]
            for row in conn.execute(
                "SELECT proname FROM pg_proc WHERE proname LIKE 'memoro%%'"
                " AND pronamespace = 'public'::regnamespace"
            )
        }
        # a new one must be listed
        assert defined == set(CROSS_USER_FUNCTIONS) | HARMLESS | set(COUNTS_ONLY) | ONE_USER
        for name, columns in COUNTS_ONLY.items():
            found = conn.execute(f"SELECT * FROM {name}()")
            assert [c.name for c in found.description or ()] == columns
        stats = conn.execute("SELECT * FROM memoro_queue_stats()").fetchall()
        assert sum(row[1] for row in stats) == 2  # ann's and bob's purges
        for name, call in CROSS_USER_FUNCTIONS.items():
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied"):
                conn.execute(call)
            conn.execute("SELECT set_config('memoro.user_id', 'ann', false)")
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(call)  # naming a user does not open the door either
            conn.execute("SELECT set_config('memoro.user_id', '', false)")
            assert name
    app, _ = roles
    app.write_block("ann", "ann's block", writer="user")
    app.write_block("bob", "bob's block", writer="user")
    with psycopg.connect(postgres_server.app, autocommit=True) as conn:
        rows = conn.execute("SELECT user_id, text FROM memoro_read_block('ann')").fetchall()
        assert rows == [("ann", "ann's block")]
        after = conn.execute("SELECT count(*) FROM memory_blocks").fetchone()
        assert after == (0,)  # the user it set lasted only for its own statement
    assert app.read_block("bob").text == "bob's block"  # type: ignore[union-attr]
    with pytest.raises(StoreError, match="run it as the worker role"):
        app.index_status()
    with pytest.raises(StoreError, match="run it as the worker role"):
        app.reindex()
    with psycopg.connect(postgres_server.admin, autocommit=True) as conn:
        conn.execute(
            f"GRANT EXECUTE ON FUNCTION memoro_chunks_missing(text, integer) TO {APP_ROLE}"
        )
    try:  # granted by mistake, the function still finds no user to visit
        with psycopg.connect(postgres_server.app) as conn:
            assert conn.execute(CROSS_USER_FUNCTIONS["memoro_chunks_missing"]).fetchall() == []
    finally:
        with psycopg.connect(postgres_server.admin, autocommit=True) as conn:
            conn.execute(
                f"REVOKE EXECUTE ON FUNCTION memoro_chunks_missing(text, integer) FROM {APP_ROLE}"
            )


def test_the_app_role_sees_only_its_users_jobs_and_keyword_statistics(
    postgres_server: Any, roles: tuple[Memoro, Memoro]
) -> None:
    with psycopg.connect(postgres_server.app) as conn:
        for table in ("jobs", "history_users"):
            assert conn.execute(f"SELECT count(*) FROM {table}").fetchone() == (0,)
        conn.execute("SELECT set_config('memoro.user_id', 'ann', true)")
        assert conn.execute("SELECT DISTINCT user_id FROM jobs").fetchall() == [("ann",)]
        assert conn.execute("SELECT user_id FROM history_users").fetchall() == [("ann",)]
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(
                "INSERT INTO jobs (kind, user_id, payload, run_after, created_at)"
                " VALUES ('purge_conversation', 'bob', '{}', now(), now())"
            )
    with psycopg.connect(postgres_server.worker) as conn:
        users = conn.execute("SELECT DISTINCT user_id FROM jobs ORDER BY 1").fetchall()
        assert users == [("ann",), ("bob",)]


def test_a_server_on_the_app_role_serves_while_a_worker_role_indexes_and_purges(
    roles: tuple[Memoro, Memoro], caplog: pytest.LogCaptureFixture
) -> None:
    app, worker = roles
    assert app.store.runs_jobs is False and worker.store.runs_jobs is True  # type: ignore[attr-defined]
    assert app.index_pending() == 0  # it sees no job, and says why
    assert "not a member of memoro_worker" in caplog.text
    assert [h.conversation_id for h in app.search("ann", "notes")] == ["kept"]
    assert worker.index_pending() == 2  # the two purges
    assert worker.index_status()["chunks"] == 2
    assert worker.index_status()["jobs"] == {"pending": 0, "running": 0, "failed": 0}
    assert [c.id for c in app.list_conversations("bob")] == ["kept"]
    app.write_block("ann", "Name: Ann", writer="user")
    assert app.delete_block("ann", writer="user").deleted


def test_only_a_worker_sees_other_users_stale_uploads_and_only_those(
    postgres_server: Any, roles: tuple[Memoro, Memoro]
) -> None:
    """A day-old upload that never finished is visible across users to
    memoro_worker alone, which deletes it; a fresh one is not (D2)."""
    app, worker = roles
    for name in ("cut", "arriving"):
        app.store.create_upload("bob", name, "export.zip", "auto")
        app.store.add_upload_part("bob", name, 0, b"bob's text")
    with psycopg.connect(postgres_server.admin, autocommit=True) as conn:
        conn.execute("UPDATE imports SET created_at = now() - interval '25 hours' WHERE id = 'cut'")
    with psycopg.connect(postgres_server.app) as conn:
        conn.execute("SELECT set_config('memoro.user_id', 'ann', true)")
        for table in ("imports", "import_parts"):
            assert conn.execute(f"SELECT count(*) FROM {table}").fetchone() == (0,)
    assert app.store.drop_stale_uploads() == 0  # the app role finds none to delete
    with psycopg.connect(postgres_server.worker) as conn:
        conn.execute("SELECT set_config('memoro.user_id', 'ann', true)")
        seen = conn.execute("SELECT id FROM imports").fetchall()
        assert seen == [("cut",)]  # not the upload still arriving
    assert worker.store.drop_stale_uploads() == 1
    assert app.store.get_import("bob", "cut") is None
    assert app.store.upload_part("bob", "arriving", 0) == b"bob's text"


def test_the_app_role_cannot_attach_parts_to_another_users_upload(
    postgres_server: Any, roles: tuple[Memoro, Memoro]
) -> None:
    """A foreign key is checked without row-level security: naming bob's
    upload (by its random id) from ann's transaction must still fail."""
    app, _ = roles
    app.store.create_upload("bob", "bobs-upload", "export.zip", "auto")
    with (
        psycopg.connect(postgres_server.app) as conn,
        pytest.raises(psycopg.errors.ForeignKeyViolation),
    ):
        conn.execute("SELECT set_config('memoro.user_id', 'ann', true)")
        conn.execute(
            "INSERT INTO import_parts (import_id, user_id, part, data)"
            " VALUES ('bobs-upload', 'ann', 0, 'planted')"
        )
    assert app.store.upload_part("bob", "bobs-upload", 0) is None


def test_a_review_proposal_is_its_users_alone_even_for_a_worker(
    postgres_server: Any, roles: tuple[Memoro, Memoro]
) -> None:
    """M12: a proposal sits behind the block's forced policy; a worker sees
    every user's review state (to find who is due) but no proposal; the
    counts reach monitoring from any role."""
    from memoro import block
    from memoro.models import Proposal
    from memoro.turns import now

    app, worker = roles
    for user in ("ann", "bob"):
        text = f"{user}'s proposed heron line"
        app.store.restore_proposal(Proposal(user, text, block.etag(None), (), (text,), now(), 1, 0))
    assert app.proposal("ann").block == "ann's proposed heron line"  # type: ignore[union-attr]
    for url in (postgres_server.app, postgres_server.worker):
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT count(*) FROM memory_proposals").fetchone() == (0,)
            conn.execute("SELECT set_config('memoro.user_id', 'ann', true)")
            rows = conn.execute("SELECT user_id FROM memory_proposals").fetchall()
            assert rows == [("ann",)]
    with psycopg.connect(postgres_server.app) as conn:
        assert conn.execute("SELECT count(*) FROM review_state").fetchone() == (0,)
    with psycopg.connect(postgres_server.worker) as conn:
        users = conn.execute("SELECT user_id FROM review_state ORDER BY 1").fetchall()
        assert users == [("ann",), ("bob",)]
    assert app.store.review_stats().proposals == 2
    assert worker.store.review_stats().proposals == 2
