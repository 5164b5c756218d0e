"""PostgreSQL-only behaviour: row-level security is a second wall between
users, even for a query that forgets its user filter (D2)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from memoro.errors import MigrationError
from memoro.models import AuditRecord, NewTurn, Operation, Writer, block_json
from memoro.service import Memoro
from memoro.store import migrations
from memoro.store.postgres import PostgresStore, migrate
from tests import postgres as pg


@pytest.fixture
def store(postgres: tuple[str, str]) -> Iterator[PostgresStore]:
    admin, url = postgres
    pg.clean(admin)
    backend = PostgresStore(url)
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
    assert [name for _, name in rows] == [
        "block",
        "history",
        "keywords",
        "roles",
        "queue_lanes",
        "conversation_titles",
        "imports",
        "user_keys",
        "queue_stats",
        "no_text_statistics",
        "read_block",
        "search_in_memory",
        "search_indexes",
        "block_notify",
        "stale_uploads",
        "upload_owner",
        "generation_clock",
        "turn_times",
        "question_terms",
        "user_epochs",
        "memory_review",
        "terms_inline",
        "vectors_by_model_id",
    ]
    assert len(rows) == len(migrations.load("postgres"))


def test_past_conversations_are_behind_the_same_wall(postgres: tuple[str, str]) -> None:
    from memoro.service import Memoro
    from memoro.settings import Settings
    from memoro.testing import HashEmbedder

    admin, url = postgres
    pg.clean(admin)
    memoro = Memoro(PostgresStore(url), Settings(home="."), embedder=HashEmbedder(), worker=False)
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
    """recall@10 against brute force is 1.0 for every user: on friendly data
    (users share one vocabulary, many near-duplicates) and on data that
    defeats a shared HNSW index filtered by user — small users whose vectors
    lie far from every query, among hundreds of other users' vectors near
    it. On that data the HNSW-then-filter query returns too few rows (shown
    here with a real HNSW index), which is why memoro searches exactly."""
    import numpy as np

    from memoro.service import Memoro
    from memoro.settings import Settings
    from memoro.testing import HashEmbedder

    admin, url = postgres
    pg.clean(admin)
    embedder = HashEmbedder(dim=32)
    memoro = Memoro(PostgresStore(url), Settings(home="."), embedder=embedder, worker=False)
    rng = np.random.default_rng(1)
    shared = [f"w{i}" for i in range(40)]
    texts: dict[str, list[str]] = {}
    for u in range(16):
        user = f"user{u}"
        # one big user, many small ones; the last four write only in words
        # of their own, far from queries made of the shared words
        count = 300 if u == 0 else 40 if u < 12 else 12
        words = shared if u < 12 else [f"own{u}x{i}" for i in range(6)]
        texts[user] = [" ".join(rng.choice(words, 6)) for _ in range(count)]
        for i, text in enumerate(texts[user]):
            memoro.record_turn(user, f"c{i % 5}", text, "")
    memoro.index_pending()
    queries = {user: embedder.embed_query(" ".join(rng.choice(shared, 3))) for user in texts}
    for user, mine in texts.items():
        q = queries[user]
        exact = sorted(((float(embedder.embed_query(t) @ q), t) for t in mine), reverse=True)[:10]
        got = memoro.store.semantic(user, embedder.model_id, q).top(10)
        assert [round(s, 5) for _, _, s in got] == [round(s, 5) for s, _ in exact], user
    memoro.close()

    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(
            "CREATE INDEX hnsw ON vectors USING hnsw ((embedding::vector(32)) vector_cosine_ops)"
        )
        try:
            for plan in ("seqscan", "bitmapscan", "sort"):  # steer the planner to HNSW
                conn.execute(f"SET enable_{plan} = off")
            short = 0
            for user in list(texts)[12:]:
                rows = conn.execute(
                    "SELECT chunk_id FROM vectors WHERE user_id = %s"
                    " ORDER BY embedding::vector(32) <=> %s::vector(32) LIMIT 10",
                    (user, "[" + ",".join(map(str, queries[user])) + "]"),
                ).fetchall()
                short += len(rows) < 10
            assert short > 0  # the pitfall is real on this data
        finally:
            conn.execute("DROP INDEX hnsw")


def test_workers_on_threads_index_every_turn_exactly_once(postgres: tuple[str, str]) -> None:
    import threading

    from memoro.history.worker import Worker
    from memoro.testing import HashEmbedder

    admin, url = postgres
    pg.clean(admin)
    store = PostgresStore(url, max_size=8)
    turns = [
        store.record_turns(f"user{i % 7}", [NewTurn(f"c{i % 3}", f"turn {i}", "ok")])[0]
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

    admin, url = postgres
    pg.clean(admin)
    runner = CliRunner()
    migrated = runner.invoke(cli, ["migrate"], env={"MEMORO_DATABASE_URL": admin})
    assert migrated.exit_code == 0 and "up to date" in migrated.stdout
    env = {"MEMORO_DATABASE_URL": url, "MEMORO_EMBEDDER": "keyword"}
    assert (
        runner.invoke(cli, ["memory", "set", "-u", "ann"], input="Name: Ann", env=env).exit_code
        == 0
    )
    assert runner.invoke(cli, ["memory", "show", "-u", "ann"], env=env).stdout == "Name: Ann\n"
    bad = runner.invoke(
        cli, ["memory", "show", "-u", "ann"], env={"MEMORO_DATABASE_URL": "mysql://x"}
    )
    assert bad.exit_code == 1 and "postgresql://" in bad.stderr


def test_times_are_shown_in_utc_whatever_the_sessions_time_zone(
    postgres: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    admin, url = postgres
    pg.clean(admin)
    monkeypatch.setenv("PGTZ", "Asia/Tokyo")  # libpq sets the session's TimeZone from it
    with Memoro(PostgresStore(url), embedder=None, worker=False) as memoro:
        memoro.write_block("ann", "Name: Ann", writer="user")
        memoro.record_turn("ann", "c", "Q?", "A.", at="2025-01-31T14:05:00Z")
        (conversation,) = memoro.list_conversations("ann")
        assert conversation.first_at.utcoffset() == timedelta(hours=9)  # as handed over
        shown = [
            conversation.to_json()["first_at"],
            memoro.conversation_turns("ann", "c")[0].to_json()["at"],
            block_json(memoro.read_block("ann"))["updated_at"],
        ]
        memoro.index_pending()
        found = memoro.execute_tool("ann", "conversation_search", {"query": "Q"}).text
        assert "2025-01-31 14:05 UTC" in found, found
    assert shown[:2] == ["2025-01-31T14:05:00Z"] * 2
    assert str(shown[2]).endswith("Z") and "+" not in str(shown[2])


WORKER = """
import sys
from memoro.history import worker
from memoro.store.postgres import PostgresStore
from memoro.testing import HashEmbedder
url, delay, lease, poll = sys.argv[1], *map(float, sys.argv[2:5])
worker.IDLE_POLL_SECONDS = poll
store = PostgresStore(url)
worker.Worker(store, HashEmbedder(delay=delay), lease_seconds=lease).run_forever()
"""


def _worker(url: str, *, delay: float, lease: float, poll: float) -> Any:
    import subprocess
    import sys

    return subprocess.Popen([sys.executable, "-c", WORKER, url, str(delay), str(lease), str(poll)])


def _listening(admin: str, count: int) -> None:
    """Wait until ``count`` workers LISTEN for jobs."""
    import time

    deadline = time.monotonic() + 30
    with psycopg.connect(admin, autocommit=True) as conn:
        while True:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE query = 'LISTEN memoro_jobs'"
            ).fetchone()
            if row and row[0] >= count:
                return
            assert time.monotonic() < deadline, "the workers never listened"
            time.sleep(0.02)


def test_notify_wakes_an_idle_worker_in_another_process(postgres: tuple[str, str]) -> None:
    """The worker polls only once a minute here: a turn indexed within
    seconds was announced by NOTIFY."""
    import time

    admin, url = postgres
    pg.clean(admin)
    store = PostgresStore(url)
    with _worker(url, delay=0, lease=60, poll=60) as proc:
        try:
            _listening(admin, 1)
            time.sleep(0.2)  # past its first look at the queue
            (turn,) = store.record_turns("ann", [NewTurn("c", "wake up", "ok")])
            deadline = time.monotonic() + 40  # well inside the worker's 60 s poll
            while not store.get_turn("ann", turn.turn_id).indexed:  # type: ignore[union-attr]
                assert time.monotonic() < deadline, "NOTIFY did not wake the worker"
                time.sleep(0.01)
        finally:
            proc.kill()
    store.close()


def test_four_worker_processes_index_2000_turns_exactly_once(postgres: tuple[str, str]) -> None:
    """Four `memoro worker`-like processes drain 2,000 turns queued while
    they run, woken by NOTIFY. Halfway, one is SIGKILLed while it holds a
    job (it embeds slowly, so it nearly always does); another takes the job
    over when its lease runs out. Every turn ends indexed exactly once and
    no job is lost or set aside."""
    import os
    import signal
    import time

    admin, url = postgres
    pg.clean(admin)
    store = PostgresStore(url, max_size=4)
    victim = _worker(url, delay=0.2, lease=2, poll=1)
    procs = [victim] + [_worker(url, delay=0.002, lease=2, poll=1) for _ in range(3)]

    def record(numbers: range) -> list[Any]:
        return [
            store.record_turns(
                f"user{i % 25}", [NewTurn(f"c{i % 40}", f"turn {i} about herons", "ok")]
            )[0]
            for i in numbers
        ]

    try:
        _listening(admin, 4)
        turns = record(range(1000))
        deadline = time.monotonic() + 60
        with psycopg.connect(admin, autocommit=True) as probe:
            while True:  # freeze the victim; kill it only while it holds a job
                assert time.monotonic() < deadline, "the victim never held a job"
                os.kill(victim.pid, signal.SIGSTOP)
                held = probe.execute(
                    "SELECT id FROM jobs WHERE status = 'running' AND locked_by LIKE %s",
                    (f"%:{victim.pid}:%",),
                ).fetchone()
                if held:
                    break
                os.kill(victim.pid, signal.SIGCONT)
                turns += record(range(len(turns), len(turns) + 1))  # keep the queue busy
            os.kill(victim.pid, signal.SIGKILL)
            victim.wait()
            turns += record(range(len(turns), 2000))
            deadline = time.monotonic() + 120
            while probe.execute("SELECT count(*) FROM jobs").fetchone() != (0,):
                assert time.monotonic() < deadline, "jobs were left in the queue"
                time.sleep(0.05)
            rows = probe.execute("SELECT turn_id, count(*) FROM chunks GROUP BY turn_id").fetchall()
            unindexed = probe.execute(
                "SELECT count(*) FROM turns WHERE indexed_at IS NULL"
            ).fetchone()
        assert all(p.poll() is None for p in procs[1:])  # the others never crashed
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    assert len(turns) == 2000
    assert sorted(rows) == sorted((t.turn_id, 1) for t in turns)
    assert unindexed == (0,)
    store.close()


def _corpus(seed: int) -> list[tuple[str, str, str, str]]:
    """(user, conversation, question, answer): Zipf-distributed words so that
    document frequencies matter, plus CJK runs and IDs that match as groups."""
    import numpy as np

    rng = np.random.default_rng(seed)
    vocabulary = [f"word{i}" for i in range(300)] + ["東京", "大阪", "ZX-4471-QP", "AB-12"]
    weights = 1 / np.arange(1, len(vocabulary) + 1)
    weights /= weights.sum()
    rows = []
    for i in range(240):
        words = rng.choice(vocabulary, int(rng.integers(3, 40)), p=weights)
        rows.append((f"user{i % 3}", f"c{i % 11}", f"turn {i}: " + " ".join(words), "noted"))
    return rows


def _keyword_results(memoro: Any, queries: list[str]) -> list[dict[str, float]]:
    results = []
    for user in ("user0", "user1"):
        for query in queries:
            hits = memoro.store.keyword_search(user, query, 500)
            texts = memoro.store.chunk_hits(user, [c for c, _, _ in hits])
            results.append({texts[c][3]: score for c, _, score in hits})
    return results


QUERIES = [
    "word0 word7",
    "word3",
    "word120 word250 word299",
    "東京",
    "大阪の東京",
    "ZX-4471-QP",
    "word1 AB-12 word2",
    "turn 17",
    "nothing-here",
]


def _assert_same_ranking(left: list[dict[str, float]], right: list[dict[str, float]]) -> None:
    for mine, theirs in zip(left, right, strict=True):
        assert mine.keys() == theirs.keys()
        for text, score in mine.items():
            assert score == pytest.approx(theirs[text], rel=1e-5), text


def test_keyword_search_ranks_as_on_sqlite(postgres: tuple[str, str], tmp_path: Path) -> None:
    """BM25 with each user's own statistics gives the same chunks with the
    same scores on both backends, also after a conversation is deleted."""
    from memoro.service import Memoro
    from memoro.settings import Settings
    from memoro.store.sqlite import SqliteStore

    admin, url = postgres
    pg.clean(admin)
    backends = [
        Memoro(
            SqliteStore(tmp_path / "m.db"), Settings(home=tmp_path), embedder=None, worker=False
        ),
        Memoro(PostgresStore(url), Settings(home=tmp_path), embedder=None, worker=False),
    ]
    for memoro in backends:
        for user, conversation, question, answer in _corpus(7):
            memoro.record_turn(user, conversation, question, answer)
        memoro.index_pending()
    sqlite, postgresql = (_keyword_results(m, QUERIES) for m in backends)
    assert sum(map(len, sqlite)) > 200  # the queries find plenty
    _assert_same_ranking(sqlite, postgresql)
    for memoro in backends:
        memoro.delete_conversation("user0", "c3")
    before = sqlite
    sqlite, postgresql = (_keyword_results(m, QUERIES) for m in backends)
    assert sqlite != before  # fewer chunks: other scores change too
    _assert_same_ranking(sqlite, postgresql)
    for memoro in backends:
        memoro.index_pending()  # the purge
    _assert_same_ranking(sqlite, _keyword_results(backends[1], QUERIES))
    for memoro in backends:
        memoro.close()


def test_migration_3_gives_older_chunks_their_keywords(
    postgres: tuple[str, str], tmp_path: Path
) -> None:
    """A database indexed under schema 2 (tsvector stems) is searchable after
    ``memoro migrate``, ranked as if indexed today, its deleted conversation
    left out — and the migration runs as an owner held by row-level security."""
    from memoro.history.chunking import chunk, turn_text
    from memoro.service import Memoro
    from memoro.settings import Settings
    from memoro.store import postgres as backend
    from memoro.store.sqlite import SqliteStore

    admin, _ = postgres
    owner = pg.in_database(pg.as_role(admin, pg.OWNER_ROLE), _fresh_database(admin, "memoro_v2"))
    backend.migrate(owner, upto=2)
    corpus = _corpus(11)
    with psycopg.connect(owner) as conn:
        for n, (user, conversation, question, answer) in enumerate(corpus, 1):
            conn.execute("SELECT set_config('memoro.user_id', %s, false)", (user,))
            conn.execute(
                "INSERT INTO conversations VALUES (%s, %s, now(), NULL) ON CONFLICT DO NOTHING",
                (user, conversation),
            )
            conn.execute(
                "INSERT INTO turns (user_id, conversation_id, seq, question, answer, at,"
                " indexed_at) VALUES (%s, %s, %s, %s, %s, now(), now())",
                (user, conversation, n, question, answer),
            )
            for ordinal, text in enumerate(chunk(turn_text(question, answer))):
                conn.execute(
                    "INSERT INTO chunks (turn_id, user_id, ordinal, text, stems)"
                    " VALUES (%s, %s, %s, %s, to_tsvector('simple', %s))",
                    (n, user, ordinal, text, text),
                )
        conn.execute("SELECT set_config('memoro.user_id', 'user0', false)")
        conn.execute("UPDATE conversations SET deleted_at = now() WHERE id = 'c3'")
    backend.migrate(owner)

    expected = Memoro(
        SqliteStore(tmp_path / "m.db"), Settings(home=tmp_path), embedder=None, worker=False
    )
    for user, conversation, question, answer in corpus:
        expected.record_turn(user, conversation, question, answer)
    expected.index_pending()
    expected.delete_conversation("user0", "c3")
    migrated = Memoro(PostgresStore(owner), Settings(home=tmp_path), embedder=None, worker=False)
    _assert_same_ranking(_keyword_results(expected, QUERIES), _keyword_results(migrated, QUERIES))
    expected.close()
    migrated.close()


def test_migration_19_gives_older_chunks_their_question_terms(
    postgres: tuple[str, str], tmp_path: Path
) -> None:
    """A database indexed before question terms ranks, after ``memoro
    migrate`` (as an owner held by row-level security), as if indexed today."""
    from memoro.history.chunking import chunk, turn_text
    from memoro.service import Memoro
    from memoro.settings import Settings
    from memoro.store import keywords
    from memoro.store import postgres as backend
    from tests.test_store_sqlite import _question_corpus, ranks_as_indexed_today

    admin, _ = postgres
    owner = pg.in_database(pg.as_role(admin, pg.OWNER_ROLE), _fresh_database(admin, "memoro_v18"))
    backend.migrate(owner, upto=18)
    corpus = _question_corpus()
    with psycopg.connect(owner) as conn:
        conn.execute("SELECT set_config('memoro.user_id', 'ann', false)")
        for n, (conversation, question, answer) in enumerate(corpus, 1):
            conn.execute(
                "INSERT INTO conversations (user_id, id, created_at) VALUES ('ann', %s, now())"
                " ON CONFLICT DO NOTHING",
                (conversation,),
            )
            turn = conn.execute(
                "INSERT INTO turns (user_id, conversation_id, seq, question, answer, at,"
                " indexed_at) VALUES ('ann', %s, %s, %s, %s, now(), now()) RETURNING id",
                (conversation, n, question, answer),
            ).fetchone()[0]
            for ordinal, text in enumerate(chunk(turn_text(question, answer))):
                found = keywords.chunk_terms(text)  # as memoro indexed before
                conn.execute(
                    "INSERT INTO chunks (turn_id, user_id, ordinal, text, terms, length)"
                    " VALUES (%s, 'ann', %s, %s, %s, %s)",
                    (turn, ordinal, text, found.pack(), found.length),
                )
    backend.migrate(owner)
    migrated = Memoro(PostgresStore(owner), Settings(home=tmp_path), embedder=None, worker=False)
    ranks_as_indexed_today(migrated, tmp_path)
    migrated.close()


def test_a_role_that_bypasses_row_level_security_is_warned_about(
    postgres: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    admin, url = postgres
    PostgresStore(url).close()
    assert not [r for r in caplog.records if "row-level security" in r.getMessage()]
    PostgresStore(admin).close()
    (warning,) = [r for r in caplog.records if "row-level security" in r.getMessage()]
    assert warning.levelname == "WARNING" and "BYPASSRLS" in warning.getMessage()


def _fresh_database(admin: str, name: str) -> str:
    """A new, empty database with pgvector, owned by memoro's owner role."""
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name} OWNER {pg.OWNER_ROLE}")
    with psycopg.connect(pg.in_database(admin, name), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION vector")
    return name


def test_an_empty_database_is_migrated_at_start_when_the_role_may(
    postgres: tuple[str, str],
) -> None:
    admin, url = postgres
    name = _fresh_database(admin, "memoro_fresh")
    with pytest.raises(MigrationError, match="run `memoro migrate` as the role"):
        PostgresStore(pg.in_database(url, name))  # memoro's role may not create tables
    store = PostgresStore(pg.in_database(pg.as_role(admin, pg.OWNER_ROLE), name))
    with store.block_transaction("ann") as tx:
        tx.put("Name: Ann", AuditRecord(Writer.USER, Operation.WRITE, (), ("Name: Ann",), 0, 1))
    assert store.read_block("ann").text == "Name: Ann"  # type: ignore[union-attr]
    store.close()


def test_a_database_with_an_older_schema_is_refused_until_migrated(
    postgres: tuple[str, str],
) -> None:
    from memoro.store import postgres as backend

    admin, _ = postgres
    url = pg.in_database(pg.as_role(admin, pg.OWNER_ROLE), _fresh_database(admin, "memoro_old"))
    backend.migrate(url, upto=2)
    with pytest.raises(MigrationError, match=r"schema version 2 .* run `memoro migrate`"):
        PostgresStore(url)
    migrate(url)
    PostgresStore(url).close()


@pytest.fixture
def pg_data() -> Iterator[str]:
    """A folder for a PostgreSQL server's data outside pytest's own temporary
    root: pgserver opens the folders above its data to its own system user,
    and any pytest session starting meanwhile (another test command on the
    machine) closes that root again to its owner."""
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix="memoro-pg-test-")
    yield str(Path(folder) / "pg")
    shutil.rmtree(folder, ignore_errors=True)


