"""PostgreSQL-only behaviour: row-level security is a second wall between
users, even for a query that forgets its user filter (D2)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

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
    assert rows == [(1, "block"), (2, "history")]


def test_past_conversations_are_behind_the_same_wall(postgres: tuple[str, str]) -> None:
    from memoro.service import Memoro
    from memoro.settings import Settings
    from memoro.testing import HashEmbedder

    admin, app = postgres
    pg.clean(admin)
    memoro = Memoro(PostgresStore(app), Settings(home="."), embedder=HashEmbedder(), worker=False)
    memoro.record_turn("ann", "c1", "ann's secret heron", "ok")
    memoro.record_turn("bob", "c1", "bob's secret heron", "ok")
    memoro.index_pending()
    store = memoro.store
    assert isinstance(store, PostgresStore)
    with store.transaction("ann") as conn:
        for table in ("conversations", "turns", "chunks", "vectors"):
            owners = conn.execute(f"SELECT DISTINCT user_id FROM {table}").fetchall()
            assert owners == [{"user_id": "ann"}], table
    with store.pool.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM chunks").fetchone() == {"n": 0}
    memoro.close()


def test_per_user_semantic_search_is_exact_for_many_users(postgres: tuple[str, str]) -> None:
    """recall@10 against brute force is 1.0 for every user, also when most
    vectors belong to other users and many are near-duplicates."""
    import numpy as np

    from memoro.service import Memoro
    from memoro.settings import Settings
    from memoro.testing import HashEmbedder

    admin, app = postgres
    pg.clean(admin)
    embedder = HashEmbedder(dim=16)
    memoro = Memoro(PostgresStore(app), Settings(home="."), embedder=embedder, worker=False)
    rng = np.random.default_rng(1)
    vocabulary = [f"w{i}" for i in range(40)]
    texts: dict[str, list[str]] = {}
    for u in range(12):
        user = f"user{u}"
        count = 60 if u == 0 else 8  # one big user, many small ones
        texts[user] = [" ".join(rng.choice(vocabulary, 6)) for _ in range(count)]
        for i, text in enumerate(texts[user]):
            memoro.record_turn(user, f"c{i % 5}", text, "")
    memoro.index_pending()
    for user, mine in texts.items():
        query = " ".join(rng.choice(vocabulary, 3))
        q = embedder.embed_query(query)
        exact = sorted(((float(embedder.embed_query(t) @ q), t) for t in mine), reverse=True)[:10]
        got = memoro.store.semantic(user, embedder.model_id, q).top(10)
        assert [round(s, 5) for _, _, s in got] == [round(s, 5) for s, _ in exact], user
    memoro.close()


def test_workers_on_threads_index_every_turn_exactly_once(postgres: tuple[str, str]) -> None:
    import threading

    from memoro.history.worker import Worker
    from memoro.testing import HashEmbedder

    admin, app = postgres
    pg.clean(admin)
    store = PostgresStore(app, max_size=8)
    turns = [
        store.record_turn(
            f"user{i % 7}",
            f"c{i % 3}",
            f"turn {i}",
            "ok",
            datetime.now(UTC),
        )
        for i in range(120)
    ]
    workers = [Worker(store, HashEmbedder(delay=0.002), name=f"w{n}") for n in range(4)]
    threads = [threading.Thread(target=w.run_until_idle) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with psycopg.connect(admin) as conn:
        rows = conn.execute("SELECT turn_id, count(*) FROM chunks GROUP BY turn_id").fetchall()
        assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (0,)
    assert sorted(rows) == sorted((t.turn_id, 1) for t in turns)
    store.close()


def test_the_cli_runs_on_postgresql(postgres: tuple[str, str]) -> None:
    from click.testing import CliRunner

    from memoro.cli import cli

    admin, app = postgres
    pg.clean(admin)
    runner = CliRunner()
    migrated = runner.invoke(cli, ["migrate"], env={"MEMORO_DATABASE_URL": admin})
    assert migrated.exit_code == 0 and "up to date" in migrated.stdout
    env = {"MEMORO_DATABASE_URL": app, "MEMORO_EMBEDDER": "keyword"}
    assert (
        runner.invoke(cli, ["memory", "set", "-u", "ann"], input="Name: Ann", env=env).exit_code
        == 0
    )
    assert runner.invoke(cli, ["memory", "show", "-u", "ann"], env=env).stdout == "Name: Ann"
    bad = runner.invoke(
        cli, ["memory", "show", "-u", "ann"], env={"MEMORO_DATABASE_URL": "mysql://x"}
    )
    assert bad.exit_code == 1 and "postgresql://" in bad.stderr


WORKER = """
import sys
from memoro.history.worker import Worker
from memoro.store.postgres import PostgresStore
from memoro.testing import HashEmbedder
Worker(PostgresStore(sys.argv[1]), HashEmbedder(delay=0.02), lease_seconds=1.0).run_forever()
"""


def test_a_worker_killed_mid_job_has_its_job_finished_by_another(
    postgres: tuple[str, str],
) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    from memoro.history.worker import Worker
    from memoro.testing import HashEmbedder

    admin, app = postgres
    pg.clean(admin)
    store = PostgresStore(app)
    turns = [
        store.record_turn(f"user{i % 3}", "c", f"turn {i} " * 50, "ok", datetime.now(UTC))
        for i in range(40)
    ]
    with (
        subprocess.Popen([sys.executable, "-c", WORKER, app]) as proc,
        psycopg.connect(admin, autocommit=True) as probe,
    ):
        deadline = time.monotonic() + 60
        while probe.execute("SELECT count(*) FROM chunks").fetchone() < (5,):
            assert time.monotonic() < deadline, "the worker made no progress"
            time.sleep(0.005)
        os.kill(proc.pid, signal.SIGKILL)
    survivor = Worker(store, HashEmbedder(), lease_seconds=1.0)
    deadline = time.monotonic() + 60
    while sum(store.count_jobs().values()):
        assert time.monotonic() < deadline, "a job was lost"
        survivor.run_until_idle()
        time.sleep(0.05)  # the dead worker's lease runs out after a second
    with psycopg.connect(admin) as conn:
        rows = conn.execute("SELECT turn_id, count(*) FROM chunks GROUP BY turn_id").fetchall()
    assert sorted(rows) == sorted((t.turn_id, 1) for t in turns)
    store.close()
