"""Search over one user's history on PostgreSQL: keyword and semantic
search run in the same in-memory indexes as on SQLite (read from this
database through ``source.py``), so both backends rank alike and exactly;
the hits' text and times come from SQL."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

import psycopg

from memoro.store.dialect import SqlBackend
from memoro.store.memory.search import IndexedSearch
from memoro.store.postgres import by_key

HITS = (
    "SELECT c.id, t.id AS turn_id, t.conversation_id, t.at, c.text, t.seq FROM chunks c"
    + by_key.TURN_OF_CHUNK
    + " WHERE c.user_id = %s AND c.id = ANY(%s) AND"
    + by_key.SHOWN
)
"""The visible ones of some chunks of a user, with their turns."""


class PgSearch(IndexedSearch, SqlBackend):
    """The search methods of PostgresStore."""

    @abc.abstractmethod
    def pipelined(self, user_id: str) -> AbstractContextManager[psycopg.Connection[Any]]:
        """A read of ``user_id`` answered in one round trip (PostgresStore)."""

    def chunk_hits(
        self, user_id: str, chunk_ids: Sequence[int]
    ) -> dict[int, tuple[int, str, datetime, str, int]]:
        if not chunk_ids:
            return {}
        with self.pipelined(user_id) as conn:
            cursor = conn.execute(HITS, (user_id, list(chunk_ids)))
        rows = cursor.fetchall()
        return {
            r["id"]: (r["turn_id"], r["conversation_id"], r["at"], r["text"], r["seq"])
            for r in rows
        }