def test_a_local_postgresql_to_try_memoro_on(tmp_path: Path, pg_data: str) -> None:
    """`python -m memoro.store.postgres.local DIR` prints a URL memoro can
    use at once, keeps the data in DIR, and stops on SIGTERM."""
    import subprocess
    import sys

    from memoro.service import Memoro
    from memoro.settings import Settings

    command = [sys.executable, "-m", "memoro.store.postgres.local", pg_data]
    for round_ in (1, 2):
        with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as proc:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line.startswith("export MEMORO_DATABASE_URL='postgresql://")
            url = line.split("'")[1]
            memoro = Memoro(
                PostgresStore(url), Settings(home=tmp_path), embedder=None, worker=False
            )
            if round_ == 1:
                memoro.write_block("ann", "Name: Ann", writer="user")
            assert memoro.read_block("ann").text == "Name: Ann"  # type: ignore[union-attr]
            memoro.close()
            proc.terminate()
            assert proc.wait(30) == 0


def test_a_database_restart_is_survived_and_an_outage_is_a_503(
    tmp_path: Path, pg_data: str
) -> None:
    """Pooled connections broken by a restart are replaced before use; while
    the database is down the API answers 503 with a JSON error and the store
    raises StoreError — never a driver traceback."""
    import httpx

    from memoro.auth import Signer
    from memoro.errors import StoreError
    from memoro.service import Memoro
    from memoro.settings import Settings
    from memoro.store.postgres import local as local_postgres
    from memoro.web.security import AuthConfig
    from tests.web_server import SECRET, running

    data = pg_data
    with local_postgres.running(data) as server:
        # a short pool timeout makes the outage below answer soon; 3 s, not
        # 1, leaves a loaded machine time to replace the broken connection
        store = PostgresStore(server.app, timeout=3.0)
        memoro = Memoro(store, Settings(home=tmp_path), embedder=None, worker=False)
        memoro.write_block("ann", "Name: Ann", writer="user")
    with local_postgres.running(data):  # the same data, a new server process
        assert memoro.read_block("ann").text == "Name: Ann"  # type: ignore[union-attr]
    headers = {"Authorization": f"Bearer {Signer(SECRET).issue('ann')}"}
    with running(memoro, AuthConfig.build("token", SECRET, "local")) as url:
        down = httpx.get(f"{url}/v1/memory", headers=headers, timeout=30)
    assert down.status_code == 503
    assert "PostgreSQL is unavailable" in down.json()["error"]["message"]
    with pytest.raises(StoreError, match="unavailable"):
        memoro.search("ann", "anything")
    memoro.close()


