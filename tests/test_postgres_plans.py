"""The few rows a search reads each time on PostgreSQL — its hits with
their turns (C4, C6) and what was indexed since the last look (C2, C8) —
are reached by key even when the planner's statistics describe a far
smaller user, as right after a large import: a plan sized on such numbers
scanned every turn of the user to fetch ten hits."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import psycopg
import pytest

from memoro.service import Memoro
from memoro.settings import Settings
from memoro.store.postgres import PostgresStore, source
from memoro.store.postgres.search import HITS
from memoro.testing import HashEmbedder
from tests import postgres as pg

USER = "ann"
TABLES = "conversations, turns, chunks, vectors"
TURNS = 600


def _most_rows(node: dict[str, Any]) -> int:
    """The most rows any step of an executed plan produced, over all its
    loops."""
    own = int(node.get("Actual Rows", 0) * node.get("Actual Loops", 1))
    return max([own, *(_most_rows(child) for child in node.get("Plans", []))])


@pytest.fixture
def stale(postgres: tuple[str, str], tmp_path: Path) -> Any:
    """USER with TURNS turns, indexed, the statistics taken when USER had
    one turn (autovacuum held off until the test ends)."""
    admin, url = postgres
    pg.clean(admin)
    with psycopg.connect(admin, autocommit=True) as conn:
        for table in TABLES.split(", "):
            conn.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
    try:
        with Memoro(
            PostgresStore(url), Settings(home=tmp_path), embedder=HashEmbedder(), worker=False
        ) as m:
            m.record_turn(USER, "c0", "the first question", "the first answer")
            m.index_pending()
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f"ANALYZE {TABLES}")
            for i in range(TURNS):
                m.record_turn(USER, f"c{i // 20}", f"question {i}", f"answer {i}")
            m.index_pending()
        yield url
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            for table in TABLES.split(", "):
                conn.execute(f"ALTER TABLE {table} RESET (autovacuum_enabled)")
            conn.execute(f"ANALYZE {TABLES}")


def test_a_searchs_few_rows_are_read_by_key_on_stale_statistics(stale: str) -> None:
    with psycopg.connect(stale, autocommit=True) as conn:
        conn.execute("SELECT set_config('memoro.user_id', %s, false)", (USER,))
        chunks = [r[0] for r in conn.execute("SELECT id FROM chunks ORDER BY id")]
        vectors = [r[0] for r in conn.execute("SELECT id FROM vectors ORDER BY id")]
        model = conn.execute("SELECT model FROM vectors LIMIT 1").fetchone()
        assert len(chunks) > TURNS and model is not None
        reads = {
            "hits": (HITS, (USER, random.Random(1).sample(chunks, 10))),
            "new chunks": (source._NEW_CHUNKS, (USER, chunks[-4])),
            "new vectors": (source._NEW_VECTORS, (USER, model[0], vectors[-4])),
        }
        for name, (sql, params) in reads.items():
            found = conn.execute(sql, params).fetchall()
            assert len(found) in (3, 10), name
            plan = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params).fetchone()
            assert plan is not None
            assert _most_rows(plan[0][0]["Plan"]) <= 30, (name, plan[0][0]["Plan"])


def test_a_cached_users_new_vectors_of_another_model_stay_out(
    postgres: tuple[str, str], tmp_path: Path
) -> None:
    """While a worker still embeds with another model (C8), what a server
    reads since its last look holds that model's vectors too: they are
    left out of its index of the model it searches with."""
    admin, url = postgres
    pg.clean(admin)
    ours, theirs = HashEmbedder(), HashEmbedder(model_id="test/other-model", dim=32)
    with (
        Memoro(PostgresStore(url), Settings(home=tmp_path), embedder=ours, worker=False) as server,
        Memoro(PostgresStore(url), Settings(home=tmp_path), embedder=theirs, worker=False) as old,
    ):
        server.record_turn(USER, "c1", "the harbour crane", "a tall one")
        server.index_pending()
        assert server.search(USER, "harbour crane", limit=3)  # the user is cached now
        old.record_turn(USER, "c1", "the wading crane", "a bird")
        old.index_pending()  # its chunk and a vector of the other model
        with psycopg.connect(admin) as conn:
            models = dict(conn.execute("SELECT model, count(*) FROM vectors GROUP BY model"))
        assert models == {ours.model_id: 1, theirs.model_id: 1}
        hits = server.search(USER, "wading crane", limit=3)
        assert hits and "wading" in hits[0].text
        entry = server.store.vectors.cached(USER, ours.model_id)  # type: ignore[attr-defined]
        assert entry is not None and len(entry.row_chunk) == 1


def test_a_cached_search_reads_no_vector_of_another_model(
    postgres: tuple[str, str], tmp_path: Path
) -> None:
    """A server still searching with the old model while a reindex gives
    every chunk a vector of the new one (C8), all with higher ids: a search
    of a user it has cached reads what was indexed since of its own model
    only, not the new model's vectors on every search."""
    admin, url = postgres
    pg.clean(admin)
    ours, theirs = HashEmbedder(), HashEmbedder(model_id="test/other-model", dim=256)
    with Memoro(PostgresStore(url), Settings(home=tmp_path), embedder=ours, worker=False) as server:
        for i in range(300):
            server.record_turn(USER, f"c{i // 50}", f"question {i} about boats", f"answer {i}")
        server.index_pending()
        assert server.search(USER, "boats", limit=3)  # the user is cached now
        with Memoro(
            PostgresStore(url), Settings(home=tmp_path), embedder=theirs, worker=False
        ) as reindexing:
            assert reindexing.reindex() == 300
        store = server.store
        assert isinstance(store, PostgresStore)
        server.search(USER, "boats", limit=3)
        with pg.messages(store, "DataRow") as sent:
            assert server.search(USER, "answer 7", limit=3)
        # the generation and the hits' texts, not 300 vectors of the other model
        assert sent[0] < 20, sent[0]
