"""Past conversations on PostgreSQL beyond what both backends share:
indexing (chunks with their packed terms, pgvector vectors), deletion, and
vector maintenance across users. Every query names
its user, even though row-level security would hide other users' rows
anyway: RLS is the second wall, not the first."""

from __future__ import annotations

import abc
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg

from memoro.errors import StoreError
from memoro.models import Job
from memoro.store import keywords
from memoro.store.dialect import Conn
from memoro.store.postgres._db import vector_literal
from memoro.store.queue import finish
from memoro.store.turns import PURGED, SqlTurns, idle_before


class PgHistory(SqlTurns):
    """The past-conversation methods of PostgresStore."""

    _generations = ("history_users", "generation")

    @abc.abstractmethod
    def pipelined(self, user_id: str) -> AbstractContextManager[psycopg.Connection[Any]]:
        """A read of ``user_id`` answered in one round trip (PostgresStore)."""

    def turns_between(
        self, user_id: str, after: datetime | None, before: datetime | None
    ) -> list[int]:
        sql, params = self._turns_between(user_id, after, before)
        with self.pipelined(user_id) as conn:
            cursor = conn.execute(sql.replace("?", "%s"), params)
        return [r["id"] for r in cursor.fetchall()]

    def _terms(self, found: keywords.ChunkTerms) -> bytes:
        return found.pack()

    def _next_generation(self, conn: Conn) -> int:
        return int(conn.execute("SELECT memoro_next_generation() AS n").fetchone()["n"])

    def _insert_vectors(
        self, conn: Conn, chunk_id: int, user_id: str, model: str, windows: npt.NDArray[np.float32]
    ) -> None:
        conn.executemany(
            "INSERT INTO vectors (chunk_id, user_id, model, part, embedding)"
            " VALUES (?, ?, ?, ?, ?::vector)",
            [(chunk_id, user_id, model, part, vector_literal(w)) for part, w in enumerate(windows)],
        )

    def delete_conversation(
        self, user_id: str, conversation_id: str, *, older_than: datetime | None = None
    ) -> bool:
        """Hide the conversation at once — its vectors go in the same
        transaction and every server's in-memory index of the user is read
        again — and queue its purge."""
        idle, when = (
            ("", ())
            if older_than is None
            else (" AND" + idle_before("conversations"), (older_than,))
        )
        with self._write(user_id) as conn:
            done = conn.execute(
                "UPDATE conversations SET deleted_at = now()"
                " WHERE user_id = ? AND id = ? AND deleted_at IS NULL" + idle,
                (user_id, conversation_id, *when),
            ).rowcount
            if not done:
                return False
            # its vectors go now, so a search's load never reads them
            conn.execute(
                "DELETE FROM vectors v USING chunks c, turns t"
                " WHERE v.user_id = %(user)s AND c.user_id = %(user)s AND t.user_id = %(user)s"
                " AND v.chunk_id = c.id AND c.turn_id = t.id"
                " AND t.conversation_id = %(conversation)s",
                {"user": user_id, "conversation": conversation_id},
            )
            self._stale(conn, user_id)
            self._enqueue(conn, "purge_conversation", user_id, {"conversation_id": conversation_id})
        return True

    def purge_conversation(self, job: Job, worker: str, conversation_id: str) -> bool:
        with self._write(job.user_id) as conn:
            if not finish(conn, job, worker):
                return False
            row = conn.execute(
                "SELECT deleted_at FROM conversations WHERE user_id = %s AND id = %s",
                (job.user_id, conversation_id),
            ).fetchone()
            if row is None or row["deleted_at"] is None:
                return True
            self._purge(conn, job.user_id, conversation_id)
        self._deleted(PURGED)
        return True

    def _purge(self, conn: Conn, user_id: str, conversation_id: str) -> None:
        mine = {"user": user_id, "conversation": conversation_id}
        turns = "turns WHERE user_id = %(user)s AND conversation_id = %(conversation)s"
        chunks = f"chunks WHERE user_id = %(user)s AND turn_id IN (SELECT id FROM {turns})"
        conn.execute(
            "DELETE FROM vectors WHERE user_id = %(user)s"
            f" AND chunk_id IN (SELECT id FROM {chunks})",
            mine,
        )
        conn.execute(f"DELETE FROM {chunks}", mine)
        conn.execute(f"DELETE FROM {turns}", mine)
        conn.execute(
            "DELETE FROM conversations WHERE user_id = %(user)s AND id = %(conversation)s", mine
        )

    def vector_models(self) -> dict[str, int]:
        rows = self._across_users(
            "SELECT model, sum(n)::bigint AS n FROM memoro_vector_models() GROUP BY model", ()
        )
        return {r["model"]: r["n"] for r in rows}

    def chunks_missing_vectors(self, model: str, limit: int) -> list[tuple[int, str, str]]:
        rows = self._across_users("SELECT * FROM memoro_chunks_missing(%s, %s)", (model, limit))
        return [(r["id"], r["user_id"], r["text"]) for r in rows]

    def count_chunks_missing_vectors(self, model: str) -> tuple[int, int]:
        rows = self._across_users("SELECT * FROM memoro_count_missing(%s)", (model,))
        return (rows[0]["missing"], rows[0]["total"]) if rows else (0, 0)

    def _across_users(self, sql: str, params: tuple[object, ...]) -> list[dict[str, Any]]:
        """The rows of a maintenance function that visits every user, which
        only a member of memoro_worker may run (migration 004)."""
        try:
            with self._queue(write=False) as conn:
                rows: list[dict[str, Any]] = conn.execute(sql, params).fetchall()
                return rows
        except psycopg.errors.InsufficientPrivilege as exc:
            raise StoreError(
                f"{exc.diag.message_primary}: run it as the worker role (docs/deploy.md)"
            ) from None

    def drop_vectors(self, keep_model: str) -> int:
        """One user at a time, under each user's policy."""
        with self._queue(write=False) as conn:
            users = [r["user_id"] for r in conn.execute("SELECT user_id FROM history_users")]
        gone = 0
        for user_id in users:
            with self._write(user_id) as conn:
                dropped = conn.execute(
                    "DELETE FROM vectors WHERE user_id = %s AND model != %s", (user_id, keep_model)
                ).rowcount
                if dropped:  # none for a user erased since the listing: nothing of theirs is added
                    self._stale(conn, user_id)
                gone += dropped
        return gone
