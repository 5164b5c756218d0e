"""A typical user's first search on PostgreSQL (C2, C4): the user's rows are
read in one snapshot with few round trips (the snapshot begins together
with its first question, and a user with no saved copy is not asked about
one twice), a user larger than a page is read whole a page at a time, and
a role that may not read the saved copies still searches, with a warning."""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

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


@contextmanager
def _round_trips(store: PostgresStore) -> Iterator[list[int]]:
    """Counts the times the server said it was ready for the next query
    (one a round trip) on the connections ``store`` hands out, through
    libpq's own protocol trace."""
    counted = [0]
    original = store.connection

    @contextmanager
    def traced() -> Iterator[Any]:
        with original() as conn, tempfile.TemporaryFile("w+") as trace:
            conn.pgconn.trace(trace.fileno())
            try:
                yield conn
            finally:
                conn.pgconn.untrace()
                trace.seek(0)
                counted[0] += sum("ReadyForQuery" in line for line in trace)

    store.connection = traced  # type: ignore[method-assign]
    try:
        yield counted
    finally:
        del store.connection


def test_a_typical_users_first_search_takes_few_round_trips(
    postgres: tuple[str, str], tmp_path: Path
) -> None:
    admin, url = postgres
    pg.clean(admin)
    _fill(url, tmp_path, 30)
    with _fresh(url, tmp_path) as m:
        store = m.store
        assert isinstance(store, PostgresStore)
        with _round_trips(store) as counted:
            hits = m.search(USER, "kestrel", limit=3)
        assert hits and hits[0].text.endswith("kestrel")
        # after the pool's checks: the snapshot begun with its generation,
        # which copies there are (none), turns, chunks, vectors, the commit;
        # then the hits' texts. It took 21 before.
        assert counted[0] <= 8, counted[0]


def test_a_user_larger_than_a_page_is_read_whole(
    postgres: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    admin, url = postgres
    pg.clean(admin)
    _fill(url, tmp_path, 11)
    monkeypatch.setattr(source, "_FETCH", 4)  # pages of 4, 4, 3 chunks
    with _fresh(url, tmp_path) as m:
        found = m.search(USER, "kestrel", limit=3, mode="keyword")
        assert found and found[0].text.endswith("kestrel")
        index = m.store.keywords.cached(USER)
        assert index is not None and len(index.chunk) == 11


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
