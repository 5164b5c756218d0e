"""Past conversations on PostgreSQL beyond what both backends share:
indexing (chunks, keyword postings with each user's statistics, pgvector
vectors), deletion, and vector maintenance across users. Every query names
its user, even though row-level security would hide other users' rows
anyway: RLS is the second wall, not the first."""

from __future__ import annotations

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
from memoro.store.turns import SqlTurns


def insert_postings(conn: Conn, user_id: str, chunk_id: int, found: keywords.ChunkTerms) -> None:
    """A chunk's keyword postings: one row per distinct term."""
    conn.execute(
        "INSERT INTO postings (user_id, term, chunk_id, tf, length)"
        " SELECT %s, t, %s, n, %s FROM unnest(%s::bigint[], %s::integer[]) x (t, n)",
        (user_id, chunk_id, found.length, found.ids.tolist(), found.counts.tolist()),
    )


class PgHistory(SqlTurns):
    """The past-conversation methods of PostgresStore."""

    def _terms(self, found: keywords.ChunkTerms) -> list[int]:
        return list(found.ids.tolist())

    def _chunk_indexed(
        self, conn: Conn, user_id: str, chunk_id: int, found: keywords.ChunkTerms
    ) -> None:
        insert_postings(conn, user_id, chunk_id, found)

    def _turn_indexed(self, conn: Conn, user_id: str, chunks: int, length: int) -> None:
        conn.execute(
            "INSERT INTO history_users VALUES (?, ?, ?) ON CONFLICT (user_id) DO UPDATE"
            " SET chunks = history_users.chunks + excluded.chunks,"
            " length = history_users.length + excluded.length",
            (user_id, chunks, length),
        )

    def _insert_vectors(
        self, conn: Conn, chunk_id: int, user_id: str, model: str, windows: npt.NDArray[np.float32]
    ) -> None:
        conn.executemany(
            "INSERT INTO vectors (chunk_id, user_id, model, part, embedding)"
            " VALUES (?, ?, ?, ?, ?::vector)",
            [(chunk_id, user_id, model, part, vector_literal(w)) for part, w in enumerate(windows)],
        )

    def delete_conversation(self, user_id: str, conversation_id: str) -> bool:
        """Hide the conversation at once — its postings and vectors go in the
        same transaction, so search reads neither — and queue its purge."""
        with self._write(user_id) as conn:
            done = conn.execute(
                "UPDATE conversations SET deleted_at = now()"
                " WHERE user_id = %s AND id = %s AND deleted_at IS NULL",
                (user_id, conversation_id),
            ).rowcount
            if not done:
                return False
            # the conversation's chunks are read once; postings and vectors go
            # and the user's keyword statistics shrink in the same statement
            conn.execute(
                "WITH gone AS (SELECT c.id, c.terms, c.length FROM chunks c"
                "  JOIN turns t ON t.user_id = c.user_id AND t.id = c.turn_id"
                "  WHERE t.user_id = %(user)s AND t.conversation_id = %(conversation)s),"
                " p AS (DELETE FROM postings p USING (SELECT id, unnest(terms) AS term FROM gone) g"
                "  WHERE p.user_id = %(user)s AND p.term = g.term AND p.chunk_id = g.id),"
                " v AS (DELETE FROM vectors v USING gone"
                "  WHERE v.user_id = %(user)s AND v.chunk_id = gone.id)"
                " UPDATE history_users h SET chunks = h.chunks - d.n, length = h.length - d.total"
                " FROM (SELECT count(*) AS n, coalesce(sum(length), 0) AS total FROM gone) d"
                " WHERE h.user_id = %(user)s",
                {"user": user_id, "conversation": conversation_id},
            )
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
            mine = {"user": job.user_id, "conversation": conversation_id}
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
        self._deleted(("conversations", "turns", "chunks", "vectors", "postings"))
        return True

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
                gone += conn.execute(
                    "DELETE FROM vectors WHERE user_id = %s AND model != %s", (user_id, keep_model)
                ).rowcount
        return gone