def test_a_servers_in_memory_index_follows_what_other_processes_write(
    postgres: tuple[str, str],
) -> None:
    """Search runs in each server's memory: a server that loaded a user sees
    turns another process indexed since, on its next search, and never a
    conversation another process deleted (C4, C6) — both for keyword and
    semantic search, while four workers index the same user at once (their
    chunk ids must reach the index in commit order, or one would be missed)."""
    import threading

    from memoro.history.worker import Worker
    from memoro.testing import HashEmbedder

    admin, url = postgres
    pg.clean(admin)
    embedder = HashEmbedder(dim=32)
    server = PostgresStore(url)  # the searching process
    writer = PostgresStore(url, max_size=8)  # another server and its workers
    writer.record_turns("ann", [NewTurn("old", "the heron nests by the lake", "noted")])
    Worker(writer, embedder, name="w").run_until_idle()
    assert [t for _, t, _ in server.keyword_search("ann", "heron", 50)] == [1]

    for i in range(80):
        writer.record_turns("ann", [NewTurn(f"c{i % 4}", f"heron sighting {i}", "ok")])
    workers = [Worker(writer, HashEmbedder(dim=32, delay=0.001), name=f"w{n}") for n in range(4)]
    threads = [threading.Thread(target=w.run_until_idle) for w in workers]
    for t in threads:
        t.start()
    seen = set()
    while any(t.is_alive() for t in threads):  # search while they commit
        seen |= {t for _, t, _ in server.keyword_search("ann", "heron", 200)}
    for t in threads:
        t.join()
    found = {t for _, t, _ in server.keyword_search("ann", "heron", 200)}
    assert found == set(range(1, 82)) and seen <= found
    query = embedder.embed_query("heron sighting 7")
    assert len(server.semantic("ann", embedder.model_id, query).top(200)) == 81

    assert writer.delete_conversation("ann", "old")
    assert 1 not in {t for _, t, _ in server.keyword_search("ann", "heron", 200)}
    top = server.semantic("ann", embedder.model_id, embedder.embed_query("heron nests lake"))
    assert 1 not in {t for _, t, _ in top.top(200)} and len(top.top(200)) == 80

    # what was indexed since a search read the vectors comes in one round
    # trip (pgvector's binary form): the same scores as a server reading all
    writer.record_turns("ann", [NewTurn("c9", "a late heron", "seen")])
    Worker(writer, embedder, name="w").run_until_idle()
    query = embedder.embed_query("a late heron")
    fresh = PostgresStore(url)
    late = server.semantic("ann", embedder.model_id, query).top(200)
    assert len(late) == 81 and late == fresh.semantic("ann", embedder.model_id, query).top(200)
    fresh.close()
    server.close()
    writer.close()


