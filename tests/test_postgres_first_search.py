"""A typical user's first search on PostgreSQL (C2, C4): the user's rows are
read in one snapshot with few round trips (the snapshot begins together
with its first question, and a user with no saved copy is not asked about
one twice), a user larger than a page is read whole a page at a time, and
a role that may not read the saved copies still searches, with a warning."""

from __future__ import annotations

import logging
from pathlib import Path

import psycopg
import pytest

from memoro.service import Memoro
from memoro.settings import Settings
from memoro.store.postgres import PostgresStore, source
from memoro.testing import HashEmbedder
from tests import postgres as pg

USER = "ann"


def _fill(url: str, tmp_path: Path, turns: int) -> None:
    """``turns`` turns of USER, indexed; the last one's answer alone says
    "kestrel"."""
    with Memoro(
        PostgresStore(url), Settings(home=tmp_path), embedder=HashEmbedder(), worker=False
    ) as m:
        for i in range(turns):
            answer = "kestrel" if i == turns - 1 else f"answer {i}"
            m.record_turn(USER, "c1", f"question {i} about the lake", answer)
        m.index_pending()


def _fresh(url: str, tmp_path: Path) -> Memoro:
    """A server starting: no user's indexes in its memory."""
    return Memoro(
        PostgresStore(url), Settings(home=tmp_path), embedder=HashEmbedder(), worker=False
    )


def test_a_typical_users_first_search_takes_few_round_trips(
    postgres: tuple[str, str], tmp_path: Path
) -> None:
    admin, url = postgres
    pg.clean(admin)
    _fill(url, tmp_path, 30)
    with _fresh(url, tmp_path) as m:
        store = m.store
        assert isinstance(store, PostgresStore)
        with pg.messages(store, "ReadyForQuery") as counted:
            hits = m.search(USER, "kestrel", limit=3)
        assert hits and hits[0].text.endswith("kestrel")
        # after the pool's checks: the snapshot begun with its generation,
        # which copies there are (none), turns, chunks, vectors, the commit;
        # then the hits' texts. It took 21 before.
        assert counted[0] <= 8, counted[0]


def test_a_chunks_terms_stay_in_its_row(postgres: tuple[str, str], tmp_path: Path) -> None:
    """A first search reads every chunk's terms and never its text: when a
    chunk is too large for one row, the text goes out of line, not the
    terms (which cost a TOAST lookup a chunk to read)."""
    admin, url = postgres
    pg.clean(admin)
    words = [f"{a}{b}{c}q" for a in "bdfgk" for b in "aeiou" for c in "lmnrst"]  # 150 distinct
    with Memoro(
        PostgresStore(url), Settings(home=tmp_path), embedder=HashEmbedder(), worker=False
    ) as m:
        m.record_turn(USER, "c1", " ".join(words), " ".join(reversed(words)))
        m.index_pending()
    with psycopg.connect(admin) as conn:
        if conn.info.server_version < 170000:
            pytest.skip("pg_column_toast_chunk_id is PostgreSQL 17's")
        rows = conn.execute(
            "SELECT octet_length(terms), pg_column_toast_chunk_id(terms),"
            " pg_column_toast_chunk_id(text) FROM chunks WHERE user_id = %s",
            (USER,),
        ).fetchall()
    assert rows and all(size > 1000 for size, _, _ in rows)
    assert [terms for _, terms, _ in rows] == [None] * len(rows)
    assert any(text is not None for _, _, text in rows)


def test_a_user_larger_than_a_page_is_read_whole(
    postgres: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    admin, url = postgres
    pg.clean(admin)
    _fill(url, tmp_path, 11)
    monkeypatch.setattr(source, "_FETCH", 4)  # pages of 4, 4, 3 chunks (and vectors)
    with _fresh(url, tmp_path) as m:
        found = m.search(USER, "kestrel", limit=3)
        assert found and found[0].text.endswith("kestrel")
        index = m.store.keywords.cached(USER)
        assert index is not None and len(index.chunk) == 11
        # the vectors came without a join: each one's turn from the chunks read
        entry = m.store.vectors.cached(USER, HashEmbedder().model_id)
        assert entry is not None
        read = dict(zip(entry.row_chunk.tolist(), entry.row_turn.tolist(), strict=True))
    with psycopg.connect(admin) as conn:
        stored = dict(conn.execute("SELECT id, turn_id FROM chunks WHERE user_id = %s", (USER,)))
    assert read == stored and len(set(stored.values())) == 11


def test_a_role_that_may_not_read_the_copies_still_searches(
    postgres: tuple[str, str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    admin, url = postgres
    pg.clean(admin)
    _fill(url, tmp_path, 5)
    owner = pg.as_role(admin, pg.OWNER_ROLE)
    role = url.split("//", 1)[1].split("@", 1)[0]
    with psycopg.connect(owner, autocommit=True) as conn:
        conn.execute(f"REVOKE SELECT ON search_indexes FROM {role}")
    try:
        with _fresh(url, tmp_path) as m, caplog.at_level(logging.WARNING, "memoro.store"):
            found = m.search(USER, "kestrel", limit=3)
        assert found and found[0].text.endswith("kestrel")
        assert "saved search indexes are not readable" in caplog.text
    finally:
        with psycopg.connect(owner, autocommit=True) as conn:
            conn.execute(f"GRANT SELECT ON search_indexes TO {role}")