def test_first_searches_that_fill_the_pool_do_not_wait_on_each_other(
    postgres: tuple[str, str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A user's first search loads their vectors on another thread, which
    needs a connection of its own. Searches that held the pool's every
    connection while waiting for those loads waited until the pool timed out
    (seen at 32 clients under load); now they let go first (C4)."""
    import threading
    import time

    from memoro.service import Memoro
    from memoro.settings import Settings
    from memoro.testing import HashEmbedder

    admin, url = postgres
    pg.clean(admin)
    users = [f"user-{i}" for i in range(6)]
    with Memoro(PostgresStore(url), Settings(home=tmp_path), embedder=HashEmbedder()) as writer:
        for user in users:
            writer.store.record_turns(user, [NewTurn("c", f"heron lake {user}", "noted")])
        writer.index_pending()
    # A pool timeout far above what six searches take even on a loaded
    # machine: searches that wait on each other stall until it passes, so
    # the bound below tells the two apart without timing the searches
    small = PostgresStore(url, max_size=2, timeout=60)
    searcher = Memoro(small, Settings(home=tmp_path), embedder=HashEmbedder(), worker=False)
    start, found = threading.Barrier(len(users)), {}

    def first_search(user: str) -> None:
        start.wait()
        found[user] = searcher.search(user, "heron lake", limit=3)

    threads = [threading.Thread(target=first_search, args=(u,)) for u in users]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    took = time.perf_counter() - began
    searcher.close()
    assert all(len(found[u]) == 1 for u in users)
    assert "ahead of its search failed" not in caplog.text
    assert took < 30, f"first searches took {took:.1f} s: they waited on the pool"
